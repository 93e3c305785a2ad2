"""Built-in scripted models that need no network (DESIGN: "The default run needs no network").

- ``builtin:oracle`` (agent): performs the task's gold actions, one tool call per turn,
  through the real dispatcher; then tells the customer the task's ``communicate_info`` facts
  and asks whether anything else is needed; calls ``end_conversation`` once the customer is
  done. With the scripted customer it is the harness's self-check: every scenario must reach
  ``agent_exit`` with the gold database.
- ``builtin:noop`` (agent): calls ``end_conversation`` at once. The floor: it matches only the
  tasks whose expected database is the seed.
- ``builtin:customer`` (user): states its request from the scenario, answers yes to anything,
  and stops (``###STOP###``) when the agent asks whether anything else is needed, or after a
  bounded number of turns.

They are deterministic: their reply is a function of the messages they are given.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from tau2_retail.data.tasks import Task
from tau2_retail.errors import ConfigError
from tau2_retail.models.messages import STOP_TOKENS, AssistantTurn, Message, Role, ToolCall, Usage
from tau2_retail.models.protocol import ChatModel
from tau2_retail.tools.registry import END_CONVERSATION

__all__ = [
    "BUILTINS_BY_ROLE",
    "BUILTIN_AGENTS",
    "BUILTIN_CUSTOMER",
    "BUILTIN_NOOP",
    "BUILTIN_ORACLE",
    "BUILTIN_USERS",
    "NoopAgent",
    "OracleAgent",
    "ScriptedCustomer",
    "builtin_model",
    "is_builtin",
]

BUILTIN_PREFIX: Final = "builtin:"
BUILTIN_ORACLE: Final = "builtin:oracle"
BUILTIN_NOOP: Final = "builtin:noop"
BUILTIN_CUSTOMER: Final = "builtin:customer"
BUILTIN_AGENTS: Final = (BUILTIN_ORACLE, BUILTIN_NOOP)
BUILTIN_USERS: Final = (BUILTIN_CUSTOMER,)
BUILTINS_BY_ROLE: Final[Mapping[str, tuple[str, ...]]] = {
    "agent": BUILTIN_AGENTS,
    "user": BUILTIN_USERS,
    "judge": (),
}
"""The built-in models each role accepts (the judge has none): the one list of names."""

ANYTHING_ELSE = "Is there anything else I can help you with?"
CUSTOMER_DONE = "No, that's all I needed. Thank you! ###STOP###"
CUSTOMER_YES = "Yes, please go ahead."
CUSTOMER_MAX_TURNS = 12


def _turn(content: str | None = None, calls: tuple[ToolCall, ...] = ()) -> AssistantTurn:
    return AssistantTurn(content=content, tool_calls=calls, usage=Usage(n_calls=1))


def _end_call(index: int) -> ToolCall:
    return ToolCall(id=f"builtin_call_{index}", name=END_CONVERSATION, arguments="{}")


class OracleAgent:
    """Performs the gold actions, reports, and ends the conversation when the user is done."""

    name = BUILTIN_ORACLE

    def __init__(self, task: Task) -> None:
        self.task = task

    def report(self) -> str:
        facts = " ".join(fact.strip() for fact in self.task.communicate_info if fact.strip())
        done = "I have taken care of your request."
        return f"{done} {facts} {ANYTHING_ELSE}" if facts else f"{done} {ANYTHING_ELSE}"

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        seed: int | None = None,
    ) -> AssistantTurn:
        calls_made = sum(len(m.tool_calls) for m in messages if m.role is Role.ASSISTANT)
        actions = self.task.actions
        if calls_made < len(actions):
            action = actions[calls_made]
            call = ToolCall(
                id=f"builtin_call_{calls_made}",
                name=action.name,
                arguments=json.dumps(action.plain_arguments()),
            )
            return _turn(calls=(call,))
        last = messages[-1] if messages else None
        if last is not None and last.role is Role.USER and _is_done(last.content):
            return _turn(calls=(_end_call(calls_made),))
        if not _has_reported(messages):
            return _turn(self.report())
        return _turn(ANYTHING_ELSE)


class NoopAgent:
    """Ends the conversation at once."""

    name = BUILTIN_NOOP

    def __init__(self, task: Task) -> None:
        self.task = task

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        seed: int | None = None,
    ) -> AssistantTurn:
        return _turn(calls=(_end_call(0),))


class ScriptedCustomer:
    """States the request, says yes, and stops when asked whether anything else is needed."""

    name = BUILTIN_CUSTOMER

    def __init__(self, task: Task) -> None:
        self.task = task

    def opening(self) -> str:
        parts = [self.task.reason_for_call.strip()]
        if self.task.known_info and self.task.known_info.strip():
            parts.append(self.task.known_info.strip())
        return " ".join(parts)

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        seed: int | None = None,
    ) -> AssistantTurn:
        # In the simulator's view its own past messages are 'assistant', the agent's 'user'.
        own_turns = sum(1 for m in messages if m.role is Role.ASSISTANT)
        if own_turns == 0:
            return _turn(self.opening())
        last = messages[-1]
        agent_text = (last.content or "") if last.role is Role.USER else ""
        if "anything else" in agent_text.lower() or own_turns >= CUSTOMER_MAX_TURNS:
            return _turn(CUSTOMER_DONE)
        return _turn(CUSTOMER_YES)


def _is_done(text: str | None) -> bool:
    return text is not None and any(token in text for token in STOP_TOKENS)


def _has_reported(messages: Sequence[Message]) -> bool:
    return any(
        m.role is Role.ASSISTANT and not m.tool_calls and ANYTHING_ELSE in (m.content or "")
        for m in messages
    )


_BUILTINS: dict[str, type[OracleAgent | NoopAgent | ScriptedCustomer]] = {
    BUILTIN_ORACLE: OracleAgent,
    BUILTIN_NOOP: NoopAgent,
    BUILTIN_CUSTOMER: ScriptedCustomer,
}


def is_builtin(name: str) -> bool:
    return name.startswith(BUILTIN_PREFIX)


def builtin_model(name: str, task: Task, *, role: str) -> ChatModel:
    """The built-in model ``name`` for ``task``; ``role`` is ``agent`` or ``user``."""
    allowed = BUILTINS_BY_ROLE.get(role, ())
    if name not in allowed:
        raise ConfigError(
            f"{name!r} is not a built-in {role} model; built-in {role} models: {', '.join(allowed)}"
        )
    return _BUILTINS[name](task)
