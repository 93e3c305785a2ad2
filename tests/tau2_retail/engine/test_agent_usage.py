"""What an agent given as code spent: the tokens a loop-style agent records through its toolbox
(``toolbox.record_usage``), a turn-style agent's completion usage, both priced by the ``model``
the agent declares, and charged to the run's budget once the scenario is over (or when the
budget stops it)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from tau2_retail.data.tasks import load_user_guidelines
from tau2_retail.engine.conversation_setup import Limits
from tau2_retail.engine.ending import StopReason
from tau2_retail.engine.harness import DataBundle, Harness, Roles, load_bundle
from tau2_retail.engine.scenario import Scenario, ScenarioOutcome
from tau2_retail.errors import BudgetExhausted
from tau2_retail.models.agent import AgentIdentity, AgentRunner
from tau2_retail.models.choice import ModelChoice
from tau2_retail.models.config import EndpointConfig
from tau2_retail.models.messages import MAX_TOKEN_COUNT, Usage
from tau2_retail.models.prices import PriceTable
from tau2_retail.testing.scripted_endpoint import ScriptedEndpoint

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


class Spent:
    """A ``Spending`` that remembers what was charged after the fact."""

    def __init__(self) -> None:
        self.charged: list[float] = []

    def reserve(self, estimate: float) -> str:
        return "k"

    def settle(self, key: str, actual: float) -> None:
        pass

    def charge(self, actual: float) -> None:
        self.charged.append(actual)


def _run(
    bundle: DataBundle, agent: object, task: str = "10", **harness_options: Any
) -> ScenarioOutcome:
    """``agent``'s scenario of ``task``, by a harness with ``PRICES``, ``ROLES`` and
    ``harness_options``."""
    options = {"prices": PRICES, "roles": ROLES, **harness_options}

    async def go() -> ScenarioOutcome:
        async with Harness(bundle=bundle, **options) as harness:
            runner = AgentRunner(lambda: agent, AgentIdentity.of("test:agent", agent))
            scenario = Scenario(task=bundle.tasks[task], trial=0, trials=1, seed=7)
            return await harness.run(scenario, agent=runner)

    return asyncio.run(go())


class Recording:
    """A loop agent on a framework that made 3 requests this turn, one of them partly cached."""

    model = "agent-model"

    def converse(self, messages: list[dict[str, Any]], toolbox: Any) -> str:
        toolbox.record_usage(input_tokens=1200, output_tokens=30, requests=2)
        toolbox.record_usage(input_tokens=800, output_tokens=20, cached_tokens=500)
        toolbox.call("end_conversation", {})
        return ""


def test_a_loop_agents_recorded_usage_is_its_token_usage_and_its_cost(bundle) -> None:
    spending = Spent()
    outcome = _run(bundle, Recording(), spending=spending)

    metrics = outcome.metrics
    assert metrics.token_usage["agent"] == Usage(
        n_calls=3, prompt=2000, completion=50, cached_prompt=500
    )
    # one converse() call: the harness's requests still count the calls into the agent
    assert metrics.requests["agent"].requests == 1
    expected = (1500 * 2.0 + 500 * 0.5 + 50 * 8.0) / 1e6
    assert metrics.cost is not None
    assert metrics.cost.agent == pytest.approx(expected)
    assert metrics.cost.total == pytest.approx(expected)  # the built-in customer costs nothing
    # spent outside the suite's requests: charged to the budget after the scenario
    assert spending.charged == [pytest.approx(expected)]


def test_a_loop_agent_that_records_nothing_counts_its_calls_as_before(bundle) -> None:
    class Silent:
        model = "agent-model"

        def converse(self, messages: list[dict[str, Any]], toolbox: Any) -> str:
            toolbox.call("end_conversation", {})
            return ""

    spending = Spent()
    outcome = _run(bundle, Silent(), spending=spending)
    assert outcome.metrics.token_usage["agent"] == Usage(n_calls=1)
    assert outcome.metrics.cost is not None
    assert outcome.metrics.cost.agent == 0.0
    assert spending.charged == []


def test_an_agent_model_without_a_price_is_unpriced_and_no_model_costs_nothing(bundle) -> None:
    class Unpriced(Recording):
        model = "no-price-model"

    class Undeclared(Recording):
        model = None  # type: ignore[assignment]

    unpriced = _run(bundle, Unpriced()).metrics.cost
    assert unpriced is not None
    assert unpriced.agent is None
    assert unpriced.total is None
    undeclared = _run(bundle, Undeclared()).metrics.cost
    assert undeclared is not None
    assert undeclared.agent == 0.0  # as before: an agent as code without a model is not priced


def test_a_turn_agent_declaring_its_model_has_its_completion_priced(bundle) -> None:
    class Turn:
        model = "agent-model"

        def respond(self, messages: list[dict[str, Any]], tools: list[Any]) -> Any:
            usage = {"prompt_tokens": 1000, "completion_tokens": 40}
            return {"choices": [{"message": END, "finish_reason": "tool_calls"}], "usage": usage}

    spending = Spent()
    metrics = _run(bundle, Turn(), spending=spending).metrics
    assert metrics.token_usage["agent"] == Usage(n_calls=1, prompt=1000, completion=40)
    assert metrics.cost is not None
    assert metrics.cost.agent == pytest.approx((1000 * 2.0 + 40 * 8.0) / 1e6)
    assert spending.charged == [metrics.cost.agent]


@pytest.mark.parametrize(
    ("arguments", "detail"),
    [
        (
            {"input_tokens": -1, "output_tokens": 0},
            "ValueError: toolbox.record_usage(): input_tokens must be >= 0, got -1",
        ),
        (
            {"input_tokens": 1, "output_tokens": True},
            "TypeError: toolbox.record_usage(): output_tokens must be an int, got bool True",
        ),
        (
            {"input_tokens": 1.5, "output_tokens": 0},
            "TypeError: toolbox.record_usage(): input_tokens must be an int, got float 1.5",
        ),
        (
            {"input_tokens": 1, "output_tokens": 0, "requests": "2"},
            "TypeError: toolbox.record_usage(): requests must be an int, got str '2'",
        ),
        (
            {"input_tokens": 10, "output_tokens": 0, "cached_tokens": 11},
            "ValueError: toolbox.record_usage(): cached_tokens (11) is part of "
            "input_tokens (10), so it cannot be larger",
        ),
    ],
    ids=["negative", "bool", "float", "str", "cached-over-prompt"],
)
def test_bad_usage_is_the_agents_error(bundle, arguments: dict[str, Any], detail: str) -> None:
    class Bad:
        model = "agent-model"

        def converse(self, messages: list[dict[str, Any]], toolbox: Any) -> str:
            toolbox.record_usage(**arguments)
            return "never said"

    outcome = _run(bundle, Bad())
    conversation = outcome.conversation
    assert conversation.stop_reason is StopReason.AGENT_ERROR
    assert conversation.detail == f"agent: converse() raised {detail}"
    assert "toolbox.record_usage(**arguments)" in conversation.agent_traceback
    assert not outcome.is_infra_error
    assert outcome.metrics.token_usage["agent"] == Usage()


def test_usage_arguments_are_keyword_only(bundle) -> None:
    class Positional:
        def converse(self, messages: list[dict[str, Any]], toolbox: Any) -> str:
            toolbox.record_usage(10, 5)
            return "never said"

    conversation = _run(bundle, Positional()).conversation
    assert conversation.stop_reason is StopReason.AGENT_ERROR
    assert "converse() raised TypeError: ScenarioToolbox.record_usage() takes 1 " in (
        conversation.detail
    )


def test_a_huge_count_is_recorded_as_the_largest_exact_one(bundle) -> None:
    class Huge(Recording):
        def converse(self, messages: list[dict[str, Any]], toolbox: Any) -> str:
            toolbox.record_usage(input_tokens=10**30, output_tokens=1)
            toolbox.call("end_conversation", {})
            return ""

    metrics = _run(bundle, Huge()).metrics
    assert metrics.token_usage["agent"].prompt == MAX_TOKEN_COUNT
    assert metrics.cost is not None
    assert metrics.cost.agent is not None  # a finite cost: at most 10**12 tokens are billed


def test_usage_recorded_in_a_call_cut_at_the_deadline_counts(bundle) -> None:
    """Tokens spent before the scenario's deadline count, although the agent's converse()
    never returned (its thread is abandoned)."""
    released = threading.Event()

    class Hung:
        model = "agent-model"

        def converse(self, messages: list[dict[str, Any]], toolbox: Any) -> str:
            toolbox.record_usage(input_tokens=100, output_tokens=10)
            released.wait(10)
            return "late"

    outcome = _run(bundle, Hung(), limits=Limits(max_duration_seconds=0.5))
    released.set()
    assert outcome.conversation.stop_reason is StopReason.TIMEOUT
    assert outcome.metrics.token_usage["agent"] == Usage(n_calls=1, prompt=100, completion=10)
    assert outcome.metrics.cost is not None
    assert outcome.metrics.cost.agent == pytest.approx((100 * 2.0 + 10 * 8.0) / 1e6)


class Admitting(Spent):
    """A budget that admits the first ``admitted`` requests of the suite's models, then none."""

    def __init__(self, admitted: int) -> None:
        super().__init__()
        self.admitted = admitted
        self.settled: list[float] = []

    def reserve(self, estimate: float) -> str:
        if self.admitted <= 0:
            raise BudgetExhausted("the next request would pass --tau2-max-cost")
        self.admitted -= 1
        return "k"

    def settle(self, key: str, actual: float) -> None:
        self.settled.append(actual)


