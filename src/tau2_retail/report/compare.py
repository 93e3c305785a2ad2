"""Comparing two runs for the report: rate differences and flipped scenarios.

Both sides are :class:`~tau2_retail.results.records.RunSummary` records (``summary.json``);
scenarios are matched by task and trial (whatever the runs' trial counts make of their ids).
The paired comparison (the flips both ways, the one-sided exact McNemar p-value of a
regression, the difference of the paired rates with its 95% interval) is the CI gate's
(:func:`tau2_retail.results.gate.pair_runs`).
Used by ``python -m tau2_retail report RUN --against OTHER``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tau2_retail.results.gate import p_text, pair_runs
from tau2_retail.results.records import GroupRate, Rate, RunSummary, ScenarioRow
from tau2_retail.results.stats import Interval, PairedComparison, fixed

__all__ = ["compare_summaries", "comparison_lines", "paired_line"]

_SHOWN_FLIPS = 20  # in the terminal; the page lists them all


def _rate_entry(
    name: str, group: str, current: Rate | None, baseline: Rate | None
) -> dict[str, Any]:
    def parts(rate: Rate | None) -> tuple[float | None, str]:
        if rate is None or rate.rate is None:
            return None, "n/a"
        return rate.rate, f"{rate.passed}/{rate.total}"

    def bounds(rate: Rate | None) -> list[float] | None:
        interval = rate.ci95 if rate is not None else None
        return [interval.low, interval.high] if interval is not None else None

    cur, cur_text = parts(current)
    base, base_text = parts(baseline)
    return {
        "name": name,
        "group": group,
        "kind": "rate",
        "current": cur,
        "baseline": base,
        "current_text": cur_text,
        "baseline_text": base_text,
        "current_ci95": bounds(current),
        "baseline_ci95": bounds(baseline),
        "delta": None if cur is None or base is None else cur - base,
    }


def _mean_entry(
    name: str, group: str, current: tuple[float | None, int], baseline: tuple[float | None, int]
) -> dict[str, Any]:
    (cur, cur_n), (base, base_n) = current, baseline
    return {
        "name": name,
        "group": group,
        "kind": "mean",
        "current": cur,
        "baseline": base,
        "current_text": f"n={cur_n}",
        "baseline_text": f"n={base_n}",
        "delta": None if cur is None or base is None else cur - base,
    }


def _group_rate(group: GroupRate | None) -> Rate | None:
    return group.as_rate if group is not None else None


def _paired_json(paired: PairedComparison) -> dict[str, Any]:
    interval: Interval | None = paired.interval
    return {
        "pairs": paired.pairs,
        "both": paired.both,
        "broken": paired.broken,
        "fixed": paired.fixed,
        "neither": paired.neither,
        "p_value": paired.p_value,
        "difference": paired.difference,
        "ci95": [interval.low, interval.high] if interval is not None else None,
    }


def _signal_rates(summary: RunSummary) -> dict[str, Rate | None]:
    return {
        "DB-State match": summary.db_state_match.rate,
        "Clean exit": summary.clean_exit.rate,
        "NL-Assertion pass": summary.nl_assertion.rate,
        "Action match (excluded)": summary.action_match.rate,
    }


def _changed_signals(row: ScenarioRow, before: ScenarioRow) -> list[str]:
    changed = []
    if row.db_state_match != before.db_state_match:
        changed.append("DB_STATE_MATCH")
    # null where the scenario's profile does not score it (tau2), also on one side only: a
    # baseline written before summaries said so (false), or of the other profile (--force)
    if None not in (row.clean_exit, before.clean_exit) and row.clean_exit != before.clean_exit:
        changed.append("CLEAN_EXIT")
    if row.nl_assertion_pass_rate != before.nl_assertion_pass_rate:
        changed.append("NL_ASSERTION")
    if row.is_action_match != before.is_action_match:
        changed.append("ACTION_MATCH")
    return changed


def compare_summaries(current: RunSummary, baseline: RunSummary) -> dict[str, Any]:
    """Rate differences and flipped scenarios between two runs' summaries.

    ``rates``: one entry per figure (overall and task success, each signal, tau2 reward,
    judge score, pass^k, each split and persona) with both values and ``delta`` (current
    minus baseline; None when either is not applicable). ``flips``: the scenarios present in
    both whose status changed, ``kind`` ``fixed`` (now PASS), ``broken`` (was PASS) or
    ``changed`` (to or from INFRA), with the signals that changed (named by the current run's
    scenario ids). ``only_current`` and ``only_baseline``: the scenarios (task and trial) of
    one run only. ``paired``: the scenarios scored in
    both runs paired by task and trial: the 2x2 table (``both``, ``broken`` pass->fail,
    ``fixed`` fail->pass, ``neither``), the one-sided exact McNemar ``p_value`` of a regression,
    and the ``difference`` of the paired success rates (current minus baseline) with its
    ``ci95`` (Newcombe's hybrid score interval for paired data).
    """
    # matched by task and trial, as the pairs are: a one-trial run's tau2_retail__5 is trial 1
    # of a baseline whose ids are tau2_retail__5-trial1 (an upstream file of several trials)
    current_by = {(r.task_id, r.trial): r for r in current.scenarios}
    baseline_by = {(r.task_id, r.trial): r for r in baseline.scenarios}
    both = [key for key in current_by if key in baseline_by]
    current_rows = {current_by[key].scenario_id: current_by[key] for key in both}
    baseline_rows = {current_by[key].scenario_id: baseline_by[key] for key in both}
    return {
        "rates": _rates(current, baseline),
        "flips": _flips(current_rows, baseline_rows),
        # by the current run's ids: the report shows the baseline's status beside its rows
        "baseline_status": {k: r.status for k, r in baseline_rows.items()},
        "only_current": [r.scenario_id for k, r in current_by.items() if k not in baseline_by],
        "only_baseline": [r.scenario_id for k, r in baseline_by.items() if k not in current_by],
        "paired": _paired_json(pair_runs(current, baseline)),
    }


def _rates(current: RunSummary, baseline: RunSummary) -> list[dict[str, Any]]:
    """One entry per figure, in the order the comparison shows them."""
    rates = [
        _rate_entry("Overall success", "headline", current.success_rate, baseline.success_rate),
        _rate_entry(
            "Task success", "headline", current.task_success_rate, baseline.task_success_rate
        ),
    ]
    baseline_signals = _signal_rates(baseline)
    for label, rate in _signal_rates(current).items():
        rates.append(_rate_entry(label, "signal", rate, baseline_signals[label]))
    for name, cur_mean, base_mean in (
        ("tau2 reward (mean)", current.tau2_reward, baseline.tau2_reward),
        ("Judge score (mean)", current.judge_score, baseline.judge_score),
    ):
        rates.append(
            _mean_entry(
                name, "informational", (cur_mean.mean, cur_mean.n), (base_mean.mean, base_mean.n)
            )
        )
    current_k = {e.k: e for e in current.pass_hat_k}
    baseline_k = {e.k: e for e in baseline.pass_hat_k}
    for k in sorted(current_k.keys() | baseline_k.keys()):
        cur_k, base_k = current_k.get(k), baseline_k.get(k)
        rates.append(
            _mean_entry(
                f"pass^{k}",
                "pass^k",
                (cur_k.value, cur_k.tasks) if cur_k else (None, 0),
                (base_k.value, base_k.tasks) if base_k else (None, 0),
            )
        )
    for label, cur_groups, base_groups in (
        ("split", current.by_split, baseline.by_split),
        ("persona", current.by_persona, baseline.by_persona),
    ):
        for name in sorted(cur_groups.keys() | base_groups.keys()):
            rates.append(
                _rate_entry(
                    f"{label} {name}",
                    label,
                    _group_rate(cur_groups.get(name)),
                    _group_rate(base_groups.get(name)),
                )
            )
    return rates


def _flips(
    current_rows: Mapping[str, ScenarioRow], baseline_rows: Mapping[str, ScenarioRow]
) -> list[dict[str, Any]]:
    """The scenarios of both runs whose status changed, with the signals that changed."""
    flips = []
    for scenario_id, row in current_rows.items():
        before = baseline_rows.get(scenario_id)
        if before is None or before.status == row.status:
            continue
        if row.status == "PASS":
            kind = "fixed"
        elif before.status == "PASS" and row.status == "FAIL":
            kind = "broken"
        else:
            kind = "changed"
        flips.append(
            {
                "id": scenario_id,
                "kind": kind,
                "baseline": before.status,
                "current": row.status,
                "signals": _changed_signals(row, before),
            }
        )
    return flips


def _delta_text(entry: Mapping[str, Any]) -> str:
    delta = entry["delta"]
    if delta is None:
        return "n/a"
    if entry["kind"] == "rate":
        return f"{100 * delta:+.2f} pp"
    return f"{delta:+.4f}"


def _value_text(entry: Mapping[str, Any], side: str) -> str:
    value = entry[side]
    if value is None:
        return "n/a"
    if entry["kind"] == "rate":
        bounds = entry.get(f"{side}_ci95")
        shown = f" [{fixed(100 * bounds[0], 1)}, {fixed(100 * bounds[1], 1)}]" if bounds else ""
        return f"{100 * value:.2f}% ({entry[f'{side}_text']}){shown}"
    return f"{value:.4f}"


def paired_line(paired: Mapping[str, Any]) -> str:
    """``paired by task and trial: 6 pairs, 3 pass->fail, 0 fail->pass, one-sided exact
    McNemar p=0.125; difference -50.00 pp [-81.2, -0.0]``."""
    line = (
        f"paired by task and trial: {paired['pairs']} pairs, {paired['broken']} pass->fail, "
        f"{paired['fixed']} fail->pass, one-sided exact McNemar {p_text(paired['p_value'])}"
    )
    if paired["difference"] is not None and paired["ci95"] is not None:
        low, high = paired["ci95"]
        line += (
            f"; difference {100 * paired['difference']:+.2f} pp "
            f"[{fixed(100 * low, 1)}, {fixed(100 * high, 1)}]"
        )
    return line


def comparison_lines(comparison: Mapping[str, Any]) -> list[str]:
    """The comparison as text for the terminal: rate differences, then the flipped scenarios."""
    lines = [f"against {comparison['name']}:"]
    for entry in comparison["rates"]:
        if entry["current"] is None and entry["baseline"] is None:
            continue
        lines.append(
            f"  {entry['name']:<28} {_value_text(entry, 'current'):>24}  vs "
            f"{_value_text(entry, 'baseline'):>24}  {_delta_text(entry)}"
        )
    flips = comparison["flips"]
    counts = {
        kind: sum(1 for f in flips if f["kind"] == kind) for kind in ("fixed", "broken", "changed")
    }
    lines.append(
        f"flipped: {counts['fixed']} fixed, {counts['broken']} broken, {counts['changed']} other"
    )
    lines.append(paired_line(comparison["paired"]))
    lines.extend(f"  {f['id']}: {f['baseline']} -> {f['current']}" for f in flips[:_SHOWN_FLIPS])
    if len(flips) > _SHOWN_FLIPS:
        lines.append(f"  ... and {len(flips) - _SHOWN_FLIPS} more (see the report)")
    for key, label in (
        ("only_current", "only in this run"),
        ("only_baseline", "only in the baseline"),
    ):
        if comparison[key]:
            lines.append(f"{label}: {len(comparison[key])} scenarios")
    return lines
