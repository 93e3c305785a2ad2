"""The circuit breaker with a fake clock: opens after K failures, probes every T seconds."""

from __future__ import annotations

import pytest

from tau2_retail.errors import EndpointDown
from tau2_retail.models.breaker import CircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(clock: Clock) -> CircuitBreaker:
    return CircuitBreaker(
        where="model 'm' at http://h/v1", failures=3, probe_seconds=30, clock=clock, wall=lambda: 0
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