def _endpoint(role: str, base_url: str) -> ModelChoice:
    config = EndpointConfig(model=f"{role}-model", base_url=base_url, api_key_env="none")
    return ModelChoice(name=f"{role}-model", endpoint=config)


# every model priced: the code agent's, and the customer's and the judge's at an endpoint
ALL_PRICED = PriceTable.parse(
    {
        "agent-model": {"input": 2.0, "output": 8.0, "cached_input": 0.5},
        "user-model": {"input": 0.5, "output": 1.5},
        "judge-model": {"input": 3.0, "output": 12.0},
    }
)


def test_what_a_code_agent_spent_counts_when_the_budget_stops_the_judge(bundle) -> None:
    """The agent's recorded tokens were charged only once its scenario had an outcome: a
    scenario the budget stopped at the judge left them out of the budget and out of what
    the stopped scenario had spent (``not_run_cost``)."""
    roles = Roles(
        agent=ROLES.agent, user=ROLES.user, judge=_endpoint("judge", "http://127.0.0.1:9/v1")
    )
    spending = Admitting(0)  # nothing is sent: the judge's first request is refused

    with pytest.raises(BudgetExhausted) as stopped:
        _run(bundle, Recording(), task="4", roles=roles, prices=ALL_PRICED, spending=spending)

    recorded = (1500 * 2.0 + 500 * 0.5 + 50 * 8.0) / 1e6
    assert stopped.value.spent == pytest.approx(recorded)
    assert spending.charged == [pytest.approx(recorded)]


