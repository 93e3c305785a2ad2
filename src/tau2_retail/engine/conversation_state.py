"""One running conversation: its state (messages, counters, the loop-style agent's toolbox) and
its turns; ``run_conversation`` drives it."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Final

from tau2_retail.engine.conversation_setup import (
    Clock,
    ConversationRules,
    Limits,
    MessageListener,
    ScenarioPrompts,
    UsageListener,
)
from tau2_retail.engine.ending import (
    Ending,
    StopReason,
    empty_agent_ending,
    failure_reason,
    user_reply_ending,
)
from tau2_retail.engine.toolbox import ScenarioToolbox
from tau2_retail.engine.transcript import ConversationResult
from tau2_retail.errors import EndpointError
from tau2_retail.models.agent import AgentFailed, AgentRunner
from tau2_retail.models.messages import (
    AssistantTurn,
    Message,
    RequestStats,
    Role,
    ToolCall,
    Usage,
    has_stop_token,
)
from tau2_retail.models.progress import RequestProgress, tracking
from tau2_retail.models.protocol import ChatModel
from tau2_retail.tools.dispatch import Action, dispatch_json
from tau2_retail.tools.store import Store

__all__ = ["TOOLBOX_ENDED", "TOOLBOX_STOPPED", "Cast", "RunningConversation"]

# What a loop-style agent's toolbox answers once the conversation is over for it (a limit was
# reached, or an ending tool succeeded): the call is neither run nor recorded.
TOOLBOX_STOPPED = "Error: the conversation is over (a limit was reached); stop and return."
TOOLBOX_ENDED = "Error: the conversation has ended; return your last words."

CALLS_PER_YIELD: Final = 100
"""A turn's tool calls run this many at a time between looks at the event loop."""
_GRACE_LIMITS = frozenset({StopReason.MAX_STEPS, StopReason.TIMEOUT, StopReason.TOO_MANY_ERRORS})


class _Stopped(Exception):
    """Ends the loop; carries the ending (internal control flow only)."""

    def __init__(self, ending: Ending, *, body: str = "", traceback: str = "") -> None:
        super().__init__(ending.detail)
        self.ending = ending
        self.body = body
        self.traceback = traceback

    @classmethod
    def by(cls, reason: StopReason, detail: str) -> _Stopped:
        """A stop that no role's failure caused (a limit)."""
        return cls(Ending(reason=reason, detail=detail))


@dataclass(frozen=True, slots=True)
class Cast:
    """Who speaks: the agent's and the user's models and the user's system prompt (the
    scenario's instructions). Held by the running conversation only, never by
    :class:`RunningConversation`: the toolbox a loop-style agent gets reaches that object, and must
    reach no task data."""

    agent: ChatModel
    user: ChatModel
    user_system: Message


