"""Run folders of the tau2 profile written in-process, for the export's tests and benchmark.

:func:`write_tau2_run` runs tasks through the real :class:`~tau2_retail.engine.harness.Harness`
(its ``OpenAIChatModel`` clients) against a :class:`ScriptedEndpoint` in the tau2 profile that
plays agent, user and judge (``endpoint.agent`` and ``endpoint.judge_fails`` script failures),
writes every scenario's artifacts as a pytest run does (``write_outcome``), then
``run_args.json`` and the summaries, as the plugin records them. No pytest subprocess: a run
of all 114 tasks in 4 trials takes seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tau2_retail import codec
from tau2_retail.data.tasks import load_user_guidelines, trial_seeds
from tau2_retail.engine.conversation_setup import Limits
from tau2_retail.engine.harness import DataBundle, Harness, Roles, load_bundle
from tau2_retail.engine.profiles import UPSTREAM_PROFILE
from tau2_retail.engine.scenario import Scenario, ScenarioOutcome
from tau2_retail.models.choice import ModelChoice
from tau2_retail.models.config import EndpointConfig
from tau2_retail.models.prices import PriceTable
from tau2_retail.results.artifacts import write_outcome
from tau2_retail.results.records import ModelRecord, RunArgs, RunConfiguration
from tau2_retail.results.summary import summary_inputs, write_run_args, write_run_summary
from tau2_retail.testing.scripted_endpoint import ScriptedEndpoint

__all__ = ["tau2_bundle", "tau2_endpoint", "write_tau2_run"]

BASE_SEED = 300


def tau2_bundle(data_dir: Path) -> DataBundle:
    return load_bundle(data_dir, profile=UPSTREAM_PROFILE)


def tau2_endpoint(bundle: DataBundle) -> ScriptedEndpoint:
    """A scripted endpoint in the tau2 profile (start its ``server`` with ``with``)."""
    return ScriptedEndpoint(
        bundle.tasks, load_user_guidelines(bundle.data_dir), profile=bundle.profile
    )


def _roles(endpoint: ScriptedEndpoint, bundle: DataBundle) -> dict[str, ModelChoice]:
    policy = bundle.profile.policy
    roles = {}
    for role in ("agent", "user", "judge"):
        name = f"scripted-{role}"
        config = EndpointConfig(model=name, base_url=endpoint.base_url, max_retries=0)
        roles[role] = ModelChoice(name=name, endpoint=policy.request_config(role, config))
    return roles


def _configuration(
    run_id: str, roles: Mapping[str, ModelChoice], settings: Mapping[str, Any], *, judge: bool
) -> RunConfiguration:
    def record(choice: ModelChoice) -> ModelRecord:
        data = codec.encode(choice)
        return ModelRecord(model=data["model"], endpoint=data["endpoint"])

    return RunConfiguration(
        run_id=run_id,
        settings=dict(settings),
        sources={},
        agent=record(roles["agent"]),
        user=record(roles["user"]),
        judge=record(roles["judge"]) if judge else None,
    )


def write_tau2_run(
    run_dir: Path,
    bundle: DataBundle,
    endpoint: ScriptedEndpoint,
    *,
    task_ids: Sequence[str],
    trials: int = 1,
    prices: Mapping[str, Any] | None = None,
    judge: bool = True,
    max_steps: int = 200,
    concurrency: int = 16,
) -> list[ScenarioOutcome]:
    """Run ``task_ids`` x ``trials`` into ``run_dir`` (a new folder named by the run id);
    ``judge`` False runs without a judge (NL assertions not judged)."""
    roles = _roles(endpoint, bundle)
    seeds = trial_seeds(BASE_SEED, trials)
    scenarios = [
        Scenario(task=bundle.tasks[task_id], trial=trial, trials=trials, seed=seeds[trial])
        for task_id in task_ids
        for trial in range(trials)
    ]
    settings = {
        "profile": UPSTREAM_PROFILE.value,
        "trials": trials,
        "seed": BASE_SEED,
        "tasks": list(task_ids),
        "split": "base",
        "max_steps": max_steps,
        "max_errors": 10,
        "prices": dict(prices) if prices else None,
        "data_dir": str(bundle.data_dir),
    }
    harness_roles = Roles(
        agent=roles["agent"], user=roles["user"], judge=roles["judge"] if judge else None
    )
    table = PriceTable.parse(prices) if prices else None

    def new_harness() -> Harness:
        return Harness(
            bundle=bundle, roles=harness_roles, prices=table, limits=Limits(max_steps=max_steps)
        )

    run_dir.mkdir(parents=True)
    outcomes = asyncio.run(_run_all(new_harness, scenarios, run_dir, settings, concurrency))
    configuration = _configuration(run_dir.name, roles, settings, judge=judge)
    _write_run_files(run_dir, scenarios, outcomes, configuration, trials=trials)
    return outcomes


async def _run_all(
    new_harness: Callable[[], Harness],
    scenarios: Sequence[Scenario],
    run_dir: Path,
    settings: Mapping[str, Any],
    concurrency: int,
) -> list[ScenarioOutcome]:
    """Run ``scenarios`` in a harness made by ``new_harness`` (in the event loop),
    ``concurrency`` at a time, writing each one's artifacts."""
    limit = asyncio.Semaphore(concurrency)
    async with new_harness() as harness:

        async def one(scenario: Scenario) -> ScenarioOutcome:
            async with limit:
                outcome = await harness.run(scenario)
            write_outcome(run_dir, outcome, prompts=harness.prompts(scenario.task), config=settings)
            return outcome

        return list(await asyncio.gather(*(one(s) for s in scenarios)))


def _write_run_files(
    run_dir: Path,
    scenarios: Sequence[Scenario],
    outcomes: Sequence[ScenarioOutcome],
    configuration: RunConfiguration,
    *,
    trials: int,
) -> None:
    """The run's ``run_args.json`` and summary files."""
    args = RunArgs(
        argv=("test",),
        configuration=configuration,
        trials=trials,
        expected=tuple(sorted(s.id for s in scenarios)),
        versions={"tau2-retail-pytest": "test"},
    )
    write_run_args(run_dir, args)
    write_run_summary(run_dir, [outcome.metrics for outcome in outcomes], **summary_inputs(args))
