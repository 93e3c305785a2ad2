"""Run-level summaries (spec: conversation_and_scoring.md §1 pass^k, §4 signals, §6 artifacts).

:func:`build_summary` turns the scenarios' ``metrics.json`` records into the figures of
``summary.json``; :func:`render_summary_text` writes them as ``all_summary.txt``. Both are pure.
:func:`write_run_summary` writes ``all_metrics.json``, ``summary.json`` and ``all_summary.txt``
(only the controller process calls it), and :func:`summarize` rebuilds them from the
artifacts of a run folder (``python -m tau2_retail summarize RUN_DIR``). Every record read or
written is typed (:mod:`tau2_retail.results.records`, :mod:`tau2_retail.engine.metrics`).

Counting rules:

- A scenario ended by ``infra_error`` is not the model's failure: it is listed and left out of
  every rate's denominator (pass^k included). A *lost* scenario (expected, but no metrics, e.g.
  its worker was killed, or its ``metrics.json`` is empty or truncated) is listed, with the
  reason when one is known, and left out too.
- NL_ASSERTION is denominated in assertions, over the scenarios where it was applicable.
- ACTION_MATCH is shown but excluded from success; the judge score and the tau2 reward are
  informational in the default profile.
- In the tau2 profile the headline is upstream's reward and pass^k (a scenario succeeds when
  its reward is 1); our signals follow, labelled, CLEAN_EXIT not applicable.
- The judge's replies are counted over every scenario (retries after an unreadable reply
  included); when most of them could not be read, the summary says the judge does not follow
  the reply format (:func:`judge_format_line`).
- Every rate carries its 95% interval (:mod:`tau2_retail.results.stats`): Wilson's, or a
  bootstrap over tasks when a task gives several units (trials, NL assertions); pass^k too.
  With trials > 1 the tasks whose trials disagree are listed as flaky.

``run_args.json`` (:class:`~tau2_retail.results.records.RunArgs`, written by the pytest plugin)
gives ``summarize`` the trials, the expected scenarios, the configuration and the versions.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import NotRequired, TypedDict, Unpack

from tau2_retail import codec
from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.engine.profiles import MIXED, ProfileName, policy_for
from tau2_retail.engine.scoring import Signal
from tau2_retail.errors import ArtifactError
from tau2_retail.models.messages import Usage
from tau2_retail.models.prices import RoleCosts
from tau2_retail.results.artifacts import load_run_metrics
from tau2_retail.results.atomic import write_json_atomic, write_text_atomic
from tau2_retail.results.long_text import cut_long_texts
from tau2_retail.results.records import (
    Counts,
    FlakyTask,
    GroupRate,
    InfraErrorRow,
    JudgeReplies,
    Mean,
    NlSignal,
    PassHatK,
    Rate,
    RunArgs,
    RunConfiguration,
    RunSummary,
    ScenarioRow,
    SignalRate,
)
from tau2_retail.results.stats import WILSON, Interval, clustered_interval, fixed
from tau2_retail.results.stats import pass_hat_k as pass_hat_k_interval

__all__ = [
    "ALL_METRICS_FILE",
    "INTERVAL_NOTE",
    "NO_RESULT",
    "RUN_ARGS_FILE",
    "SUMMARY_JSON_FILE",
    "SUMMARY_TEXT_FILE",
    "build_summary",
    "cost_lines",
    "flaky_lines",
    "headline_lines",
    "judge_format_line",
    "pass_hat_k",
    "pass_hat_k_line",
    "read_run_args",
    "read_summary",
    "render_summary_text",
    "scenario_order",
    "summarize",
    "usd",
    "write_run_args",
    "write_run_summary",
]

ALL_METRICS_FILE = "all_metrics.json"
SUMMARY_JSON_FILE = "summary.json"
SUMMARY_TEXT_FILE = "all_summary.txt"
RUN_ARGS_FILE = "run_args.json"
#: why ``summarize`` lists an expected scenario that has no ``metrics.json`` at all
NO_RESULT = "no metrics.json (not run, interrupted, or its process was lost)"

_ROLES = ("agent", "user", "judge")

#: how the ``[low, high]`` intervals of the text summaries were computed
INTERVAL_NOTE = (
    "Intervals [low, high]: 95%, Wilson score; a bootstrap over tasks where a task "
    "gives several units (trials, NL assertions); see docs/statistics.md"
)


def _clustered(clusters: Mapping[str, tuple[int, int]]) -> Interval | None:
    """The interval of a rate over tasks' ``(passed, units)``; None when it is Wilson's (the
    record computes that one itself)."""
    interval = clustered_interval(list(clusters.values()))
    return None if interval is None or interval.method == WILSON else interval


def _rate(scored: Sequence[ScenarioMetrics], flag: Callable[[ScenarioMetrics], bool]) -> Rate:
    """The share of ``scored`` with ``flag``; the trials of a task form one cluster."""
    clusters: dict[str, tuple[int, int]] = {}
    for metrics in scored:
        passed, units = clusters.get(metrics.task_id, (0, 0))
        clusters[metrics.task_id] = (passed + bool(flag(metrics)), units + 1)
    return Rate(
        passed=sum(bool(flag(m)) for m in scored),
        total=len(scored),
        interval=_clustered(clusters),
    )


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def pass_hat_k(outcomes: Mapping[str, Sequence[bool]], k: int) -> tuple[float | None, int]:
    """tau2's pass^k: per task ``C(successes, k) / C(trials, k)``, averaged over tasks.

    ``outcomes`` maps a task id to its scored trials' success flags. Tasks with fewer than
    ``k`` trials are skipped. Returns the value (None when no task qualifies) and the number
    of tasks averaged.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    values = [
        math.comb(sum(flags), k) / math.comb(len(flags), k)
        for flags in outcomes.values()
        if len(flags) >= k
    ]
    return _mean(values), len(values)


