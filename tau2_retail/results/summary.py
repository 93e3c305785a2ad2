"""Run-level summaries (spec: conversation_and_scoring.md §1 pass^k, §4 signals, §6 artifacts).

:func:`build_summary` turns the scenarios' ``metrics.json`` records into the figures of
``summary.json``; :func:`render_summary_text` writes them as ``all_summary.txt``. Both are pure.
:func:`write_run_summary` writes ``all_metrics.json``, ``summary.json`` and ``all_summary.txt``
(only the controller process calls it), and :func:`summarize_command` rebuilds them from the
artifacts of a run folder (``python -m tau2_retail summarize RUN_DIR``).

Counting rules:

- A scenario ended by ``infra_error`` is not the model's failure: it is listed and left out of
  every rate's denominator (pass^k included). A *lost* scenario (expected, but no metrics, e.g.
  its worker was killed) is listed and left out too.
- NL_ASSERTION is denominated in assertions, over the scenarios where it was applicable.
- ACTION_MATCH is shown but excluded from success; the judge score and the tau2 reward are
  informational.

``run_args.json`` (written by the pytest plugin through :func:`write_run_args`) may hold
``trials`` (int), ``expected`` (scenario ids), ``configuration`` and ``versions`` (objects);
``summarize`` reads those keys and ignores the others.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tau2_retail.errors import ArtifactError
from tau2_retail.results.artifacts import load_run_metrics, metrics_sort_key
from tau2_retail.results.atomic import write_json_atomic, write_text_atomic

__all__ = [
    "ALL_METRICS_FILE",
    "RUN_ARGS_FILE",
    "SUMMARY_JSON_FILE",
    "SUMMARY_TEXT_FILE",
    "build_summary",
    "headline_lines",
    "pass_hat_k",
    "render_summary_text",
    "summarize_command",
    "write_run_args",
    "write_run_summary",
]

ALL_METRICS_FILE = "all_metrics.json"
SUMMARY_JSON_FILE = "summary.json"
SUMMARY_TEXT_FILE = "all_summary.txt"
RUN_ARGS_FILE = "run_args.json"

_ROLES = ("agent", "user", "judge")
_TOKEN_FIELDS = ("n_calls", "prompt", "completion")


def _is_infra(metrics: Mapping[str, Any]) -> bool:
    return bool(metrics.get("infra_error")) or metrics.get("stop_reason") == "infra_error"


def _rate(passed: int, total: int) -> dict[str, Any]:
    return {"passed": passed, "total": total, "rate": passed / total if total else None}


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _number(value: Any) -> float:
    """A JSON number as float; anything else (missing, null) counts as 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


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


def _profile(metrics: Sequence[Mapping[str, Any]], configuration: Mapping[str, Any]) -> str:
    """The run's profile: the one its scenarios record, else the configured one, else default."""
    recorded = {str(m["profile"]) for m in metrics if m.get("profile")}
    if len(recorded) == 1:
        return recorded.pop()
    if len(recorded) > 1:
        return "mixed"
    settings = configuration.get("settings")
    configured = settings.get("profile") if isinstance(settings, Mapping) else None
    return str(configured or configuration.get("profile") or "default")


def _model_name(configuration: Mapping[str, Any], role: str) -> str | None:
    """``configuration["<role>_model"]``, else ``configuration[role]["model"]``."""
    flat = configuration.get(f"{role}_model")
    if flat:
        return str(flat)
    nested = configuration.get(role)
    if isinstance(nested, Mapping) and nested.get("model"):
        return str(nested["model"])
    return None


def _row(metrics: Mapping[str, Any]) -> dict[str, Any]:
    infra = _is_infra(metrics)
    successful = bool(metrics.get("is_successful"))
    nl_total = _count(metrics.get("nl_assertion_total"))
    nl_applicable = "nl_assertion_pass_rate" in metrics
    return {
        "scenario_id": metrics.get("scenario_id"),
        "task_id": metrics.get("task_id"),
        "trial": metrics.get("trial"),
        "status": "INFRA" if infra else "PASS" if successful else "FAIL",
        "is_successful": successful,
        "is_task_successful": bool(metrics.get("is_task_successful")),
        "db_state_match": bool(metrics.get("db_state_match")),
        "clean_exit": bool(metrics.get("clean_exit")),
        "nl_assertion_pass_rate": metrics.get("nl_assertion_pass_rate"),
        "nl_assertion_pass_count": (
            _count(metrics.get("nl_assertion_pass_count")) if nl_applicable else None
        ),
        "nl_assertion_total": nl_total,
        "is_action_match": bool(metrics.get("is_action_match")),
        "judge_score": metrics.get("judge_score"),
        "tau2_reward": metrics.get("tau2_reward"),
        "stop_reason": metrics.get("stop_reason"),
        "total_turns": metrics.get("total_turns"),
        "duration_seconds": metrics.get("duration_seconds"),
    }


