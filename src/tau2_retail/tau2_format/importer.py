"""An upstream ``results.json`` as our records: each simulation as upstream wrote it.

Each simulation becomes a scenario of the tau2 profile (``tau2_retail__<task>[-trial<k>]``,
trials numbered from 1), read as upstream wrote it, never re-scored: ``tau2_reward`` is its
``reward_info.reward`` (a trial succeeds when it is 1, as upstream's pass^k counts it), its
ending upstream's ``termination_reason`` in our words (:mod:`~tau2_retail.tau2_format.terms`;
``infrastructure_error`` is an infra error, left out of the rates as upstream leaves it out of
its metrics), DB_STATE_MATCH its ``db_check``, NL_ASSERTION its ``nl_assertions`` (the NL
component passes when every returned result is met, as upstream's does); for a simulation
upstream did not evaluate, the signals our export keeps in ``info`` (``db_state_match``,
``nl_assertions``), else no DB match and no judgement. ACTION_MATCH is our rule on its recorded
writes against the reference writes (the gold replay's, as our runs score it); split and
persona come from the pinned data; the cost is upstream's ``agent_cost`` and ``user_cost``
(its judge's is not part of a run's cost there: 0). Upstream records neither DB hashes nor
latencies: those are empty. The run is ``num_trials`` trials of each
task that has a simulation (an export embeds every task of its split, whatever ran); a trial
without one is lost.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tau2_retail import codec
from tau2_retail.data.tasks import Task
from tau2_retail.engine.ending import StopReason
from tau2_retail.engine.judge_result import JudgeResult
from tau2_retail.engine.metrics import ScenarioMetrics, Turn
from tau2_retail.engine.profiles import UPSTREAM_PROFILE
from tau2_retail.engine.scenario import scenario_id
from tau2_retail.engine.scoring import action_match, success
from tau2_retail.engine.transcript import TimedMessage, Transcript
from tau2_retail.errors import ArtifactError
from tau2_retail.models.messages import Role, Usage
from tau2_retail.models.prices import RoleCosts
from tau2_retail.results.records import ModelRecord, RunArgs, RunConfiguration
from tau2_retail.tau2_format.messages import our_messages, recorded_actions, seconds_of
from tau2_retail.tau2_format.reward import verdicts_of
from tau2_retail.tau2_format.schema import (
    NLAssertionCheck,
    ResultsRecord,
    SimulationRecord,
    TaskRecord,
)
from tau2_retail.tau2_format.terms import (
    DOMAIN,
    LLM_AGENT,
    SCORED,
    USER_SIMULATOR,
    from_upstream,
)
from tau2_retail.tools.dispatch import Action
from tau2_retail.tools.registry import TOOLS

__all__ = [
    "ImportedRun",
    "ImportedScenario",
    "References",
    "embedded_references",
    "imported_run",
    "read_results",
]

NL = "NL_ASSERTION"
UPSTREAM_JUDGE = "upstream's NL-assertion judge"


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportedScenario:
    """One simulation as our records: metrics, transcript, the judge's verdicts (None when
    its NL assertions were not judged) and the task's reference writes."""

    metrics: ScenarioMetrics
    transcript: Transcript
    judge: JudgeResult | None
    reference: tuple[Action, ...]
    nl_assertions: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportedRun:
    run_args: RunArgs
    scenarios: tuple[ImportedScenario, ...]
    #: task and trial of the run without a simulation in the file -> why
    lost: Mapping[str, str]


def read_results(path: Path) -> ResultsRecord:
    """Read ``path`` as upstream's ``results.json``; :class:`ArtifactError` names the file and
    the field when it is not one (or not of the retail domain)."""
    results = codec.read(ResultsRecord, Path(path))
    domain = results.info.environment_info.domain_name
    if domain != DOMAIN:
        raise ArtifactError(f"{path}: a {domain!r} run; this suite reads runs of the retail domain")
    # checked here, where every reader starts (import, report --against, a baseline checked at
    # start-up): they were a traceback at the end of a run, or a half-written import
    ids: set[str] = set()
    for sim in results.simulations:
        if sim.id in ids:
            raise ArtifactError(f"{path}: simulation {sim.id} appears more than once")
        ids.add(sim.id)
        try:
            from_upstream(sim.termination_reason)
        except ValueError as error:
            raise ArtifactError(f"{path}: simulation {sim.id}: {error}") from None
    return results


