"""An agent given as code is closed after its scenario, after a deadline too: its last call,
cancelled there, is waited for (a bounded time), then ``aclose()``/``close()`` runs; what goes
wrong there is noted beside the verdict and never changes it."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI

from tau2_retail.engine.conversation_setup import Limits
from tau2_retail.engine.ending import StopReason
from tau2_retail.engine.harness import DataBundle, load_bundle
from tau2_retail.models import agent as agent_module
from tau2_retail.testing.loopback_server import Hang, LoopbackOpenAIServer

from .test_agents import _run

DEADLINE = Limits(max_duration_seconds=0.5)
TIMED_OUT = "the agent request in flight (counted as failed) outlived the 0.5 s limit"


@pytest.fixture(scope="module")
def bundle(data_dir: Path) -> DataBundle:
    return load_bundle(data_dir)


class AsyncClientAgent:
    """An async agent owning its ``AsyncOpenAI`` client (closed in ``aclose``), as a real one."""

    def __init__(self, base_url: str, *, close_fails: bool = False) -> None:
        self.client = AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
        self.close_fails = close_fails
        self.cancelled = False

    async def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        try:
            return await self.client.chat.completions.create(
                model="m",
                messages=messages,  # type: ignore[arg-type]
                tools=tools,  # type: ignore[arg-type]
            )
        except asyncio.CancelledError:
            self.cancelled = True
            raise

    async def aclose(self) -> None:
        await self.client.close()
        if self.close_fails:
            raise RuntimeError("the tracer would not flush")


@pytest.mark.parametrize("close_fails", [False, True], ids=["closes", "close-raises"])
def test_an_async_agent_cancelled_at_the_deadline_is_closed_and_keeps_its_verdict(
    bundle: DataBundle, openai_server: LoopbackOpenAIServer, close_fails: bool
) -> None:
    """Its model request hangs; the deadline cancels it, it ends at once, and its client is
    closed: it was left open (close() "not called") at every timeout of an async agent."""
    openai_server.enqueue(Hang())
    agent = AsyncClientAgent(openai_server.base_url, close_fails=close_fails)
    outcome = _run(bundle, agent, limits=DEADLINE)
    assert agent.client.is_closed()
    assert agent.cancelled  # it was closed once its cancelled call had ended
    conversation, metrics = outcome.conversation, outcome.metrics
    assert conversation.stop_reason is StopReason.TIMEOUT
    assert (metrics.is_successful, metrics.infra_error) == (False, False)
    noted = "; agent: close() raised RuntimeError: the tracer would not flush"
    # a loaded machine may add that the client's first request (its lazy imports and SSL
    # context) held the agent's loop past the deadline: said, and not what is tested here
    assert conversation.detail.startswith(TIMED_OUT)
    assert conversation.detail.endswith(noted) == close_fails


class BlockedAgent:
    """Its last call goes on past the deadline until ``released``: sync code, or a coroutine
    that swallows the deadline's cancellation."""

    def __init__(self, style: str) -> None:
        self.released = threading.Event()
        self.closed = threading.Event()
        self.thread: threading.Thread | None = None
        self.respond = self._sync if style == "sync" else self._async

    def _sync(self, messages: Any, tools: Any) -> str:
        self.thread = threading.current_thread()
        self.released.wait(60)
        return "late"

    async def _async(self, messages: Any, tools: Any) -> str:
        self.thread = threading.current_thread()
        while not self.released.is_set():
            with contextlib.suppress(asyncio.CancelledError):  # swallowed: it keeps going
                await asyncio.sleep(0.02)
        return "late"

    def close(self) -> None:
        self.closed.set()


@pytest.mark.parametrize("style", ["sync", "async"])
def test_an_agent_still_running_after_the_wait_is_not_closed_and_the_wait_is_named(
    bundle: DataBundle, monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    monkeypatch.setattr(agent_module, "_LAST_CALL_SECONDS", 0.2)
    agent = BlockedAgent(style)
    try:
        outcome = _run(bundle, agent, limits=DEADLINE)
    finally:
        agent.released.set()
    conversation = outcome.conversation
    assert conversation.stop_reason is StopReason.TIMEOUT
    assert conversation.detail.endswith(
        "; agent: close() not called: its last call was still running 0.2 s after the deadline"
    )
    # once its call ends, its thread ends too (it waited for ever), never closing the agent
    assert agent.thread is not None
    agent.thread.join(30)
    assert not agent.thread.is_alive()
    assert not agent.closed.is_set()
