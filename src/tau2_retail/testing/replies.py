"""What the loopback chat server answers with, and what it records: small frozen records.

``Completion`` (text and/or tool calls with raw argument strings, usage, finish reason) and the
faults ``HttpError``, ``Hang``, ``Drop``, ``InvalidJson``, ``NoChoices``, ``SlowDrip`` and
``RawBody``; a ``Responder`` computes a reply from a request; ``RecordedRequest`` is one request
as the server saw it. The server itself is :mod:`tau2_retail.testing.loopback_server`, which
exports these names too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

__all__ = [
    "Completion",
    "Drop",
    "Hang",
    "HttpError",
    "InvalidJson",
    "NoChoices",
    "RawBody",
    "RecordedRequest",
    "Reply",
    "ReplyToolCall",
    "Responder",
    "SlowDrip",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplyToolCall:
    """A tool call in a scripted completion; ``arguments`` goes on the wire exactly as given.

    ``id=None`` lets the server generate one (``call_loopback_<n>``); ``omit_id=True`` leaves the
    ``id`` field out of the reply, as some servers do; ``extra_content`` goes beside the call as
    Gemini sends its thought signature.
    """

    name: str
    arguments: str = "{}"
    id: str | None = None
    omit_id: bool = False
    extra_content: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Delayed:
    """What every reply has: ``latency``, the seconds the server waits before it answers."""

    latency: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion(_Delayed):
    """A 200 chat completion with text and/or tool calls.

    Token counts default to rough estimates (request message characters // 4 for the prompt,
    reply characters // 4 + 1 for the completion); ``include_usage=False`` leaves ``usage`` out.
    ``finish_reason=None`` means ``"tool_calls"`` when there are tool calls, else ``"stop"``.
    """

    content: str | None = None
    tool_calls: tuple[ReplyToolCall, ...] = ()
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    include_usage: bool = True
    #: the message's ``reasoning_content``, as DeepSeek's thinking mode sends it
    reasoning_content: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpError(_Delayed):
    """An HTTP error status with a raw body and optional headers (e.g. ``Retry-After``)."""

    status: int
    body: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    content_type: str = "application/json"

    @classmethod
    def openai(
        cls,
        status: int,
        message: str,
        *,
        error_type: str = "invalid_request_error",
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
        latency: float = 0.0,
    ) -> HttpError:
        """An error with a body in OpenAI's format: ``{"error": {"message", "type", ...}}``."""
        body = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
        return cls(
            status=status, body=json.dumps(body), headers=dict(headers or {}), latency=latency
        )

    @classmethod
    def rate_limited(cls, *, retry_after: str | None = None, latency: float = 0.0) -> HttpError:
        """A 429, with a ``Retry-After`` header (seconds or an HTTP date) when given."""
        headers = {} if retry_after is None else {"Retry-After": retry_after}
        return cls.openai(
            429,
            "Rate limit reached. Please try again later.",
            error_type="requests",
            code="rate_limit_exceeded",
            headers=headers,
            latency=latency,
        )

    @classmethod
    def server_error(cls, status: int = 500, *, latency: float = 0.0) -> HttpError:
        """A 5xx in OpenAI's error format."""
        return cls.openai(
            status,
            "The server had an error while processing your request.",
            error_type="server_error",
            latency=latency,
        )

    @classmethod
    def context_length_exceeded(cls, *, latency: float = 0.0) -> HttpError:
        """The 400 OpenAI sends when the prompt does not fit the model's context window."""
        return cls.openai(
            400,
            "This model's maximum context length is 8192 tokens. However, your messages resulted "
            "in 9001 tokens. Please reduce the length of the messages.",
            code="context_length_exceeded",
            latency=latency,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Hang(_Delayed):
    """Answer nothing for ``seconds`` (longer than any client timeout); ends early on ``stop()``."""

    seconds: float = 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Drop(_Delayed):
    """Close the connection without sending any response."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InvalidJson(_Delayed):
    """A 200 whose body is not JSON (by default it still claims ``application/json``)."""

    body: str = "<html>upstream proxy says hello</html>"
    content_type: str = "application/json"


@dataclass(frozen=True, slots=True, kw_only=True)
class NoChoices(_Delayed):
    """A 200 completion object whose ``choices`` list is empty."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SlowDrip(_Delayed):
    """Send the status and headers at once, then ``reply``'s body one byte per ``interval``."""

    reply: Completion = field(default_factory=lambda: Completion(content="drip"))
    interval: float = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RawBody(_Delayed):
    """A reply with exactly this body and these headers (e.g. ``Content-Encoding: gzip`` beside
    a compressed body), written in 64 KiB chunks; a client that stops reading ends it.
    ``sent`` counts the bytes written (across every use of this record)."""

    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    status: int = 200
    sent: list[int] = field(default_factory=list, compare=False)


Reply: TypeAlias = (
    Completion | HttpError | Hang | Drop | InvalidJson | NoChoices | SlowDrip | RawBody
)
"""Anything the server can answer with."""

Responder: TypeAlias = Callable[[Mapping[str, Any]], Reply]
"""Computes a reply from the parsed request body; runs in the server's thread. If it raises,
aiohttp answers 500 and logs the traceback (pytest shows it with the failing test)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedRequest:
    """One request as the server saw it (``raw_body``: the bytes as received). Header names
    are lower-cased."""

    method: str
    path: str
    body: Any
    headers: Mapping[str, str]
    tools_seen: bool = True
    raw_body: bytes = b""
    #: the query string, without its ``?``
    query: str = ""

    def header(self, name: str) -> str | None:
        """The value of header ``name`` (case-insensitive), or None."""
        return self.headers.get(name.lower())
