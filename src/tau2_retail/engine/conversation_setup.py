"""What a conversation is given: its prompts, limits and routing rules, its clock and the listener
of its messages."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tau2_retail.engine.prompts import GREETING
from tau2_retail.models.messages import Message, Usage
from tau2_retail.tools.registry import END_CONVERSATION, TRANSFER_TO_HUMAN_AGENTS

__all__ = [
    "Clock",
    "ConversationRules",
    "Limits",
    "MessageListener",
    "ScenarioPrompts",
    "SystemClock",
    "UsageListener",
]

_EXIT_TOOLS = frozenset({END_CONVERSATION, TRANSFER_TO_HUMAN_AGENTS})


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

UsageListener = Callable[[str, Usage], None]
"""Called with a role and the tokens of each of its completions as they are counted (for an
agent given as code, those it returns or records); it must not block, and may be called from
a loop-style agent's thread."""


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def wall(self) -> float: ...


class SystemClock:
    """The real clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()
