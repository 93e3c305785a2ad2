"""The ``tau2_*`` fixtures: a scenario's private store, its gold state, and its outcome.

``tau2_outcome`` runs the whole scenario during set-up: a model's failure is then a test
failure (the test's assertions), while an endpoint outage (``infra_error``) is a set-up error,
reported as a pytest error and excluded from the rates.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import pytest
import pytest_asyncio

from tau2_retail.data.gold import Gold
from tau2_retail.engine.conversation import Limits
from tau2_retail.engine.profiles import ProfileName
from tau2_retail.engine.scenario import Scenario, ScenarioOutcome, run_scenario
from tau2_retail.models.builtin import builtin_model
from tau2_retail.models.protocol import ChatModel
from tau2_retail.plugins.options import ModelSettings, Tau2Settings
from tau2_retail.plugins.run import METRICS_KEY, RUN_KEY, Tau2InfraError, Tau2Run
from tau2_retail.plugins.runtime import DataBundle, endpoint_model
from tau2_retail.results.artifacts import scenario_dir, write_scenario_artifacts
from tau2_retail.tools.store import Store

__all__ = [
    "Tau2InfraError",
    "tau2_data",
    "tau2_endpoints",
    "tau2_gold",
    "tau2_outcome",
    "tau2_run",
    "tau2_scenario",
    "tau2_settings",
    "tau2_store",
]


@pytest.fixture(scope="session")
def tau2_run(pytestconfig: pytest.Config) -> Tau2Run:
    return pytestconfig.stash[RUN_KEY]


@pytest.fixture(scope="session")
def tau2_settings(tau2_run: Tau2Run) -> Tau2Settings:
    return tau2_run.settings


@pytest.fixture(scope="session")
def tau2_data(tau2_run: Tau2Run) -> DataBundle:
    """The verified data, loaded once per process."""
    return tau2_run.bundle


@pytest.fixture
def tau2_scenario(request: pytest.FixtureRequest) -> Scenario:
    """The scenario of this test case (parametrized by the plugin)."""
    scenario: Scenario = request.param
    return scenario


@pytest.fixture
def tau2_gold(tau2_scenario: Scenario, tau2_data: DataBundle) -> Gold:
    """The task's expected database and reference actions (replayed once per process)."""
    return tau2_data.golds[tau2_scenario.task.id]


@pytest.fixture
def tau2_store(tau2_data: DataBundle) -> Store:
    """A private copy-on-write database for this scenario."""
    return Store(tau2_data.golds.seed)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def tau2_endpoints(tau2_run: Tau2Run) -> AsyncIterator[Mapping[str, ChatModel]]:
    """One endpoint client per role and process, shared by its scenarios, closed at the end.

    Building a client costs tens of milliseconds (TLS context); scenarios reuse them on the
    session's event loop.
    """
    settings = tau2_run.settings
    roles = {"agent": settings.agent, "user": settings.user, "judge": settings.judge}
    profile = ProfileName(settings["profile"])
    clients = {
        role: endpoint_model(model, role=role, profile=profile)
        for role, model in roles.items()
        if model is not None and model.endpoint is not None
    }
    try:
        yield clients
    finally:
        for client in clients.values():
            await client.close()


@pytest_asyncio.fixture(loop_scope="session")
async def tau2_outcome(
    request: pytest.FixtureRequest,
    tau2_run: Tau2Run,
    tau2_endpoints: Mapping[str, ChatModel],
    tau2_scenario: Scenario,
    tau2_data: DataBundle,
    tau2_gold: Gold,
    tau2_store: Store,
) -> AsyncIterator[ScenarioOutcome]:
    """Run the scenario, write its artifacts, hand its metrics to the report."""
    settings = tau2_run.settings
    task = tau2_scenario.task

    def model_for(role: str, model: ModelSettings) -> ChatModel:
        return tau2_endpoints.get(role) or builtin_model(model.name, task, role=role)

    judge = tau2_endpoints.get("judge")
    user_prompt = tau2_data.profile.user_prompt(task)
    outcome = await run_scenario(
        tau2_scenario,
        agent=model_for("agent", settings.agent),
        user=model_for("user", settings.user),
        judge_model=judge,
        gold=tau2_gold,
        store=tau2_store,
        agent_prompt=tau2_data.agent_prompt,
        user_prompt=user_prompt,
        tools=tau2_data.tools,
        limits=Limits(
            max_steps=settings["max_steps"],
            max_errors=settings["max_errors"],
            max_duration_seconds=settings["max_duration"],
        ),
        profile=tau2_data.profile,
    )
    directory = scenario_dir(
        tau2_run.run_dir, tau2_scenario.name, tau2_scenario.trial, tau2_scenario.trials
    )
    write_scenario_artifacts(
        directory,
        outcome,
        agent_prompt=tau2_data.agent_prompt,
        user_prompt=user_prompt,
        tools=tau2_data.tools,
        config=tau2_run.public_configuration,
    )
    request.node.stash[METRICS_KEY] = outcome.metrics
    if outcome.is_infra_error:
        raise Tau2InfraError(
            f"infra_error: {outcome.conversation.detail} "
            "(excluded from the pass rate; re-run with --tau2-resume "
            f"{tau2_run.run_id})"
        )
    yield outcome
