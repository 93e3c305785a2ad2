"""The run summary for people: ``all_summary.txt`` and the lines the terminal shows.

Pure functions of a :class:`~tau2_retail.results.records.RunSummary` (computed by
:mod:`tau2_retail.results.summary`); the profile of the run heads its figures
(:meth:`~tau2_retail.engine.profiles.ProfilePolicy.headline`).
"""

from __future__ import annotations

from collections.abc import Sequence

from tau2_retail.engine.profiles import policy_for
from tau2_retail.engine.scoring import Signal
from tau2_retail.results.records import PassHatK, Rate, RunSummary, ScenarioRow, SignalRate
from tau2_retail.results.stats import fixed
from tau2_retail.results.stopped_spending import StopCause

__all__ = [
    "INTERVAL_NOTE",
    "cost_lines",
    "flaky_lines",
    "headline_lines",
    "interrupted_by_text",
    "judge_format_line",
    "pass_hat_k_line",
    "render_summary_text",
    "usd",
]

_ROLES = ("agent", "user", "judge")

#: how the ``[low, high]`` intervals of the text summaries were computed
INTERVAL_NOTE = (
    "Intervals [low, high]: 95%, Wilson score; a bootstrap over tasks where a task "
    "gives several units (trials, NL assertions); see docs/statistics.md"
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


def _signal_percent(signal: SignalRate) -> str:
    """A scenario signal's :func:`_percent`, or ``not applicable (why)``."""
    if signal.rate is None:
        return f"not applicable ({signal.reason})"
    return _percent(signal.rate, "scenarios")


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


#: what stopped scenarios in flight, as the cost lines name it (:class:`StopCause`)
_STOPPED_BY = {
    StopCause.INTERRUPT: "the interrupt",
    StopCause.MAXFAIL: "-x/--maxfail",
    StopCause.TIMEOUT: "a timeout",
    StopCause.SESSION_END: "the session's end",
}


def interrupted_by_text(summary: RunSummary) -> str | None:
    """What stopped the scenarios of ``interrupted_cost``: ``the interrupt``, ``-x/--maxfail
    and a timeout`` (None: the summary does not say)."""
    names = [_STOPPED_BY[cause] for cause in summary.interrupted_by]
    if len(names) < 2:
        return names[0] if names else None
    return f"{', '.join(names[:-1])} and {names[-1]}"


def _stopped_scenarios(summary: RunSummary) -> list[tuple[float | None, str]]:
    """Each amount stopped scenarios had spent, with who they are: ``the scenarios the
    budget stopped unscored``."""
    by = interrupted_by_text(summary)
    return [
        (summary.not_run_cost, "the scenarios the budget stopped unscored"),
        (
            summary.interrupted_cost,
            "the scenarios stopped in flight unscored"
            if by is None
            else f"the scenarios {by} stopped unscored",
        ),
    ]


def cost_lines(summary: RunSummary, *, indent: str = "") -> list[str]:
    """``Cost: ...`` per role and in total, what the scenarios the budget stopped unscored,
    and those stopped in flight (by an interrupt, -x...), had spent, and which models have no
    price (none without prices)."""
    cost = summary.cost
    lines = []
    if cost is not None:
        roles = ", ".join(f"{role} {usd(cost.role(role))}" for role in _ROLES)
        lines.append(f"{indent}Cost (USD): {usd(cost.total)} total ({roles})")
    for amount, scenarios in _stopped_scenarios(summary):
        if not amount:
            continue
        stopped = f"{usd(amount)} spent by {scenarios}"
        if cost is not None:
            lines.append(f"{indent}  and {stopped} (no record: not in the total)")
        elif lines:  # a line without a total already leads
            lines.append(f"{indent}  and {stopped}")
        elif summary.counts.scored:  # records without a cost (scored without --tau2-prices)
            lines.append(
                f"{indent}Cost (USD): n/a (no scored scenario's record has a cost); {stopped}"
            )
        else:
            lines.append(f"{indent}Cost (USD): no scenario scored; {stopped}")
    if cost is not None and summary.unpriced_models:
        lines.append(
            f"{indent}  no price for model(s) {', '.join(summary.unpriced_models)}: add them "
            "to --tau2-prices"
        )
    return lines


def _scenario_lines(rows: Sequence[ScenarioRow]) -> list[str]:
    """A line per scenario; a signal the scenario's profile does not score reads ``n/a``."""
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
            f"{'-' if infra else 'n/a' if row.clean_exit is None else _flag(row.clean_exit):<4}  "
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
        Signal.DB_STATE_MATCH: (f"DB-State match: {_signal_percent(summary.db_state_match)}"),
        Signal.CLEAN_EXIT: f"Clean exit: {_signal_percent(summary.clean_exit)}",
        Signal.NL_ASSERTION: nl_line,
        Signal.ACTION_MATCH: (
            f"Action match (excluded from success): {_signal_percent(summary.action_match)}"
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
    """``all_summary.txt``: the figures of ``build_summary``, for people."""
    out = _header_lines(summary)
    out.extend(_scenario_lines(summary.scenarios))
    out.append("")
    out.extend(headline_lines(summary))
    out.extend(_informational_lines(summary))
    out.append("")
    out.extend(_excluded_lines(summary))
    out.append("")
    out.extend(_usage_lines(summary))
    out.extend(_group_lines(summary))
    return "\n".join(out) + "\n"


def _header_lines(summary: RunSummary) -> list[str]:
    counts = summary.counts
    return [
        "tau2 retail benchmark: run summary",
        "",
        f"Profile:     {summary.profile}",
        f"Agent model: {summary.model('agent') or 'not recorded'}",
        f"User model:  {summary.model('user') or 'not recorded'}",
        f"Judge model: {summary.model('judge') or 'none (NL assertions not judged)'}",
        f"Trials:      {summary.trials}",
        "",
        f"Scenarios: {counts.expected} expected, {counts.scored} scored "
        f"({counts.succeeded} succeeded, {counts.failed} failed), "
        f"{counts.infra_errors} infra error{'' if counts.infra_errors == 1 else 's'}, "
        f"{counts.lost} lost" + (f", {counts.not_run} not run (budget)" if counts.not_run else ""),
        "",
    ]


def _informational_lines(summary: RunSummary) -> list[str]:
    """The judge's format line, the judge score, the informational reward, the interval note
    and the flaky tasks."""
    out = []
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
    return out


def _excluded_lines(summary: RunSummary) -> list[str]:
    """The stop reasons, and the scenarios left out of the rates (infra, lost, not run)."""
    counts = summary.counts
    out = ["Stop reasons: " + ", ".join(f"{r} {n}" for r, n in summary.stop_reasons.items())]
    out.append(f"Infra errors (excluded from rates): {counts.infra_errors}")
    out.extend(f"  {e.scenario_id}: {e.detail or 'no detail'}" for e in summary.infra_errors)
    out.append(f"Lost scenarios (no metrics; excluded from rates): {counts.lost}")
    for scenario_id in summary.lost:
        reason = summary.lost_reasons.get(scenario_id)
        out.append(f"  {scenario_id}: {reason}" if reason else f"  {scenario_id}")
    if counts.not_run:
        out.append(f"Not run (budget; excluded from rates, resumable): {counts.not_run}")
        out.extend(f"  {scenario_id}" for scenario_id in summary.not_run)
    return out


def _usage_lines(summary: RunSummary) -> list[str]:
    out = ["Token usage:"]
    for role, usage in summary.token_usage.items():
        hits = f", {usage.cache_hits} from the cache" if usage.cache_hits else ""
        out.append(
            f"  {role:<5}  {usage.n_calls} call{'' if usage.n_calls == 1 else 's'}, "
            f"{usage.prompt} prompt, {usage.completion} completion tokens{hits}"
        )
    out.extend(cost_lines(summary, indent="  "))
    return out


def _group_lines(summary: RunSummary) -> list[str]:
    out = []
    for title, groups in (("split", summary.by_split), ("persona", summary.by_persona)):
        out.append("")
        out.append(f"Success rate by {title}:")
        width = max([0, *(len(name) for name in groups)])
        for name, group in groups.items():
            out.append(f"  {name:<{width}}  {_percent(group.as_rate, 'scenarios')}")
        if not groups:
            out.append("  (no scored scenarios)")
    return out
