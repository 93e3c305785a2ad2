"""``conversation_log.txt``: a scenario's conversation as readable text (spec:
conversation_and_scoring.md §6), written beside its ``transcript.json``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from tau2_retail.models.messages import Message, Role

__all__ = ["render_conversation_log"]


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="milliseconds")


def render_conversation_log(
    messages: Sequence[Message],
    timestamps: Sequence[float],
    *,
    ending: str | None = None,
    cut: Callable[[str], str] = str,
) -> str:
    """The conversation as readable text: one block per message, blank line between blocks.

    ``[time] agent:`` / ``[time] user:`` with the text below, ``[time] agent -> name(args)``
    for each tool call, ``[time] tool name:`` (``(error)`` for failures) with the result below;
    then, when ``ending`` is given, a last line ``=== ended: <ending>``. ``cut`` shortens
    each text and argument string (the log written beside the transcript cuts huge ones).
    """
    blocks: list[str] = []
    for message, seconds in zip(messages, timestamps, strict=True):
        stamp = f"[{_timestamp(seconds)}]"
        text = cut(message.content or "")
        if message.role is Role.ASSISTANT:
            lines = [f"{stamp} agent:\n{text}"] if text.strip() else []
            lines += [
                f"{stamp} agent -> {call.name}({cut(call.arguments)})"
                for call in message.tool_calls
            ]
            blocks.append("\n".join(lines) if lines else f"{stamp} agent: (empty)")
        elif message.role is Role.TOOL:
            marker = " (error)" if message.error else ""
            blocks.append(f"{stamp} tool {message.name}{marker}:\n{text}")
        else:
            blocks.append(f"{stamp} {message.role.value}:\n{text}")
    if ending is not None:
        blocks.append(f"=== ended: {ending}")
    return "\n\n".join(blocks) + "\n"
