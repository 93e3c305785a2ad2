"""Comparing two runs for the report: rate differences and flipped scenarios.

Both sides are ``summary.json`` figures
(:func:`tau2_retail.results.summary.build_summary`); scenarios are matched by scenario id.
Used by ``python -m tau2_retail report RUN --against OTHER``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["compare_summaries", "comparison_lines"]

_SHOWN_FLIPS = 20  # in the terminal; the page lists them all

_SIGNALS = ("DB_STATE_MATCH", "CLEAN_EXIT", "NL_ASSERTION", "ACTION_MATCH")
_ROW_SIGNALS = {
    "db_state_match": "DB_STATE_MATCH",
    "clean_exit": "CLEAN_EXIT",
    "is_action_match": "ACTION_MATCH",
}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _rate_entry(
    name: str, group: str, current: Mapping[str, Any] | None, baseline: Mapping[str, Any] | None
) -> dict[str, Any]:
    def parts(rate: Mapping[str, Any] | None) -> tuple[float | None, str]:
        if not rate or rate.get("rate") is None:
            return None, "n/a"
        return float(rate["rate"]), f"{rate.get('passed')}/{rate.get('total')}"

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
        "delta": None if cur is None or base is None else cur - base,
    }


def _mean_entry(
    name: str, group: str, current: Mapping[str, Any], baseline: Mapping[str, Any], value: str
) -> dict[str, Any]:
    cur, base = _number(current.get(value)), _number(baseline.get(value))
    return {
        "name": name,
        "group": group,
        "kind": "mean",
        "current": cur,
        "baseline": base,
        "current_text": f"n={current.get('n', current.get('tasks', 0))}",
        "baseline_text": f"n={baseline.get('n', baseline.get('tasks', 0))}",
        "delta": None if cur is None or base is None else cur - base,
    }


def _group_rate(group: Any) -> dict[str, Any] | None:
    if not isinstance(group, dict):
        return None
    return {
        "passed": group.get("succeeded"),
        "total": group.get("n"),
        "rate": group.get("success_rate"),
    }


def _signal_rate(signal: Any) -> dict[str, Any] | None:
    if not isinstance(signal, dict) or signal.get("applicable") is False:
        return None
    return signal


def compare_summaries(current: Mapping[str, Any], baseline: Mapping[str, Any]) -> dict[str, Any]:
    """Rate differences and flipped scenarios between two runs' ``summary.json`` figures.

    ``rates``: one entry per figure (overall and task success, each signal, tau2 reward,
    judge score, pass^k, each split and persona) with both values and ``delta`` (current
    minus baseline; None when either is not applicable). ``flips``: the scenarios present in
    both whose status changed, ``kind`` ``fixed`` (now PASS), ``broken`` (was PASS) or
    ``changed`` (to or from INFRA), with the signals that changed. ``only_current`` and
    ``only_baseline``: scenario ids present in one run only.
    """
    rates = [
        _rate_entry(
            "Overall success", "headline", current["success_rate"], baseline["success_rate"]
        ),
        _rate_entry(
            "Task success", "headline", current["task_success_rate"], baseline["task_success_rate"]
        ),
    ]
    labels = {
        "DB_STATE_MATCH": "DB-State match",
        "CLEAN_EXIT": "Clean exit",
        "NL_ASSERTION": "NL-Assertion pass",
        "ACTION_MATCH": "Action match (excluded)",
    }
    for signal in _SIGNALS:
        rates.append(
            _rate_entry(
                labels[signal],
                "signal",
                _signal_rate(current["signals"].get(signal)),
                _signal_rate(baseline["signals"].get(signal)),
            )
        )
    rates.append(
        _mean_entry(
            "tau2 reward (mean)",
            "informational",
            current["tau2_reward"],
            baseline["tau2_reward"],
            "mean",
        )
    )
    rates.append(
        _mean_entry(
            "Judge score (mean)",
            "informational",
            current["judge_score"],
            baseline["judge_score"],
            "mean",
        )
    )
    current_k = {e.get("k"): e for e in current["pass_hat_k"] if isinstance(e, dict)}
    baseline_k = {e.get("k"): e for e in baseline["pass_hat_k"] if isinstance(e, dict)}
    for k in sorted(set(current_k) | set(baseline_k), key=lambda v: (not isinstance(v, int), v)):
        rates.append(
            _mean_entry(f"pass^{k}", "pass^k", current_k.get(k, {}), baseline_k.get(k, {}), "value")
        )
    for key, label in (("by_split", "split"), ("by_persona", "persona")):
        for name in sorted(set(current[key]) | set(baseline[key])):
            rates.append(
                _rate_entry(
                    f"{label} {name}",
                    label,
                    _group_rate(current[key].get(name)),
                    _group_rate(baseline[key].get(name)),
                )
            )

    current_rows = {str(r["scenario_id"]): r for r in current["scenarios"]}
    baseline_rows = {str(r["scenario_id"]): r for r in baseline["scenarios"]}
    flips = []
    for scenario_id, row in current_rows.items():
        before = baseline_rows.get(scenario_id)
        if before is None or before.get("status") == row.get("status"):
            continue
        if row.get("status") == "PASS":
            kind = "fixed"
        elif before.get("status") == "PASS" and row.get("status") == "FAIL":
            kind = "broken"
        else:
            kind = "changed"
        changed = [
            signal
            for key, signal in _ROW_SIGNALS.items()
            if bool(row.get(key)) != bool(before.get(key))
        ]
        if row.get("nl_assertion_pass_rate") != before.get("nl_assertion_pass_rate"):
            changed.insert(2, "NL_ASSERTION")
        flips.append(
            {
                "id": scenario_id,
                "kind": kind,
                "baseline": before.get("status"),
                "current": row.get("status"),
                "signals": changed,
            }
        )
    return {
        "rates": rates,
        "flips": flips,
        "baseline_status": {k: r.get("status") for k, r in baseline_rows.items()},
        "only_current": [k for k in current_rows if k not in baseline_rows],
        "only_baseline": [k for k in baseline_rows if k not in current_rows],
    }


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
        return f"{100 * value:.2f}% ({entry[f'{side}_text']})"
    return f"{value:.4f}"


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
