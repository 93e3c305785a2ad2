"""The thread an agent given as code runs in: its calls' outcomes as values, the harness's
cancellations, blocking steps measured; and its replies made plain there."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from tau2_retail.models.agent_reply import Unreadable, plain_reply
from tau2_retail.models.agent_thread import AgentThread, Raised, Returned


def _run(call: Any, then: Any = None) -> Returned | Raised:
    async def go() -> Returned | Raised:
        thread = AgentThread("t")
        try:
            return await thread.run(call, then)
        finally:
            thread.stop()

    return asyncio.run(go())


async def _raise(error: BaseException) -> None:
    await asyncio.sleep(0)
    raise error


@pytest.mark.parametrize(
    "error",
    [
        SystemExit(3),
        KeyboardInterrupt(),
        GeneratorExit(),
        asyncio.CancelledError(),
        ValueError("v"),
    ],
    ids=lambda error: type(error).__name__,
)
@pytest.mark.parametrize("style", ["sync", "async"])
def test_whatever_the_agent_raises_is_a_value(error: BaseException, style: str) -> None:
    def sync() -> None:
        raise error

    outcome = _run(sync if style == "sync" else lambda: _raise(error))
    assert isinstance(outcome, Raised)
    assert outcome.kind is type(error)
    # the traceback starts at the agent's code, not at the harness's frames
    assert outcome.traceback_text.startswith("Traceback")
    for ours in ("in _execute", "in _guarded", "in __await__"):
        assert ours not in outcome.traceback_text


def test_a_value_and_then_run_in_the_agents_thread() -> None:
    seen: list[int] = []

    async def respond() -> str:
        seen.append(threading.get_ident())
        return "hi"

    def then(value: str) -> str:
        seen.append(threading.get_ident())
        return value.upper()

    assert _run(respond, then) == Returned("HI")
    assert len(set(seen)) == 1
    assert threading.get_ident() not in seen


def test_the_harnesss_cancellation_cancels_the_agents_coroutine_and_stays_a_cancellation() -> None:
    cancelled = threading.Event()

    async def hang() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def go() -> None:
        thread = AgentThread("t")
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await thread.run(hang)
        thread.stop()

    asyncio.run(go())
    assert cancelled.wait(10)


def test_a_blocking_step_is_measured_and_blocks_only_its_own_loop() -> None:
    async def block() -> str:
        time.sleep(0.3)
        return "done"

    async def go() -> tuple[float, float, int]:
        thread = AgentThread("t")
        task = asyncio.ensure_future(thread.run(block))
        ticks = 0
        while not task.done():  # the harness's loop goes on meanwhile
            await asyncio.sleep(0.01)
            ticks += 1
        during = thread.blocking_for()
        thread.stop()
        return thread.longest_step, during, ticks

    longest, after, ticks = asyncio.run(go())
    assert longest >= 0.3
    assert after == 0.0
    assert ticks > 3


class _Str(str):
    def __str__(self) -> str:
        raise AssertionError("never called")


class _Dump:
    def __init__(self, data: object = None, error: BaseException | None = None) -> None:
        self.data, self.error = data, error

    def model_dump(self) -> object:
        if self.error is not None:
            raise self.error
        return self.data


def test_a_reply_is_made_of_plain_builtins() -> None:
    reply = plain_reply(_Dump({"content": _Str("hi"), "tool_calls": ({"id": 1},)}))
    assert reply == {"content": "hi", "tool_calls": [{"id": 1}]}
    assert type(reply["content"]) is str
    assert type(reply["tool_calls"]) is list


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (_Dump(error=ValueError("broke")), "whose model_dump() raised ValueError: broke"),
        (_Dump(error=SystemExit(2)), "whose model_dump() raised SystemExit: 2"),
        (object(), "that is not an assistant turn (holds an object)"),
        ({"content": object()}, "that is not an assistant turn (holds an object)"),
    ],
)
def test_a_reply_that_cannot_be_made_plain_is_unreadable(reply: object, message: str) -> None:
    with pytest.raises(Unreadable, match=message.replace("(", r"\(").replace(")", r"\)")):
        plain_reply(reply)
