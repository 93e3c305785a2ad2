"""Chat messages, tool calls and usage: the plain values every layer above ``tools`` shares.

They are frozen and JSON-able (:mod:`tau2_retail.codec` reads and writes them) so results
cross xdist process boundaries and land in artifacts unchanged. ``to_openai`` renders the wire
form of the Chat Completions API.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Annotated, Any, Final, TypeVar

from tau2_retail.codec import Omitted, rounded

__all__ = [
    "MAX_TOKEN_COUNT",
    "STOP_TOKENS",
    "AssistantTurn",
    "Message",
    "RequestStats",
    "Role",
    "ToolCall",
    "Usage",
    "has_stop_token",
]

# The markers by which the simulated user ends the conversation (tau2's user-side stop tokens).
STOP_TOKENS: tuple[str, ...] = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")


def has_stop_token(text: str | None) -> bool:
    return text is not None and any(token in text for token in STOP_TOKENS)


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One function call as the model sent it; ``arguments`` is the raw JSON text.

    ``extra_content`` is what the server sent beside the call for itself (Gemini's
    ``thought_signature``), sent back with the call as it came: the server refuses the next
    request without it.
    """

    id: str
    name: str
    arguments: str
    # not hashed (a mapping is not hashable): equal calls still hash alike
    extra_content: Annotated[Mapping[str, Any] | None, Omitted] = field(default=None, hash=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """A chat message. Tool results carry ``tool_call_id``, the tool ``name`` and ``error``."""

    role: Role
    content: str | None = None
    tool_calls: Annotated[tuple[ToolCall, ...], Omitted] = ()
    tool_call_id: Annotated[str | None, Omitted] = None
    name: Annotated[str | None, Omitted] = None
    error: Annotated[bool, Omitted] = False
    #: why the endpoint stopped generating this assistant message (``stop``, ``length``,
    #: ``tool_calls``, ...), as it said; recorded in the transcript, never sent back
    finish_reason: Annotated[str | None, Omitted] = None
    #: the model's reasoning as the server returned it beside the message (DeepSeek's
    #: ``reasoning_content``); sent back only with tool calls, where DeepSeek's thinking mode
    #: requires it (its reasoner without tools refuses it anywhere)
    reasoning_content: Annotated[str | None, Omitted] = None

    def to_openai(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"role": self.role.value}
        if self.role is Role.TOOL:
            wire["tool_call_id"] = self.tool_call_id
            wire["content"] = self.content or ""
            return wire
        # Never null: llama.cpp's server (and other strict validators) reject a null content
        # beside tool calls; an empty string is accepted by OpenAI, vLLM, Ollama and llama.cpp.
        wire["content"] = self.content or ""
        if self.tool_calls:
            wire["tool_calls"] = [_call_to_openai(call) for call in self.tool_calls]
            if self.reasoning_content is not None:
                wire["reasoning_content"] = self.reasoning_content
        return wire


def _call_to_openai(call: ToolCall) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }
    if call.extra_content is not None:
        wire["extra_content"] = copy.deepcopy(dict(call.extra_content))
    return wire


_Counted = TypeVar("_Counted", "Usage", "RequestStats")


def _field_sum(a: _Counted, b: _Counted) -> _Counted:
    """Two records of counters added field by field (derived fields are derived again)."""
    return type(a)(**{f.name: getattr(a, f.name) + getattr(b, f.name) for f in fields(a) if f.init})


MAX_TOKEN_COUNT: Final = 2**53 - 1
"""The largest token count a reply's usage records (a larger one is recorded as this): the
largest integer every JSON reader holds exactly, the report's browser included."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token counts of one or more completions.

    ``cached_prompt``: prompt tokens the provider reported as read from its own prompt cache
    (billed at the cached-input price when one is set). ``cache_hits``: replies served from
    the response cache (``tau2_retail.models.cache``) instead of the endpoint; ``hit_prompt``
    and ``hit_completion`` are their tokens, counted in ``prompt``/``completion`` like any
    reply but never billed.
    """

    n_calls: int = 0
    prompt: int = 0
    completion: int = 0
    # written only when set: records of runs without a cache or prices keep their old shape
    cached_prompt: Annotated[int, Omitted] = 0
    cache_hits: Annotated[int, Omitted] = 0
    hit_prompt: Annotated[int, Omitted] = 0
    hit_completion: Annotated[int, Omitted] = 0

    def __add__(self, other: Usage) -> Usage:
        return _field_sum(self, other)


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestStats:
    """What requests to one role cost: calls, attempts on the wire, and seconds spent waiting.

    ``retries`` is the attempts after each request's first (derived: written, never read);
    ``wait_seconds`` is the backoff and ``Retry-After`` time between attempts (written to the
    millisecond); ``failed`` counts requests that failed after their attempts, ``unsent`` those
    of them that failed before any attempt went out (an open circuit breaker refused them;
    written only when set).
    """

    requests: int = 0
    attempts: int = 0
    retries: int = field(init=False, default=0)
    failed: int = 0
    unsent: Annotated[int, Omitted] = 0
    wait_seconds: Annotated[float, rounded(3)] = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "retries", self.attempts - self.requests + self.unsent)

    def __add__(self, other: RequestStats) -> RequestStats:
        return _field_sum(self, other)


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantTurn:
    """What a model returned for one request: text and/or tool calls, usage and latency.

    ``attempts`` counts what went on the wire for it (1 without retries; 0 for a reply
    served from the response cache) and ``wait_seconds`` the time spent waiting between
    attempts.
    """

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    latency_seconds: float = 0.0
    attempts: int = 1
    wait_seconds: float = 0.0
    finish_reason: str | None = None
    reasoning_content: str | None = None

    @property
    def from_cache(self) -> bool:
        """Served from the response cache: no request was sent."""
        return self.usage.cache_hits > 0

    @property
    def is_empty(self) -> bool:
        return not (self.content and self.content.strip()) and not self.tool_calls

    def to_message(self) -> Message:
        return Message(
            role=Role.ASSISTANT,
            content=self.content,
            tool_calls=self.tool_calls,
            finish_reason=self.finish_reason,
            reasoning_content=self.reasoning_content,
        )