def _rounded_usd(value: float | None) -> float | None:
    # micro-dollars, as metrics.json records them
    return None if value is None else round(value, 6)


#: the fields a summary row copies from its scenario's metrics (the others are derived)
_ROW_COPIES = tuple(
    f.name for f in dataclasses.fields(ScenarioRow) if f.name not in ("status", "cost")
)


def _row(m: ScenarioMetrics) -> ScenarioRow:
    return ScenarioRow(
        **{name: getattr(m, name) for name in _ROW_COPIES},
        status="INFRA" if m.infra_error else "PASS" if m.is_successful else "FAIL",
        cost=_rounded_usd(m.cost.total if m.cost is not None else None),
    )


def _group_rates(scored: Iterable[ScenarioMetrics], key: str) -> dict[str, GroupRate]:
    groups: dict[str, list[ScenarioMetrics]] = {}
    for metrics in scored:
        groups.setdefault(getattr(metrics, key) or "unknown", []).append(metrics)
    out = {}
    for name in sorted(groups):
        rate = _rate(groups[name], lambda m: m.is_successful)
        out[name] = GroupRate(n=rate.total, succeeded=rate.passed, interval=rate.interval)
    return out


def _token_usage(metrics: Sequence[ScenarioMetrics]) -> dict[str, Usage]:
    totals = {role: Usage() for role in _ROLES}
    for record in metrics:
        for role, usage in record.token_usage.items():
            totals[role] = totals.get(role, Usage()) + usage
    return totals


def _cost(
    metrics: Sequence[ScenarioMetrics], configuration: RunConfiguration | None
) -> tuple[RoleCosts | None, tuple[str, ...]]:
    """The run's cost per role (None without prices) and the models that have no price.

    A scenario recorded without a cost (before prices were set, on resume) makes its roles'
    costs unknown: a partial sum would look like the whole."""
    costs = [m.cost for m in metrics]
    if not any(cost is not None for cost in costs):
        return None, ()
    total = RoleCosts()
    for cost in costs:
        total = total + (cost if cost is not None else RoleCosts(agent=None, user=None, judge=None))
    unpriced = sorted(
        {
            model
            for role in _ROLES
            if total.role(role) is None
            and (model := configuration.model(role) if configuration else None)
        }
    )
    return total, tuple(unpriced)


def _nl_signal(
    scored: Sequence[ScenarioMetrics], configuration: RunConfiguration | None
) -> NlSignal:
    judged = [m for m in scored if m.nl_applicable]
    clusters: dict[str, tuple[int, int]] = {}
    for m in judged:  # the assertions of a task's scenarios are one cluster
        passed, units = clusters.get(m.task_id, (0, 0))
        clusters[m.task_id] = (
            passed + (m.nl_assertion_pass_count or 0),
            units + m.nl_assertion_total,
        )
    if not judged:
        no_judge = configuration is None or configuration.judge is None
        reason = "no judge configured" if no_judge else "no scored scenario has NL assertions"
        return NlSignal(rate=None, reason=reason)
    return NlSignal(
        rate=Rate(
            passed=sum(m.nl_assertion_pass_count or 0 for m in judged),
            total=sum(m.nl_assertion_total for m in judged),
            interval=_clustered(clusters),
        ),
        scenarios=len(judged),
        scenarios_passed=sum(1 for m in judged if (m.nl_assertion_pass_rate or 0.0) >= 1.0),
    )


