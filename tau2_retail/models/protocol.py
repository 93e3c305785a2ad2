"""The one interface every model implements: messages and tools in, an assistant turn out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from tau2_retail.models.messages import AssistantTurn, Message

__all__ = ["ChatModel"]


class ChatModel(Protocol):
    """An agent, a simulated user or a judge behind one async call.

    ``complete`` returns the next assistant turn. It raises ``EndpointError`` when the endpoint
    failed after retries (an infra error) and ``ContextWindowExceeded`` when the prompt is too
    long; it never raises for a reply that is merely bad (the conversation scores that).
    """

    @property
    def name(self) -> str: ...

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        seed: int | None = None,
    ) -> AssistantTurn: ...
