"""Chat messages, tool calls and usage: the plain values every layer above ``tools`` shares.

They are frozen and JSON-able (``to_json``/``from_json``) so results cross xdist process
boundaries and land in artifacts unchanged. ``to_openai`` renders the wire form of the
Chat Completions API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "STOP_TOKENS",
    "AssistantTurn",
    "Message",
    "RequestStats",
    "Role",
    "ToolCall",
    "Usage",
]

# The markers by which the simulated user ends the conversation (tau2's user-side stop tokens).
STOP_TOKENS: tuple[str, ...] = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One function call as the model sent it; ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ToolCall:
        return cls(id=data["id"], name=data["name"], arguments=data["arguments"])


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """A chat message. Tool results carry ``tool_call_id``, the tool ``name`` and ``error``."""

    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    error: bool = False
    #: why the endpoint stopped generating this assistant message (``stop``, ``length``,
    #: ``tool_calls``, ...), as it said; recorded in the transcript, never sent back
    finish_reason: str | None = None

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
            wire["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        return wire

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"role": self.role.value, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [call.to_json() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            data["name"] = self.name
        if self.error:
            data["error"] = True
        if self.finish_reason is not None:
            data["finish_reason"] = self.finish_reason
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Message:
        return cls(
            role=Role(data["role"]),
            content=data.get("content"),
            tool_calls=tuple(ToolCall.from_json(c) for c in data.get("tool_calls", ())),
            tool_call_id=data.get("tool_call_id"),
            name=data.get("name"),
            error=bool(data.get("error", False)),
            finish_reason=data.get("finish_reason"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token counts of one or more completions."""

    n_calls: int = 0
    prompt: int = 0
    completion: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            n_calls=self.n_calls + other.n_calls,
            prompt=self.prompt + other.prompt,
            completion=self.completion + other.completion,
        )

    def to_json(self) -> dict[str, int]:
        return {"n_calls": self.n_calls, "prompt": self.prompt, "completion": self.completion}


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestStats:
    """What requests to one role cost: calls, attempts on the wire, and seconds spent waiting.

    ``retries`` is ``attempts - requests``; ``wait_seconds`` is the backoff and ``Retry-After``
    time between attempts; ``failed`` counts requests that failed after their attempts.
    """

    requests: int = 0
    attempts: int = 0
    failed: int = 0
    wait_seconds: float = 0.0

    def __add__(self, other: RequestStats) -> RequestStats:
        return RequestStats(
            requests=self.requests + other.requests,
            attempts=self.attempts + other.attempts,
            failed=self.failed + other.failed,
            wait_seconds=self.wait_seconds + other.wait_seconds,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "attempts": self.attempts,
            "retries": self.attempts - self.requests,
            "failed": self.failed,
            "wait_seconds": round(self.wait_seconds, 3),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantTurn:
    """What a model returned for one request: text and/or tool calls, usage and latency.

    ``attempts`` counts what went on the wire for it (1 without retries) and ``wait_seconds``
    the time spent waiting between attempts.
    """

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    latency_seconds: float = 0.0
    attempts: int = 1
    wait_seconds: float = 0.0
    finish_reason: str | None = None

    @property
    def is_empty(self) -> bool:
        return not (self.content and self.content.strip()) and not self.tool_calls

    def to_message(self) -> Message:
        return Message(
            role=Role.ASSISTANT,
            content=self.content,
            tool_calls=self.tool_calls,
            finish_reason=self.finish_reason,
        )
