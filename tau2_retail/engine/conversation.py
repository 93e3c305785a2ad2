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
import dataclasses
import itertools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, Protocol

from tau2_retail import codec
from tau2_retail.codec import Omitted
from tau2_retail.engine.metrics import ROLES
from tau2_retail.engine.prompts import GREETING
from tau2_retail.engine.toolbox import ScenarioToolbox
from tau2_retail.errors import (
    ArtifactFormatError,
    BudgetExhausted,
    ContextWindowExceeded,
    EndpointError,
    UnparsedModelOutput,
)
from tau2_retail.models.agent import AgentFailed, AgentRunner
from tau2_retail.models.agent_thread import BLOCKING_STEP_SECONDS
from tau2_retail.models.messages import (
    STOP_TOKENS,
    AssistantTurn,
    Message,
    RequestStats,
    Role,
    ToolCall,
    Usage,
)
from tau2_retail.models.progress import RequestProgress, tracking
from tau2_retail.models.protocol import ChatModel
from tau2_retail.tools.dispatch import Action, dispatch_json
from tau2_retail.tools.registry import END_CONVERSATION, TRANSFER_TO_HUMAN_AGENTS
from tau2_retail.tools.store import Store

__all__ = [
    "Clock",
    "ConversationResult",
    "ConversationRules",
    "Ending",
    "Limits",
    "MessageListener",
    "StopReason",
    "SystemClock",
    "run_conversation",
]

_EXIT_TOOLS = frozenset({END_CONVERSATION, TRANSFER_TO_HUMAN_AGENTS})

# What a loop-style agent's toolbox answers once the conversation is over for it (a limit was
# reached, or an ending tool succeeded): the call is neither run nor recorded.
TOOLBOX_STOPPED = "Error: the conversation is over (a limit was reached); stop and return."
TOOLBOX_ENDED = "Error: the conversation has ended; return your last words."


class StopReason(StrEnum):
    AGENT_EXIT = "agent_exit"
    USER_STOP = "user_stop"
    MAX_STEPS = "max_steps"
    TOO_MANY_ERRORS = "too_many_errors"
    TIMEOUT = "timeout"
    AGENT_ERROR = "agent_error"
    CONTEXT_WINDOW_EXCEEDED = "context_window_exceeded"
    INFRA_ERROR = "infra_error"
    # upstream's endings without a counterpart here: only runs imported from an upstream
    # results.json (``python -m tau2_retail import``) carry them; the engine never ends so
    USER_ERROR = "user_error"
    UNEXPECTED_ERROR = "unexpected_error"


