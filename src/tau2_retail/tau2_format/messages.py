"""A conversation in upstream's message shape, and back.

Export (:func:`upstream_messages`): every message of ``transcript.json`` in order, the greeting
first; ``turn_idx`` is the message's index; ``timestamp`` ISO 8601 in UTC; an agent message
with tool calls has ``tool_calls`` with each call's ``arguments`` as a JSON object (never a
string) and its results follow at once, each a ``tool`` message whose ``id`` is its call's id
(as upstream's replay pairs them); ``usage`` is the completion's ``prompt_tokens`` and
``completion_tokens`` and ``cost`` its price when the run has prices (the greeting costs 0.0,
as upstream's fixed first message does; without prices, and for transcripts written before
per-message usage, the others have none). Arguments that are not a JSON object raise
:class:`ArgumentsNotAnObject` (see :mod:`tau2_retail.tau2_format.terms` for why).

Import (:func:`our_messages`): the inverse, into ``transcript.json``'s messages, and the
recorded actions (successful writes and transfers, as our scoring records them).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from tau2_retail.engine.transcript import TimedMessage
from tau2_retail.models.messages import Message as OurMessage
from tau2_retail.models.messages import Role, ToolCall, Usage
from tau2_retail.tau2_format.schema import (
    Message,
    ParticipantMessage,
    SystemMessage,
    ToolCallRecord,
    ToolMessage,
)
from tau2_retail.tools.dispatch import Action, parse_arguments
from tau2_retail.tools.registry import TOOLS

__all__ = [
    "ArgumentsNotAnObject",
    "Pricing",
    "iso_time",
    "our_messages",
    "recorded_actions",
    "seconds_of",
    "upstream_messages",
]

Pricing = Callable[[str, Usage], float | None]
"""The cost of a role's (``agent``, ``user``) usage, None when unknown."""


class ArgumentsNotAnObject(ValueError):
    """A tool call's arguments are not a JSON object: upstream cannot hold the conversation."""

    def __init__(self, *, index: int, name: str, arguments: str) -> None:
        shown = arguments if len(arguments) <= 60 else arguments[:57] + "..."
        super().__init__(f"message {index}: {name}({shown})")
        self.index = index


def iso_time(seconds: float) -> str:
    """``2026-12-01T21:36:08.583790+00:00``: a wall-clock time as ISO 8601, in UTC."""
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="microseconds")


def seconds_of(stamp: str | None, default: float = 0.0) -> float:
    """The wall-clock time of an ISO timestamp (one without an offset is read as UTC)."""
    if not stamp:
        return default
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return default
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _arguments(index: int, call: ToolCall) -> dict[str, Any]:
    try:
        # as the tools read them: a lone surrogate becomes U+FFFD (no UTF-8 file can hold it;
        # the export stopped with UnicodeEncodeError), nesting too deep is not JSON (upstream's
        # json.loads raises RecursionError there: the export stopped with it)
        value = parse_arguments(call.arguments)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise ArgumentsNotAnObject(index=index, name=call.name, arguments=call.arguments)
    return value


def _usage(usage: Usage | None) -> dict[str, int] | None:
    if usage is None:
        return None
    return {"completion_tokens": usage.completion, "prompt_tokens": usage.prompt}


def _upstream(index: int, message: TimedMessage, cost: Pricing) -> Message:
    stamp = iso_time(message.timestamp)
    if message.role is Role.TOOL:
        return ToolMessage(
            id=message.tool_call_id or "",
            role="tool",
            content=message.content,
            error=message.error,
            turn_idx=index,
            timestamp=stamp,
        )
    if message.role is Role.SYSTEM:
        return SystemMessage(role="system", content=message.content, turn_idx=index)
    role: Literal["assistant", "user"] = "assistant" if message.role is Role.ASSISTANT else "user"
    calls = tuple(
        ToolCallRecord(id=call.id, name=call.name, arguments=_arguments(index, call))
        for call in message.tool_calls
    )
    usage = message.usage
    price = cost("agent" if role == "assistant" else "user", usage) if usage else None
    return ParticipantMessage(
        role=role,
        # a tool call's message has no text in upstream's files (the API sends none)
        content=(message.content or None) if calls else message.content,
        tool_calls=calls or None,
        turn_idx=index,
        timestamp=stamp,
        cost=0.0 if index == 0 and usage is None else price,
        usage=_usage(usage),
    )


def upstream_messages(messages: Sequence[TimedMessage], *, cost: Pricing) -> tuple[Message, ...]:
    """``transcript.json``'s messages in upstream's shape (see the module docstring)."""
    return tuple(_upstream(index, message, cost) for index, message in enumerate(messages))


def _our_usage(usage: Any) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return Usage(n_calls=1, prompt=prompt, completion=completion)


def our_messages(messages: Sequence[Message]) -> tuple[TimedMessage, ...]:
    """Upstream's messages as ``transcript.json``'s (each tool result named after its call,
    the calls paired with the results that follow them in order)."""
    pending: list[ToolCall] = []
    out: list[TimedMessage] = []
    previous = 0.0
    for message in messages:
        previous = seconds_of(message.timestamp, previous)
        if isinstance(message, ToolMessage):
            call = pending.pop(0) if pending else None
            out.append(
                TimedMessage(
                    role=Role.TOOL,
                    content=message.content,
                    tool_call_id=message.id,
                    name=call.name if call is not None else "",
                    error=message.error,
                    timestamp=previous,
                )
            )
            continue
        if isinstance(message, SystemMessage):
            out.append(TimedMessage(role=Role.SYSTEM, content=message.content, timestamp=previous))
            continue
        calls = tuple(
            ToolCall(id=call.id, name=call.name, arguments=json.dumps(dict(call.arguments)))
            for call in message.tool_calls or ()
        )
        pending = list(calls)
        out.append(
            TimedMessage(
                role=Role.ASSISTANT if message.role == "assistant" else Role.USER,
                content=message.content,
                tool_calls=calls,
                timestamp=previous,
                usage=_our_usage(message.usage),
            )
        )
    return tuple(out)


def recorded_actions(messages: Sequence[OurMessage]) -> tuple[Action, ...]:
    """The successful writes and transfers of a conversation, as our scoring records them
    (each result paired with the call before it in order, as upstream's replay pairs them)."""
    pending: list[ToolCall] = []
    actions = []
    for message in messages:
        if message.role is not Role.TOOL:
            pending = list(message.tool_calls)
            continue
        call = pending.pop(0) if pending else None
        spec = TOOLS.get(call.name) if call is not None else None
        if call is None or spec is None or not spec.records_action or message.error:
            continue
        actions.append(Action(name=call.name, arguments=json.loads(call.arguments)))
    return tuple(actions)
