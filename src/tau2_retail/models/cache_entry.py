"""A response cache entry's reply: what the endpoint answered, and the turn it serves again.

The entry is JSON in the project's codec (``CachedReply``), the roles' keys masked by the writer.
Read back, it is held to the rules of a live reply: half a surrogate pair becomes U+FFFD; a
negative token count or a tool call without a name is refused (``ArtifactError``). The turn it
makes costs nothing: its usage counts it in ``cache_hits`` with its tokens, no latency, no
attempt.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Annotated, Final

from tau2_retail import codec
from tau2_retail.codec import Omitted
from tau2_retail.errors import ArtifactError
from tau2_retail.models.messages import AssistantTurn, ToolCall, Usage
from tau2_retail.models.text import valid_unicode

__all__ = ["CachedReply", "reply_json", "turn_from_reply"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CachedReply:
    """A cache entry's ``reply``: what the endpoint answered (tool calls always written)."""

    content: str | None
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    reasoning_content: Annotated[str | None, Omitted] = None


def reply_json(turn: AssistantTurn) -> str:
    """The entry of ``turn``, as stored (before masking)."""
    reply = CachedReply(
        content=turn.content,
        tool_calls=turn.tool_calls,
        usage=turn.usage,
        reasoning_content=turn.reasoning_content,
    )
    return json.dumps(codec.encode(reply), ensure_ascii=False)


_USAGE_FIELDS: Final = tuple(f.name for f in dataclasses.fields(Usage))


def _reply_problem(reply: CachedReply) -> str | None:
    """Why a cache entry is refused where a live reply would be: a negative token count, a
    tool call without a name (the reader of live replies refuses both)."""
    usage = reply.usage
    if min(getattr(usage, name) for name in _USAGE_FIELDS) < 0:
        return "a negative token count"
    if any(not call.name for call in reply.tool_calls):
        return "a tool call without a name"
    return None


def turn_from_reply(text: str) -> AssistantTurn:
    """The turn of a cache entry; ``ArtifactError`` when the entry is damaged or refused."""
    reply = codec.decode(CachedReply, text, "response cache entry")
    problem = _reply_problem(reply)
    if problem is not None:
        raise ArtifactError(f"response cache entry: {problem}")
    usage = reply.usage
    return AssistantTurn(
        # the same text rules as a live reply (half a surrogate pair becomes U+FFFD)
        content=None if reply.content is None else valid_unicode(reply.content),
        tool_calls=tuple(
            ToolCall(
                id=valid_unicode(call.id),
                name=valid_unicode(call.name),
                arguments=valid_unicode(call.arguments),
                extra_content=call.extra_content,
            )
            for call in reply.tool_calls
        ),
        usage=Usage(
            n_calls=1,
            prompt=usage.prompt,
            completion=usage.completion,
            cache_hits=1,
            hit_prompt=usage.prompt,
            hit_completion=usage.completion,
        ),
        latency_seconds=0.0,
        attempts=0,
        reasoning_content=(
            None if reply.reasoning_content is None else valid_unicode(reply.reasoning_content)
        ),
    )
