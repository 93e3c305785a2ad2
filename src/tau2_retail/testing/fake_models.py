"""Chat models made of a function, for tests that run the engine without an endpoint."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tau2_retail.models.messages import AssistantTurn, Message, ToolCall, Usage

__all__ = ["END_TURN", "FunctionModel", "scripted_agent"]

END_TURN: Final = AssistantTurn(
    content=None,
    tool_calls=(ToolCall(id="end", name="end_conversation", arguments="{}"),),
    usage=Usage(n_calls=1),
)
"""The agent ends the conversation."""


@dataclass(frozen=True, slots=True)
class FunctionModel:
    """A ``ChatModel`` whose reply to every request is ``answer(messages)``; ``answer`` may
    raise as an endpoint would (``EndpointError``: the endpoint is down)."""

    name: str
    answer: Callable[[Sequence[Message]], AssistantTurn]

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        seed: int | None = None,
    ) -> AssistantTurn:
        return self.answer(messages)


def scripted_agent(
    name: str, turns: Sequence[AssistantTurn], *, end: AssistantTurn = END_TURN
) -> FunctionModel:
    """An agent that sends ``turns`` in order, then ``end`` to every later request."""
    remaining = list(turns)
    return FunctionModel(name, lambda messages: remaining.pop(0) if remaining else end)
