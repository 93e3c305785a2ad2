"""The tables ``bench_concurrency.py`` prints: its runs, side by side with upstream tau2's
measured figures, start-up CPU per process and phase, and the targets."""

from __future__ import annotations

from typing import Any

from _measure import machine_line
from _tables import Column, column_table, print_targets, run_columns, table, verdict

TARGETS = {
    "c114_wall_over_ideal": 1.2,
    "c114_rss_mb": 250.0,
    "cpu_ms_per_completion": 1.5,
    "c456_wall_over_ideal": 1.2,
    "c912_wall_over_ideal": 1.3,
    "c912n2_wall_over_ideal": 1.2,
    "c912_rss_mb": 400.0,
    "offline_one_scenario_cpu_s": 1.5,
}
UPSTREAM = (
    # upstream tau2's own runner on the same work (114 tasks, 1 s per completion), measured on
    # this machine: see docs/performance.md
    ("upstream tau2, --max-concurrency 114", 114, "341 s", "84 ms", "2.1 GB"),
    ("upstream tau2, --max-concurrency 114 --workers 2", 114, "164-205 s", "", ""),
)
PHASES = (
    ("interpreter + pytest", None, "plugin_imported"),
    ("plugins (tau2, xdist, asyncio; rewriting)", "plugin_imported", "configured"),
    ("import openai", "openai_start", "openai_imported"),
    ("data (tasks, policy, seed, verified)", "data_start", "data_loaded"),
    ("rest of collection", None, None),
    ("to the first test", "collected", "first_test"),
)


def side_by_side(runs: list[dict[str, Any]]) -> str:
    """The runs beside upstream's figures for the same work: in flight, wall/ideal, CPU per
    completion, peak RSS, the load average before and after each run."""
    rows = [
        [
            r["label"],
            max(r["workers"], 1),
            max(r["workers"], 1) * r["concurrency"],
            f"{r['scored']}/{r['scenarios']}",
            r["infra_errors"],
            f"{r['wall_s']:.1f} s",
            f"{r['wall_over_ideal']:.2f}",
            f"{r['harness_cpu_ms_per_completion']:.2f} ms",
            f"{r['max_rss_mb']:.0f} MB",
            f"{r['load_average_before'][0]:.1f} / {r['load_average_after'][0]:.1f}",
        ]
        for r in runs
    ]
    rows += [
        [name, "", flight, "", "", wall, "", cpu, rss, ""]
        for name, flight, wall, cpu, rss in UPSTREAM
    ]
    headers = [
        "run",
        "processes",
        "in flight",
        "scored",
        "infra errors",
        "wall",
        "wall / ideal",
        "harness CPU / completion",
        "peak RSS (largest process)",
        "load before / after",
    ]
    return table(headers, rows)


def _checks(runs: list[dict[str, Any]], offline_cpu: float) -> list[list[Any]]:
    by_label = {r["label"]: r for r in runs}
    checks: list[list[Any]] = []
    for label, key in (
        ("c114", "c114_wall_over_ideal"),
        ("c456", "c456_wall_over_ideal"),
        ("c912", "c912_wall_over_ideal"),
        ("c912n2", "c912n2_wall_over_ideal"),
    ):
        if label in by_label:
            checks.append(
                [f"{label} wall / ideal", TARGETS[key], by_label[label]["wall_over_ideal"]]
            )
    for label in ("c114", "c912"):
        if label in by_label:
            key = f"{label}_rss_mb"
            checks.append([f"{label} peak RSS MB", TARGETS[key], by_label[label]["max_rss_mb"]])
    for r in runs:
        checks.append(
            [
                f"{r['label']} harness CPU ms/completion",
                TARGETS["cpu_ms_per_completion"],
                r["harness_cpu_ms_per_completion"],
            ]
        )
        checks.append([f"{r['label']} infra errors", 0, r["infra_errors"]])
    checks.append(
        ["one scenario offline CPU s", TARGETS["offline_one_scenario_cpu_s"], offline_cpu]
    )
    return checks


def report(figures: dict[str, Any]) -> None:
    print(
        f"{machine_line(figures)}; latency {figures['latency_s']} s; "
        f"interpreter {figures['python']}\n"
    )
    runs = figures["runs"]
    print(column_table(RUNS_COLUMNS, runs))
    print("\nSide by side with upstream tau2 (1 s per completion, 114 tasks)\n")
    print(side_by_side(runs))
    print("\nPer process: start-up CPU s by phase, total CPU s, peak RSS MB\n")
    print(_processes_table(runs))
    offline = figures["offline"]
    cpu = sorted(row["cpu_s"] for row in offline)[len(offline) // 2]
    print(
        f"\nOne scenario offline, command to exit: CPU median {cpu:.2f} s "
        f"(runs {', '.join(format(row['cpu_s'], '.2f') for row in offline)}), "
        f"wall {', '.join(format(row['wall_s'], '.2f') for row in offline)} s"
    )
    checks = _checks(runs, cpu)
    print_targets([[*row, verdict(row[2], row[1])] for row in checks])


RUNS_COLUMNS: tuple[Column, ...] = (
    ("run", "label"),
    ("-n", "workers"),
    ("concurrency", "concurrency"),
    *run_columns("completions_agree"),
    ("last reply to exit s", "last_reply_to_exit_s"),
    ("tree CPU s", "tree_cpu_s"),
    ("harness CPU ms/completion", "harness_cpu_ms_per_completion"),
    ("server CPU ms/completion", "server_cpu_ms_per_completion"),
    ("peak RSS MB (largest process)", "max_rss_mb"),
    (
        "reference work ms before / after",
        lambda r: " / ".join(format(ms, ".1f") for ms in r.get("reference_ms", ())),
    ),
    (
        "a file ms before / after",
        lambda r: " / ".join(format(ms, ".2f") for ms in r.get("file_ms", ())),
    ),
)
"""The main table: one row per run."""


def _processes_table(runs: list[dict[str, Any]]) -> str:
    """Per process of each run: start-up CPU by phase, total CPU, peak RSS."""
    names = [name for name, _, _ in PHASES] + ["total before the first test"]
    rows = []
    for r in runs:
        for p in r["processes"]:
            rows.append(
                [
                    r["label"],
                    p["role"],
                    *(p["phases_cpu_s"].get(name, float("nan")) for name in names),
                    p["cpu_s"],
                    p["maxrss_mb"],
                ]
            )
    return table(["run", "process", *names, "CPU s", "peak RSS MB"], rows)
