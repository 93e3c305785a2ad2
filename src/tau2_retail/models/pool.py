"""Keep-alive connections for the ``openai`` client: a connection pool that never scans.

The ``openai`` client sends through ``httpx`` (``httpx2`` in recent releases), whose default
transport (``httpcore``) walks every connection of its pool at each request and each reply
(``_assign_requests_to_connections``): with hundreds of conversations in flight that walk was
a third of the harness's CPU, O(connections) per request. :func:`pooled_transport` makes a
transport of that same library (the ``openai`` client, its request building, its error
statuses and its exceptions are unchanged) that keeps each origin's idle connections on a
stack: taking one, returning one, opening one and waiting for a free place are O(1). At most
``max_connections`` are open (``--tau2-<role>-max-connections``); the other requests wait,
first come first served. The request's ``timeout`` extension (connect, read, write, pool) is
honoured; failures raise the library's exceptions (``ConnectError``, ``ConnectTimeout``,
``ReadTimeout``, ``ReadError``, ``RemoteProtocolError``, ``PoolTimeout``), which the ``openai``
client maps to ``APIConnectionError`` and ``APITimeoutError`` as before. HTTP/1.1 itself is in
``models/http1.py``.

It serves plain ``http://`` endpoints without a proxy (:func:`serves`); ``https://`` and
proxied endpoints keep the ``openai`` client's default transport, and a redirect from a
served endpoint to ``https://`` goes through the library's own transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.request
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from tau2_retail.models.http1 import (
    Connection,
    ProtocolError,
    framing,
    read_body,
    read_head,
    send_request,
)

__all__ = ["pooled_transport", "serves"]


def serves(base_url: str | None) -> bool:
    """Whether the pooled transport serves this endpoint: a plain ``http://`` URL and no
    proxy configured for it in the environment (``HTTP_PROXY``, ``ALL_PROXY``)."""
    if not base_url or not base_url.lower().startswith("http://"):
        return False
    proxies = urllib.request.getproxies()
    return not any(key in proxies for key in ("http", "all"))


class _Pool:
    """Idle connections per origin (a stack), at most ``limit`` open, FIFO waiters."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0
        self.peak = 0
        self.idle: dict[tuple[str, int], list[Connection]] = {}
        self.waiters: deque[asyncio.Future[None]] = deque()
        self.closed = False

    async def acquire(
        self, origin: tuple[str, int], *, pool_timeout: float | None
    ) -> Connection | None:
        """An idle connection to ``origin``, or None with a place reserved to open one;
        waits (at most ``pool_timeout``) while ``limit`` are open."""
        if not self.waiters:
            got, connection = self._take(origin)
            if got:
                return connection
        if pool_timeout is None:
            return await self._wait(origin)
        async with asyncio.timeout(pool_timeout):
            return await self._wait(origin)

    def _take(self, origin: tuple[str, int]) -> tuple[bool, Connection | None]:
        idle = self.idle.get(origin)
        while idle:
            connection = idle.pop()
            if connection.reusable_when_idle:
                return True, connection
            self._discard(connection)
        if self.open < self.limit:
            self.open += 1
            self.peak = max(self.peak, self.open)
            return True, None
        return False, None

    async def _wait(self, origin: tuple[str, int]) -> Connection | None:
        first_turn = False
        while True:
            waiter = asyncio.get_running_loop().create_future()
            # a waiter woken but beaten to the place keeps its turn at the front
            (self.waiters.appendleft if first_turn else self.waiters.append)(waiter)
            try:
                await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # woken just as it was cancelled: hand the turn on
                else:
                    self._forget(waiter)
                raise
            got, connection = self._take(origin)
            if got:
                return connection
            first_turn = True

    def release(self, connection: Connection, *, reusable: bool) -> None:
        if reusable and not self.closed and connection.reusable_when_idle:
            self.idle.setdefault(connection.origin, []).append(connection)
        else:
            self._discard(connection)
        self._wake_one()

    def opening_failed(self) -> None:
        self.open -= 1
        self._wake_one()

    def _discard(self, connection: Connection) -> None:
        connection.close()
        self.open -= 1

    def _forget(self, waiter: asyncio.Future[None]) -> None:
        with contextlib.suppress(ValueError):
            self.waiters.remove(waiter)

    def _wake_one(self) -> None:
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def close_idle(self) -> None:
        self.closed = True
        for connections in self.idle.values():
            for connection in connections:
                connection.close()
                self.open -= 1
        self.idle.clear()


# -- the transport ------------------------------------------------------------------------------