# endings that a role's model (or its endpoint) caused: their detail is recorded "role: ..."
_ROLE_ENDINGS = frozenset(
    {StopReason.INFRA_ERROR, StopReason.CONTEXT_WINDOW_EXCEEDED, StopReason.AGENT_ERROR}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ending:
    """How a conversation ended: the reason, its detail as recorded, and the role whose model
    or endpoint failed (None when no role failed: a limit, a stop, the agent's exit).

    ``detail`` is the text the artifacts record (``transcript.json``'s ``detail``,
    ``metrics.json``'s ``stop_detail``), e.g. ``"agent: HTTP 500: ..."``; ``failed_role`` is
    the typed truth the harness decides by, set where the conversation ends.
    """

    reason: StopReason
    detail: str = ""
    failed_role: str | None = None

    @classmethod
    def failure(cls, reason: StopReason, role: str, message: str) -> Ending:
        """The ending caused by ``role``, recorded as ``"role: message"``."""
        return cls(reason=reason, detail=f"{role}: {message}", failed_role=role)

    @classmethod
    def from_record(cls, reason: str, detail: str) -> Ending:
        """The ending of a saved transcript (which records ``stop_reason`` and ``detail`` only):
        the failed role is the detail's ``role:`` prefix; an infra error without one was the
        agent's (the only role whose failures were once recorded without it)."""
        stop = StopReason(reason)
        role = None
        if stop in _ROLE_ENDINGS:
            prefix = detail.partition(":")[0]
            if prefix in ROLES:
                role = prefix
            elif stop is not StopReason.CONTEXT_WINDOW_EXCEEDED:
                role = "agent"
        return cls(reason=stop, detail=detail, failed_role=role)

    def noting(self, note: str) -> Ending:
        """This ending with ``note`` appended to its detail (``"; "``-separated)."""
        return dataclasses.replace(self, detail="; ".join(filter(None, (self.detail, note))))


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioPrompts:
    """What the models of one scenario are given: the agent's and the user's system prompts
    and the agent's tool schemas (recorded in the scenario's artifacts)."""

    agent: str
    user: str
    tools: Sequence[Mapping[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """When a conversation is cut short: routed messages, tool errors, wall-clock seconds, and
    the characters of the agent's history (an agent that writes megabytes every turn would
    otherwise grow every request until some endpoint gives up: that is the agent's failure,
    ``context_window_exceeded``, not an outage of the endpoint that happened to refuse it).
    """

    max_steps: int = 200
    max_errors: int = 10
    max_duration_seconds: float = 900.0
    max_history_chars: int = 2_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationRules:
    """How turns are routed and conversations end: ours by default, upstream's in the tau2 profile.

    - ``greeting``: the fixed first agent message; ``greeting_is_a_step``: whether it counts
      toward ``max_steps`` (upstream's orchestrator counts only the steps it runs).
    - ``exit_tools``: a successful call to one of them ends the conversation (``agent_exit``).
    - ``available_tools``: tool names the dispatcher accepts (None: every registered tool).
    - ``normalize_ids``: identifier normalization in the tools' lookups.
    - ``user_grace_turn``: after the user's stop token the agent gets one more turn; without it
      the conversation ends at once, and a step limit reached by that very message wins (as
      upstream's orchestrator decides).
    - ``retry_empty_agent``: an agent reply with neither text nor tool calls is asked again
      once; otherwise it ends the conversation as ``agent_error`` at once.
    - ``tool_calls_are_steps``: each tool call of a turn counts as a step toward
      ``max_steps``, and a turn runs only the calls the limit leaves room for (the others are
      not run; the conversation ends ``max_steps``). Otherwise (upstream's orchestrator) the
      results of a turn count as one step and every call of the turn runs.
    """

    greeting: str = GREETING
    greeting_is_a_step: bool = True
    exit_tools: frozenset[str] = _EXIT_TOOLS
    available_tools: frozenset[str] | None = None
    normalize_ids: bool = True
    user_grace_turn: bool = True
    retry_empty_agent: bool = True
    tool_calls_are_steps: bool = True


MessageListener = Callable[[Message], None]
"""Called with each message as it joins the conversation (live output); it must not block."""


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def wall(self) -> float: ...


class SystemClock:
    """The real clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()


@dataclass(frozen=True, slots=True, kw_only=True)
class _Recorded:
    """What a :class:`ConversationResult` and its ``transcript.json`` (:class:`Transcript`)
    share, in the file's order. ``agent_traceback`` is None when the agent's code raised
    nothing."""

    messages: tuple[Message, ...]
    stop_reason: StopReason
    detail: str
    actions: tuple[Action, ...]
    usage: Mapping[str, Usage]
    latencies: tuple[tuple[str, float], ...]
    started_at: float
    duration_seconds: float
    steps: int
    tool_errors: int
    requests: Mapping[str, RequestStats] = field(default_factory=dict)
    error_body: str = ""
    agent_traceback: Annotated[str | None, Omitted] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationResult(_Recorded):
    """Everything one conversation produced: ``timestamps`` has one wall-clock time per
    message and ``usages`` the tokens of the completion that produced each one (None for the
    greeting and tool results);
    ``store`` is the final database (not JSON)."""

    timestamps: tuple[float, ...]
    store: Store = field(repr=False, compare=False)
    failed_role: str | None = None
    #: the failed role's request timeout (seconds per attempt) when its request ended the
    #: conversation by timing out (not recorded in the transcript)
    request_timeout: float | None = None
    usages: tuple[Usage | None, ...] = ()

    def __post_init__(self) -> None:
        if not self.agent_traceback:
            object.__setattr__(self, "agent_traceback", None)
        if len(self.usages) != len(self.messages):
            object.__setattr__(self, "usages", (None,) * len(self.messages))

    @property
    def ending(self) -> Ending:
        """How the conversation ended, typed."""
        return Ending(reason=self.stop_reason, detail=self.detail, failed_role=self.failed_role)

    @classmethod
    def from_json(
        cls, data: object, store: Store, where: str = "transcript.json"
    ) -> ConversationResult:
        """The conversation of a saved ``transcript.json`` value (``store`` is the final
        database, rebuilt by the caller); :class:`ArtifactError` names the field."""
        if isinstance(data, dict) and (problem := codec.format_problem(data)) is not None:
            raise ArtifactFormatError(f"{where}: {problem}")
        saved = codec.decode_value(Transcript, data, where)
        return cls(
            **_shared(saved)
            | {"messages": tuple(Message(**_shared(m, Message)) for m in saved.messages)},
            timestamps=tuple(m.timestamp for m in saved.messages),
            usages=tuple(m.usage for m in saved.messages),
            failed_role=Ending.from_record(saved.stop_reason, saved.detail).failed_role,
            store=store,
        )

    def to_json(self) -> dict[str, Any]:
        """The ``transcript.json`` value: each message with its timestamp (and its usage)."""
        messages = tuple(
            TimedMessage(**_shared(message, Message), timestamp=timestamp, usage=usage)
            for message, timestamp, usage in zip(
                self.messages, self.timestamps, self.usages, strict=True
            )
        )
        return codec.versioned(codec.encode(Transcript(**_shared(self) | {"messages": messages})))


@dataclass(frozen=True, slots=True, kw_only=True)
class TimedMessage(Message):
    """A message of ``transcript.json``: the message, when it joined the conversation and,
    for a message a model produced, the tokens of its completion (``usage``; absent for the
    greeting and tool results)."""

    timestamp: float
    usage: Annotated[Usage | None, Omitted] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Transcript(_Recorded):
    """``transcript.json``: a :class:`ConversationResult` without its database, each message
    with its timestamp."""

    messages: tuple[TimedMessage, ...]


def _shared(record: object, kind: type = _Recorded) -> dict[str, Any]:
    """The values of ``record`` for the fields of ``kind`` (one of its bases)."""
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(kind)}


_EMPTY_AGENT = Ending(
    reason=StopReason.AGENT_ERROR,
    detail="the agent returned an empty message twice",
    failed_role="agent",
)
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


def _failure_reason(role: str, error: EndpointError) -> StopReason:
    """How a failed request ends the conversation: a prompt too long for the model is
    ``context_window_exceeded``; output the server could not parse is the agent's
    ``agent_error`` when the agent wrote it; anything else is an infra error of ``role``."""
    if isinstance(error, ContextWindowExceeded):
        return StopReason.CONTEXT_WINDOW_EXCEEDED
    if isinstance(error, UnparsedModelOutput) and role == "agent":
        return StopReason.AGENT_ERROR
    return StopReason.INFRA_ERROR


@dataclass(frozen=True, slots=True)
class _Cast:
    """Who speaks: the agent's and the user's models and the user's system prompt (the
    scenario's instructions). Held by the running conversation only, never by
    :class:`_Conversation`: the toolbox a loop-style agent gets reaches that object, and must
    reach no task data."""

    agent: ChatModel
    user: ChatModel
    user_system: Message


def has_stop_token(text: str | None) -> bool:
    return text is not None and any(token in text for token in STOP_TOKENS)


class _Conversation:
    """The state of one running conversation: the agent's side of it (its prompt, tools and
    database, the messages, the counters). The models and the user's prompt are in
    :class:`_Cast`, passed to the turns."""

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
    ) -> None:
        self.rules = rules
        self.agent_system = Message(role=Role.SYSTEM, content=prompts.agent)
        self.tools = prompts.tools
        self.store = store
        self.limits = limits
        self.seed = seed
        self.clock = clock
        self.on_message = on_message
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
        #: the role whose request was cut in flight (by the deadline)
        self.cut_role: str | None = None
        self.agent_traceback = ""
        # a loop-style agent's toolbox: its calls may come from the agent's thread
        self.toolbox: ScenarioToolbox | None = None
        self.toolbox_lock = threading.Lock()
        self.toolbox_ids = itertools.count()
        # an Ending, not the exception: a traceback would reach the frames of the harness
        self.toolbox_stop: Ending | None = None
        self.toolbox_ended = False
        self.toolbox_closed = False
        if toolbox:
            self.toolbox = ScenarioToolbox(
                schemas=prompts.tools, run=self.toolbox_call, ended=lambda: self.toolbox_ended
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

    async def complete(self, role: str, model: ChatModel, messages: list[Message]) -> AssistantTurn:
        tools = self.tools if role == "agent" else None
        with tracking() as progress:
            try:
                turn = await model.complete(messages, tools=tools, seed=self.seed)
            except EndpointError as error:
                self.requests[role] += RequestStats(
                    requests=1, attempts=error.attempts, failed=1, wait_seconds=error.wait_seconds
                )
                self.request_timeout = error.timeout_seconds
                raise _Stopped(
                    Ending.failure(_failure_reason(role, error), role, str(error)),
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
        self.cut_role = role
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

    async def user_turn(self, cast: _Cast) -> Message:
        self.check_limits()
        turn = await self.complete("user", cast.user, self.user_view(cast.user_system))
        if not (turn.content and turn.content.strip()):
            self.check_limits()
            turn = await self.complete("user", cast.user, self.user_view(cast.user_system))
        if not (turn.content and turn.content.strip()):
            raise _Stopped(
                Ending.failure(
                    StopReason.INFRA_ERROR, "user", "the simulator returned an empty message twice"
                )
            )
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
                    raise _Stopped(_EMPTY_AGENT)
                retried_empty = True
                continue
            # The retry is per empty message: a good reply earns the next empty one a retry too.
            retried_empty = False
            self.record(turn.to_message(), by="agent")
            self.steps += 1
            if not turn.tool_calls:
                return False
            if self.run_tools(turn):
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
            self.count_usage("agent", Usage(n_calls=1))
            self.latencies.append(("agent", time.perf_counter() - started))
            with self.toolbox_lock:
                stop, ended = self.toolbox_stop, self.toolbox_ended
            if stop is not None:
                raise _Stopped(stop)
            if text and text.strip():
                self.record(Message(role=Role.ASSISTANT, content=text), by="agent")
                self.steps += 1
                return ended
            if ended:
                return True
            if retried_empty or not self.rules.retry_empty_agent:
                raise _Stopped(_EMPTY_AGENT)
            retried_empty = True

    def toolbox_call(self, name: str, arguments: str, call_id: str | None = None) -> str:
        """One toolbox call of a loop-style agent: run and recorded exactly as a model's tool
        call (an assistant message with the call, then its result), limits checked first."""
        with self.toolbox_lock:
            if self.toolbox_closed or self.toolbox_stop is not None:
                return TOOLBOX_STOPPED
            if self.toolbox_ended:
                return TOOLBOX_ENDED
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

    def close_toolbox(self) -> None:
        """No toolbox call runs from here on (a sync agent's thread may outlive its scenario
        after the deadline: the final database must not change after it is scored)."""
        with self.toolbox_lock:
            self.toolbox_closed = True

    def run_tools(self, turn: AssistantTurn) -> bool:
        """Execute the turn's calls in order and count their steps; True when one of them
        ended the conversation. Raises ``_Stopped`` at the step limit (the turn's remaining
        calls are not run; ``tool_calls_are_steps`` only) or the error limit."""
        calls = turn.tool_calls
        for done, call in enumerate(calls):
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

    async def converse(self, cast: _Cast) -> Ending:
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
) -> ConversationResult:
    """Run one conversation on ``store`` (mutated in place) and return what happened.

    ``prompts``: the agent's and the user's system prompts and the agent's tools.
    ``on_message`` sees each message as it is recorded (the ``run`` command prints them live).
    """
    limits = limits or Limits()
    runner = agent if isinstance(agent, AgentRunner) else None
    conversation = _Conversation(
        prompts=prompts,
        store=store,
        limits=limits,
        seed=seed,
        clock=clock or SystemClock(),
        rules=rules or ConversationRules(),
        on_message=on_message,
        toolbox=runner is not None,
    )
    cast = _Cast(
        agent=agent, user=user, user_system=Message(role=Role.SYSTEM, content=prompts.user)
    )
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


async def _bounded(conversation: _Conversation, cast: _Cast, seconds: float) -> Ending:
    """The conversation's ending, within ``seconds`` (a call still running then is abandoned;
    the toolbox is closed in any case)."""
    try:
        # The clock checks between turns are exact; this bounds a single call that hangs.
        async with asyncio.timeout(seconds):
            return await conversation.converse(cast)
    except TimeoutError:
        cut = conversation.cut_role
        call = f"the {cut} request in flight (counted as failed)" if cut else "a model call"
        ending = Ending(reason=StopReason.TIMEOUT, detail=f"{call} outlived the {seconds} s limit")
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
