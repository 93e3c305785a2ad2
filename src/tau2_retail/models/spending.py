"""A budget that is a cap: every model request reserves its estimated cost before it is sent
and settles its real cost when its reply arrives.

:class:`BudgetedChatModel` wraps a priced endpoint model. Before each request it asks the
run's :class:`Spending` to reserve an estimate (:func:`estimate_cost`); the spending refuses
with :class:`~tau2_retail.errors.BudgetExhausted` when what was spent, plus what the requests
in flight reserved, plus this estimate would pass the limit. The request is then not sent. When
the reply arrives the reservation is settled with the reply's real cost (0 for a failed request,
or a reply served from the response cache).

The bound: with ``C`` conversations in flight (``--tau2-concurrency`` per process, times the
processes) at most ``C`` requests are in flight, each admitted only while the spent and the
reserved amounts fit under the limit. Spending passes the limit only by what those requests
cost beyond their estimates: less than one request per conversation in flight. The estimate is
generous (every character of the prompt and the tools at 3 characters a token, and the
request's ``max_tokens``, else :data:`COMPLETION_ALLOWANCE` tokens, of completion), so with
replies shorter than the allowance the run stays under the limit.

Each scenario's requests go through a :class:`ScenarioSpending`, which counts what that
scenario spent, so a scenario stopped unscored (by the budget, or interrupted) still says what
it cost. Without a budget there is nothing to reserve: :class:`BudgetedChatModel` then only
counts each reply's cost.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Final, Protocol

from tau2_retail.models.messages import AssistantTurn, Message, Usage
from tau2_retail.models.prices import ModelPrice
from tau2_retail.models.protocol import ChatModel

__all__ = [
    "CHARS_PER_TOKEN",
    "COMPLETION_ALLOWANCE",
    "BudgetedChatModel",
    "ScenarioSpending",
    "Spending",
    "estimate_cost",
]

CHARS_PER_TOKEN: Final = 3
"""Characters counted as one prompt token by the estimate (tokenizers average 3 to 4)."""
COMPLETION_ALLOWANCE: Final = 1024
"""Completion tokens the estimate counts when the request sets no ``max_tokens``."""


class Spending(Protocol):
    """The run's spending against its limit (``tau2_retail.plugins.budget.Budget``)."""

    def reserve(self, estimate: float) -> str:
        """Reserve ``estimate`` USD; returns the reservation's key. Raises ``BudgetExhausted``
        when the spent and reserved amounts plus ``estimate`` would pass the limit."""
        ...

    def settle(self, key: str, actual: float) -> None:
        """Replace the reservation ``key`` by what the request really cost."""
        ...

    def charge(self, actual: float) -> None:
        """Count ``actual`` USD spent outside the suite's requests (an agent given as code,
        through its own backend), after the fact: nothing was reserved for it."""
        ...


def _characters(messages: Sequence[Message]) -> int:
    return sum(
        len(message.content or "")
        + sum(len(call.name) + len(call.arguments) for call in message.tool_calls)
        for message in messages
    )


def estimate_cost(price: ModelPrice, *, prompt_chars: int, max_tokens: int | None = None) -> float:
    """The USD a request of ``prompt_chars`` characters may cost (see the module docstring)."""
    prompt = prompt_chars // CHARS_PER_TOKEN + 1
    completion = max_tokens if max_tokens is not None else COMPLETION_ALLOWANCE
    return price.cost(Usage(n_calls=1, prompt=prompt, completion=completion))


class ScenarioSpending:
    """The run's ``Spending`` as one scenario's requests use it: every reservation,
    settlement and charge goes to the run's (none without a budget), and ``spent`` adds up
    what this scenario's settled and charged (what it cost, also when it stops unscored)."""

    def __init__(self, run: Spending | None = None) -> None:
        self._run = run
        self.spent = 0.0

    def reserve(self, estimate: float) -> str:
        return "" if self._run is None else self._run.reserve(estimate)

    def settle(self, key: str, actual: float) -> None:
        if self._run is not None:
            self._run.settle(key, actual)
        self.spent += actual

    def charge(self, actual: float) -> None:
        if self._run is not None:
            self._run.charge(actual)
        self.spent += actual


@dataclass(slots=True, eq=False)
class BudgetedChatModel:
    """A ``ChatModel``: ``inner``'s completions, each reserved and settled with ``spending``.
    ``reserve=False`` (a run with prices and no budget): nothing is estimated or reserved
    before a request, its cost is settled after it."""

    inner: ChatModel
    _: KW_ONLY
    price: ModelPrice
    spending: Spending
    max_tokens: int | None = None
    reserve: bool = True
    # the tools are the same object for every request of a scenario: sized once
    _tools: tuple[int, int] | None = field(default=None, init=False)

    @property
    def name(self) -> str:
        return self.inner.name

    def _tools_chars(self, tools: Sequence[Mapping[str, Any]] | None) -> int:
        if not tools:
            return 0
        if self._tools is None or self._tools[0] != id(tools):
            self._tools = (id(tools), len(json.dumps([dict(tool) for tool in tools])))
        return self._tools[1]

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        seed: int | None = None,
    ) -> AssistantTurn:
        key = ""
        if self.reserve:
            estimate = estimate_cost(
                self.price,
                prompt_chars=_characters(messages) + self._tools_chars(tools),
                max_tokens=self.max_tokens,
            )
            key = self.spending.reserve(estimate)
        actual = 0.0  # a request that failed is not billed
        try:
            turn = await self.inner.complete(messages, tools=tools, seed=seed)
            actual = self.price.cost(turn.usage)
            return turn
        finally:
            self.spending.settle(key, actual)
