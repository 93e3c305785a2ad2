"""A shared backoff gate: a 429 from one request slows every conversation on the same client.

With many conversations in flight on one endpoint client (``--tau2-concurrency``), a rate limit
answered to one of them applies to all: each retrying on its own would keep hammering the
endpoint. The client holds the gate for the wait the 429 asks for (``Retry-After``, else its
backoff); every request of every conversation passes the gate before its first attempt (a
retry waits its own backoff). Other transient failures (5xx, timeouts) back off per request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

__all__ = ["BackoffGate"]


class BackoffGate:
    """Closed until a moment on ``clock``; ``wait`` returns once that moment has passed."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._open_at = float("-inf")

    @property
    def closed_for(self) -> float:
        """Seconds until the gate opens (0 when open; the clock is not read if never held)."""
        if self._open_at == float("-inf"):
            return 0.0
        return max(0.0, self._open_at - self._clock())

    def hold(self, seconds: float) -> float:
        """Keep the gate closed for ``seconds`` from now (never shortens an earlier hold).

        Returns the hold's end; the holder passes it to ``served`` once it has waited it out.
        """
        self._open_at = max(self._open_at, self._clock() + seconds)
        return self._open_at

    def served(self, hold: float) -> None:
        """The holder waited out ``hold``: open the gate unless a later hold extended it.

        (Then the gate does not depend on the clock having moved: an injected sleep need not.)
        """
        if self._open_at == hold:
            self._open_at = float("-inf")

    async def wait(self) -> float:
        """Sleep until the gate opens (not at all when it is open); return the seconds slept."""
        remaining = self.closed_for
        if remaining > 0:
            await self._sleep(remaining)
        return remaining
