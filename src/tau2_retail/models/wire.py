"""The OpenAI chat wire format, both ways: what a model is sent and how its reply is read.

One encoder and one reader, shared by the OpenAI-compatible client and by agents given as
Python code (``tau2_retail.models.agent``): an agent's ``respond`` sees exactly the messages an
endpoint model would be sent, and what it returns is read exactly as an endpoint's reply.
This module does not import ``openai`` (it costs most of a second to import).

Reading: tool-call arguments stay the raw string the model sent (the conversation turns
invalid JSON into a tool error for the model), an empty string becomes ``{}``, an object becomes
its JSON text, a missing call id gets ``call_<n>``, content given as a list of parts is the text
of its ``text`` parts, and half a UTF-16 surrogate pair in any kept text becomes U+FFFD. What a
server sends for itself and requires back is kept and sent back as it came: a tool call's
``extra_content`` (Gemini's thought signature) and the message's ``reasoning_content``
(DeepSeek's, sent back beside tool calls only).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final, NamedTuple

from tau2_retail.models.messages import MAX_TOKEN_COUNT, Message, ToolCall, Usage
from tau2_retail.models.text import valid_unicode

__all__ = [
    "ReadCompletion",
    "UnreadableReply",
    "encode_messages",
    "read_completion",
    "read_message",
]

# a finish_reason is a word, not a text: it is recorded as the server said it, cut short
_FINISH_REASON_CHARS: Final = 64
_ERROR_CHARS: Final = 200


class UnreadableReply(ValueError):
    """A reply that is not a chat completion (or an assistant message) we can read."""


class ReadCompletion(NamedTuple):
    """What a chat completion says: its first choice's message, usage and ``finish_reason``."""

    content: str | None
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    finish_reason: str | None
    #: the model's reasoning as the server sent it beside the message (DeepSeek's), or None
    reasoning_content: str | None = None


def _wire_safe(message: dict[str, Any]) -> dict[str, Any]:
    """A wire message whose text holds no lone surrogate (it could not be encoded as UTF-8)."""
    content = message.get("content")
    if isinstance(content, str):
        message["content"] = valid_unicode(content)
    for call in message.get("tool_calls", ()):
        function = call["function"]
        function["arguments"] = valid_unicode(function["arguments"])
        function["name"] = valid_unicode(function["name"])
    return message


def encode_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The ``messages`` of a Chat Completions request, as plain (fresh, mutable) dicts."""
    return [_wire_safe(message.to_openai()) for message in messages]


def read_message(
    message: object, call_ids: Iterator[int]
) -> tuple[str | None, tuple[ToolCall, ...]]:
    """Content and tool calls of an assistant message dict; raises ``UnreadableReply``.

    ``call_ids`` numbers the calls that come without an id (``call_<n>``).
    """
    if not isinstance(message, Mapping):
        raise UnreadableReply("the message is not an object")
    content = _content(message.get("content"))
    if content is not None:
        content = valid_unicode(content)
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise UnreadableReply("tool_calls is not a list")
    return content, tuple(_tool_call(raw, call_ids) for raw in raw_calls)


def _content(raw: object) -> str | None:
    """A message's text: a string, or the text of its ``text`` parts when the server sends the
    content as a list of parts (Mistral's reasoning models do: a ``thinking`` part, then a
    ``text`` part). Other parts are the model's own notes, left out as ``reasoning_content``
    is; a list without a text part is no text. Raises ``UnreadableReply`` for anything else."""
    if raw is None or isinstance(raw, str):
        return raw
    if not isinstance(raw, list):
        raise UnreadableReply("the message content is neither a string nor a list of parts")
    texts: list[str] = []
    for part in raw:
        if not isinstance(part, Mapping):
            raise UnreadableReply("a part of the message content is not an object")
        if part.get("type") != "text":
            continue
        text = part.get("text")
        if not isinstance(text, str):
            raise UnreadableReply("a text part of the message content has no text")
        texts.append(text)
    return "".join(texts) if texts else None


def read_completion(data: object, call_ids: Iterator[int]) -> ReadCompletion:
    """Content, tool calls, usage, ``finish_reason`` and reasoning of a chat completion object;
    raises ``UnreadableReply``."""
    if not isinstance(data, Mapping):
        raise UnreadableReply("body is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise UnreadableReply("no choices")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, Mapping) else None
    if not isinstance(message, Mapping):
        raise UnreadableReply("the first choice has no message")
    finish = choice.get("finish_reason")
    if finish == "error" or choice.get("error") is not None:
        # a provider's failure after generation began (OpenRouter sends it with HTTP 200): the
        # endpoint's fault, never the model's turn (any text before it is cut off)
        raise UnreadableReply(f"the choice reports an error: {_error_text(choice.get('error'))}")
    content, tool_calls = read_message(message, call_ids)
    finish_reason = (
        valid_unicode(finish[:_FINISH_REASON_CHARS]) if isinstance(finish, str) else None
    )
    reasoning = message.get("reasoning_content")
    return ReadCompletion(
        content,
        tool_calls,
        _usage(data.get("usage")),
        finish_reason,
        valid_unicode(reasoning) if isinstance(reasoning, str) else None,
    )


def _error_text(error: object) -> str:
    """A choice's ``error`` as one short line (its ``message`` when it has one)."""
    if isinstance(error, Mapping) and isinstance(error.get("message"), str):
        text = error["message"]
    else:
        text = "finish_reason error" if error is None else json.dumps(error)
    return valid_unicode(text[:_ERROR_CHARS])


