"""What an agent given as code spent: a turn-style agent's completion usage, priced by the
``model`` the agent declares."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tau2_retail.engine.harness import DataBundle, Harness, Roles, load_bundle
from tau2_retail.engine.scenario import Scenario, ScenarioOutcome
from tau2_retail.models.agent import AgentIdentity, AgentRunner
from tau2_retail.models.choice import ModelChoice
from tau2_retail.models.messages import Usage
from tau2_retail.models.prices import PriceTable

ROLES = Roles(
    agent=ModelChoice(name="builtin:oracle", endpoint=None),
    user=ModelChoice(name="builtin:customer", endpoint=None),
)
PRICES = PriceTable.parse({"agent-model": {"input": 2.0, "output": 8.0, "cached_input": 0.5}})
END = {
    "tool_calls": [
        {"id": "e", "type": "function", "function": {"name": "end_conversation", "arguments": "{}"}}
    ]
}


@pytest.fixture(scope="module")
def bundle(data_dir: Path) -> DataBundle:
    return load_bundle(data_dir)


def _run(bundle: DataBundle, agent: object, **harness_options: Any) -> ScenarioOutcome:
    """``agent``'s scenario of task 10, by a harness with ``PRICES`` and ``harness_options``."""
    options = {"prices": PRICES, **harness_options}

    async def go() -> ScenarioOutcome:
        async with Harness(bundle=bundle, roles=ROLES, **options) as harness:
            runner = AgentRunner(lambda: agent, AgentIdentity.of("test:agent", agent))
            scenario = Scenario(task=bundle.tasks["10"], trial=0, trials=1, seed=7)
            return await harness.run(scenario, agent=runner)

    return asyncio.run(go())


class Turn:
    model = "agent-model"

    def respond(self, messages: list[dict[str, Any]], tools: list[Any]) -> Any:
        usage = {"prompt_tokens": 1000, "completion_tokens": 40}
        return {"choices": [{"message": END, "finish_reason": "tool_calls"}], "usage": usage}


def test_a_turn_agent_declaring_its_model_has_its_completion_priced(bundle) -> None:
    metrics = _run(bundle, Turn()).metrics
    assert metrics.token_usage["agent"] == Usage(n_calls=1, prompt=1000, completion=40)
    assert metrics.cost is not None
    assert metrics.cost.agent == pytest.approx((1000 * 2.0 + 40 * 8.0) / 1e6)


def test_an_agent_model_without_a_price_is_unpriced_and_no_model_costs_nothing(bundle) -> None:
    class Unpriced(Turn):
        model = "no-price-model"

    class Undeclared(Turn):
        model = None  # type: ignore[assignment]

    unpriced = _run(bundle, Unpriced()).metrics.cost
    assert unpriced is not None
    assert unpriced.agent is None
    assert unpriced.total is None
    undeclared = _run(bundle, Undeclared()).metrics.cost
    assert undeclared is not None
    assert undeclared.agent == 0.0  # as before: an agent as code without a model is not priced
