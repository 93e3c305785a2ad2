"""The ``openai`` client's own CPU per request, as the chat client drives it (issue 28).

Run from the repository root (about a minute; no server, no data)::

    .venv/bin/python benchmarks/bench_sdk_request.py

One ``AsyncOpenAI`` client with the HTTP client the chat client gives it, over a transport
that answers at once with a small completion (no socket: only the SDK, its HTTP library and
the bounded read remain), posts a 20 KB body N times; CPU per request (``process_time``) for:

- ``post``: ``AsyncOpenAI.post("/chat/completions", content=...)`` per request, the SDK's
  default HTTP client (the path before this change);
- ``RawPost``: ``tau2_retail.models.sdk_transport.RawPost`` (the options copied from a
  template, the whole URL, a counter for the idempotency key) with ``http_client`` (the
  SDK's plain request built in one pass) and ``SdkClient`` (the whole URL parsed once): what
  the chat client runs.

The two are interleaved, ``--rounds`` times each; the table gives the best and the median
round. On a shared machine the figures grow with the load (stated beside them); their ratio
is what to read. Prints the table; writes ``benchmarks/results/sdk_request.json``. Nothing is
asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import _checkout  # noqa: F401  (this checkout's tau2_retail first)
import openai
from _measure import ROOT, load_average, write_json
from _tables import table

from tau2_retail.models.sdk_transport import (
    _HEADERS,
    LIBRARY,
    RawPost,
    SdkClient,
    http_client,
    read_reply,
)

REPLY = json.dumps(
    {
        "id": "c",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
).encode()
BODY = b'{"model":"m","messages":[{"role":"user","content":"' + b"x" * 20_000 + b'"}]}'
MAX_BYTES = 1 << 20


class _Answer(LIBRARY.AsyncBaseTransport):  # type: ignore[misc,name-defined]
    """Answers every request at once (reads what a real transport reads of it)."""

    async def handle_async_request(self, request: Any) -> Any:
        _ = request.url.raw_path, request.headers.raw, request.content
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(REPLY))]
        return LIBRARY.Response(200, headers=headers, stream=LIBRARY.ByteStream(REPLY))


def _client(sdk: type[openai.AsyncOpenAI], http: Any) -> openai.AsyncOpenAI:
    timeout = LIBRARY.Timeout(None, connect=30.0)
    return sdk(
        base_url="http://127.0.0.1:8000/v1",
        api_key="k",
        max_retries=0,
        timeout=timeout,
        http_client=http(transport=_Answer(), timeout=timeout),
    )


def _post(client: openai.AsyncOpenAI) -> Callable[[], Awaitable[bytes]]:
    async def send() -> bytes:
        response = await client.post(
            "/chat/completions",
            cast_to=LIBRARY.Response,
            content=BODY,
            options={"headers": _HEADERS},
            stream=True,
        )
        return await read_reply(response, max_bytes=MAX_BYTES)

    return send


def _raw_post(client: openai.AsyncOpenAI) -> Callable[[], Awaitable[bytes]]:
    post = RawPost(client)
    return lambda: post(BODY, max_bytes=MAX_BYTES)


PATHS = {
    "post (before)": (openai.AsyncOpenAI, openai.DefaultAsyncHttpxClient, _post),
    "RawPost (now)": (SdkClient, http_client, _raw_post),
}


async def _round(name: str, requests: int) -> float:
    sdk, http, make = PATHS[name]
    client = _client(sdk, http)
    send = make(client)
    for _ in range(100):  # warm: first-use costs out of the figure
        await send()
    started = time.process_time()
    for _ in range(requests):
        await send()
    return (time.process_time() - started) / requests * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    load_before = load_average()
    rounds: dict[str, list[float]] = {name: [] for name in PATHS}
    for _ in range(args.rounds):
        for name in PATHS:
            rounds[name].append(asyncio.run(_round(name, args.requests)))
    load_after = load_average()
    rows = [[name, min(values), statistics.median(values)] for name, values in rounds.items()]
    print(
        f"openai {openai.__version__}; {args.rounds} rounds of {args.requests} requests; "
        f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after\n"
    )
    print(table(["path", "best ms CPU / request", "median ms CPU / request"], rows))
    figures = {
        "openai": openai.__version__,
        "requests": args.requests,
        "rounds": rounds,
        "load_average_before": load_before,
        "load_average_after": load_after,
    }
    print(f"\nwritten: {write_json('sdk_request', figures).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
