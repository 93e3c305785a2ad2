"""HTTP/1.1 on one connection, for the pooled transport (``models/pool.py``).

:class:`Connection` is an ``asyncio.Protocol``: the event loop hands it the bytes as they
arrive (buffered; reading from the socket pauses past :data:`READ_BUFFER_BYTES` until they are
consumed) and tells it at once when the server closes the connection, so an idle connection
the server dropped is never reused and no idle socket is polled. The functions read one reply
from it: the head (at most :data:`MAX_HEAD_BYTES`; informational 1xx replies skipped), then
the body framed by ``Content-Length``, ``Transfer-Encoding: chunked`` or the connection's end,
and say whether the connection may carry another request (HTTP/1.1 keep-alive unless either
side says ``Connection: close``). A reply that breaks the protocol raises
:class:`ProtocolError`, worded as httpcore words it ("Server disconnected without sending a
response."); the transport raises it as the HTTP library's ``RemoteProtocolError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Final

__all__ = [
    "MAX_HEAD_BYTES",
    "READ_BUFFER_BYTES",
    "Connection",
    "ProtocolError",
    "framing",
    "read_body",
    "read_head",
    "send_request",
]

MAX_HEAD_BYTES: Final = 64 * 1024
"""A reply's status line and headers at most (h11, under httpcore, allows 16 KiB by default
for one event; servers send well under 8 KiB)."""

READ_BUFFER_BYTES: Final = 256 * 1024
"""Bytes held per connection before reading from the socket pauses until the body is read."""

_CHUNK_LINE_BYTES: Final = 4096
_NO_BODY_STATUSES: Final = frozenset({204, 304})
_DISCONNECTED: Final = "Server disconnected without sending a response."


class Connection(asyncio.Protocol):
    """One TCP connection: bytes buffered as they arrive, waiters woken on data or close."""

    def __init__(self, origin: tuple[str, int]) -> None:
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.eof = False
        self.closed = False
        self.error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None
        self._paused = False
        self.read_timeout: float | None = None

    # -- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > READ_BUFFER_BYTES and not self._paused and self.transport:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = self.eof = True
        self.error = exc
        self._wake()
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def pause_writing(self) -> None:
        self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    # -- used by the transport -----------------------------------------------------------------

    @property
    def reusable_when_idle(self) -> bool:
        return not (self.closed or self.eof or self.buffer)

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def more(self) -> None:
        """Wait until more bytes arrived or the connection ended (at most ``read_timeout``:
        ``TimeoutError``)."""
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            if self.read_timeout is None:
                await self._waiter
            else:
                async with asyncio.timeout(self.read_timeout):
                    await self._waiter
        finally:
            self._waiter = None

    async def write(self, data: bytes, timeout: float | None) -> None:
        """Send ``data``; waits (at most ``timeout``) only while the socket's buffer is full."""
        assert self.transport is not None
        if self.closed:
            raise ConnectionResetError("the connection was closed")
        self.transport.write(data)
        if self._writable is None:
            return
        if timeout is None:
            await self._writable
        else:
            async with asyncio.timeout(timeout):
                await self._writable

    def take(self, size: int) -> bytes:
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class ProtocolError(Exception):
    """The reply breaks HTTP/1.1 (raised as the library's ``RemoteProtocolError``)."""


async def read_head(
    connection: Connection,
) -> tuple[bytes, int, bytes, list[tuple[bytes, bytes]]]:
    """Version, status, reason and headers of the next reply (1xx replies skipped)."""
    while True:
        end = connection.buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(connection.buffer) > MAX_HEAD_BYTES:
                raise ProtocolError(f"reply head longer than {MAX_HEAD_BYTES} bytes")
            if connection.eof:
                if connection.buffer.strip():
                    raise ProtocolError("Server disconnected in the middle of the reply head.")
                raise ProtocolError(_DISCONNECTED)
            await connection.more()
            continue
        if end > MAX_HEAD_BYTES:
            raise ProtocolError(f"reply head longer than {MAX_HEAD_BYTES} bytes")
        head = connection.take(end + 4)
        version, status, reason, headers = _parse_head(head[:-4])
        if 100 <= status < 200 and status != 101:
            continue  # informational (100 Continue, 103 Early Hints): the reply follows
        return version, status, reason, headers


def _parse_head(head: bytes) -> tuple[bytes, int, bytes, list[tuple[bytes, bytes]]]:
    lines = head.lstrip(b"\r\n").split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or len(parts[1]) != 3:
        raise ProtocolError(f"malformed status line {lines[0][:100]!r}")
    try:
        status = int(parts[1])
    except ValueError:
        raise ProtocolError(f"malformed status line {lines[0][:100]!r}") from None
    headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip() or line[:1] in (b" ", b"\t"):
            raise ProtocolError(f"malformed header line {line[:100]!r}")
        headers.append((name, value.strip(b" \t")))
    return parts[0], status, parts[2] if len(parts) > 2 else b"", headers


