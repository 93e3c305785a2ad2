"""The one interface every model implements: messages and tools in, an assistant turn out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol, Self

from tau2_retail.models.messages import AssistantTurn, Message

__all__ = ["ChatModel", "ClosedOnExit"]


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


class ClosedOnExit:
    """``async with`` for an object that holds connections: the block's end calls ``close``."""

    __slots__ = ()

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()
