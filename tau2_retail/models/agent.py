"""Agents as Python code: the public contract, finding an agent by import string, and running it.

An agent is any object with one of two methods, sync or async:

- turn style, ``respond(messages, tools)``: ``messages`` is the conversation so far in OpenAI
  chat format (plain dicts, exactly what an endpoint model would be sent in the active
  profile), ``tools`` the profile's tool list; it returns the next assistant turn: a ``str``,
  an assistant message dict (``content`` and/or ``tool_calls``), a whole chat completion dict,
  or any object with ``model_dump()`` giving one of those (an ``openai`` message or completion).
  The harness reads it as it reads an endpoint's reply and runs the tools.
- loop style, ``converse(messages, toolbox)``: the agent runs its own tool loop through the
  ``toolbox`` (see :class:`Toolbox`) and returns the text to say to the customer.

A sync method runs in a thread of its own, so scenarios in flight (``--tau2-concurrency``)
overlap. An agent may also have ``close()`` or ``aclose()``: it is called once its scenario's
conversation is over (to close its own clients). An exception raised by the agent is the
agent's failure (``agent_error``, its traceback kept); :class:`~tau2_retail.errors.AgentInfraError`
marks an outage of the agent's own backend (an infra error, excluded and resumable).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import itertools
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, runtime_checkable

from tau2_retail.errors import AgentInfraError, ConfigError, Tau2Error
from tau2_retail.models.messages import AssistantTurn, Message, Usage
from tau2_retail.models.wire import UnreadableReply, encode_messages, read_completion, read_message

__all__ = [
    "FIXTURE_SOURCE",
    "AgentFactory",
    "AgentFailed",
    "AgentIdentity",
    "AgentRunner",
    "LoopAgent",
    "Toolbox",
    "TurnAgent",
    "agent_style",
    "call_in_thread",
    "load_agent_factory",
    "parse_agent_spec",
]

FIXTURE_SOURCE: Final = "tau2_agent fixture"

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
    ``<conftest path>::tau2_agent``; ``name``/``version`` are the agent's attributes, if any."""

    source: str
    name: str | None = None
    version: str | None = None
    fixture: bool = False

    @classmethod
    def of(cls, source: str, agent: object, *, fixture: bool = False) -> AgentIdentity:
        def attribute(key: str) -> str | None:
            value = getattr(agent, key, None)
            return str(value) if isinstance(value, (str, int, float)) and value != "" else None

        return cls(
            source=source, name=attribute("name"), version=attribute("version"), fixture=fixture
        )

    def describe(self) -> str:
        extra = " ".join(filter(None, (self.name, self.version)))
        return f"{self.source} ({extra})" if extra else self.source


def parse_agent_spec(spec: str) -> tuple[str, str]:
    """``(module, attribute)`` of ``package.module:factory``; raises ``ConfigError``."""
    module, colon, attribute = spec.strip().partition(":")
    if (
        not colon
        or not module
        or not attribute
        or not all(part.isidentifier() for part in (*module.split("."), *attribute.split(".")))
    ):
        raise ConfigError(
            f"{spec!r} is not an import string; expected package.module:factory, e.g. "
            "my_agents.support:make_agent"
        )
    return module, attribute