class RunningConversation:
    """The state of one running conversation: the agent's side of it (its prompt, tools and
    database, the messages, the counters). The models and the user's prompt are in
    :class:`Cast`, passed to the turns."""

    def __init__(
        self,
        *,
        prompts: ScenarioPrompts,
        store: Store,
        limits: Limits,
        seed: int | None,
        clock: Clock,
        rules: ConversationRules,
        on_message: MessageListener | None,
        toolbox: bool,
        on_usage: UsageListener | None = None,
    ) -> None:
        self.rules = rules
        self.agent_system = Message(role=Role.SYSTEM, content=prompts.agent)
        self.tools = prompts.tools
        self.store = store
        self.limits = limits
        self.seed = seed
        self.clock = clock
        self.on_message = on_message
        self.on_usage = on_usage
        self.messages: list[Message] = []
        self.timestamps: list[float] = []
        self.usages: list[Usage | None] = []
        #: per role, the tokens of completions not yet in a recorded message (a discarded
        #: empty reply's join the next message of its role)
        self.pending: dict[str, Usage] = {}
        self.actions: list[Action] = []
        self.usage = {"agent": Usage(), "user": Usage()}
        self.requests = {"agent": RequestStats(), "user": RequestStats()}
        self.history_chars = len(prompts.agent)
        self.error_body = ""
        self.request_timeout: float | None = None
        #: the role whose request was cut in flight (by the deadline), and its progress
        self.cut_request: tuple[str, RequestProgress] | None = None
        self.agent_traceback = ""
        # a loop-style agent's toolbox: its calls may come from the agent's thread
        self.toolbox: ScenarioToolbox | None = None
        self.toolbox_lock = threading.Lock()
        self.toolbox_ids = itertools.count()
        # an Ending, not the exception: a traceback would reach the frames of the harness
        self.toolbox_stop: Ending | None = None
        self.toolbox_ended = False
        self.toolbox_closed = False
        self.toolbox_recorded = False  # usage recorded since converse() last returned
        if toolbox:
            self.toolbox = ScenarioToolbox(
                schemas=prompts.tools,
                run=self.toolbox_call,
                ended=lambda: self.toolbox_ended,
                record=self.toolbox_usage,
            )
        self.latencies: list[tuple[str, float]] = []
        self.steps = 0
        self.tool_errors = 0
        self.started = clock.monotonic()
        self.started_at = clock.wall()

    def record(self, message: Message, *, by: str | None = None) -> None:
        """Add ``message``; ``by`` names the role whose completions produced it (its usage)."""
        self.messages.append(message)
        self.timestamps.append(self.clock.wall())
        self.usages.append(self.pending.pop(by, None) if by is not None else None)
        self.history_chars += len(message.content or "") + sum(
            len(call.arguments) + len(call.name) for call in message.tool_calls
        )
        if self.on_message is not None:
            self.on_message(message)

    def check_limits(self) -> None:
        elapsed = self.clock.monotonic() - self.started
        if elapsed >= self.limits.max_duration_seconds:
            raise _Stopped.by(
                StopReason.TIMEOUT, f"{elapsed:.1f} s >= {self.limits.max_duration_seconds} s"
            )
        if self.steps >= self.limits.max_steps:
            raise _Stopped.by(StopReason.MAX_STEPS, f"{self.steps} routed messages")
        if self.history_chars > self.limits.max_history_chars:
            raise _Stopped.by(
                StopReason.CONTEXT_WINDOW_EXCEEDED,
                f"the conversation grew to {self.history_chars:,} characters, beyond the "
                f"{self.limits.max_history_chars:,}-character limit (the agent's output, not an "
                "endpoint fault)",
            )

    def count_usage(self, role: str, usage: Usage) -> None:
        """Add a completion's tokens to ``role``'s total and to its next message's usage."""
        self.usage[role] = self.usage[role] + usage
        self.pending[role] = self.pending.get(role, Usage()) + usage
        if self.on_usage is not None:
            self.on_usage(role, usage)

    async def complete(self, role: str, model: ChatModel, messages: list[Message]) -> AssistantTurn:
        tools = self.tools if role == "agent" else None
        with tracking() as progress:
            try:
                turn = await model.complete(messages, tools=tools, seed=self.seed)
            except EndpointError as error:
                self.requests[role] += RequestStats(
                    requests=1,
                    attempts=error.attempts,
                    failed=1,
                    unsent=int(error.attempts == 0),
                    wait_seconds=error.wait_seconds,
                )
                self.request_timeout = error.timeout_seconds
                raise _Stopped(
                    Ending.failure(failure_reason(role, error), role, str(error)),
                    body=error.full_body,
                ) from error
            except AgentFailed as error:
                raise self.agent_failed(error) from error
            except asyncio.CancelledError:
                self.cut(role, progress)
                raise
        self.count_usage(role, turn.usage)
        if turn.from_cache:  # nothing was sent: no request, no endpoint latency
            return turn
        self.requests[role] += RequestStats(
            requests=1, attempts=turn.attempts, wait_seconds=turn.wait_seconds
        )
        self.latencies.append((role, turn.latency_seconds))
        return turn

    def cut(self, role: str, progress: RequestProgress) -> None:
        """Count ``role``'s request cut in flight (at the scenario's deadline, or the session
        stopping): sent, failed, with the attempts and waits it had made; its tokens are
        unknown (the server never said them), so usage and cost gain nothing."""
        self.cut_request = (role, progress)
        self.requests[role] += RequestStats(
            requests=1,
            attempts=max(progress.attempts, 1),
            failed=1,
            wait_seconds=progress.wait_seconds,
        )

    def user_view(self, system: Message) -> list[Message]:
        """The user simulator sees agent text as 'user' and its own messages as 'assistant'."""
        view = [system]
        for message in self.messages:
            if message.role is Role.USER:
                view.append(Message(role=Role.ASSISTANT, content=message.content))
            elif message.role is Role.ASSISTANT and not message.tool_calls and message.content:
                view.append(Message(role=Role.USER, content=message.content))
        return view

    async def user_turn(self, cast: Cast) -> Message:
        self.check_limits()
        turn = await self.complete("user", cast.user, self.user_view(cast.user_system))
        if not (turn.content and turn.content.strip()):
            self.check_limits()
            turn = await self.complete("user", cast.user, self.user_view(cast.user_system))
        unusable = user_reply_ending(turn.content, turn.finish_reason)
        if unusable is not None:
            raise _Stopped(unusable)
        message = Message(role=Role.USER, content=turn.content, finish_reason=turn.finish_reason)
        self.record(message, by="user")
        self.steps += 1
        return message

    def agent_failed(self, error: AgentFailed) -> _Stopped:
        self.requests["agent"] += RequestStats(requests=1, attempts=1, failed=1)
        return _Stopped(
            Ending.failure(StopReason.AGENT_ERROR, "agent", error.detail),
            traceback=error.traceback_text,
        )

    async def agent_turn(self, agent: ChatModel) -> bool:
        """Run the agent until it answers in text (False) or leaves the conversation (True)."""
        if isinstance(agent, AgentRunner) and agent.style == "loop":
            return await self.loop_turn(agent)
        retried_empty = False
        while True:
            self.check_limits()
            turn = await self.complete("agent", agent, [self.agent_system, *self.messages])
            if turn.is_empty:
                if retried_empty or not self.rules.retry_empty_agent:
                    ending = empty_agent_ending(turn.finish_reason, asked_again=retried_empty)
                    raise _Stopped(ending)
                retried_empty = True
                continue
            # The retry is per empty message: a good reply earns the next empty one a retry too.
            retried_empty = False
            self.record(turn.to_message(), by="agent")
            self.steps += 1
            if not turn.tool_calls:
                return False
            if await self.run_tools_yielding(turn):
                return True

    async def loop_turn(self, agent: AgentRunner) -> bool:
        """A loop-style agent's turn: it runs its tools through the toolbox (each call is
        recorded as it happens) and returns its text; True when an ending tool succeeded."""
        assert self.toolbox is not None
        retried_empty = False
        while True:
            self.check_limits()
            started = time.perf_counter()
            try:
                text = await agent.converse([self.agent_system, *self.messages], self.toolbox)
            except asyncio.CancelledError:
                self.cut("agent", RequestProgress(attempts=1))
                raise
            except EndpointError as error:  # AgentInfraError: the agent's backend is down
                self.requests["agent"] += RequestStats(requests=1, attempts=1, failed=1)
                raise _Stopped(
                    Ending.failure(StopReason.INFRA_ERROR, "agent", str(error))
                ) from error
            except AgentFailed as error:
                raise self.agent_failed(error) from error
            self.requests["agent"] += RequestStats(requests=1, attempts=1)
            self.latencies.append(("agent", time.perf_counter() - started))
            with self.toolbox_lock:
                stop, ended = self.toolbox_stop, self.toolbox_ended
                if not self.toolbox_recorded:  # one call, its requests and tokens unknown
                    self.count_usage("agent", Usage(n_calls=1))
                self.toolbox_recorded = False
            if stop is not None:
                raise _Stopped(stop)
            if text and text.strip():
                self.record(Message(role=Role.ASSISTANT, content=text), by="agent")
                self.steps += 1
                return ended
            if ended:
                return True
            if retried_empty or not self.rules.retry_empty_agent:
                raise _Stopped(empty_agent_ending(None, asked_again=retried_empty))
            retried_empty = True

    def toolbox_call(self, name: str, arguments: str, call_id: str | None = None) -> str:
        """One toolbox call of a loop-style agent: run and recorded exactly as a model's tool
        call (an assistant message with the call, then its result), limits checked first."""
        with self.toolbox_lock:
            if self.toolbox_ended:  # before the closing that follows it: no limit was reached
                return TOOLBOX_ENDED
            if self.toolbox_closed or self.toolbox_stop is not None:
                return TOOLBOX_STOPPED
            try:
                self.check_limits()
                if self.rules.tool_calls_are_steps and self.steps + 1 >= self.limits.max_steps:
                    # no room for the call and its result: neither is recorded
                    raise _Stopped.by(StopReason.MAX_STEPS, f"{self.steps} routed messages")
            except _Stopped as stop:
                self.toolbox_stop = stop.ending
                return TOOLBOX_STOPPED
            call = ToolCall(
                id=call_id or f"toolbox_{next(self.toolbox_ids)}", name=name, arguments=arguments
            )
            turn = AssistantTurn(content=None, tool_calls=(call,))
            self.record(turn.to_message())
            self.steps += 1
            try:
                exited = self.run_tools(turn)
            except _Stopped as stop:  # the error limit, reached by this call (it ran)
                self.toolbox_stop, exited = stop.ending, False
            result = self.messages[-1].content or ""
            if exited:
                self.toolbox_ended = True
            return result

    def toolbox_usage(self, usage: Usage) -> None:
        """Tokens a loop-style agent recorded: the agent role's (in place of the one call
        counted for a converse() that recorded none); nothing once the toolbox is closed."""
        with self.toolbox_lock:
            if not self.toolbox_closed:
                self.toolbox_recorded = True
                self.count_usage("agent", usage)

    def close_toolbox(self) -> None:
        """No toolbox call runs from here on (a sync agent's thread may outlive its scenario
        after the deadline: the final database must not change after it is scored)."""
        with self.toolbox_lock:
            self.toolbox_closed = True

    def run_tools(self, turn: AssistantTurn) -> bool:
        """Execute the turn's calls in order and count their steps; True when one of them
        ended the conversation. Raises ``_Stopped`` at the step limit (the turn's remaining
        calls are not run; ``tool_calls_are_steps`` only) or the error limit."""
        calls = self._tool_calls(turn)
        while (exited := _next_pause(calls)) is None:
            pass
        return exited

    async def run_tools_yielding(self, turn: AssistantTurn) -> bool:
        """:meth:`run_tools`, letting the event loop run every :data:`CALLS_PER_YIELD` calls:
        a turn of 100,000 calls (the tau2 profile runs them all) held up the other scenarios in
        flight for seconds and ran past the scenario's deadline, which can land here now."""
        calls = self._tool_calls(turn)
        while (exited := _next_pause(calls)) is None:
            await asyncio.sleep(0)
        return exited

    def _tool_calls(self, turn: AssistantTurn) -> Generator[None, None, bool]:
        """The body of :meth:`run_tools`, pausing (a ``yield``) every
        :data:`CALLS_PER_YIELD` calls."""
        calls = turn.tool_calls
        for done, call in enumerate(calls):
            if done and not done % CALLS_PER_YIELD:
                yield
            if self.rules.tool_calls_are_steps and self.steps >= self.limits.max_steps:
                raise _Stopped.by(
                    StopReason.MAX_STEPS,
                    f"{self.steps} routed messages; {done} of the last turn's {len(calls)} tool "
                    "calls run",
                )
            result = dispatch_json(
                self.store,
                call.name,
                call.arguments,
                normalize_ids=self.rules.normalize_ids,
                available=self.rules.available_tools,
            )
            self.record(
                Message(
                    role=Role.TOOL,
                    content=result.content,
                    tool_call_id=call.id,
                    name=call.name,
                    error=result.error,
                )
            )
            if result.action is not None:
                self.actions.append(result.action)
            if self.rules.tool_calls_are_steps:
                self.steps += 1
            if result.error:
                self.tool_errors += 1
            elif call.name in self.rules.exit_tools:
                return self._turn_done(exited=True)
        return self._turn_done(exited=False)

    def _turn_done(self, *, exited: bool) -> bool:
        if not self.rules.tool_calls_are_steps:
            self.steps += 1  # upstream: the turn's results are one step
        if not exited and self.tool_errors >= self.limits.max_errors:
            raise _Stopped.by(StopReason.TOO_MANY_ERRORS, f"{self.tool_errors} tool errors")
        return exited

    async def converse(self, cast: Cast) -> Ending:
        if isinstance(cast.agent, AgentRunner):
            try:
                await cast.agent.start()
            except AgentFailed as error:
                self.agent_traceback = error.traceback_text
                return Ending.failure(StopReason.AGENT_ERROR, "agent", error.detail)
            except EndpointError as error:  # AgentInfraError raised by the factory
                return Ending.failure(StopReason.INFRA_ERROR, "agent", str(error))
        self.record(Message(role=Role.ASSISTANT, content=self.rules.greeting))
        if self.rules.greeting_is_a_step:
            self.steps += 1
        user_stopped = False
        try:
            while True:
                message = await self.user_turn(cast)
                user_stopped = has_stop_token(message.content)
                if user_stopped and not self.rules.user_grace_turn:
                    if self.steps >= self.limits.max_steps:
                        return Ending(
                            reason=StopReason.MAX_STEPS, detail=f"{self.steps} routed messages"
                        )
                    return Ending(reason=StopReason.USER_STOP)
                if await self.agent_turn(cast.agent):
                    return Ending(reason=StopReason.AGENT_EXIT)
                if user_stopped:
                    return Ending(reason=StopReason.USER_STOP)
        except _Stopped as stop:
            if user_stopped and stop.ending.reason in _GRACE_LIMITS:
                # The user had already ended the conversation (upstream stops right there);
                # a limit reached during our grace turn does not change that ending.
                return Ending(
                    reason=StopReason.USER_STOP,
                    detail=f"grace turn cut short: {stop.ending.detail}",
                )
            self.error_body = stop.body
            self.agent_traceback = stop.traceback
            return stop.ending

    def result(self, ending: Ending) -> ConversationResult:
        return ConversationResult(
            stop_reason=ending.reason,
            detail=ending.detail,
            failed_role=ending.failed_role,
            request_timeout=self.request_timeout if ending.failed_role else None,
            messages=tuple(self.messages),
            timestamps=tuple(self.timestamps),
            usages=tuple(self.usages),
            actions=tuple(self.actions),
            store=self.store,
            usage=dict(self.usage),
            latencies=tuple(self.latencies),
            started_at=self.started_at,
            duration_seconds=self.clock.monotonic() - self.started,
            steps=self.steps,
            tool_errors=self.tool_errors,
            requests=dict(self.requests),
            error_body=self.error_body,
            agent_traceback=self.agent_traceback,
        )


def _next_pause(calls: Generator[None, None, bool]) -> bool | None:
    """Run a turn's calls to their next pause (None) or to their end (whether they ended the
    conversation)."""
    try:
        next(calls)
    except StopIteration as done:
        return bool(done.value)
    return None
