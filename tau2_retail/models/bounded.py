"""A reply body read with a size limit: counted while it arrives, and after decompression.

A hostile or broken endpoint can send a reply of any size, or a small gzip body that inflates
to gigabytes (a 1 GiB bomb is 1 MB on the wire). :func:`read_bounded` reads the raw bytes as
they arrive and inflates ``gzip``/``deflate`` itself with ``zlib``'s ``max_length``, so that
no more than the limit (plus one chunk of at most 64 KiB) is ever held; past the limit it stops
reading and raises :class:`ReplyTooLarge`. The request asks for ``gzip, deflate`` only
(:data:`ACCEPT_ENCODING`); a reply in any other encoding is refused the same way, since it could
not be inflated within bounds.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator
from typing import Final, Protocol

__all__ = [
    "ACCEPT_ENCODING",
    "DEFAULT_MAX_REPLY_BYTES",
    "ReplyTooLarge",
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

    def __init__(self, message: str, *, limit: int, inflated: bool = False) -> None:
        self.limit = limit
        self.inflated = inflated
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
    encoding = _encoding(response)
    if encoding in ("identity", ""):
        decoder = None
    elif encoding in _WBITS:
        wbits = _WBITS[encoding]
        # deflate: RFC says zlib-wrapped, some servers send it raw; 0 means "from the header"
        decoder = zlib.decompressobj(wbits or zlib.MAX_WBITS | 32)
    else:
        raise ReplyTooLarge(
            f"reply in content encoding {encoding!r}, not the requested {ACCEPT_ENCODING}: "
            "not inflated (its size could not be bounded)",
            limit=max_bytes,
            inflated=True,
        )
    parts: list[bytes] = []
    total = 0
    async for chunk in response.aiter_raw():
        if decoder is None:
            total += len(chunk)
            if total > max_bytes:
                raise _too_large(max_bytes, inflated=False)
            parts.append(chunk)
            continue
        data = chunk
        while data:
            try:
                out = decoder.decompress(data, min(max_bytes - total + 1, _CHUNK))
            except zlib.error as error:
                raise ReplyTooLarge(
                    f"reply body not valid {encoding} ({error})", limit=max_bytes, inflated=True
                ) from error
            data = decoder.unconsumed_tail
            total += len(out)
            if total > max_bytes:
                raise _too_large(max_bytes, inflated=True)
            parts.append(out)
    if decoder is not None:
        # every input byte was fed back until consumed: what is left is zlib's small buffer
        out = decoder.flush()
        total += len(out)
        if total > max_bytes:
            raise _too_large(max_bytes, inflated=True)
        parts.append(out)
    return b"".join(parts)


def _too_large(limit: int, *, inflated: bool) -> ReplyTooLarge:
    what = "inflates to" if inflated else "is"
    return ReplyTooLarge(
        f"reply body {what} more than the {limit} byte limit (--tau2-max-reply-bytes): "
        "stopped reading",
        limit=limit,
        inflated=inflated,
    )
