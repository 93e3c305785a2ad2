"""The shared backoff gate on its own."""

from __future__ import annotations

import pytest

from tau2_retail.models.backoff import BackoffGate


@pytest.mark.asyncio
async def test_an_open_gate_neither_reads_the_clock_nor_sleeps() -> None:
    def clock() -> float:
        raise AssertionError("read")

    async def sleep(seconds: float) -> None:
        raise AssertionError("slept")

    await BackoffGate(clock=clock, sleep=sleep).wait()


@pytest.mark.asyncio
async def test_a_hold_makes_waiters_sleep_the_rest_and_never_shortens() -> None:
    now = [10.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    gate = BackoffGate(clock=lambda: now[0], sleep=sleep)
    gate.hold(5.0)
    gate.hold(1.0)  # a shorter wait asked later does not open the gate earlier
    now[0] = 12.0
    await gate.wait()
    now[0] = 15.0
    await gate.wait()

    assert slept == [3.0]


@pytest.mark.asyncio
async def test_the_holder_opens_the_gate_once_served_unless_extended() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    gate = BackoffGate(clock=lambda: 0.0, sleep=sleep)
    first = gate.hold(2.0)
    second = gate.hold(5.0)
    gate.served(first)  # a later, longer hold stands
    assert gate.closed_for == 5.0
    gate.served(second)
    await gate.wait()

    assert slept == []
