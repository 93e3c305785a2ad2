"""Peak memory of one chat completion whose reply is huge (issue 21, item 2).

Run from the repository root (under a minute)::

    .venv/bin/python benchmarks/bench_bounded_replies.py

Each case runs in a fresh process: an ``OpenAIChatModel`` (default settings: the reply limit is
8 MiB) asks a loopback server on 127.0.0.1 for one completion, which answers with the case's
body. The process reports its peak RSS (``getrusage``) and what the request ended with. The
server runs in the same process and holds the body it sends (50 MiB for that row, built from
a 50 MiB string): subtract it to see the client's share. The "baseline" row is a small reply:
the cost of Python, the SDK and the server. Prints a table; figures are never asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _tables import table

_CASE = r"""
import asyncio, json, resource, sys, zlib
from tau2_retail.errors import EndpointError
from tau2_retail.models import EndpointConfig, OpenAIChatModel
from tau2_retail.models.messages import Message, Role
from tau2_retail.testing.loopback_server import Completion, LoopbackOpenAIServer, RawBody

MiB = 1024 * 1024
case = sys.argv[1]


def bomb(size):
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return b"".join(compressor.compress(bytes(MiB)) for _ in range(size // MiB)) + (
        compressor.flush()
    )


def completion(text):
    return json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": text}}]}).encode()


replies = {  # built only for the case measured
    "baseline (1 KB reply)": lambda: Completion(content="x" * 1000),
    "6 MiB reply (allowed)": lambda: RawBody(body=completion("x" * (6 * MiB))),
    "50 MiB reply": lambda: RawBody(body=completion("x" * (50 * MiB))),
    "gzip bomb, 1 GiB inflated": lambda: RawBody(body=bomb(1024 * MiB),
                                                 headers={"Content-Encoding": "gzip"}),
}
reply = replies[case]()
wire = len(reply.body) if isinstance(reply, RawBody) else 0


async def main():
    with LoopbackOpenAIServer() as server:
        server.enqueue(reply)
        config = EndpointConfig(model="m", base_url=server.base_url, max_retries=0)
        async with OpenAIChatModel(config) as model:
            try:
                turn = await model.complete([Message(role=Role.USER, content="hi")])
                return f"read {len(turn.content or '')} characters"
            except EndpointError as error:
                return "infra error: " + str(error).split(": ", 2)[-1][:60]


outcome = asyncio.run(main())
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"peak_mib": peak, "wire_mib": wire / MiB, "outcome": outcome}))
"""

CASES = (
    "baseline (1 KB reply)",
    "6 MiB reply (allowed)",
    "50 MiB reply",
    "gzip bomb, 1 GiB inflated",
)


def main() -> None:
    rows = []
    for case in CASES:
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", _CASE, case], capture_output=True, text=True, check=True
        )
        seconds = time.perf_counter() - started
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        rows.append(
            (
                case,
                f"{figures['wire_mib']:.1f}",
                f"{figures['peak_mib']:.0f}",
                f"{seconds:.1f}",
                figures["outcome"],
            )
        )
    print(table(("reply", "on the wire (MiB)", "peak RSS (MiB)", "process s", "outcome"), rows))


if __name__ == "__main__":
    main()