def _judge_replies(metrics: Sequence[ScenarioMetrics]) -> JudgeReplies:
    total = 0
    for record in metrics:
        stats = record.requests.get("judge")
        if stats is not None:
            total += stats.requests - stats.failed
    return JudgeReplies(
        total=total, unreadable=sum(record.judge_unreadable_replies for record in metrics)
    )


def judge_format_line(summary: RunSummary) -> str | None:
    """The line that says the judge does not follow the reply format (most of its replies of
    the run could not be read), or that some replies could not be read; None when all could."""
    replies = summary.judge_replies
    if not replies.unreadable:
        return None
    counted = f"{replies.unreadable} of {replies.total} judge replies could not be read"
    consequence = policy_for(summary.profile).judge_unreadable_consequence
    if replies.follows_format:
        return f"Judge: {counted} ({consequence})"
    return (
        f"JUDGE DOES NOT FOLLOW THE REPLY FORMAT: {counted} ({consequence}); check that "
        "the judge model answers with the JSON object its prompt asks for"
    )


def _run_profile(metrics: Sequence[ScenarioMetrics], configuration: RunConfiguration | None) -> str:
    """The run's profile: the one its scenarios record (``mixed`` when they disagree), else
    the configured one, else ``default``."""
    recorded = {m.profile for m in metrics}
    if len(recorded) == 1:
        return recorded.pop()
    if len(recorded) > 1:
        return MIXED
    configured = configuration.profile if configuration is not None else None
    return configured or ProfileName.DEFAULT.value


