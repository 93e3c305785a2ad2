"""A budget that is a cap: reserve an estimate before a request, settle its cost after."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from tau2_retail.errors import BudgetExhausted, EndpointError
from tau2_retail.models.messages import AssistantTurn, Message, Role, Usage
from tau2_retail.models.prices import ModelPrice
from tau2_retail.models.spending import (
    COMPLETION_ALLOWANCE,
    BudgetedChatModel,
    ScenarioSpending,
    estimate_cost,
)
from tau2_retail.plugins.budget import Budget
from tau2_retail.testing.fake_models import FunctionModel

PRICE = ModelPrice(input=1.0, output=2.0)  # USD per million tokens
HELLO = [Message(role=Role.USER, content="x" * 3000)]


def _reply(messages: Sequence[Message]) -> AssistantTurn:
    return AssistantTurn(content="ok", usage=Usage(n_calls=1, prompt=1000, completion=10))


def test_the_estimate_counts_the_prompt_and_a_completion_allowance() -> None:
    assert estimate_cost(PRICE, prompt_chars=3000) == pytest.approx(
        (1001 * 1.0 + COMPLETION_ALLOWANCE * 2.0) / 1e6
    )
    assert estimate_cost(PRICE, prompt_chars=0, max_tokens=10) == pytest.approx((1 + 20) / 1e6)


def test_a_request_reserves_then_settles_its_real_cost(tmp_path: Path) -> None:
    budget = Budget(limit=1.0, run_dir=tmp_path, token="t")
    model = BudgetedChatModel(FunctionModel("m", _reply), price=PRICE, spending=budget)

    asyncio.run(model.complete(HELLO))

    assert budget.spent == pytest.approx((1000 * 1.0 + 10 * 2.0) / 1e6)
    assert not budget.exhausted


def test_a_request_whose_estimate_does_not_fit_is_not_sent(tmp_path: Path) -> None:
    sent: list[int] = []

    def reply(messages: Sequence[Message]) -> AssistantTurn:
        sent.append(1)
        return _reply(messages)

    limit = estimate_cost(PRICE, prompt_chars=3000) * 1.5
    budget = Budget(limit=limit, run_dir=tmp_path, token="t")
    other = Budget(limit=limit, run_dir=tmp_path, token="t")  # another process, same ledger
    key = other.reserve(estimate_cost(PRICE, prompt_chars=3000))  # in flight elsewhere
    model = BudgetedChatModel(FunctionModel("m", reply), price=PRICE, spending=budget)

    with pytest.raises(BudgetExhausted, match=r"would pass --tau2-max-cost"):
        asyncio.run(model.complete(HELLO))
    assert sent == []
    assert budget.refused == 1

    other.settle(key, 0.0)  # the other request failed: nothing spent, its reservation freed
    asyncio.run(model.complete(HELLO))
    assert sent == [1]


def test_a_failed_request_costs_nothing_and_frees_its_reservation(tmp_path: Path) -> None:
    def down(messages: Sequence[Message]) -> AssistantTurn:
        raise EndpointError("down")

    budget = Budget(limit=1.0, run_dir=tmp_path, token="t")
    model = BudgetedChatModel(FunctionModel("m", down), price=PRICE, spending=budget)

    with pytest.raises(EndpointError):
        asyncio.run(model.complete(HELLO))
    assert budget.spent == 0.0
    assert not budget.exhausted
    lines = (tmp_path / ".budget-t").read_text().splitlines()
    assert [line.split(" ")[0] for line in lines] == ["R", "S"]


def test_what_was_spent_outside_the_suites_requests_is_charged_after_the_fact(
    tmp_path: Path,
) -> None:
    """An agent given as code spends through its own backend: nothing reserved, its cost
    charged once its scenario ends, seen by every process sharing the ledger."""
    budget = Budget(limit=1.0, run_dir=tmp_path, token="t")
    other = Budget(limit=1.0, run_dir=tmp_path, token="t")  # another process, same ledger

    other.charge(0.6)
    assert budget.spent == pytest.approx(0.6)
    assert not budget.exhausted

    other.charge(0.5)  # past the limit: what was spent is spent
    assert budget.spent == pytest.approx(1.1)
    assert budget.exhausted
    with pytest.raises(BudgetExhausted):
        budget.reserve(0.0001)


def test_a_scenarios_spending_counts_what_its_requests_cost_and_the_run_sees_each(
    tmp_path: Path,
) -> None:
    """What a scenario the budget stops had spent is known (its requests settled through its
    own ``ScenarioSpending``), and every amount still reaches the run's ledger."""
    budget = Budget(limit=1.0, run_dir=tmp_path, token="t")
    first, second = ScenarioSpending(budget), ScenarioSpending(budget)
    asyncio.run(
        BudgetedChatModel(FunctionModel("m", _reply), price=PRICE, spending=first).complete(HELLO)
    )
    first.charge(0.5)  # an agent given as code, through its own backend
    one_request = (1000 * 1.0 + 10 * 2.0) / 1e6

    assert first.spent == pytest.approx(one_request + 0.5)
    assert second.spent == 0.0
    assert budget.spent == pytest.approx(one_request + 0.5)


def test_without_a_budget_a_scenarios_requests_are_counted_and_nothing_is_reserved() -> None:
    """Prices and no budget: each reply's cost is counted (what an interrupted scenario had
    spent); no estimate is reserved, so no request is ever refused."""

    class Refusing(ScenarioSpending):
        def reserve(self, estimate: float) -> str:
            raise AssertionError("a run without a budget reserved an estimate")

    spending = Refusing()
    model = BudgetedChatModel(
        FunctionModel("m", _reply), price=PRICE, spending=spending, reserve=False
    )

    asyncio.run(model.complete(HELLO))
    asyncio.run(model.complete(HELLO))

    assert spending.spent == pytest.approx(2 * (1000 * 1.0 + 10 * 2.0) / 1e6)