def load_agent_factory(spec: str) -> tuple[AgentFactory, AgentIdentity]:
    """The factory named by ``spec`` and the identity of the agent it makes.

    The named object must be callable: a class, or a function returning a fresh agent. A
    function is called once here to check what it returns (a class is inspected instead).
    Raises ``ConfigError`` naming what is wrong (module not importable, with the import error;
    attribute missing; not callable; an object with neither ``respond`` nor ``converse``).
    """
    module_name, attribute = parse_agent_spec(spec)
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # any error of the user's module at import: say which
        raise ConfigError(
            f"{spec}: cannot import {module_name!r}: {type(error).__name__}: {error}"
        ) from error
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ConfigError(f"{spec}: module {module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    if agent_style(target) is not None and not inspect.isclass(target):
        raise ConfigError(
            f"{spec}: names an agent object, not a factory; name a class or a function that "
            "returns a fresh agent (one per scenario and trial)"
        )
    if not callable(target):
        raise ConfigError(f"{spec}: {type(target).__name__} object is not callable")
    factory: AgentFactory = target
    if inspect.isclass(target):
        probe: object = target
    else:
        try:
            probe = target()
        except Exception as error:  # the user's factory: report it as a start-up error
            raise ConfigError(
                f"{spec}: the factory raised {type(error).__name__}: {error}"
            ) from error
    if agent_style(probe) is None:
        raise ConfigError(
            f"{spec}: {_kind(probe)} has neither respond(messages, tools) nor "
            "converse(messages, toolbox); see the agent contract in docs/agents.md"
        )
    return factory, AgentIdentity.of(spec, probe)


def _kind(value: object) -> str:
    if inspect.isclass(value):
        return f"class {value.__name__}"
    return f"the factory's {type(value).__name__} object"


class AgentFailed(Tau2Error):
    """The agent's own code raised (or returned something unreadable): ``agent_error``.

    ``detail`` is one line; ``traceback_text`` the whole traceback (saved with the scenario).
    """

    def __init__(self, detail: str, *, traceback_text: str = "") -> None:
        super().__init__(detail)
        self.detail = detail
        self.traceback_text = traceback_text or detail


def _failed(where: str, error: Exception) -> AgentFailed:
    text = "".join(traceback.format_exception(error))
    return AgentFailed(f"{where} raised {type(error).__name__}: {error}", traceback_text=text)


async def call_in_thread(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` in a daemon thread of its own, awaited without blocking the loop.

    A thread per call rather than ``asyncio.to_thread``: the default executor has a handful of
    workers (min(32, CPUs + 4)), which would cap ``--tau2-concurrency`` for sync agents, and its
    threads are joined at exit, so one hung agent would hang the process after its scenario
    timed out. A daemon thread costs tens of microseconds and is abandoned at the deadline.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():
            return  # cancelled at the deadline
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def run() -> None:
        try:
            result, error = function(*args), None
        except BaseException as raised:  # handed to the awaiting coroutine, which judges it
            result, error = None, raised
        # a closed loop: the scenario ended without this call (its deadline)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name="tau2-agent", daemon=True).start()
    return await future


async def _invoke(method: Callable[..., Any], *args: Any) -> Any:
    if inspect.iscoroutinefunction(method):
        return await method(*args)
    result = await call_in_thread(method, *args)
    if inspect.isawaitable(result):
        result = await result
    return result


class AgentRunner:
    """One scenario's agent: made by ``factory`` at ``start``, then called turn by turn.

    It is also the agent role's ``ChatModel`` for a turn-style agent (``complete``), so the
    conversation runs its tools, limits and endings exactly as for an endpoint model.
    """

    def __init__(self, factory: AgentFactory, identity: AgentIdentity) -> None:
        self._factory = factory
        self.identity = identity
        self._agent: object | None = None
        self._style: AgentStyle | None = None
        self._call_ids = itertools.count()

    @property
    def name(self) -> str:
        return self.identity.describe()

    @property
    def style(self) -> AgentStyle:
        if self._style is None:
            raise RuntimeError("the agent is not started")
        return self._style

    def start(self) -> None:
        """Make the agent; raises ``AgentFailed`` when the factory raises or makes no agent."""
        try:
            agent = self._factory()
        except AgentInfraError:
            raise
        except Exception as error:  # the user's code: its failure, with its traceback
            raise _failed("the agent factory", error) from error
        style = agent_style(agent)
        if style is None:
            raise AgentFailed(
                f"{self.identity.source} gave a {type(agent).__name__} object, which has "
                "neither respond(messages, tools) nor converse(messages, toolbox)"
            )
        self._agent, self._style = agent, style

    async def _call(self, method: str, *args: Any) -> Any:
        try:
            return await _invoke(getattr(self._agent, method), *args)
        except AgentInfraError:
            raise
        except Exception as error:  # the user's code: its failure, with its traceback
            raise _failed(f"{method}()", error) from error

    async def close(self) -> str:
        """Call the agent's ``aclose()`` or ``close()`` if it has one; returns what it raised
        (one line, empty when nothing), which does not change how the scenario scored."""
        if self._agent is None:
            return ""
        method = getattr(self._agent, "aclose", None) or getattr(self._agent, "close", None)
        if not callable(method):
            return ""
        try:
            await _invoke(method)
        except Exception as error:  # the user's clean-up code: reported beside the result
            return (
                f"{getattr(method, '__name__', 'close')}() raised {type(error).__name__}: {error}"
            )
        return ""

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        seed: int | None = None,
    ) -> AssistantTurn:
        """The turn-style agent's next turn, read as an endpoint's reply is read."""
        started = time.perf_counter()
        wire_tools = [dict(tool) for tool in tools or ()]
        reply = await self._call("respond", encode_messages(messages), wire_tools)
        content, tool_calls, usage = self._read(reply)
        return AssistantTurn(
            content=content,
            tool_calls=tool_calls,
            usage=usage,
            latency_seconds=time.perf_counter() - started,
        )

    async def converse(self, messages: Sequence[Message], toolbox: Toolbox) -> str | None:
        """The loop-style agent's text for the conversation so far (None or "" is empty)."""
        reply = await self._call("converse", encode_messages(messages), toolbox)
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
        if isinstance(reply, str):
            return reply, (), Usage(n_calls=1)
        if reply is None:
            return None, (), Usage(n_calls=1)
        data = reply
        dump = getattr(reply, "model_dump", None)
        if callable(dump) and not isinstance(reply, Mapping):
            data = dump()
        try:
            if isinstance(data, Mapping) and "choices" in data:
                content, tool_calls, usage, _ = read_completion(data, self._call_ids)
                return content, tool_calls, usage
            content, tool_calls = read_message(data, self._call_ids)
        except UnreadableReply as error:
            raise AgentFailed(
                f"the agent returned a {type(reply).__name__} that is not an assistant turn "
                f"({error}); expected a str, an assistant message dict or a chat completion"
            ) from error
        return content, tool_calls, Usage(n_calls=1)
