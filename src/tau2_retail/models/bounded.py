"""A reply body read with a size limit: counted while it arrives, and after decompression.

A hostile or broken endpoint can send a reply of any size, or a small gzip body that inflates
to gigabytes (a 1 GiB bomb is 1 MB on the wire). :func:`read_bounded` reads the raw bytes as
they arrive and inflates ``gzip``/``deflate`` itself with ``zlib``'s ``max_length``, so that
no more than the limit (plus one chunk of at most 64 KiB) is ever held; past the limit it stops
reading and raises :class:`ReplyTooLarge`. The request asks for ``gzip, deflate`` only
(:data:`ACCEPT_ENCODING`); a reply in any other encoding is refused the same way, since it could
not be inflated within bounds.

Error statuses (4xx/5xx) are read by the ``openai`` client itself, whole, before it raises:
:func:`error_body_hook` is a response hook of its HTTP client that swaps such a response's
stream for one that inflates it the same way and stops after ``max_bytes``, adding a marker
(``… [error body cut: ...]``); the rest is never read (the connection is closed).
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any, Final, Protocol

__all__ = [
    "ACCEPT_ENCODING",
    "DEFAULT_MAX_REPLY_BYTES",
    "ReplyTooLarge",
    "error_body_hook",
    "read_bounded",
]

DEFAULT_MAX_REPLY_BYTES: Final = 8 * 1024 * 1024
"""8 MiB: a completion of max_tokens 32k is well under 1 MB of JSON; 8 MiB leaves room for
verbose servers (logprobs, reasoning text) and stops what only a fault or an attack sends."""

ACCEPT_ENCODING: Final = "gzip, deflate"
_CHUNK: Final = 64 * 1024
_WBITS: Final = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": 0}


class ReplyTooLarge(Exception):
    """A reply body exceeded the limit (``inflated`` when only its decompressed size did), or
    came in an encoding that cannot be inflated within bounds."""

    def __init__(
        self, message: str, *, limit: int, inflated: bool = False, oversize: bool = False
    ) -> None:
        self.limit = limit
        self.inflated = inflated
        self.oversize = oversize
        super().__init__(message)


class RawResponse(Protocol):
    """What is read of an HTTP response (an ``httpx``-style ``Response``)."""

    @property
    def headers(self) -> object: ...

    def aiter_raw(self) -> AsyncIterator[bytes]: ...


def _encoding(response: RawResponse) -> str:
    get = getattr(response.headers, "get", None)
    value = get("content-encoding") if callable(get) else None
    return str(value or "identity").strip().lower()


async def read_bounded(response: RawResponse, *, max_bytes: int) -> bytes:
    """The whole body of ``response``, decompressed, at most ``max_bytes`` long.

    Raises :class:`ReplyTooLarge` as soon as more arrives (or inflates) than ``max_bytes``;
    the caller closes the response, which drops the connection.
    """
    chunks = _inflate(response.aiter_raw(), _encoding(response), max_bytes)
    return b"".join([part async for part in chunks])


async def _inflate(
    chunks: AsyncIterable[bytes], encoding: str, max_bytes: int
) -> AsyncIterator[bytes]:
    """The decompressed parts of a raw body; raises ``ReplyTooLarge`` past ``max_bytes``."""
    if encoding in ("identity", ""):
        decoder = None
    elif encoding in _WBITS:
        wbits = _WBITS[encoding]
        # deflate: RFC says zlib-wrapped, some servers send it raw (tried when the header
        # fails, as httpx does); 0 means "from the header"
        decoder = zlib.decompressobj(wbits or zlib.MAX_WBITS | 32)
    else:
        raise ReplyTooLarge(
            f"reply in content encoding {encoding!r}, not the requested {ACCEPT_ENCODING}: "
            "not inflated (its size could not be bounded)",
            limit=max_bytes,
            inflated=True,
        )
    total = 0
    # deflate without its zlib header (raw): known once the header's two bytes fail
    raw_possible = encoding == "deflate"
    header = b""
    async for chunk in chunks:
        if decoder is None:
            total += len(chunk)
            if total > max_bytes:
                raise _too_large(max_bytes, inflated=False)
            yield chunk
            continue
        data = chunk
        while data:
            try:
                out = decoder.decompress(data, min(max_bytes - total + 1, _CHUNK))
            except zlib.error as error:
                if raw_possible:
                    decoder, raw_possible = zlib.decompressobj(-zlib.MAX_WBITS), False
                    data = header + data
                    continue
                raise ReplyTooLarge(
                    f"reply body not valid {encoding} ({error})", limit=max_bytes, inflated=True
                ) from error
            if raw_possible:
                header += data[: len(data) - len(decoder.unconsumed_tail)]
                raw_possible = len(header) < 2
            data = decoder.unconsumed_tail
            total += len(out)
            if total > max_bytes:
                raise _too_large(max_bytes, inflated=True)
            yield out
    if decoder is not None:
        # every input byte was fed back until consumed: what is left is zlib's small buffer
        out = decoder.flush()
        total += len(out)
        if total > max_bytes:
            raise _too_large(max_bytes, inflated=True)
        yield out


def error_body_hook(stream_base: type, *, max_bytes: int) -> Callable[[Any], Awaitable[None]]:
    """A response hook for the ``openai`` client's HTTP client (``event_hooks={"response":
    [...]}``): an error status's body is read at most ``max_bytes`` long (inflated here, within
    the same bound), then a marker; the rest is not read. ``stream_base`` is the HTTP library's
    ``AsyncByteStream`` (``httpx`` or ``httpx2``, whichever the ``openai`` package uses)."""

    class _CutStream(stream_base):  # type: ignore[misc]
        def __init__(self, original: AsyncIterable[bytes], encoding: str) -> None:
            self._original = original
            self._encoding = encoding

        async def __aiter__(self) -> AsyncIterator[bytes]:
            try:
                async for part in _inflate(self._original, self._encoding, max_bytes):
                    yield part
            except ReplyTooLarge as error:
                why = (
                    f"more than {max_bytes} bytes, the rest was not read"
                    if error.oversize
                    else str(error)
                )
                yield f"… [error body cut: {why}]".encode()

        async def aclose(self) -> None:
            await self._original.aclose()  # type: ignore[attr-defined]

    async def hook(response: Any) -> None:
        if response.status_code < 400:
            return
        encoding = _encoding(response)
        response.stream = _CutStream(response.stream, encoding)
        # inflated by the stream above: the library must not inflate it again (whole)
        if "content-encoding" in response.headers:
            del response.headers["content-encoding"]

    return hook


def _too_large(limit: int, *, inflated: bool) -> ReplyTooLarge:
    what = "inflates to" if inflated else "is"
    return ReplyTooLarge(
        f"reply body {what} more than the {limit} byte limit (--tau2-max-reply-bytes): "
        "stopped reading",
        limit=limit,
        inflated=inflated,
        oversize=True,
    )