def build_summary(
    metrics: Sequence[ScenarioMetrics],
    *,
    expected: Sequence[str] | None,
    trials: int,
    configuration: RunConfiguration | None,
    versions: Mapping[str, str],
    lost: Mapping[str, str] | Sequence[str] = (),
    not_run: Sequence[str] = (),
) -> RunSummary:
    """The figures of ``summary.json`` from the scenarios' metrics.

    ``not_run``: scenarios the budget kept from starting; they are neither lost nor scored.

    ``expected``: the scenario ids the run meant to produce (None when unknown); those without
    metrics are lost, as are the ids in ``lost`` (a mapping gives each one's reason, e.g. an
    unreadable ``metrics.json``). ``configuration`` (secrets already redacted) and
    ``versions`` are recorded as given. Each scenario id must appear once in ``metrics`` (else
    ``ValueError``). ``counts.expected`` is every scenario of the run, reported or lost, so
    ``expected == scored + infra_errors + lost`` and ``scored == succeeded + failed``.
    """
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    ordered = sorted(metrics, key=ScenarioMetrics.sort_key)
    ids = [m.scenario_id for m in ordered]
    duplicates = sorted(name for name, n in Counter(ids).items() if n > 1)
    if duplicates:
        raise ValueError(f"scenarios reported more than once: {', '.join(duplicates)}")
    reported = set(ids)
    reasons = dict(lost) if isinstance(lost, Mapping) else dict.fromkeys(lost, "")
    unstarted = sorted(set(not_run) - reported, key=scenario_order)
    missing = set(reasons) | (set(expected or ()) - reported)
    lost_ids = sorted(missing - reported - set(unstarted), key=scenario_order)
    cost, unpriced = _cost(ordered, configuration)

    infra = [m for m in ordered if m.infra_error]
    scored = [m for m in ordered if not m.infra_error]
    success = _rate(scored, lambda m: m.is_successful)

    profile = _run_profile(ordered, configuration)
    policy = policy_for(profile)
    by_task: dict[str, list[bool]] = {}
    for record in scored:
        counted = policy.pass_k_outcome(
            is_successful=record.is_successful, reward=record.tau2_reward
        )
        if counted is not None:
            by_task.setdefault(record.task_id, []).append(counted)
    pass_k = []
    if policy.reports_pass_k(trials):
        for k in range(1, trials + 1):
            value, tasks = pass_hat_k(by_task, k)
            _, interval = pass_hat_k_interval(
                [(sum(flags), len(flags)) for _, flags in sorted(by_task.items())], k
            )
            pass_k.append(PassHatK(k=k, value=value, tasks=tasks, ci95=interval))
    flaky = (
        tuple(
            FlakyTask(task_id=task_id, passed=sum(flags), trials=len(flags))
            for task_id, flags in sorted(by_task.items(), key=lambda item: _task_sort_key(item[0]))
            if 0 < sum(flags) < len(flags)
        )
        if trials > 1
        else ()
    )

    judge_scores = [m.judge_score for m in scored if m.judge_score is not None]
    stop_reasons = Counter(m.stop_reason for m in ordered)
    rewards = [m.tau2_reward for m in scored if m.tau2_reward is not None]
    return RunSummary(
        profile=profile,
        configuration=configuration,
        versions=dict(versions),
        trials=trials,
        counts=Counts(
            expected=len(ordered) + len(lost_ids) + len(unstarted),
            reported=len(ordered),
            scored=len(scored),
            succeeded=success.passed,
            failed=len(scored) - success.passed,
            infra_errors=len(infra),
            lost=len(lost_ids),
            not_run=len(unstarted),
        ),
        success_rate=success,
        task_success_rate=_rate(scored, lambda m: m.is_task_successful),
        db_state_match=SignalRate(rate=_rate(scored, lambda m: m.db_state_match), gating=True),
        clean_exit=SignalRate(rate=_rate(scored, lambda m: m.clean_exit), gating=True),
        nl_assertion=_nl_signal(scored, configuration),
        action_match=SignalRate(rate=_rate(scored, lambda m: m.is_action_match), gating=False),
        judge_score=Mean(mean=_mean(judge_scores), n=len(judge_scores)),
        tau2_reward=Mean(mean=_mean(rewards), n=len(rewards)),
        tau2_reward_not_scorable=len(scored) - len(rewards),
        pass_hat_k=tuple(pass_k),
        stop_reasons=dict(sorted(stop_reasons.items(), key=lambda item: (-item[1], item[0]))),
        token_usage=_token_usage(ordered),
        by_split=_group_rates(scored, "split"),
        by_persona=_group_rates(scored, "persona_name"),
        infra_errors=tuple(
            InfraErrorRow(scenario_id=m.scenario_id, detail=m.stop_detail) for m in infra
        ),
        lost=tuple(lost_ids),
        lost_reasons={key: reasons[key] for key in lost_ids if reasons.get(key)},
        judge_replies=_judge_replies(ordered),
        flaky_tasks=flaky,
        scenarios=tuple(_row(m) for m in ordered),
        cost=cost,
        unpriced_models=unpriced,
        not_run=tuple(unstarted),
    )


def _task_sort_key(task_id: str) -> tuple[float, str]:
    return (float(int(task_id)) if task_id.isdigit() else math.inf), task_id


def scenario_order(scenario_id: str) -> tuple[float, str]:
    """The sort key of a scenario id: ``tau2_retail__12-trial3`` sorts by 12 then the text."""
    tail = scenario_id.rpartition("__")[2]
    number = tail.partition("-")[0]
    return (float(int(number)) if number.isdigit() else math.inf), scenario_id


def _percent(rate: Rate, unit: str) -> str:
    """``62.28% (71/114 scenarios) [53.1, 70.6]``: the rate, its counts, its 95% interval."""
    if rate.rate is None:
        return f"n/a (0 {unit})"
    interval = rate.ci95
    shown = f" {interval.percent_text()}" if interval is not None else ""
    return f"{100 * rate.rate:.2f}% ({rate.passed}/{rate.total} {unit}){shown}"


def _pass_k_value(entry: PassHatK) -> str:
    """``0.3333 [0.2083, 0.4667]`` (no interval when none could be computed)."""
    if entry.value is None:
        return "n/a"
    interval = entry.ci95
    shown = f" [{fixed(interval.low, 4)}, {fixed(interval.high, 4)}]" if interval else ""
    return f"{entry.value:.4f}{shown}"


def _flag(value: bool) -> str:
    return "ok" if value else "FAIL"


def usd(value: float | None) -> str:
    """A cost for people: ``$0.0123``, ``n/a`` when unknown."""
    if value is None:
        return "n/a"
    return f"${value:,.4f}" if value < 100 else f"${value:,.2f}"


