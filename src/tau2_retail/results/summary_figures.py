"""The figures of a run summary, computed from the scenarios' records (pure functions).

:func:`tau2_retail.results.summary.build_summary` assembles them into a
:class:`~tau2_retail.results.records.RunSummary`; the counting rules are in that module's
docstring.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.engine.profiles import policy_for
from tau2_retail.models.messages import Usage
from tau2_retail.models.prices import RoleCosts
from tau2_retail.results.records import (
    FlakyTask,
    GroupRate,
    JudgeReplies,
    Mean,
    NlSignal,
    PassHatK,
    Rate,
    RunConfiguration,
    ScenarioRow,
    SignalRate,
)
from tau2_retail.results.stats import WILSON, Interval, clustered_interval
from tau2_retail.results.stats import pass_hat_k as pass_hat_k_interval

__all__ = [
    "cost_of",
    "group_rates",
    "judge_replies",
    "pass_hat_k",
    "rates_of",
    "row_of",
    "stop_reasons",
    "token_usage",
    "trial_figures",
]

_ROLES = ("agent", "user", "judge")
#: why CLEAN_EXIT has no rate when no scored scenario's profile scores it
CLEAN_EXIT_NOT_SCORED = (
    "not scored by the tau2 profile (upstream's reward: a customer's stop ends too)"
)


def clustered(clusters: Mapping[str, tuple[int, int]]) -> Interval | None:
    """The interval of a rate over tasks' ``(passed, units)``; None when it is Wilson's (the
    record computes that one itself)."""
    interval = clustered_interval(list(clusters.values()))
    return None if interval is None or interval.method == WILSON else interval


def rate_of(scored: Sequence[ScenarioMetrics], flag: Callable[[ScenarioMetrics], bool]) -> Rate:
    """The share of ``scored`` with ``flag``; the trials of a task form one cluster."""
    clusters: dict[str, tuple[int, int]] = {}
    for metrics in scored:
        passed, units = clusters.get(metrics.task_id, (0, 0))
        clusters[metrics.task_id] = (passed + bool(flag(metrics)), units + 1)
    return Rate(
        passed=sum(bool(flag(m)) for m in scored),
        total=len(scored),
        interval=clustered(clusters),
    )


def mean_of(values: Sequence[float]) -> float | None:
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
    return mean_of(values), len(values)


def rounded_usd(value: float | None) -> float | None:
    # micro-dollars, as metrics.json records them
    return None if value is None else round(value, 6)


#: the fields a summary row copies from its scenario's metrics (the others are derived)
_ROW_COPIES = tuple(
    f.name
    for f in dataclasses.fields(ScenarioRow)
    if f.name not in ("status", "cost", "clean_exit")
)


def row_of(m: ScenarioMetrics) -> ScenarioRow:
    return ScenarioRow(
        **{name: getattr(m, name) for name in _ROW_COPIES},
        clean_exit=m.clean_exit if m.clean_exit_applicable else None,
        status="INFRA" if m.infra_error else "PASS" if m.is_successful else "FAIL",
        cost=rounded_usd(m.cost.total if m.cost is not None else None),
    )


def group_rates(scored: Iterable[ScenarioMetrics], key: str) -> dict[str, GroupRate]:
    groups: dict[str, list[ScenarioMetrics]] = {}
    for metrics in scored:
        groups.setdefault(getattr(metrics, key) or "unknown", []).append(metrics)
    out = {}
    for name in sorted(groups):
        rate = rate_of(groups[name], lambda m: m.is_successful)
        out[name] = GroupRate(n=rate.total, succeeded=rate.passed, interval=rate.interval)
    return out


def token_usage(metrics: Sequence[ScenarioMetrics]) -> dict[str, Usage]:
    totals = {role: Usage() for role in _ROLES}
    for record in metrics:
        for role, usage in record.token_usage.items():
            totals[role] = totals.get(role, Usage()) + usage
    return totals


def cost_of(
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
            and (model := configuration.priced_model(role) if configuration else None)
        }
    )
    return total, tuple(unpriced)


def clean_exit_signal(scored: Sequence[ScenarioMetrics]) -> SignalRate:
    """CLEAN_EXIT over the scored scenarios whose profile scores it: not applicable when none
    does (a tau2-profile run, an imported upstream one), not 0% of them."""
    applicable = [m for m in scored if m.clean_exit_applicable]
    if scored and not applicable:
        return SignalRate(rate=None, gating=True, reason=CLEAN_EXIT_NOT_SCORED)
    return SignalRate(rate=rate_of(applicable, lambda m: m.clean_exit), gating=True)


def nl_signal(
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
            interval=clustered(clusters),
        ),
        scenarios=len(judged),
        scenarios_passed=sum(1 for m in judged if (m.nl_assertion_pass_rate or 0.0) >= 1.0),
    )


def judge_replies(metrics: Sequence[ScenarioMetrics]) -> JudgeReplies:
    total = 0
    for record in metrics:
        stats = record.requests.get("judge")
        if stats is not None:
            total += stats.requests - stats.failed
    return JudgeReplies(
        total=total, unreadable=sum(record.judge_unreadable_replies for record in metrics)
    )


def rates_of(
    scored: Sequence[ScenarioMetrics], configuration: RunConfiguration | None
) -> dict[str, Any]:
    """The summary's rates and means over the scored scenarios, by field name."""
    judge_scores = [m.judge_score for m in scored if m.judge_score is not None]
    rewards = [m.tau2_reward for m in scored if m.tau2_reward is not None]
    return {
        "success_rate": rate_of(scored, lambda m: m.is_successful),
        "task_success_rate": rate_of(scored, lambda m: m.is_task_successful),
        "db_state_match": SignalRate(rate=rate_of(scored, lambda m: m.db_state_match), gating=True),
        "clean_exit": clean_exit_signal(scored),
        "nl_assertion": nl_signal(scored, configuration),
        "action_match": SignalRate(rate=rate_of(scored, lambda m: m.is_action_match), gating=False),
        "judge_score": Mean(mean=mean_of(judge_scores), n=len(judge_scores)),
        "tau2_reward": Mean(mean=mean_of(rewards), n=len(rewards)),
        "tau2_reward_not_scorable": len(scored) - len(rewards),
    }


def stop_reasons(ordered: Sequence[ScenarioMetrics]) -> dict[str, int]:
    stop_reasons = Counter(m.stop_reason for m in ordered)
    return dict(sorted(stop_reasons.items(), key=lambda item: (-item[1], item[0])))


def trial_figures(
    scored: Sequence[ScenarioMetrics], *, trials: int, profile: str
) -> tuple[tuple[PassHatK, ...], tuple[FlakyTask, ...]]:
    """pass^k for k = 1..trials (when the profile reports it) and the flaky tasks."""
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
    if trials < 2:
        return tuple(pass_k), ()
    flaky = tuple(
        FlakyTask(task_id=task_id, passed=sum(flags), trials=len(flags))
        for task_id, flags in sorted(by_task.items(), key=lambda item: task_sort_key(item[0]))
        if 0 < sum(flags) < len(flags)
    )
    return tuple(pass_k), flaky


def task_sort_key(task_id: str) -> tuple[float, str]:
    return (float(int(task_id)) if task_id.isdigit() else math.inf), task_id