def pooled_transport(
    library: Any, *, max_connections: int, on_connected: Callable[[], None] = lambda: None
) -> Any:
    """A ``library.AsyncBaseTransport`` (``library``: ``httpx`` or ``httpx2``, the one the
    ``openai`` package uses) keeping at most ``max_connections`` connections open;
    ``on_connected`` is called for each new connection the server accepted."""
    stream = type("PooledStream", (_PooledStream, library.AsyncByteStream), {})
    transport = type("PooledTransport", (_PooledTransport, library.AsyncBaseTransport), {})
    return transport(library, stream, _Pool(max_connections), on_connected)


@dataclass(eq=False)
class _PooledStream:
    """A reply's body (the library's ``AsyncByteStream`` too): its connection goes back to the
    pool once the body was read whole, and is closed when the reader stops early."""

    library: Any
    pool: _Pool
    connection: Connection
    parts: AsyncIterator[bytes]
    keep: bool
    _complete: bool = field(default=False, init=False)
    _released: bool = field(default=False, init=False)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self.parts:
                yield part
        except (ProtocolError, TimeoutError, OSError) as error:
            self._release()
            raise _mapped(self.library, error, self.connection) from _cause(error)
        self._complete = True
        self._release()

    async def aclose(self) -> None:
        self._release()

    def _release(self) -> None:
        if not self._released:
            self._released = True
            self.pool.release(self.connection, reusable=self.keep and self._complete)


class _PooledTransport:
    """The transport (the library's ``AsyncBaseTransport`` too): one exchange per request on
    a pooled connection."""

    def __init__(
        self, library: Any, stream: type, pool: _Pool, on_connected: Callable[[], None]
    ) -> None:
        self._library = library
        self._stream = stream
        self._pool = pool
        self._on_connected = on_connected
        #: the library's own transport, for what this pool does not carry (made when needed)
        self._other: Any = None

    async def handle_async_request(self, request: Any) -> Any:
        timeouts = request.extensions.get("timeout", {})
        url = request.url
        if url.scheme != "http":
            # a redirect to https:// (an ingress's 308): the library's transport sends it, as
            # the openai client alone would (it was refused: every scenario an infra error)
            if self._other is None:
                self._other = self._library.AsyncHTTPTransport()
            return await self._other.handle_async_request(request)
        connection = await self._connection((url.host, url.port or 80), timeouts)
        connection.read_timeout = timeouts.get("read")
        method = request.method.encode() if isinstance(request.method, str) else request.method
        writing = True
        try:
            await send_request(connection, request, method, timeouts.get("write"))
            writing = False
            version, status, reason, headers = await read_head(connection)
            body_framing, length, keep = framing(method, status, headers, version)
        except BaseException as error:
            self._pool.release(connection, reusable=False)
            if isinstance(error, (ProtocolError, TimeoutError, OSError)):
                mapped = _mapped(self._library, error, connection, writing=writing)
                raise mapped from _cause(error)
            raise
        parts = read_body(connection, body_framing, length)
        return self._library.Response(
            status,
            headers=headers,
            stream=self._stream(self._library, self._pool, connection, parts, keep),
            extensions={"http_version": version, "reason_phrase": reason},
        )

    async def _connection(self, origin: tuple[str, int], timeouts: dict[str, Any]) -> Connection:
        library = self._library
        try:
            connection = await self._pool.acquire(origin, pool_timeout=timeouts.get("pool"))
        except TimeoutError as error:
            raise library.PoolTimeout("no connection became free in time") from error
        if connection is not None:
            return connection
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeouts.get("connect")):
                _, protocol = await loop.create_connection(
                    lambda: Connection(origin), origin[0], origin[1]
                )
        except BaseException as error:
            self._pool.opening_failed()
            if isinstance(error, TimeoutError):
                where = f"{origin[0]}:{origin[1]}"
                raise library.ConnectTimeout(f"connecting to {where} timed out") from error
            if isinstance(error, OSError):
                raise library.ConnectError(str(error)) from error
            raise
        self._on_connected()
        return protocol

    async def aclose(self) -> None:
        self._pool.close_idle()
        if self._other is not None:
            await self._other.aclose()


def _cause(error: BaseException) -> BaseException | None:
    """What a mapped error is raised from: the OS error as httpcore chains it; not our own
    ``ProtocolError`` (the library's ``RemoteProtocolError`` says it all)."""
    return None if isinstance(error, ProtocolError) else error


def _mapped(
    library: Any, error: BaseException, connection: Connection, *, writing: bool = False
) -> Any:
    """The library's exception for a failed exchange (worded as httpcore words it)."""
    if isinstance(error, TimeoutError):
        if writing:
            return library.WriteTimeout("timed out sending the request")
        return library.ReadTimeout("timed out waiting for the reply")
    if isinstance(error, ProtocolError) and connection.error is None:
        return library.RemoteProtocolError(str(error))
    cause = connection.error if isinstance(error, ProtocolError) else error
    text = str(cause) or type(cause).__name__
    return library.WriteError(text) if writing else library.ReadError(text)
