"""Agents as Python code: the public contract and running it (finding one by import string:
:mod:`tau2_retail.models.agent_import`).

An agent is any object with one of two methods, sync or async:

- turn style, ``respond(messages, tools)``: ``messages`` is the conversation so far in OpenAI
  chat format (plain dicts, exactly what an endpoint model would be sent in the active
  profile), ``tools`` the profile's tool list; it returns the next assistant turn: a ``str``,
  an assistant message dict (``content`` and/or ``tool_calls``), a whole chat completion dict,
  or any object with ``model_dump()`` giving one of those (an ``openai`` message or completion).
  The harness reads it as it reads an endpoint's reply and runs the tools.
- loop style, ``converse(messages, toolbox)``: the agent runs its own tool loop through the
  ``toolbox`` (see :class:`Toolbox`) and returns the text to say to the customer.

Each scenario's agent runs in a thread of its own, with its own event loop
(:mod:`tau2_retail.models.agent_thread`): scenarios in flight (``--tau2-concurrency``)
overlap whether the agent is sync or async, and one that blocks holds up only its own
scenario. An agent may also have ``close()`` or ``aclose()``: it is called once its scenario's
conversation is over (to close its own clients). Anything raised by the agent's code is the
agent's failure (``agent_error``, its traceback kept), ``SystemExit``, ``GeneratorExit`` and a
``CancelledError`` it raises itself included; :class:`~tau2_retail.errors.AgentInfraError`
marks an outage of the agent's own backend (an infra error, excluded and resumable; so does
the ``openai`` client's connection error or retryable status inside a framework's wrapper,
:mod:`~tau2_retail.models.agent_outage`) and
``KeyboardInterrupt`` interrupts the run as Ctrl-C does
(:class:`~tau2_retail.errors.AgentInterrupted`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, Protocol, runtime_checkable

from tau2_retail.codec import Omitted
from tau2_retail.errors import AgentInfraError, AgentInterrupted, Tau2Error
from tau2_retail.models.agent_reply import Unreadable, a_type, plain_reply
from tau2_retail.models.agent_thread import AgentThread, Outcome, Returned
from tau2_retail.models.messages import AssistantTurn, Message, Usage
from tau2_retail.models.wire import UnreadableReply, encode_messages, read_completion, read_message

__all__ = [
    "FIXTURE_SOURCE",
    "AgentFactory",
    "AgentFailed",
    "AgentIdentity",
    "AgentLedger",
    "AgentRunner",
    "LoopAgent",
    "Toolbox",
    "TurnAgent",
    "agent_style",
]

FIXTURE_SOURCE: Final = "tau2_agent fixture"
# how long an agent's close()/aclose() may take before its thread is abandoned (the wait for
# its last call below included)
_CLOSE_SECONDS: Final = 30.0
# How long close() waits for the agent's last call, cancelled at the deadline, to end before it
# gives up calling close()/aclose() (part of _CLOSE_SECONDS). A coroutine ends within
# milliseconds of its cancellation (an AsyncOpenAI request to a hung loopback server, 30
# timeouts on the loaded 2-core machine: median 2.5 ms, at most 13 ms); 5 s leaves room for
# the async clean-up of a framework's own (except/finally blocks that await). What still runs
# then ignores the cancellation (sync code, a swallowed CancelledError): waiting longer only
# holds the scenario's slot.
_LAST_CALL_SECONDS: Final = 5.0

AgentStyle = Literal["turn", "loop"]
AgentFactory = Callable[[], object]
"""Makes one fresh agent (called once per scenario and trial)."""


@runtime_checkable
class Toolbox(Protocol):
    """The scenario's tools bound to its database, for a loop-style agent.

    - ``call(name, arguments)`` runs a tool and returns exactly the text a model would get
      (same normalization, profile rules and ``Error: ...`` strings); each call is recorded in
      the transcript as an assistant tool call and its result. ``arguments`` is a dict (or the
      raw JSON text a model would send); ``call_id`` is the id your model gave the call, if
      you have it (the transcript then shows it).
    - ``schemas``: the profile's tool list in OpenAI format (what a turn-style agent gets).
    - ``functions``: name -> a plain Python callable with the tool's signature and docstring
      (keyword arguments; for frameworks that build tools from functions).
    - ``ended``: True once an ending tool (``end_conversation``, a transfer) succeeded: the
      conversation ends after the text the agent returns.
    - ``record_usage(input_tokens=, output_tokens=, requests=1, cached_tokens=0)``:
      the tokens the agent's own model requests spent (the suite never sees them), counted as
      the agent role's ``token_usage`` and priced by the agent's ``model``. A count that is not
      a non-negative ``int`` raises ``TypeError``/``ValueError`` (the agent's error).
    """

    @property
    def schemas(self) -> list[dict[str, Any]]: ...

    @property
    def functions(self) -> Mapping[str, Callable[..., str]]: ...

    @property
    def ended(self) -> bool: ...

    def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | None = None,
        *,
        call_id: str | None = None,
    ) -> str: ...

    def record_usage(
        self, *, input_tokens: int, output_tokens: int, requests: int = 1, cached_tokens: int = 0
    ) -> None: ...


@runtime_checkable
class TurnAgent(Protocol):
    """Turn style: the next assistant turn for the conversation so far (sync or async)."""

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any: ...


@runtime_checkable
class LoopAgent(Protocol):
    """Loop style: runs its own tool loop through ``toolbox``; returns the text to say."""

    def converse(self, messages: list[dict[str, Any]], toolbox: Toolbox) -> Any: ...


def agent_style(agent: object) -> AgentStyle | None:
    """``turn`` (has ``respond``; it wins when both exist), ``loop`` or None."""
    if callable(getattr(agent, "respond", None)):
        return "turn"
    if callable(getattr(agent, "converse", None)):
        return "loop"
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentIdentity:
    """Who the agent is, as the records name it: ``source`` is ``package.module:factory`` or
    ``<conftest path>::tau2_agent``; ``name``/``version`` are the agent's attributes, if any;
    ``model`` the model id it declares (a ``str`` attribute), which prices its tokens."""

    source: str
    name: str | None = None
    version: str | None = None
    fixture: bool = False
    model: Annotated[str | None, Omitted] = None

    @classmethod
    def of(cls, source: str, agent: object, *, fixture: bool = False) -> AgentIdentity:
        def attribute(key: str, kinds: tuple[type, ...] = (str, int, float)) -> str | None:
            try:
                value = getattr(agent, key, None)
            except (Exception, SystemExit):  # the agent's property or __getattr__: no name
                return None
            return str(value) if isinstance(value, kinds) and value != "" else None

        return cls(
            source=source,
            name=attribute("name"),
            version=attribute("version"),
            fixture=fixture,
            model=attribute("model", (str,)),
        )

    def describe(self) -> str:
        extra = " ".join(filter(None, (self.name, self.version)))
        if self.model is not None:
            extra = f"{extra}, model {self.model}" if extra else f"model {self.model}"
        return f"{self.source} ({extra})" if extra else self.source


class AgentFailed(Tau2Error):
    """The agent's own code raised (or returned something unreadable): ``agent_error``.

    ``detail`` is one line; ``traceback_text`` the whole traceback (saved with the scenario).
    """

    def __init__(self, detail: str, *, traceback_text: str = "") -> None:
        super().__init__(detail)
        self.detail = detail
        self.traceback_text = traceback_text or detail


class AgentLedger:
    """The agents one process has handed to scenarios: a factory (or a fixture) that gives a
    second scenario an object an earlier one already had is refused, since every scenario
    would share its state. Only identities are compared (no method of the agent is called)."""

    def __init__(self) -> None:
        self._seen: dict[int, Callable[[], object]] = {}

    def claim(self, agent: object) -> bool:
        """False when ``agent`` was already handed out in this process (and is alive)."""
        key = id(agent)
        held = self._seen.get(key)
        if held is not None and held() is agent:
            return False
        seen = self._seen

        def forget(_: object) -> None:
            seen.pop(key, None)

        try:
            seen[key] = weakref.ref(agent, forget)
        except TypeError:  # cannot be weakly referenced: remembered while its scenario runs
            seen[key] = lambda: agent
        return True

    def release(self, agent: object) -> None:
        """Its scenario is over: forget an agent held strongly (a weak one forgets itself)."""
        held = self._seen.get(id(agent))
        if held is not None and not isinstance(held, weakref.ref):
            del self._seen[id(agent)]


class AgentRunner:
    """One scenario's agent: made by ``factory`` at ``start``, then called turn by turn.

    It is also the agent role's ``ChatModel`` for a turn-style agent (``complete``), so the
    conversation runs its tools, limits and endings exactly as for an endpoint model. Every
    call into the agent's code runs in the scenario's :class:`AgentThread`; what it raises
    becomes :class:`AgentFailed`, :class:`AgentInfraError` or :class:`AgentInterrupted` here.
    ``ledger`` refuses an agent object that another scenario of the process already had.
    """

    def __init__(
        self, factory: AgentFactory, identity: AgentIdentity, *, ledger: AgentLedger | None = None
    ) -> None:
        self._factory = factory
        self.identity = identity
        self._ledger = ledger
        self._agent: object | None = None
        self._style: AgentStyle | None = None
        self._call_ids = itertools.count()
        self._thread = AgentThread(identity.describe())
        self._tools: tuple[object, str] | None = None
        #: the agent's ``close()`` raised KeyboardInterrupt: the scenario keeps its verdict
        #: (its record is written), then the run stops as for Ctrl-C
        self.interrupted: AgentInterrupted | None = None
        #: the model the agent object declares where its factory (a class read at start-up)
        #: declared none or another: the records and the prices never see it
        self.unseen_model: str | None = None

    @property
    def name(self) -> str:
        return self.identity.describe()

    @property
    def factory_is_class(self) -> bool:
        """Whether the agents come from a class (read at start-up, never called there)."""
        return isinstance(self._factory, type)

    @property
    def style(self) -> AgentStyle:
        if self._style is None:
            raise RuntimeError("the agent is not started")
        return self._style

    @property
    def longest_block(self) -> float:
        """The longest time one step of the agent's async code held its event loop (seconds),
        the step still running included."""
        return max(self._thread.longest_step, self._thread.blocking_for())

    def blocking_now(self) -> float:
        """How long the agent's async code has held its loop in the step running now."""
        return self._thread.blocking_for()

    async def start(self) -> None:
        """Make the agent (in its thread); raises ``AgentFailed`` when the factory raises or
        makes no agent, or makes one another scenario already had."""
        factory = self._factory

        def make() -> tuple[object, AgentStyle | None]:
            agent = factory()
            return agent, agent_style(agent)

        agent, style = self._value(await self._thread.run(make), "the agent factory")
        if style is None:
            raise AgentFailed(
                f"{self.identity.source} gave a {type(agent).__name__} object, which has "
                "neither respond(messages, tools) nor converse(messages, toolbox)"
            )
        if self._ledger is not None and not self._ledger.claim(agent):
            raise AgentFailed(
                f"{self.identity.source} gave an agent object that another scenario of this "
                "process already had: every scenario would share it; make each call return a "
                "fresh agent (e.g. the agent's class)"
            )
        self._agent, self._style = agent, style
        declared = AgentIdentity.of(self.identity.source, agent).model
        if declared is not None and declared != self.identity.model:
            self.unseen_model = declared

    def _value(self, outcome: Outcome, where: str) -> Any:
        if isinstance(outcome, Returned):
            return outcome.value
        if issubclass(outcome.kind, AgentInfraError):
            raise AgentInfraError(outcome.text)
        if outcome.outage is not None:  # an outage, wrapped by the agent's framework
            raise AgentInfraError(
                f"{where} raised {outcome.kind.__name__} "
                f"(the agent's backend failed: {outcome.outage})"
            )
        if issubclass(outcome.kind, KeyboardInterrupt):
            raise AgentInterrupted(f"{self.identity.source}: {where} raised KeyboardInterrupt")
        if issubclass(outcome.kind, Unreadable):
            detail = f"{where} {outcome.text}"
        else:
            text = f": {outcome.text}" if outcome.text else ""
            detail = f"{where} raised {outcome.kind.__name__}{text}"
        raise AgentFailed(detail, traceback_text=outcome.traceback_text)

    async def _call(self, method: str, arguments: Callable[[], tuple[Any, ...]]) -> Any:
        """``agent.<method>(*arguments())`` in the agent's thread, its reply made plain there."""
        agent = self._agent

        def call() -> Any:
            return getattr(agent, method)(*arguments())

        return self._value(await self._thread.run(call, plain_reply), f"{method}()")

    async def close(self) -> str:
        """Call the agent's ``aclose()`` or ``close()`` if it has one, then end its thread;
        returns what went wrong (one line, empty when nothing), which does not change how the
        scenario scored. A call cancelled at the deadline is waited for first (at most
        ``_LAST_CALL_SECONDS``): the agent is not closed while it still runs."""
        agent, thread = self._agent, self._thread
        try:
            return "" if agent is None else await self._close(agent)
        finally:
            thread.stop()
            # only now: an agent object held strongly is not another scenario's while it closes
            if agent is not None and self._ledger is not None:
                self._ledger.release(agent)

    async def _close(self, agent: object) -> str:
        deadline = asyncio.get_running_loop().time() + _CLOSE_SECONDS
        if not await self._thread.wait_idle(_LAST_CALL_SECONDS):
            return (
                "close() not called: its last call was still running "
                f"{_LAST_CALL_SECONDS:g} s after the deadline"
            )

        def call() -> Any:
            method = getattr(agent, "aclose", None) or getattr(agent, "close", None)
            return method() if callable(method) else None

        try:
            async with asyncio.timeout_at(deadline):
                outcome = await self._thread.run(call)
        except TimeoutError:
            return f"close() did not return within {_CLOSE_SECONDS:g} s"
        try:
            self._value(outcome, "close()")
        except AgentFailed as error:  # the user's clean-up code: reported beside the result
            return error.detail
        except AgentInfraError as error:
            return f"close() raised AgentInfraError: {error}"
        except AgentInterrupted as error:
            self.interrupted = error
            return "close() raised KeyboardInterrupt"
        return ""

    def abandon(self) -> None:
        """The scenario ended without closing its agent (interrupted): let its thread end."""
        if self._agent is not None and self._ledger is not None:
            self._ledger.release(self._agent)
        self._thread.stop()

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        seed: int | None = None,
    ) -> AssistantTurn:
        """The turn-style agent's next turn, read as an endpoint's reply is read. The agent
        gets the messages and a fresh copy of the tools: nothing it changes reaches another
        call, scenario or record."""
        started = time.perf_counter()
        tools_text = self._tools_text(tools or ())
        wire = encode_messages(messages)
        reply = await self._call("respond", lambda: (wire, json.loads(tools_text)))
        content, tool_calls, usage = self._read(reply)
        return AssistantTurn(
            content=content,
            tool_calls=tool_calls,
            usage=usage,
            latency_seconds=time.perf_counter() - started,
        )

    def _tools_text(self, tools: Sequence[Mapping[str, Any]]) -> str:
        # the same list every turn: encoded once, decoded into a fresh copy per call
        if self._tools is None or self._tools[0] is not tools:
            self._tools = (tools, json.dumps(list(tools)))
        return self._tools[1]

    async def converse(self, messages: Sequence[Message], toolbox: Toolbox) -> str | None:
        """The loop-style agent's text for the conversation so far (None or "" is empty)."""
        wire = encode_messages(messages)
        reply = await self._call("converse", lambda: (wire, toolbox))
        if reply is None or isinstance(reply, str):
            return reply
        content, tool_calls, _ = self._read(reply)
        if tool_calls:
            raise AgentFailed(
                "converse() returned tool calls; a loop-style agent calls its tools through "
                "the toolbox and returns the text to say"
            )
        return content

    def _read(self, reply: object) -> tuple[str | None, tuple[Any, ...], Usage]:
        """A reply already made plain (``plain_reply``) read as an endpoint's."""
        if isinstance(reply, str):
            return reply, (), Usage(n_calls=1)
        if reply is None:
            return None, (), Usage(n_calls=1)
        try:
            if isinstance(reply, Mapping) and "choices" in reply:
                read = read_completion(reply, self._call_ids)
                return read.content, read.tool_calls, read.usage
            _check_message_dict(reply)
            content, tool_calls = read_message(reply, self._call_ids)
        except UnreadableReply as error:
            raise AgentFailed(
                f"the agent returned {a_type(reply)} that is not an assistant turn "
                f"({error}); expected a str, an assistant message dict or a chat completion"
            ) from error
        return content, tool_calls, Usage(n_calls=1)


def _check_message_dict(reply: object) -> None:
    """A dict the agent returns as its message is an assistant's: a ``role`` other than
    ``assistant`` (a user message handed back by mistake), or none of ``role``, ``content``
    and ``tool_calls`` (some other object), is not a turn, rather than an empty one."""
    if not isinstance(reply, Mapping):
        return
    role = reply.get("role")
    if role not in (None, "assistant"):
        raise UnreadableReply(f"its role is {role!r}")
    if not reply.keys() & {"role", "content", "tool_calls"}:
        raise UnreadableReply("it has none of role, content and tool_calls")