References = Callable[[TaskRecord], tuple[Action, ...]]
"""A task's reference writes, for ACTION_MATCH."""


def embedded_references(task: TaskRecord) -> tuple[Action, ...]:
    """The writes and transfers of the embedded task's actions, as listed (a gold action that
    fails when replayed is kept: :func:`tau2_retail.tau2_format.upstream_run.upstream_run`
    gives the gold replay's instead, as our runs score it)."""
    criteria = task.evaluation_criteria
    actions = criteria.actions if criteria is not None and criteria.actions else ()
    return tuple(
        Action(name=a.name, arguments=dict(a.arguments))
        for a in actions
        if a.name in TOOLS and TOOLS[a.name].records_action
    )


def _nl(task: TaskRecord) -> tuple[str, ...]:
    criteria = task.evaluation_criteria
    if criteria is None or NL not in criteria.reward_basis:
        return ()
    return tuple(criteria.nl_assertions or ())


def _judge(checks: Sequence[NLAssertionCheck]) -> JudgeResult:
    met = all(check.met for check in checks)
    return JudgeResult(
        score=1.0 if met else 0.0,
        reason="every returned result met" if met else "a returned result was not met",
        verdicts=verdicts_of(checks),
        system_prompt="",
        user_content="",
    )


def _usage(messages: Sequence[TimedMessage]) -> dict[str, Usage]:
    totals = {"agent": Usage(), "user": Usage(), "judge": Usage()}
    for message in messages:
        if message.usage is not None:
            role = "agent" if message.role is Role.ASSISTANT else "user"
            totals[role] = totals[role] + message.usage
    return totals