def cost_lines(summary: RunSummary, *, indent: str = "") -> list[str]:
    """``Cost: ...`` per role and in total, and which models have no price (none without
    prices)."""
    cost = summary.cost
    if cost is None:
        return []
    roles = ", ".join(f"{role} {usd(cost.role(role))}" for role in _ROLES)
    lines = [f"{indent}Cost (USD): {usd(cost.total)} total ({roles})"]
    if summary.unpriced_models:
        lines.append(
            f"{indent}  no price for model(s) {', '.join(summary.unpriced_models)}: add them "
            "to --tau2-prices"
        )
    return lines


def _scenario_lines(rows: Sequence[ScenarioRow]) -> list[str]:
    width = max([len("scenario"), *(len(row.scenario_id) for row in rows)])
    priced = any(row.cost is not None for row in rows)
    lines = [
        f"{'scenario':<{width}}  result  DB    EXIT  NL     turns  duration  "
        + ("cost       " if priced else "")
        + "stop reason",
    ]
    for row in rows:
        infra = row.status == "INFRA"
        if row.nl_assertion_pass_count is not None:
            nl = f"{row.nl_assertion_pass_count}/{row.nl_assertion_total}"
        else:
            nl = "n/a"
        lines.append(
            f"{row.scenario_id:<{width}}  {row.status:<6}  "
            f"{'-' if infra else _flag(row.db_state_match):<4}  "
            f"{'-' if infra else _flag(row.clean_exit):<4}  "
            f"{'-' if infra else nl:<5}  {row.total_turns!s:>5}  "
            f"{f'{row.duration_seconds:.1f}s':>8}  "
            + (f"{usd(row.cost):<9}  " if priced else "")
            + row.stop_reason
        )
    return lines


def pass_hat_k_line(summary: RunSummary) -> str | None:
    """``pass^1 0.5000, pass^2 0.2500 (4 tasks)`` for a multi-trial run, else None."""
    if not summary.pass_hat_k:
        return None
    shown = ", ".join(f"pass^{e.k} {_pass_k_value(e)}" for e in summary.pass_hat_k)
    return f"{shown} ({_tasks(summary.pass_hat_k[0].tasks)})"


def _tasks(count: int) -> str:
    return f"{count} task" if count == 1 else f"{count} tasks"


def _reward_line(summary: RunSummary) -> str:
    reward = summary.tau2_reward
    unscored = summary.tau2_reward_not_scorable
    note = f"; {unscored} not scorable without a judge" if unscored else ""
    if reward.mean is None:
        return f"tau2 reward (upstream): n/a (0 scenarios{note})"
    return f"tau2 reward (upstream): mean {reward.mean:.4f} over {reward.n} scenarios{note}"


def _pass_k_lines(summary: RunSummary) -> list[str]:
    return [f"pass^{e.k}: {_pass_k_value(e)} ({_tasks(e.tasks)})" for e in summary.pass_hat_k]


def flaky_lines(summary: RunSummary) -> list[str]:
    """The tasks whose trials disagree (trials > 1), one line each."""
    if summary.trials < 2:
        return []
    tasks = summary.flaky_tasks
    out = [f"Flaky tasks (trials disagree): {len(tasks)}"]
    out.extend(f"  task {t.task_id}: {t.passed}/{t.trials} trials passed" for t in tasks)
    return out


def _signal_lines(summary: RunSummary) -> dict[Signal, str]:
    nl = summary.nl_assertion
    if nl.rate is not None:
        nl_line = (
            f"NL-Assertion pass: {_percent(nl.rate, 'assertions')}; "
            f"{nl.scenarios_passed}/{nl.scenarios} scenarios with all assertions met"
        )
    else:
        nl_line = f"NL-Assertion pass: not applicable ({nl.reason})"
    return {
        Signal.DB_STATE_MATCH: (
            f"DB-State match: {_percent(summary.db_state_match.rate, 'scenarios')}"
        ),
        Signal.CLEAN_EXIT: f"Clean exit: {_percent(summary.clean_exit.rate, 'scenarios')}",
        Signal.NL_ASSERTION: nl_line,
        Signal.ACTION_MATCH: (
            "Action match (excluded from success): "
            f"{_percent(summary.action_match.rate, 'scenarios')}"
        ),
    }


