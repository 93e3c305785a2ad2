"""The circuit breaker of one endpoint in one process: fail fast while the endpoint is down.

Every failed attempt at the endpoint (connection refused, no complete reply in time, 5xx, a
429 asking to wait longer than the backoff cap, 401/403/404) counts; any reply that proves the
endpoint is up (a completion, a context-length 400, an invalid-request 400/422, a 429 that
may be waited for: busy is not down) resets the count. The breaker opens only when the endpoint
looks down, not busy: at least ``failures`` consecutive failures **and** no success for at least
``window_seconds`` since the first of them. Counting alone is not enough: 114 conversations
starting together against a healthy server with a small listen backlog see a burst of refused
or reset connections before the first reply comes back (measured: 22 consecutive failures in
the first second, then every retry succeeded), and a count of 5 opened the breaker and made 24
to 66 of the 114 scenarios infra errors. A server that is really down fails every attempt for
the whole window, and its retries (1 + 2 + 4 + 8 s of backoff by default) outlast the default
window of 10 s, so it is still found down within one request's retry budget.

Once open, calls fail at once with ``EndpointDown`` ("endpoint X is down since HH:MM:SS (K
consecutive failures: <last error>)", the time of the first failure of the streak) instead of
paying the retry budget again. At most every ``probe_seconds`` one call is let through as a
probe; its success closes the breaker, its failure keeps it open for another interval.

The breaker is owned by the client object (one per role and process), so every scenario a
process runs, on one event loop or one after another, shares it. It is not thread-safe and
need not be: one event loop drives it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

from tau2_retail.errors import EndpointDown

__all__ = [
    "DEFAULT_BREAKER_FAILURES",
    "DEFAULT_BREAKER_WINDOW_SECONDS",
    "DEFAULT_PROBE_SECONDS",
    "CircuitBreaker",
]

DEFAULT_BREAKER_FAILURES: Final = 5
"""Consecutive failed attempts that open the breaker (the default attempts of one request)."""

DEFAULT_BREAKER_WINDOW_SECONDS: Final = 10.0
"""Seconds without any success, from the first of the consecutive failures, before the
breaker may open (shorter than the 15 s of backoff one request spends on its default retries)."""

DEFAULT_PROBE_SECONDS: Final = 30.0
"""Seconds between probes of an open breaker."""


class CircuitBreaker:
    """Counts consecutive endpoint failures and fails fast once there were ``failures`` over at
    least ``window_seconds`` without a success.

    ``clock`` (monotonic seconds) and ``wall`` (epoch seconds, for the "since" time) are
    injectable so tests neither wait nor depend on the time of day.
    """

    def __init__(
        self,
        *,
        where: str,
        failures: int = DEFAULT_BREAKER_FAILURES,
        window_seconds: float = DEFAULT_BREAKER_WINDOW_SECONDS,
        probe_seconds: float = DEFAULT_PROBE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if failures < 1:
            raise ValueError(f"failures must be >= 1, got {failures}")
        self._where = where
        self._threshold = failures
        self._window = window_seconds
        self._probe_seconds = probe_seconds
        self._clock = clock
        self._wall = wall
        self._consecutive = 0
        self._last_error = ""
        self._failing_since: float | None = None  # clock time of the streak's first failure
        self._failing_since_wall = 0.0
        self._opened_at: float | None = None  # wall time the streak began, once open
        self._next_probe = 0.0
        self._probing = False

    @property
    def is_open(self) -> bool:
        return self._opened_at is not None

    @property
    def consecutive_failures(self) -> int:
        return self._consecutive

    def before_attempt(self) -> None:
        """Raise ``EndpointDown`` unless an attempt may go out now (closed, or the probe)."""
        if self._opened_at is None:
            return
        now = self._clock()
        if not self._probing and now >= self._next_probe:
            self._probing = True
            self._next_probe = now + self._probe_seconds
            return
        raise self.down()

    def down(self) -> EndpointDown:
        """The error of an open breaker (also raised when a failure just opened it)."""
        assert self._opened_at is not None
        # in UTC, as every time in the run's files (a local time without a zone misled)
        since = datetime.fromtimestamp(self._opened_at, UTC).strftime("%H:%M:%S UTC")
        return EndpointDown(
            f"endpoint {self._where} is down since {since} "
            f"({self._consecutive} consecutive failures: {self._last_error}); "
            f"probed again at most every {self._probe_seconds:g} s"
        )

    def record_success(self) -> None:
        """The endpoint answered: close the breaker and reset the count."""
        self._consecutive = 0
        self._failing_since = None
        self._opened_at = None
        self._probing = False

    def record_failure(self, detail: str) -> None:
        """One failed attempt; opens the breaker once the streak is long enough, in count and
        in time."""
        now = self._clock()
        self._consecutive += 1
        self._last_error = detail
        self._probing = False
        if self._failing_since is None:
            self._failing_since = now
            self._failing_since_wall = self._wall()
        if self._opened_at is not None:
            # a failed probe: the next one waits a whole interval from now (a probe of a hung
            # endpoint takes the full request deadline before it fails)
            self._next_probe = now + self._probe_seconds
        elif self._consecutive >= self._threshold and now - self._failing_since >= self._window:
            self._opened_at = self._failing_since_wall
            self._next_probe = now + self._probe_seconds