def _group_rates(scored: Iterable[Mapping[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[bool]] = {}
    for metrics in scored:
        groups.setdefault(str(metrics.get(key) or "unknown"), []).append(
            bool(metrics.get("is_successful"))
        )
    rates = {}
    for name in sorted(groups):
        flags = groups[name]
        succeeded = sum(flags)
        rates[name] = {
            "n": len(flags),
            "succeeded": succeeded,
            "success_rate": succeeded / len(flags),
        }
    return rates


def _token_usage(metrics: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    totals = {role: dict.fromkeys(_TOKEN_FIELDS, 0) for role in _ROLES}
    for record in metrics:
        usage = record.get("token_usage")
        if not isinstance(usage, Mapping):
            continue
        for role in _ROLES:
            counts = usage.get(role)
            if isinstance(counts, Mapping):
                for field in _TOKEN_FIELDS:
                    totals[role][field] += _count(counts.get(field))
    return totals


def _nl_signal(
    scored: Sequence[Mapping[str, Any]], configuration: Mapping[str, Any]
) -> dict[str, Any]:
    judged = [m for m in scored if "nl_assertion_pass_rate" in m]
    if not judged:
        reason = (
            "no judge configured"
            if _model_name(configuration, "judge") is None
            else "no scored scenario has NL assertions"
        )
        return {"applicable": False, "reason": reason, "gating": True, "unit": "assertions"}
    passed = sum(_count(m.get("nl_assertion_pass_count")) for m in judged)
    total = sum(_count(m.get("nl_assertion_total")) for m in judged)
    scenarios_passed = sum(1 for m in judged if _number(m.get("nl_assertion_pass_rate")) >= 1.0)
    return {
        "applicable": True,
        "gating": True,
        "unit": "assertions",
        **_rate(passed, total),
        "scenarios": len(judged),
        "scenarios_passed": scenarios_passed,
    }


def build_summary(
    metrics: Sequence[Mapping[str, Any]],
    *,
    expected: Sequence[str] | None,
    trials: int,
    configuration: Mapping[str, Any],
    versions: Mapping[str, str],
    lost: Sequence[str] = (),
) -> dict[str, Any]:
    """The figures of ``summary.json`` (plain JSON values) from the scenarios' metrics.

    ``expected``: the scenario ids the run meant to produce (None when unknown); those without
    metrics are lost, as are the ids in ``lost``. ``configuration`` (secrets already redacted)
    and ``versions`` are recorded as given; the header reads the models from
    ``configuration["agent_model"]`` (or ``configuration["agent"]["model"]``), and likewise for
    ``user`` and ``judge``. Each scenario id must appear once in ``metrics`` (else
    ``ValueError``). ``counts.expected`` is every scenario of the run, reported or lost, so
    ``expected == scored + infra_errors + lost`` and ``scored == succeeded + failed``.
    """
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    ordered = sorted(metrics, key=metrics_sort_key)
    ids = [str(m.get("scenario_id")) for m in ordered]
    duplicates = sorted(name for name, n in Counter(ids).items() if n > 1)
    if duplicates:
        raise ValueError(f"scenarios reported more than once: {', '.join(duplicates)}")
    reported = set(ids)
    missing = set(lost) | (set(expected or ()) - reported)
    lost_ids = sorted(missing - reported, key=_id_sort_key)

    infra = [m for m in ordered if _is_infra(m)]
    scored = [m for m in ordered if not _is_infra(m)]
    succeeded = sum(1 for m in scored if m.get("is_successful"))
    n = len(scored)

    by_task: dict[str, list[bool]] = {}
    for record in scored:
        by_task.setdefault(str(record.get("task_id")), []).append(bool(record.get("is_successful")))
    profile = _profile(ordered, configuration)
    pass_k = []
    if trials > 1 or profile == "tau2":
        for k in range(1, trials + 1):
            value, tasks = pass_hat_k(by_task, k)
            pass_k.append({"k": k, "value": value, "tasks": tasks})

    judge_scores = [_number(m["judge_score"]) for m in scored if m.get("judge_score") is not None]
    stop_reasons = Counter(str(m.get("stop_reason")) for m in ordered)
    rewards = [_number(m.get("tau2_reward")) for m in scored if m.get("tau2_reward") is not None]
    return {
        "profile": profile,
        "configuration": dict(configuration),
        "versions": dict(versions),
        "models": {role: _model_name(configuration, role) for role in _ROLES},
        "trials": trials,
        "counts": {
            "expected": len(ordered) + len(lost_ids),
            "reported": len(ordered),
            "scored": n,
            "succeeded": succeeded,
            "failed": n - succeeded,
            "infra_errors": len(infra),
            "lost": len(lost_ids),
        },
        "success_rate": _rate(succeeded, n),
        "task_success_rate": _rate(sum(1 for m in scored if m.get("is_task_successful")), n),
        "signals": {
            "DB_STATE_MATCH": {
                "gating": True,
                **_rate(sum(1 for m in scored if m.get("db_state_match")), n),
            },
            "CLEAN_EXIT": {
                "gating": True,
                **_rate(sum(1 for m in scored if m.get("clean_exit")), n),
            },
            "NL_ASSERTION": _nl_signal(scored, configuration),
            "ACTION_MATCH": {
                "gating": False,
                "excluded": True,
                **_rate(sum(1 for m in scored if m.get("is_action_match")), n),
            },
        },
        "judge_score": {"mean": _mean(judge_scores), "n": len(judge_scores)},
        "tau2_reward": {"mean": _mean(rewards), "n": len(rewards)}
        | ({"not_scorable": n - len(rewards)} if profile == "tau2" else {}),
        "pass_hat_k": pass_k,
        "stop_reasons": dict(sorted(stop_reasons.items(), key=lambda item: (-item[1], item[0]))),
        "token_usage": _token_usage(ordered),
        "by_split": _group_rates(scored, "split"),
        "by_persona": _group_rates(scored, "persona_name"),
        "infra_errors": [
            {"scenario_id": m.get("scenario_id"), "detail": m.get("stop_detail", "")} for m in infra
        ],
        "lost": lost_ids,
        "scenarios": [_row(m) for m in ordered],
    }


def _id_sort_key(scenario_id: str) -> tuple[float, str]:
    """``tau2_retail__12-trial3`` sorts by 12 then the text (trial)."""
    tail = scenario_id.rpartition("__")[2]
    number = tail.partition("-")[0]
    return (float(int(number)) if number.isdigit() else math.inf), scenario_id


def _percent(rate: Mapping[str, Any], unit: str) -> str:
    if rate["rate"] is None:
        return f"n/a (0 {unit})"
    return f"{100 * rate['rate']:.2f}% ({rate['passed']}/{rate['total']} {unit})"


def _flag(value: bool) -> str:
    return "ok" if value else "FAIL"


def _scenario_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    width = max([len("scenario"), *(len(str(row["scenario_id"])) for row in rows)])
    lines = [
        f"{'scenario':<{width}}  result  DB    EXIT  NL     turns  duration  stop reason",
    ]
    for row in rows:
        infra = row["status"] == "INFRA"
        if row["nl_assertion_pass_count"] is not None:
            nl = f"{row['nl_assertion_pass_count']}/{row['nl_assertion_total']}"
        else:
            nl = "n/a"
        duration = row["duration_seconds"]
        shown = f"{duration:.1f}s" if isinstance(duration, int | float) else "-"
        lines.append(
            f"{row['scenario_id']!s:<{width}}  {row['status']:<6}  "
            f"{'-' if infra else _flag(row['db_state_match']):<4}  "
            f"{'-' if infra else _flag(row['clean_exit']):<4}  "
            f"{'-' if infra else nl:<5}  {row['total_turns']!s:>5}  {shown:>8}  "
            f"{row['stop_reason']}"
        )
    return lines


def _reward_line(summary: Mapping[str, Any]) -> str:
    reward = summary["tau2_reward"]
    unscored = reward.get("not_scorable", 0)
    note = f"; {unscored} not scorable without a judge" if unscored else ""
    if reward["mean"] is None:
        return f"tau2 reward (upstream): n/a (0 scenarios{note})"
    return f"tau2 reward (upstream): mean {reward['mean']:.4f} over {reward['n']} scenarios{note}"


def _pass_k_lines(summary: Mapping[str, Any]) -> list[str]:
    lines = []
    for entry in summary["pass_hat_k"]:
        value = "n/a" if entry["value"] is None else f"{entry['value']:.4f}"
        lines.append(f"pass^{entry['k']}: {value} ({entry['tasks']} tasks)")
    return lines


def headline_lines(summary: Mapping[str, Any]) -> list[str]:
    """The overall and per-signal rates: the lines a terminal summary shows.

    In the tau2 profile upstream's reward and pass^k come first; our signals follow, labelled.
    """
    signals = summary["signals"]
    out: list[str] = []
    tau2 = summary.get("profile") == "tau2"
    if tau2:
        out.append(_reward_line(summary))
        out.extend(_pass_k_lines(summary))
        out.append("Our signals (beside upstream's reward; CLEAN_EXIT not applicable):")
    out.append(f"Overall success rate: {_percent(summary['success_rate'], 'scenarios')}")
    out.append(
        f"Task success rate (CLEAN_EXIT ignored): "
        f"{_percent(summary['task_success_rate'], 'scenarios')}"
    )
    out.append(f"DB-State match: {_percent(signals['DB_STATE_MATCH'], 'scenarios')}")
    if not tau2:
        out.append(f"Clean exit: {_percent(signals['CLEAN_EXIT'], 'scenarios')}")
    nl = signals["NL_ASSERTION"]
    if nl["applicable"]:
        out.append(
            f"NL-Assertion pass: {_percent(nl, 'assertions')}; "
            f"{nl['scenarios_passed']}/{nl['scenarios']} scenarios with all assertions met"
        )
    else:
        out.append(f"NL-Assertion pass: not applicable ({nl['reason']})")
    out.append(
        f"Action match (excluded from success): {_percent(signals['ACTION_MATCH'], 'scenarios')}"
    )
    return out


def render_summary_text(summary: Mapping[str, Any]) -> str:
    """``all_summary.txt``: the figures of :func:`build_summary`, for people."""
    counts = summary["counts"]
    models = summary["models"]
    out = ["tau2 retail benchmark: run summary", ""]
    out.append(f"Profile:     {summary.get('profile', 'default')}")
    out.append(f"Agent model: {models['agent'] or 'not recorded'}")
    out.append(f"User model:  {models['user'] or 'not recorded'}")
    out.append(f"Judge model: {models['judge'] or 'none (NL assertions not judged)'}")
    out.append(f"Trials:      {summary['trials']}")
    out.append("")
    out.append(
        f"Scenarios: {counts['expected']} expected, {counts['scored']} scored "
        f"({counts['succeeded']} succeeded, {counts['failed']} failed), "
        f"{counts['infra_errors']} infra error{'' if counts['infra_errors'] == 1 else 's'}, "
        f"{counts['lost']} lost"
    )
    out.append("")
    out.extend(_scenario_lines(summary["scenarios"]))
    out.append("")
    out.extend(headline_lines(summary))
    judge = summary["judge_score"]
    if judge["mean"] is not None:
        out.append(f"Judge score (informational): mean {judge['mean']:.3f} over {judge['n']}")
    if summary.get("profile") != "tau2":
        reward = summary["tau2_reward"]
        if reward["mean"] is not None:
            out.append(f"tau2 reward (informational): mean {reward['mean']:.4f} over {reward['n']}")
        else:
            out.append("tau2 reward (informational): n/a (0 scenarios)")
        out.extend(_pass_k_lines(summary))
    out.append("")
    out.append("Stop reasons: " + ", ".join(f"{r} {n}" for r, n in summary["stop_reasons"].items()))
    out.append(f"Infra errors (excluded from rates): {counts['infra_errors']}")
    out.extend(
        f"  {e['scenario_id']}: {e['detail'] or 'no detail'}" for e in summary["infra_errors"]
    )
    out.append(f"Lost scenarios (no metrics; excluded from rates): {counts['lost']}")
    out.extend(f"  {scenario_id}" for scenario_id in summary["lost"])
    out.append("")
    out.append("Token usage:")
    for role, usage in summary["token_usage"].items():
        out.append(
            f"  {role:<5}  {usage['n_calls']} calls, {usage['prompt']} prompt, "
            f"{usage['completion']} completion tokens"
        )
    for title, key in (("split", "by_split"), ("persona", "by_persona")):
        out.append("")
        out.append(f"Success rate by {title}:")
        groups = summary[key]
        width = max([0, *(len(name) for name in groups)])
        for name, group in groups.items():
            rate = {
                "passed": group["succeeded"],
                "total": group["n"],
                "rate": group["success_rate"],
            }
            out.append(f"  {name:<{width}}  {_percent(rate, 'scenarios')}")
        if not groups:
            out.append("  (no scored scenarios)")
    return "\n".join(out) + "\n"


def write_run_summary(
    run_dir: Path,
    metrics: Sequence[Mapping[str, Any]],
    *,
    expected: Sequence[str] | None,
    trials: int,
    configuration: Mapping[str, Any],
    versions: Mapping[str, str],
    lost: Sequence[str] = (),
) -> dict[str, Any]:
    """Write ``all_metrics.json``, ``summary.json`` and ``all_summary.txt``; return the summary.

    Controller process only. The arguments are those of :func:`build_summary`.
    """
    run_dir = Path(run_dir)
    summary = build_summary(
        metrics,
        expected=expected,
        trials=trials,
        configuration=configuration,
        versions=versions,
        lost=lost,
    )
    write_json_atomic(run_dir / ALL_METRICS_FILE, sorted(metrics, key=metrics_sort_key))
    write_json_atomic(run_dir / SUMMARY_JSON_FILE, summary)
    write_text_atomic(run_dir / SUMMARY_TEXT_FILE, render_summary_text(summary))
    return summary


def write_run_args(run_dir: Path, args: Mapping[str, Any]) -> None:
    """Write ``run_args.json`` atomically (secrets already redacted by the caller).

    ``summarize`` reads its ``trials``, ``expected``, ``configuration`` and ``versions`` keys.
    """
    write_json_atomic(Path(run_dir) / RUN_ARGS_FILE, dict(args))


def _read_run_args(run_dir: Path) -> dict[str, Any]:
    """``run_args.json`` checked for the keys summarize uses; ``{}`` when there is none."""
    path = run_dir / RUN_ARGS_FILE
    try:
        raw = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise ArtifactError(f"cannot read {path}: {error}") from error
    except ValueError as error:
        raise ArtifactError(f"{path}: not valid JSON ({error})") from error
    if not isinstance(raw, dict):
        raise ArtifactError(f"{path}: expected a JSON object, got {type(raw).__name__}")
    trials = raw.get("trials")
    if trials is not None and (
        not isinstance(trials, int) or isinstance(trials, bool) or trials < 1
    ):
        raise ArtifactError(f"{path}: 'trials' must be an integer >= 1, got {trials!r}")
    expected = raw.get("expected")
    if expected is not None and not (
        isinstance(expected, list) and all(isinstance(item, str) for item in expected)
    ):
        raise ArtifactError(f"{path}: 'expected' must be a list of scenario ids")
    for key in ("configuration", "versions"):
        if raw.get(key) is not None and not isinstance(raw[key], dict):
            raise ArtifactError(f"{path}: {key!r} must be an object")
    return raw


def summarize_command(args: argparse.Namespace) -> int:
    """``summarize RUN_DIR``: rebuild the run summaries from its artifacts and print the text."""
    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        print(f"error: {run_dir} is not a directory", file=sys.stderr)
        return 2
    metrics = load_run_metrics(run_dir)
    if not metrics:
        print(
            f"error: {run_dir} has no scenario metrics (no <scenario>/metrics.json or "
            "<scenario>/trial-<k>/metrics.json); is it a run directory?",
            file=sys.stderr,
        )
        return 2
    run_args = _read_run_args(run_dir)
    trials = run_args.get("trials")
    if trials is None:
        trials = max(
            (t + 1 for m in metrics if isinstance(t := m.get("trial"), int) and t >= 0),
            default=1,
        )
    summary = write_run_summary(
        run_dir,
        metrics,
        expected=run_args.get("expected"),
        trials=trials,
        configuration=run_args.get("configuration") or {},
        versions=run_args.get("versions") or {},
    )
    sys.stdout.write(render_summary_text(summary))
    return 0
