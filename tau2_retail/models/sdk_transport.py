"""How the OpenAI-compatible client drives the ``openai`` package: its generic raw-body POST,
and the HTTP client it is given.

- :func:`post_raw`: ``AsyncOpenAI.post("/chat/completions", content=<bytes>, stream=True,
  cast_to=<the HTTP library's Response>)``, the SDK's public call for requests it has no typed
  method for: the SDK builds the request (headers, auth, URL, error statuses as
  ``APIStatusError``) and returns the response unread; the body is read here within
  ``max_bytes`` (``read_bounded``). The typed ``chat.completions.create`` ran its transform
  and re-encoded the whole history for every request. :data:`POST_TAKES_CONTENT` is False for
  an SDK without raw request bodies (the caller then uses the typed call).
- :func:`http_options`: for a plain ``http://`` endpoint without a proxy, the pooled
  transport (``models/pool.py``; each connection it opens widens the ramp) and a timeout that
  bounds only connecting: the attempt's own deadline bounds connect to last byte, and read,
  write and pool timers (one each per request, never firing first) cost CPU for nothing.
  Other endpoints get the ``openai`` client's default transport and the plain timeout.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any, Final

import openai

from tau2_retail.models.bounded import ACCEPT_ENCODING, read_bounded
from tau2_retail.models.pool import pooled_transport, serves

__all__ = [
    "CONNECTION_ERRORS",
    "LIBRARY",
    "POST_TAKES_CONTENT",
    "TIMEOUT_ERRORS",
    "http_options",
    "post_raw",
]

LIBRARY: Final[Any] = importlib.import_module(
    type(openai.DEFAULT_CONNECTION_LIMITS).__module__.partition(".")[0]
)
"""The HTTP library the ``openai`` package uses (``httpx``, or ``httpx2`` in recent releases),
found from its own default limits so that no module here names it."""

POST_TAKES_CONTENT: Final = "content" in inspect.signature(openai.AsyncOpenAI.post).parameters
"""``AsyncOpenAI.post(content=...)`` (raw request bodies) came with the httpx2-based releases."""

TIMEOUT_ERRORS: Final[tuple[type[BaseException], ...]] = (
    TimeoutError,
    openai.APITimeoutError,
    LIBRARY.TimeoutException,
)
"""An attempt that timed out: the deadline, the SDK's timeout, or the library's while the
body is read (after the SDK returned)."""
CONNECTION_ERRORS: Final[tuple[type[BaseException], ...]] = (
    openai.APIConnectionError,
    LIBRARY.TransportError,
)
"""An attempt whose connection failed: the SDK's, or the library's while the body is read."""

# only encodings read_bounded inflates within its limit
_HEADERS: Final = {"Accept-Encoding": ACCEPT_ENCODING, "Content-Type": "application/json"}


async def post_raw(client: openai.AsyncOpenAI, content: bytes, *, max_bytes: int) -> bytes:
    """POST ``content`` to ``/chat/completions``; the reply body, read within ``max_bytes``."""
    response = await client.post(
        "/chat/completions",
        cast_to=LIBRARY.Response,
        content=content,
        options={"headers": _HEADERS},
        stream=True,
    )
    try:
        # read as it arrives, inflated here within the limit (never a body whole)
        body: bytes = await read_bounded(response, max_bytes=max_bytes)
        return body
    finally:
        await response.aclose()


def http_options(
    base_url: str | None,
    *,
    max_connections: int,
    timeout_seconds: float,
    on_connected: Callable[[], None],
) -> tuple[Any, dict[str, Any]]:
    """The timeout for the ``openai`` client and its HTTP client, and the extra arguments of
    the HTTP client (the pooled transport where it serves the endpoint)."""
    if not serves(base_url):
        return timeout_seconds, {}
    transport = pooled_transport(
        LIBRARY, max_connections=max_connections, on_connected=on_connected
    )
    return LIBRARY.Timeout(None, connect=timeout_seconds), {"transport": transport}
