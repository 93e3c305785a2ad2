"""Slow start for one endpoint: attempts in flight ramp up instead of arriving all at once.

``--tau2-concurrency 114`` starts 114 conversations at the same instant, and each one's first
request would open a new TCP connection: a healthy server with a small listen backlog (5, or
a busy accept loop) refuses or resets part of that burst. ``Ramp`` admits at most ``window``
attempts at a time on one client. The window starts at :data:`DEFAULT_INITIAL_WINDOW` and
grows by one with every attempt the endpoint answers (so it doubles per round trip, as TCP's
slow start does: 16, 32, 64, 128 in four replies' time) and, over the pooled transport of
plain-http endpoints (``models/pool.py``), with every new connection the endpoint accepted (a
connection is accepted in microseconds, a reply takes the model's seconds: 912 conversations
start within milliseconds instead of six replies' time), up to the connection limit. A failed
connection halves it (never below the initial window): the server is asked for fewer new
connections while it catches up. Once the window is past the number of conversations, it
costs nothing; the connections it let open stay open (keep-alive) for the rest of the run.

It is owned by the client (one per role and process), like the breaker, and driven by one
event loop at a time; no asyncio primitive is bound to a loop until a caller has to wait, so a
client used by one event loop after another (one scenario per loop) works.
"""

from __future__ import annotations

import asyncio
from collections import deque
from types import TracebackType
from typing import Final

__all__ = ["DEFAULT_INITIAL_WINDOW", "Ramp"]

DEFAULT_INITIAL_WINDOW: Final = 16
"""Attempts in flight at first: far below what a real server's accept queue takes (the Linux
default backlog is 4096, Python's 100, aiohttp's 128), and a burst of 16 was absorbed even by
a loopback server with a backlog of 5 whose loop was busy."""


class Ramp:
    """At most ``window`` attempts in flight: from ``initial``, +1 per answered attempt, halved
    (not below ``initial``) per failed connection, never above ``maximum``."""

    def __init__(self, *, maximum: int, initial: int = DEFAULT_INITIAL_WINDOW) -> None:
        if initial < 1 or maximum < 1:
            raise ValueError(f"initial and maximum must be >= 1, got {initial}, {maximum}")
        self._floor = min(initial, maximum)
        self._maximum = maximum
        self.window = self._floor
        self.in_flight = 0
        self.peak = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    def slot(self) -> _Slot:
        """Hold one of the window's places for the body (waits while the window is full)."""
        return _Slot(self)

    def _release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def answered(self) -> None:
        """The endpoint answered an attempt (any reply): one more attempt may be in flight."""
        if self.window < self._maximum:
            self.window += 1
            self._wake()

    def connected(self) -> None:
        """The endpoint accepted a new connection: one more attempt may be in flight (with a
        model's seconds of latency, growing per reply alone took several seconds to let
        hundreds of conversations start; connections are accepted in microseconds)."""
        self.answered()

    def connection_failed(self) -> None:
        """An attempt could not connect (refused, reset): ask for fewer at once."""
        self.window = max(self._floor, self.window // 2)

    async def _acquire(self) -> None:
        if self.in_flight < self.window and not self._waiters:
            self._admit()
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                # admitted just as the waiting was cancelled: hand the place on
                self.in_flight -= 1
                self._wake()
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
            raise

    def _admit(self) -> None:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.window:
            waiter = self._waiters.popleft()
            if waiter.done():  # cancelled while queued
                continue
            self._admit()
            waiter.set_result(None)


class _Slot:
    """``Ramp.slot()``'s context: a class, not a generator (one per request: the generator's
    machinery cost more than the slot itself)."""

    __slots__ = ("_ramp",)

    def __init__(self, ramp: Ramp) -> None:
        self._ramp = ramp

    async def __aenter__(self) -> None:
        await self._ramp._acquire()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._ramp._release()
