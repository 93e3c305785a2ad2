"""The ``tau2_*`` fixtures: a scenario's private store, its gold state, and its outcome.

``tau2_outcome`` runs the whole scenario during set-up: a model's failure is then a test
failure (the test's assertions), while an endpoint outage (``infra_error``) is a set-up error,
reported as a pytest error and excluded from the rates.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
import pytest_asyncio

from tau2_retail.data.gold import Gold
from tau2_retail.engine.conversation import Limits
from tau2_retail.engine.prompts import user_system_prompt
from tau2_retail.engine.scenario import Scenario, ScenarioOutcome, run_scenario
from tau2_retail.models.builtin import builtin_model
from tau2_retail.models.protocol import ChatModel
from tau2_retail.plugins.options import ModelSettings, Tau2Settings
from tau2_retail.plugins.run import METRICS_KEY, RUN_KEY, Tau2InfraError, Tau2Run
from tau2_retail.plugins.runtime import DataBundle, endpoint_model
from tau2_retail.plugins.scheduler import ScenarioScheduler, upcoming_items
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
    "tau2_scheduler",
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
    """A private copy-on-write database over the seed (the scenario itself runs on its own,
    ``tau2_outcome.conversation.store``)."""
    return Store(tau2_data.golds.seed)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def tau2_endpoints(tau2_run: Tau2Run) -> AsyncIterator[Mapping[str, ChatModel]]:
    """One endpoint client per role and process, shared by its scenarios, closed at the end.

    Building a client costs tens of milliseconds (TLS context); scenarios reuse them on the
    session's event loop.
    """
    settings = tau2_run.settings
    roles = {"agent": settings.agent, "user": settings.user, "judge": settings.judge}
    clients = {
        role: endpoint_model(model)
        for role, model in roles.items()
        if model is not None and model.endpoint is not None
    }
    try:
        yield clients
    finally:
        for client in clients.values():
            await client.close()


def _is_scenario_item(item: pytest.Item) -> bool:
    """A benchmark scenario test the scheduler may start ahead (not one marked to skip)."""
    callspec = getattr(item, "callspec", None)
    return (
        callspec is not None
        and "tau2_scenario" in callspec.params
        and "tau2_outcome" in getattr(item, "fixturenames", ())
        and item.get_closest_marker("skip") is None
    )


async def _run(
    tau2_run: Tau2Run,
    endpoints: Mapping[str, ChatModel],
    data: DataBundle,
    scenario: Scenario,
) -> ScenarioOutcome:
    settings = tau2_run.settings
    task = scenario.task

    def model_for(role: str, model: ModelSettings) -> ChatModel:
        return endpoints.get(role) or builtin_model(model.name, task, role=role)

    return await run_scenario(
        scenario,
        agent=model_for("agent", settings.agent),
        user=model_for("user", settings.user),
        judge_model=endpoints.get("judge"),
        gold=data.golds[task.id],
        store=Store(data.golds.seed),
        agent_prompt=data.agent_prompt,
        user_prompt=user_system_prompt(data.user_guidelines, task),
        tools=data.tools,
        limits=Limits(
            max_steps=settings["max_steps"],
            max_errors=settings["max_errors"],
            max_duration_seconds=settings["max_duration"],
        ),
    )


def _write(tau2_run: Tau2Run, data: DataBundle, outcome: ScenarioOutcome) -> None:
    scenario = outcome.scenario
    write_scenario_artifacts(
        scenario_dir(tau2_run.run_dir, scenario.name, scenario.trial, scenario.trials),
        outcome,
        agent_prompt=data.agent_prompt,
        user_prompt=user_system_prompt(data.user_guidelines, scenario.task),
        tools=data.tools,
        config=tau2_run.public_configuration,
    )


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def tau2_scheduler(
    request: pytest.FixtureRequest,
    tau2_run: Tau2Run,
    tau2_endpoints: Mapping[str, ChatModel],
    tau2_data: DataBundle,
) -> AsyncIterator[ScenarioScheduler[ScenarioOutcome]]:
    """Starts this process's scenarios ahead of their tests, ``--tau2-concurrency`` at once.

    Each scenario writes its artifacts as soon as it finishes, so a session that stops early
    (Ctrl-C, ``-x``, ``--maxfail``) keeps every finished one (``--tau2-resume`` skips them);
    the conversations still running are cancelled.
    """
    session = request.session

    async def start(item: pytest.Item) -> ScenarioOutcome:
        callspec: Any = getattr(item, "callspec", None)
        scenario: Scenario = callspec.params["tau2_scenario"]
        outcome = await _run(tau2_run, tau2_endpoints, tau2_data, scenario)
        _write(tau2_run, tau2_data, outcome)
        return outcome

    scheduler = ScenarioScheduler(
        limit=tau2_run.settings["concurrency"],
        start=start,
        upcoming=upcoming_items(session),
        wanted=_is_scenario_item,
        stopping=lambda: bool(session.shouldfail or session.shouldstop),
    )
    try:
        yield scheduler
    finally:
        await scheduler.aclose()


@pytest_asyncio.fixture(loop_scope="session")
async def tau2_outcome(
    request: pytest.FixtureRequest,
    tau2_run: Tau2Run,
    tau2_scheduler: ScenarioScheduler[ScenarioOutcome],
    tau2_scenario: Scenario,
) -> AsyncIterator[ScenarioOutcome]:
    """This test's scenario (started ahead by the scheduler, its artifacts written); its
    metrics go to the report. The conversation ran on ``tau2_outcome.conversation.store``."""
    outcome = await tau2_scheduler.outcome(request.node)
    request.node.stash[METRICS_KEY] = outcome.metrics
    if outcome.is_infra_error:
        raise Tau2InfraError(
            f"infra_error: {outcome.conversation.detail} "
            "(excluded from the pass rate; re-run with --tau2-resume "
            f"{tau2_run.run_id})"
        )
    yield outcome
