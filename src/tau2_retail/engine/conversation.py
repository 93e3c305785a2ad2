"""One scenario's conversation: the agent and the simulated user take turns (spec §3).

The agent opens with a fixed greeting. Each agent turn is one completion; its tool calls run
in order through the dispatcher and the agent is called again, until it answers in text,
which goes to the user. The user's messages end the run when they carry a stop token, after
one grace turn in which the agent may still call ``end_conversation``. Limits (steps, tool
errors, wall-clock duration) and model failures end the run with a ``StopReason``; nothing a
model sends raises out of here. The clock is injectable so limits are tested without sleeping.
"""

from __future__ import annotations

import asyncio

from tau2_retail.engine.conversation_setup import (
    Clock,
    ConversationRules,
    Limits,
    MessageListener,
    ScenarioPrompts,
    SystemClock,
    UsageListener,
)
from tau2_retail.engine.conversation_state import Cast, RunningConversation
from tau2_retail.engine.ending import Ending, StopReason
from tau2_retail.engine.transcript import ConversationResult
from tau2_retail.errors import BudgetExhausted
from tau2_retail.models.agent import AgentRunner
from tau2_retail.models.agent_thread import BLOCKING_STEP_SECONDS
from tau2_retail.models.messages import Message, Role
from tau2_retail.models.protocol import ChatModel
from tau2_retail.tools.store import Store

__all__ = ["run_conversation"]


async def run_conversation(
    *,
    agent: ChatModel,
    user: ChatModel,
    prompts: ScenarioPrompts,
    store: Store,
    limits: Limits | None = None,
    seed: int | None = None,
    clock: Clock | None = None,
    rules: ConversationRules | None = None,
    on_message: MessageListener | None = None,
    on_usage: UsageListener | None = None,
) -> ConversationResult:
    """Run one conversation on ``store`` (mutated in place) and return what happened.

    ``prompts``: the agent's and the user's system prompts and the agent's tools.
    ``on_message`` sees each message as it is recorded (the ``run`` command prints them live),
    ``on_usage`` each completion's tokens as they are counted.
    """
    limits = limits or Limits()
    runner = agent if isinstance(agent, AgentRunner) else None
    conversation = RunningConversation(
        prompts=prompts,
        store=store,
        limits=limits,
        seed=seed,
        clock=clock or SystemClock(),
        rules=rules or ConversationRules(),
        on_message=on_message,
        toolbox=runner is not None,
        on_usage=on_usage,
    )
    cast = Cast(agent=agent, user=user, user_system=Message(role=Role.SYSTEM, content=prompts.user))
    try:
        ending = await _bounded(conversation, cast, limits.max_duration_seconds)
    except BudgetExhausted:
        # not an ending: the scenario stops unscored; the agent still closes its clients
        if runner is not None:
            await runner.close()
        raise
    except BaseException:
        if runner is not None:  # interrupted (Ctrl-C, the agent's KeyboardInterrupt)
            runner.abandon()
        raise
    if runner is not None:
        problem = await runner.close()
        if problem:
            ending = ending.noting(f"agent: {problem}")
    return conversation.result(ending)


async def _bounded(conversation: RunningConversation, cast: Cast, seconds: float) -> Ending:
    """The conversation's ending, within ``seconds`` (a call still running then is abandoned;
    the toolbox is closed in any case)."""
    try:
        # The clock checks between turns are exact; this bounds a single call that hangs.
        async with asyncio.timeout(seconds):
            return await conversation.converse(cast)
    except TimeoutError:
        ending = _deadline_ending(conversation, seconds)
        if isinstance(cast.agent, AgentRunner):
            blocked = cast.agent.blocking_now()
            if blocked >= BLOCKING_STEP_SECONDS:
                ending = ending.noting(
                    f"agent: its async code had held its event loop for {blocked:.1f} s "
                    "without awaiting (time.sleep or blocking I/O inside async def?)"
                )
        return ending
    finally:
        conversation.close_toolbox()


def _deadline_ending(conversation: RunningConversation, seconds: float) -> Ending:
    """The ending of a conversation its deadline cut: ``timeout``, the time the models took;
    but a request that had already failed an attempt was retrying a failing endpoint (a hang,
    a drip, a 5xx, a rate limit), whose fault that is, not the agent's: an infra error of the
    role it was sent for (a customer's endpoint that went dark made the agent fail)."""
    if conversation.cut_request is None:
        return Ending(
            reason=StopReason.TIMEOUT, detail=f"a model call outlived the {seconds} s limit"
        )
    role, progress = conversation.cut_request
    if not progress.failed_attempts:
        detail = f"the {role} request in flight (counted as failed) outlived the {seconds} s limit"
        return Ending(reason=StopReason.TIMEOUT, detail=detail)
    if progress.failure_timeout is not None:  # the run names the option that raises it
        conversation.request_timeout = progress.failure_timeout
    return Ending.failure(
        StopReason.INFRA_ERROR,
        role,
        f"{progress.endpoint or 'its endpoint'}: the request was still being retried after "
        f"{progress.failed_attempts} failed attempt(s) (last: {progress.last_failure}) when "
        f"the scenario reached its {seconds} s limit (counted as failed)",
    )