def _turns(messages: Sequence[TimedMessage]) -> tuple[Turn, ...]:
    return tuple(
        Turn(
            timestamp=m.timestamp,
            role="user" if m.role is Role.USER else "agent",
            text=m.content or "",
        )
        for m in messages
        if m.role is Role.USER or (m.role is Role.ASSISTANT and not m.tool_calls and m.content)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Place:
    """Where a simulation lands: its task, 0-based trial and the run's trials."""

    task: TaskRecord
    ours: Task | None
    trial: int
    trials: int


def _nl_counts(
    checks: Sequence[NLAssertionCheck] | None, total: int
) -> tuple[bool | None, int | None]:
    """Whether the NL component passed (None: not judged) and the assertions counted met."""
    if checks is None or not total:
        return None, None
    passed = all(check.met for check in checks)
    return passed, total if passed else min(total, sum(check.met for check in checks))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Read:
    """What one simulation says, in our terms."""

    messages: tuple[TimedMessage, ...]
    stop: StopReason
    reward: float | None
    db_match: bool
    nl_assertions: tuple[str, ...]
    nl_passed: bool | None
    nl_count: int | None
    actions: tuple[Action, ...]
    reference: tuple[Action, ...]
    detail: str


def _checks(sim: SimulationRecord) -> tuple[NLAssertionCheck, ...] | None:
    """The NL verdicts: ``reward_info``'s, else (an ending upstream does not evaluate) those
    our export keeps in ``info``."""
    info = sim.reward_info
    if info is not None and info.nl_assertions is not None:
        return info.nl_assertions
    kept = (sim.info or {}).get("nl_assertions")
    if kept is None:
        return None
    return codec.decode_value(tuple[NLAssertionCheck, ...], kept, f"simulation {sim.id} info")


def _read(sim: SimulationRecord, place: _Place, references: References) -> _Read:
    info = sim.reward_info
    notes = dict(sim.info or {})
    if info is not None and info.info:
        notes.setdefault("note", info.info.get("note"))
    nl_assertions = _nl(place.task)
    checks = _checks(sim)
    nl_passed, nl_count = _nl_counts(checks, len(nl_assertions))
    messages = our_messages(sim.messages or ())
    scored = sim.termination_reason in SCORED
    return _Read(
        messages=messages,
        stop=from_upstream(sim.termination_reason),
        reward=info.reward if info is not None else (None if scored else 0.0),
        db_match=(
            info.db_check.db_match
            if info is not None and info.db_check is not None
            else notes.get("db_state_match") is True
        ),
        nl_assertions=nl_assertions,
        nl_passed=nl_passed,
        nl_count=nl_count,
        actions=recorded_actions(messages),
        reference=references(place.task),
        detail=str(notes.get("stop_detail") or _one_line(notes.get("error") or notes.get("note"))),
    )


def _one_line(text: object) -> str:
    """Upstream's error or note as one line: its errors embed a message's repr (``Got
    AssistantMessage\\nis_final_chunk: True``), which split the summary's list of infra errors."""
    return " ".join(str(text).split()) if text else ""


def _metrics(sim: SimulationRecord, place: _Place, read: _Read) -> ScenarioMetrics:
    matched = action_match(read.reference, read.actions)
    verdict = success(
        db_match=read.db_match, clean_exit=None, nl_passed=read.nl_passed, actions_matched=matched
    )
    turns = _turns(read.messages)
    total = len(read.nl_assertions)
    return ScenarioMetrics(
        profile=UPSTREAM_PROFILE.value,
        scenario_name=f"tau2_retail__{place.task.id}",
        scenario_id=scenario_id(place.task.id, place.trial, place.trials),
        task_id=place.task.id,
        trial=place.trial + 1,
        seed=sim.seed,
        split=place.ours.split if place.ours else "unknown",
        persona_name=place.ours.persona_name if place.ours else "unknown",
        total_turns=len(turns),
        turns=turns,
        duration_seconds=sim.duration,
        latency_stats={},
        stop_reason=read.stop.value,
        stop_detail=read.detail,
        infra_error=read.stop is StopReason.INFRA_ERROR,
        clean_exit=read.stop is StopReason.AGENT_EXIT,
        db_state_expected_hash="",
        db_state_actual_hash="",
        db_state_match=read.db_match,
        is_action_match=matched,
        nl_assertion_total=total,
        nl_assertion_pass_count=read.nl_count,
        nl_assertion_pass_rate=None if read.nl_count is None else read.nl_count / total,
        token_usage=_usage(read.messages),
        # upstream records no request statistics (attempts, retries, failures)
        requests={},
        success_breakdown={state: tuple(names) for state, names in verdict.breakdown.items()},
        is_successful=read.reward == 1.0,
        is_task_successful=verdict.is_task_successful,
        tau2_reward=read.reward,
        cost=(
            RoleCosts(agent=sim.agent_cost, user=sim.user_cost, judge=0.0)
            if sim.agent_cost is not None or sim.user_cost is not None
            else None
        ),
    )


def _scenario(sim: SimulationRecord, place: _Place, references: References) -> ImportedScenario:
    read = _read(sim, place, references)
    messages = read.messages
    transcript = Transcript(
        messages=messages,
        stop_reason=read.stop,
        detail=read.detail,
        actions=read.actions,
        usage=_usage(messages),
        latencies=(),
        started_at=seconds_of(sim.start_time),
        duration_seconds=sim.duration,
        steps=len(messages),
        tool_errors=sum(1 for m in messages if m.role is Role.TOOL and m.error),
    )
    checks = _checks(sim)
    return ImportedScenario(
        metrics=_metrics(sim, place, read),
        transcript=transcript,
        judge=_judge(checks) if checks and read.nl_assertions else None,
        reference=read.reference,
        nl_assertions=read.nl_assertions,
    )


def _places(
    results: ResultsRecord, ours: Mapping[str, Task], where: str
) -> list[tuple[SimulationRecord, _Place]]:
    tasks = {task.id: task for task in results.tasks}
    trials = results.info.num_trials
    seen: Counter[str] = Counter()
    places: list[tuple[SimulationRecord, _Place]] = []
    taken: dict[tuple[str, int], str] = {}
    for sim in results.simulations:
        task = tasks.get(sim.task_id)
        if task is None:
            raise ArtifactError(
                f"{where}: simulation {sim.id} is of task {sim.task_id!r}, not embedded"
            )
        trial = sim.trial if sim.trial is not None else seen[sim.task_id]
        seen[sim.task_id] += 1
        if not 0 <= trial < trials:
            raise ArtifactError(
                f"{where}: simulation {sim.id} is trial {trial} of {trials} (num_trials)"
            )
        other = taken.setdefault((sim.task_id, trial), sim.id)
        if other != sim.id:
            raise ArtifactError(
                f"{where}: simulations {other} and {sim.id} are both task {sim.task_id} "
                f"trial {trial}"
            )
        places.append(
            (sim, _Place(task=task, ours=ours.get(sim.task_id), trial=trial, trials=trials))
        )
    return places


def _configuration(
    results: ResultsRecord, run_id: str, *, ran: list[str], judged: bool, source: str
) -> RunConfiguration:
    info = results.info
    settings = {
        "profile": UPSTREAM_PROFILE.value,
        "trials": info.num_trials,
        "seed": info.seed,
        "max_steps": info.max_steps,
        "max_errors": info.max_errors,
        "split": "base",
        "tasks": ran,
        "imported_from": source,
    }
    agent, user = info.agent_info, info.user_info
    return RunConfiguration(
        run_id=run_id,
        settings=settings,
        sources={},
        agent=_player(agent.implementation, agent.llm, agent.llm_args, LLM_AGENT),
        user=_player(user.implementation, user.llm, user.llm_args, USER_SIMULATOR),
        judge=ModelRecord(model=UPSTREAM_JUDGE, endpoint=None) if judged else None,
    )


def _player(
    implementation: str, llm: str | None, args: Mapping[str, Any] | None, standard: str
) -> ModelRecord:
    """Who played a role upstream: a model through upstream's own scaffold (``standard``) is
    recorded as an endpoint of that model with its ``llm_args`` as what its requests carried,
    so that an export of the imported run names it as upstream did."""
    if llm and implementation == standard:
        return ModelRecord(model=llm, endpoint={"model": llm, "extra_body": dict(args or {})})
    return ModelRecord(model=llm or implementation, endpoint=None)


def imported_run(
    results: ResultsRecord,
    *,
    tasks: Mapping[str, Task],
    run_id: str,
    source: str,
    references: References = embedded_references,
) -> ImportedRun:
    """``results`` as our records (``tasks``: the pinned data's, for split and persona;
    ``source`` names the file in messages and in the recorded settings; ``references`` gives
    each task's reference writes)."""
    scenarios = [
        _scenario(sim, place, references) for sim, place in _places(results, tasks, source)
    ]
    scenarios.sort(key=lambda scenario: scenario.metrics.sort_key())
    trials = results.info.num_trials
    # the tasks that ran (an export embeds every task of the split, whatever ran)
    simulated = {sim.task_id for sim in results.simulations}
    ran = [task.id for task in results.tasks if task.id in simulated]
    expected = [scenario_id(task_id, trial, trials) for task_id in ran for trial in range(trials)]
    reported = {scenario.metrics.scenario_id for scenario in scenarios}
    judged = any(scenario.judge is not None for scenario in scenarios)
    run_args = RunArgs(
        argv=("python", "-m", "tau2_retail", "import", source),
        configuration=_configuration(results, run_id, ran=ran, judged=judged, source=source),
        trials=trials,
        expected=tuple(expected),
        versions={"tau2-bench": results.info.git_commit},
    )
    return ImportedRun(
        run_args=run_args,
        scenarios=tuple(scenarios),
        lost={key: f"no simulation in {source}" for key in expected if key not in reported},
    )