def test_what_a_code_agent_spent_counts_when_the_budget_stops_its_conversation(
    bundle, data_dir: Path
) -> None:
    """The customer's second request is refused after the agent had recorded its tokens:
    the stopped scenario spent the customer's first request and the agent's tokens."""

    class Talking:
        model = "agent-model"

        def converse(self, messages: list[dict[str, Any]], toolbox: Any) -> str:
            toolbox.record_usage(input_tokens=1000, output_tokens=100)
            return "Could you tell me more?"

    scripted = ScriptedEndpoint(bundle.tasks, load_user_guidelines(data_dir))
    spending = Admitting(1)
    with scripted.server:
        roles = Roles(agent=ROLES.agent, user=_endpoint("user", scripted.base_url))
        with pytest.raises(BudgetExhausted) as stopped:
            _run(bundle, Talking(), roles=roles, prices=ALL_PRICED, spending=spending)

    (customer,) = spending.settled
    assert customer > 0  # the customer's first request was sent and billed
    agent = (1000 * 2.0 + 100 * 8.0) / 1e6
    assert stopped.value.spent == pytest.approx(customer + agent)
    assert spending.charged == [pytest.approx(agent)]


def test_what_a_code_agent_spent_counts_when_its_scenario_is_interrupted(bundle) -> None:
    """Ctrl-C cancels a scenario whose agent had recorded tokens through its own backend:
    with prices (no budget) what it spent is told, priced by its declared model."""
    recorded, released = threading.Event(), threading.Event()

    class Busy:
        model = "agent-model"

        def converse(self, messages: list[dict[str, Any]], toolbox: Any) -> str:
            toolbox.record_usage(input_tokens=1000, output_tokens=100)
            recorded.set()
            released.wait(10)
            return "late"

    told: list[tuple[str, float]] = []

    async def go() -> None:
        async with Harness(bundle=bundle, roles=ROLES, prices=PRICES) as h:
            agent = Busy()
            runner = AgentRunner(lambda: agent, AgentIdentity.of("test:agent", agent))
            scenario = Scenario(task=bundle.tasks["10"], trial=0, trials=1, seed=7)

            def tell(spent: float) -> None:
                told.append((scenario.id, spent))

            running = asyncio.create_task(h.run(scenario, agent=runner, on_interrupted=tell))
            while not recorded.is_set():
                await asyncio.sleep(0.01)
            running.cancel()
            with pytest.raises(asyncio.CancelledError):
                await running

    try:
        asyncio.run(go())
    finally:
        released.set()
    assert told == [("tau2_retail__10", pytest.approx((1000 * 2.0 + 100 * 8.0) / 1e6))]