def _tool_call(raw: object, call_ids: Iterator[int]) -> ToolCall:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("function"), Mapping):
        raise UnreadableReply("a tool call has no function")
    function = raw["function"]
    # What the model wrote is its call, however wrong: a servers' tool parser passes an empty
    # name or arguments that are no object on as it found them. The tools answer it (``Tool ''
    # not found``, invalid arguments) and the agent is scored on it; it was an unreadable reply,
    # retried, then an infra error that opened the breaker on an endpoint answering 200.
    name = function.get("name")
    if name is None:
        name = ""
    elif not isinstance(name, str):
        raise UnreadableReply("a tool call's function name is not a string")
    arguments = function.get("arguments")
    if arguments is None or arguments == "":
        arguments = "{}"
    elif not isinstance(arguments, str):
        # Some servers send the arguments as a JSON value (an object) rather than its text.
        arguments = json.dumps(arguments)
    call_id = raw.get("id")
    if not isinstance(call_id, str) or not call_id:
        call_id = f"call_{next(call_ids)}"
    extra = raw.get("extra_content")  # the server's own, sent back as it came (Gemini's)
    return ToolCall(
        id=valid_unicode(call_id),
        name=valid_unicode(name),
        arguments=valid_unicode(arguments),
        extra_content=extra if isinstance(extra, Mapping) and _sendable(extra) else None,
    )


def _sendable(value: Mapping[str, Any]) -> bool:
    """A server's own object that can go back in a request (not empty, no lone surrogate)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return bool(value)


def _usage(raw: object) -> Usage:
    if not isinstance(raw, Mapping):
        return Usage(n_calls=1)
    details = raw.get("prompt_tokens_details")
    return Usage(
        n_calls=1,
        prompt=_count(raw.get("prompt_tokens")),
        completion=_count(raw.get("completion_tokens")),
        # the provider's own prompt cache (OpenAI, vLLM): billed at the cached-input price
        cached_prompt=_count(details.get("cached_tokens")) if isinstance(details, Mapping) else 0,
    )


def _count(value: object) -> int:
    """A reported token count: a non-negative integer, at most :data:`MAX_TOKEN_COUNT` (an
    agent's code may return any integer, and one of 5,000 digits could not be written). Some
    proxies write it as a float (``1200.0``, a fraction rounded up) or as digits in a string:
    counted 0, their requests cost nothing and the budget never stopped the run."""
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        digits = value.strip().lstrip("0") or "0"
        value = int(digits) if len(digits) <= 18 else MAX_TOKEN_COUNT
    elif isinstance(value, float) and math.isfinite(value):
        value = math.ceil(min(value, MAX_TOKEN_COUNT))
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return min(value, MAX_TOKEN_COUNT)
    return 0
