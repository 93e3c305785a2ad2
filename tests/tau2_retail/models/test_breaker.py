"""The circuit breaker with a fake clock: opens after K failures over W seconds without a
success, probes every T seconds."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tau2_retail.errors import EndpointDown
from tau2_retail.models.breaker import CircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(clock: Clock, *, window: float = 0) -> CircuitBreaker:
    return CircuitBreaker(
        where="model 'm' at http://h/v1",
        failures=3,
        window_seconds=window,
        probe_seconds=30,
        clock=clock,
        wall=lambda: clock.now + 1_000_000,
    )


def test_opens_after_k_consecutive_failures_and_a_success_resets_the_count():
    clock = Clock()
    breaker = make(clock)
    for _ in range(2):
        breaker.before_attempt()
        breaker.record_failure("HTTP 503")
    breaker.record_success()
    for _ in range(2):
        breaker.record_failure("HTTP 503")
    assert not breaker.is_open
    breaker.record_failure("HTTP 502: bad gateway")
    assert breaker.is_open
    with pytest.raises(EndpointDown, match=r"\(3 consecutive failures: HTTP 502: bad gateway\)"):
        breaker.before_attempt()


def test_one_probe_per_interval_counted_from_the_last_failure():
    clock = Clock()
    breaker = make(clock)
    for _ in range(3):
        breaker.record_failure("refused")
    clock.now += 30
    breaker.before_attempt()  # the probe goes out
    with pytest.raises(EndpointDown):
        breaker.before_attempt()  # only one probe at a time
    clock.now += 120  # a hung probe fails at its deadline...
    breaker.record_failure("no complete reply within the 120 s timeout")
    with pytest.raises(EndpointDown):
        breaker.before_attempt()  # ...and the next probe waits a whole interval from then
    clock.now += 30
    breaker.before_attempt()
    breaker.record_success()
    assert not breaker.is_open
    breaker.before_attempt()


def test_a_burst_of_failures_is_busy_not_down_until_the_window_has_passed():
    clock = Clock()
    breaker = make(clock, window=10)
    for _ in range(114):  # every conversation's first connection refused at once
        breaker.before_attempt()
        breaker.record_failure("connection failed (ConnectError)")
    clock.now += 9.9
    breaker.record_failure("connection failed (ConnectError)")
    assert not breaker.is_open  # many failures, but not for long
    breaker.record_success()  # a retry got through: the streak starts again
    clock.now += 0.2
    breaker.record_failure("connection failed (ConnectError)")
    clock.now += 10
    breaker.record_failure("connection failed (ConnectError)")
    assert not breaker.is_open  # long enough, but only two failures
    breaker.record_failure("HTTP 503")
    assert breaker.is_open  # three failures over ten seconds, no success: down
    # down since the first failure of the streak (wall = clock + 1e6 here)
    since = datetime.fromtimestamp(100.0 + 9.9 + 0.2 + 1_000_000, UTC).strftime("%H:%M:%S")
    assert f"is down since {since} UTC (3 consecutive failures: HTTP 503)" in str(breaker.down())


@pytest.mark.usefixtures("local_time_far_from_utc")
def test_down_since_is_in_utc_whatever_the_local_time():
    clock = Clock()
    breaker = make(clock)
    for _ in range(3):
        breaker.record_failure("HTTP 503")
    # wall time 1_000_100 s: 1970-01-12 13:48:20 UTC, 10:18:20 in the local time of the test
    assert "is down since 13:48:20 UTC (3 consecutive failures" in str(breaker.down())


def test_the_window_is_measured_from_the_first_failure_not_the_last():
    clock = Clock()
    breaker = make(clock, window=10)
    breaker.record_failure("refused")
    clock.now += 6
    breaker.record_failure("refused")
    clock.now += 6
    breaker.record_failure("refused")
    assert breaker.is_open