def framing(
    method: bytes, status: int, headers: list[tuple[bytes, bytes]], version: bytes = b"HTTP/1.1"
) -> tuple[str, int, bool]:
    """How the body is delimited ("none", "length", "chunked", "close"), its length, and
    whether the connection may be used again after it: an HTTP/1.1 reply unless it says
    ``Connection: close``, an HTTP/1.0 one only when it says ``Connection: keep-alive`` (RFC
    9112 §9.3; Python's ``http.server`` answers HTTP/1.0 and closes: reusing its connection
    cost a failed attempt and a backoff for every request after the first)."""
    lengths = set()
    chunked = False
    close = False
    keep_alive = False
    for name, value in headers:
        lower = name.lower()
        if lower == b"content-length":
            lengths.add(value)
        elif lower == b"transfer-encoding":
            chunked = value.lower().rsplit(b",", 1)[-1].strip() == b"chunked"
            if not chunked:
                raise ProtocolError(f"unsupported transfer encoding {value[:60]!r}")
        elif lower == b"connection":
            close = close or b"close" in value.lower()
            keep_alive = keep_alive or b"keep-alive" in value.lower()
    close = close or (version.upper() == b"HTTP/1.0" and not keep_alive)
    if method == b"HEAD" or status in _NO_BODY_STATUSES:
        return "none", 0, not close
    if chunked:
        return "chunked", 0, not close
    if lengths:
        if len(lengths) > 1 or not next(iter(lengths)).isdigit():
            raise ProtocolError(f"invalid Content-Length {sorted(lengths)!r}")
        return "length", int(next(iter(lengths))), not close
    return "close", 0, False


async def read_body(connection: Connection, framing: str, length: int) -> AsyncIterator[bytes]:
    """The body's bytes as they arrive (raises ``ProtocolError`` if the server stops early)."""
    if framing == "length":
        while length > 0:
            if not connection.buffer:
                if connection.eof:
                    raise ProtocolError(
                        f"peer closed connection without sending complete message body "
                        f"({length} bytes missing)"
                    )
                await connection.more()
                continue
            part = connection.take(length)
            length -= len(part)
            yield part
    elif framing == "chunked":
        async for part in _chunks(connection):
            yield part
    elif framing == "close":
        while not (connection.eof and not connection.buffer):
            if connection.buffer:
                yield connection.take(len(connection.buffer))
            else:
                await connection.more()


async def _line(connection: Connection) -> bytes:
    while True:
        end = connection.buffer.find(b"\r\n")
        if end >= 0:
            return connection.take(end + 2)[:-2]
        if len(connection.buffer) > _CHUNK_LINE_BYTES:
            raise ProtocolError("chunk size line too long")
        if connection.eof:
            raise ProtocolError("peer closed connection in the middle of a chunked body")
        await connection.more()


async def _chunks(connection: Connection) -> AsyncIterator[bytes]:
    while True:
        line = await _line(connection)
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise ProtocolError(f"invalid chunk size {size_text[:20]!r}") from None
        if size < 0:
            raise ProtocolError(f"invalid chunk size {size_text[:20]!r}")
        if size == 0:
            trailers = 0
            while line := await _line(connection):  # trailers, then the empty line
                trailers += len(line)
                if trailers > MAX_HEAD_BYTES:
                    raise ProtocolError(f"trailers longer than {MAX_HEAD_BYTES} bytes")
            return
        async for part in read_body(connection, "length", size):
            yield part
        if await _line(connection):
            raise ProtocolError("chunk not followed by CRLF")


async def send_request(
    connection: Connection, request: Any, method: bytes, write_timeout: float | None
) -> None:
    """Write the request: head and body in one write (a streamed body is gathered first, and
    sent as one chunk when the library framed it as chunked)."""
    lines = [method + b" " + request.url.raw_path + b" HTTP/1.1"]
    lines += [name + b": " + value for name, value in request.headers.raw]
    try:
        body: bytes = request.content
    except Exception:  # a streamed body not read yet (the library's RequestNotRead)
        body = b"".join([part async for part in request.stream])
        if any(name.lower() == b"transfer-encoding" for name, _ in request.headers.raw):
            body = (b"%x\r\n%s\r\n" % (len(body), body) if body else b"") + b"0\r\n\r\n"
    lines += [b"", body]  # the blank line ending the head, then the body: one copy of it
    await connection.write(b"\r\n".join(lines), write_timeout)