def headline_lines(summary: RunSummary, *, pass_k: str | None = None) -> list[str]:
    """The overall and per-signal rates: the lines a terminal summary shows, headed as the
    run's profile heads them (tau2: upstream's reward and pass^k first, our signals labelled).

    ``pass_k``: a one-line pass^k (:func:`pass_hat_k_line`) to show after the first rate when
    the headline does not already show pass^k.
    """
    policy = policy_for(summary.profile)
    signals = _signal_lines(summary)
    rates = [
        f"Overall success rate: {_percent(summary.success_rate, 'scenarios')}",
        "Task success rate (CLEAN_EXIT ignored): "
        f"{_percent(summary.task_success_rate, 'scenarios')}",
        *(signals[signal] for signal in policy.scored_signals()),
    ]
    reward = [_reward_line(summary), *_pass_k_lines(summary)]
    return policy.headline(reward=reward, signals=rates, pass_k=pass_k)


def _informational_reward_lines(summary: RunSummary) -> list[str]:
    reward = summary.tau2_reward
    if reward.mean is not None:
        line = f"tau2 reward (informational): mean {reward.mean:.4f} over {reward.n}"
    else:
        line = "tau2 reward (informational): n/a (0 scenarios)"
    return policy_for(summary.profile).informational([line, *_pass_k_lines(summary)])


def render_summary_text(summary: RunSummary) -> str:
    """``all_summary.txt``: the figures of :func:`build_summary`, for people."""
    counts = summary.counts
    out = ["tau2 retail benchmark: run summary", ""]
    out.append(f"Profile:     {summary.profile}")
    out.append(f"Agent model: {summary.model('agent') or 'not recorded'}")
    out.append(f"User model:  {summary.model('user') or 'not recorded'}")
    out.append(f"Judge model: {summary.model('judge') or 'none (NL assertions not judged)'}")
    out.append(f"Trials:      {summary.trials}")
    out.append("")
    out.append(
        f"Scenarios: {counts.expected} expected, {counts.scored} scored "
        f"({counts.succeeded} succeeded, {counts.failed} failed), "
        f"{counts.infra_errors} infra error{'' if counts.infra_errors == 1 else 's'}, "
        f"{counts.lost} lost" + (f", {counts.not_run} not run (budget)" if counts.not_run else "")
    )
    out.append("")
    out.extend(_scenario_lines(summary.scenarios))
    out.append("")
    out.extend(headline_lines(summary))
    judge_format = judge_format_line(summary)
    if judge_format is not None:
        out.append(judge_format)
    judge = summary.judge_score
    if judge.mean is not None:
        out.append(f"Judge score (informational): mean {judge.mean:.3f} over {judge.n}")
    out.extend(_informational_reward_lines(summary))
    out.append(INTERVAL_NOTE)
    flaky = flaky_lines(summary)
    if flaky:
        out.append("")
        out.extend(flaky)
    out.append("")
    out.append("Stop reasons: " + ", ".join(f"{r} {n}" for r, n in summary.stop_reasons.items()))
    out.append(f"Infra errors (excluded from rates): {counts.infra_errors}")
    out.extend(f"  {e.scenario_id}: {e.detail or 'no detail'}" for e in summary.infra_errors)
    out.append(f"Lost scenarios (no metrics; excluded from rates): {counts.lost}")
    for scenario_id in summary.lost:
        reason = summary.lost_reasons.get(scenario_id)
        out.append(f"  {scenario_id}: {reason}" if reason else f"  {scenario_id}")
    if counts.not_run:
        out.append(f"Not run (budget; excluded from rates, resumable): {counts.not_run}")
        out.extend(f"  {scenario_id}" for scenario_id in summary.not_run)
    out.append("")
    out.append("Token usage:")
    for role, usage in summary.token_usage.items():
        hits = f", {usage.cache_hits} from the cache" if usage.cache_hits else ""
        out.append(
            f"  {role:<5}  {usage.n_calls} call{'' if usage.n_calls == 1 else 's'}, "
            f"{usage.prompt} prompt, {usage.completion} completion tokens{hits}"
        )
    out.extend(cost_lines(summary, indent="  "))
    for title, groups in (("split", summary.by_split), ("persona", summary.by_persona)):
        out.append("")
        out.append(f"Success rate by {title}:")
        width = max([0, *(len(name) for name in groups)])
        for name, group in groups.items():
            out.append(f"  {name:<{width}}  {_percent(group.as_rate, 'scenarios')}")
        if not groups:
            out.append("  (no scored scenarios)")
    return "\n".join(out) + "\n"


