"""The slow start of one endpoint's attempts: a window that grows per reply, halves on a
failed connection, and hands its places on in order, cancellation included."""

from __future__ import annotations

import asyncio

import pytest

from tau2_retail.models.ramp import Ramp


def test_the_window_grows_per_reply_up_to_the_limit_and_halves_on_a_failed_connection():
    ramp = Ramp(initial=4, maximum=10)
    assert ramp.window == 4
    for _ in range(20):
        ramp.answered()
    assert ramp.window == 10
    ramp.connection_failed()
    assert ramp.window == 5
    ramp.connection_failed()
    assert ramp.window == 4  # never below the initial window
    assert Ramp(initial=16, maximum=3).window == 3  # nor above the connection limit


@pytest.mark.asyncio
async def test_attempts_beyond_the_window_wait_and_a_reply_lets_one_more_in():
    ramp = Ramp(initial=2, maximum=100)
    release = asyncio.Event()
    entered: list[int] = []

    async def attempt(n: int) -> None:
        async with ramp.slot():
            entered.append(n)
            await release.wait()

    tasks = [asyncio.create_task(attempt(n)) for n in range(5)]
    await asyncio.sleep(0)
    assert entered == [0, 1]
    ramp.answered()  # the window is 3 now: the next one in line goes
    await asyncio.sleep(0)
    assert entered == [0, 1, 2]
    tasks[3].cancel()  # a waiter cancelled (its scenario ended) gives its turn away
    release.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert entered == [0, 1, 2, 4]
    assert (ramp.in_flight, ramp.peak) == (0, 3)


def test_an_accepted_connection_widens_the_window_like_a_reply():
    ramp = Ramp(initial=2, maximum=4)
    ramp.connected()
    assert ramp.window == 3
    for _ in range(5):
        ramp.connected()
    assert ramp.window == 4