class SummaryInputs(TypedDict):
    """What :func:`build_summary` takes beside the metrics (``lost`` and ``not_run`` optional)."""

    expected: Sequence[str] | None
    trials: int
    configuration: RunConfiguration | None
    versions: Mapping[str, str]
    lost: NotRequired[Mapping[str, str] | Sequence[str]]
    not_run: NotRequired[Sequence[str]]


def write_run_summary(
    run_dir: Path, metrics: Sequence[ScenarioMetrics], **inputs: Unpack[SummaryInputs]
) -> RunSummary:
    """Write ``all_metrics.json``, ``summary.json`` and ``all_summary.txt``; return the summary.

    Controller process only. ``inputs`` are those of :func:`build_summary`.
    """
    run_dir = Path(run_dir)
    summary = build_summary(metrics, **inputs)
    ordered = sorted(metrics, key=ScenarioMetrics.sort_key)
    write_json_atomic(
        run_dir / ALL_METRICS_FILE,
        cut_long_texts(codec.encode(ordered, list[ScenarioMetrics])),
    )
    write_json_atomic(run_dir / SUMMARY_JSON_FILE, codec.encode(summary))
    write_text_atomic(run_dir / SUMMARY_TEXT_FILE, render_summary_text(summary))
    return summary


def write_run_args(run_dir: Path, args: RunArgs) -> None:
    """Write ``run_args.json`` atomically (secrets already redacted by the caller)."""
    write_json_atomic(Path(run_dir) / RUN_ARGS_FILE, codec.encode(args))


def read_run_args(run_dir: Path) -> RunArgs | None:
    """``run_args.json`` of a run, None when there is none; :class:`ArtifactError` if unusable."""
    path = Path(run_dir) / RUN_ARGS_FILE
    if not path.is_file():
        return None
    return codec.read(RunArgs, path)


def read_summary(run_dir: Path) -> RunSummary | None:
    """``summary.json`` of a run, None when there is none; :class:`ArtifactError` if unusable."""
    path = Path(run_dir) / SUMMARY_JSON_FILE
    if not path.is_file():
        return None
    return codec.read(RunSummary, path)


def summarize(run_dir: Path) -> RunSummary:
    """Rebuild the run summaries of ``run_dir`` from its artifacts (the ``summarize`` command).

    Trials, expected scenarios, configuration and versions come from ``run_args.json``; without
    it, from the earlier ``summary.json`` (never replaced by empty values), else from the
    metrics. Unreadable ``metrics.json`` files count as lost, with their reason.
    """
    run_dir = Path(run_dir)
    loaded = load_run_metrics(run_dir)
    if loaded.misplaced:
        more = f" (and {len(loaded.misplaced) - 1} more)" if len(loaded.misplaced) > 1 else ""
        raise ArtifactError(
            f"{run_dir} is not a readable run: {loaded.misplaced[0]}{more}; move or remove it"
        )
    run_args = read_run_args(run_dir)
    if run_args is None and not loaded.records and not loaded.incomplete:
        raise ArtifactError(
            f"{run_dir} has no run_args.json and no scenario metrics (no <scenario>/metrics.json "
            "or <scenario>/trial-<k>/metrics.json); is it a run directory?"
        )
    try:
        earlier = read_summary(run_dir)
    except ArtifactError:
        earlier = None
    # scenarios the budget kept from starting are recorded in the summary only
    not_run = earlier.not_run if earlier else ()
    if run_args is not None:
        # run_args.json is written before the first scenario starts: every expected scenario
        # without a whole record is listed as lost, even when the run was killed at once
        reported = {m.scenario_id for m in loaded.records}
        reasons = dict.fromkeys(
            (key for key in run_args.expected if key not in reported and key not in not_run),
            NO_RESULT,
        )
        reasons.update(loaded.incomplete)
        return write_run_summary(
            run_dir,
            loaded.records,
            expected=run_args.expected,
            trials=run_args.trials,
            configuration=run_args.configuration,
            versions=run_args.versions,
            lost=reasons,
            not_run=not_run,
        )
    trials = max((m.trial for m in loaded.records), default=1)
    return write_run_summary(
        run_dir,
        loaded.records,
        expected=[row.scenario_id for row in earlier.scenarios] if earlier else None,
        trials=earlier.trials if earlier else trials,
        configuration=earlier.configuration if earlier else None,
        versions=earlier.versions if earlier else {},
        lost=loaded.incomplete,
        not_run=not_run,
    )
