"""The offline suite's own cost: wall time, CPU, memory, per-scenario harness time, scale.

Run from the repository root (about two minutes on 2 cores)::

    TAU2_DATA_DIR=/path/to/data .venv/bin/python benchmarks/bench_offline.py [--repeats 3]

Every figure comes from running the real command as a subprocess, exactly as a user types it
(plus ``--tau2-output-dir`` pointing at a temporary folder, deleted at the end):

- ``pytest --collect-only -q -k tau2_retail``, ``pytest -k tau2_retail -n 0`` and ``-n 2``
  (114 scenarios with the built-in oracle agent and scripted customer), ``--repeats`` times
  each: wall from the command to its exit (artifacts and
  summaries included), CPU of the whole process tree; medians are reported.
- One more run of each, with the probe of ``_measure`` (``-p _measure``): per process peak RSS
  and CPU, and per scenario test the set-up time pytest reports, which is the ``tau2_outcome``
  fixture: conversation + scoring + artifact writes (``metrics.json``'s ``duration_seconds`` is
  the conversation alone, reported beside it).
- In process, without pytest: the 114 scenarios' conversation + scoring and their artifact
  writes, timed apart (``perf_counter``), ``--repeats`` times.
- Scale: ``--tau2-trials 4`` (456 scenarios) at ``-n 8``; then, on its run directory, the time
  to build and write the run summaries with pass^k in process (what the controller does at the
  end, from the metrics it already holds) and ``python -m tau2_retail summarize RUN_DIR`` (reads
  every ``metrics.json`` first); and the artifacts' size per scenario.

Prints tables and writes ``benchmarks/results/offline.json``. Timings are never asserted.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _checkout  # noqa: F401  (this checkout's tau2_retail first)
from _measure import (
    ROOT,
    Run,
    artifact_sizes,
    load_average,
    machine,
    machine_line,
    median,
    percentile,
    run_suite,
    write_json,
)
from _tables import Column, column_table, parse_with_data, print_targets, table, verdict

TARGETS = {
    "n2_wall_s": 8.0,
    "collect_wall_s": 2.0,
    "worker_maxrss_mb": 150.0,
    "summary_s": 1.0,
}


def suite_args(out: Path, run_id: str, *extra: str) -> list[str]:
    return [
        "-k",
        "tau2_retail",
        "-q",
        f"--tau2-output-dir={out}",
        f"--tau2-run-id={run_id}",
        *extra,
    ]


def repeated(label: str, args_for: Any, repeats: int, probe_dir: Path) -> dict[str, Any]:
    """``repeats`` plain runs (wall, CPU) and one probed run (per process, per scenario)."""
    plain: list[Run] = []
    for number in range(repeats):
        run = run_suite(args_for(f"{label}-{number}"))
        plain.append(run)
        print(
            f"  {label} #{number + 1}: {run.wall_s:.2f} s wall, rc {run.returncode}, "
            f"load {load_average()[0]:.2f}: {run.last_line()}",
            flush=True,
        )
    probed = run_suite(args_for(f"{label}-probe"), probe_dir=probe_dir / label)
    print(f"  {label} probed: {probed.wall_s:.2f} s wall, rc {probed.returncode}", flush=True)
    return {"plain": plain, "probed": probed}


def process_rows(run: Run) -> list[dict[str, Any]]:
    rows = []
    for process in sorted(run.processes, key=lambda p: p["role"]):
        marks, cpu_marks = process["marks"], process["cpu_marks"]
        scenarios = [t for n, t in process["tests"].items() if "test_tau2_retail[" in n]
        total = process["cpu_user_s"] + process["cpu_sys_s"]
        # CPU before the first test, while testing (or relaying, on an xdist controller), after.
        begin = cpu_marks.get("first_test", cpu_marks.get("configured", 0.0))
        end = cpu_marks.get("last_test", cpu_marks.get("sessionfinish", total))
        rows.append(
            {
                "role": process["role"],
                "maxrss_mb": process["maxrss_mb"],
                "cpu_s": total,
                "cpu_before_tests_s": begin,
                "cpu_tests_s": end - begin,
                "cpu_after_tests_s": total - end,
                "gc_s": sum(process["gc_seconds"]),
                "plugin_imported_s": marks["plugin_imported"] - run.started,
                "collected_s": marks.get("collected", float("nan")) - run.started,
                "first_test_s": marks.get("first_test", float("nan")) - run.started,
                "last_test_s": marks.get("last_test", float("nan")) - run.started,
                "exit_s": marks["unconfigure"] - run.started,
                "tests": len(process["tests"]),
                "scenarios": len(scenarios),
            }
        )
    return rows


def harness_times(run: Run, run_dir: Path) -> dict[str, float]:
    tests = run.scenario_tests()
    setups = [t["setup"] for t in tests if "setup" in t]
    whole = [t["wall"] for t in tests if "wall" in t]
    cpu = [t["cpu"] for t in tests if "cpu" in t]
    conversation = [
        json.loads(path.read_text())["duration_seconds"] for path in run_dir.glob("**/metrics.json")
    ]
    return {
        "scenarios": len(setups),
        "setup_ms_median": median(setups) * 1000,
        "setup_ms_p90": percentile(setups, 0.9) * 1000,
        "setup_ms_max": max(setups, default=float("nan")) * 1000,
        "conversation_ms_median": median(conversation) * 1000,
        "test_protocol_ms_median": median(whole) * 1000,
        "test_protocol_cpu_ms_median": median(cpu) * 1000,
    }


def in_process_harness(repeats: int) -> dict[str, float]:
    """The harness per scenario without pytest: conversation + scoring, then the artifacts.

    The 114 scenarios with the built-in oracle and scripted customer, golds already replayed
    (as in a worker after the gold tests), ``repeats`` times; medians in ms.
    """
    import asyncio

    inputs = _harness_inputs()
    scenario_ms: list[float] = []
    artifacts_ms: list[float] = []
    scratch = Path(tempfile.mkdtemp(prefix="tau2-bench-harness-"))
    try:
        for number in range(repeats):
            asyncio.run(_one_pass(inputs, scratch / str(number), scenario_ms, artifacts_ms))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {
        "scenarios": len(scenario_ms),
        "conversation_and_scoring_ms_median": median(scenario_ms),
        "artifacts_ms_median": median(artifacts_ms),
        "artifacts_ms_p90": percentile(artifacts_ms, 0.9),
        "total_ms_median": median(a + b for a, b in zip(scenario_ms, artifacts_ms, strict=True)),
    }


def _harness_inputs() -> dict[str, Any]:
    """What every pass shares: the tasks, the gold book (golds replayed), prompts, tools, the
    default profile."""
    from tau2_retail.data.files import resolve_data_dir
    from tau2_retail.data.gold import GoldBook
    from tau2_retail.data.seed import load_seed
    from tau2_retail.data.tasks import load_policy, load_tasks, load_user_guidelines
    from tau2_retail.engine.profiles import ProfileName, load_profile
    from tau2_retail.engine.prompts import agent_system_prompt
    from tau2_retail.tools.schemas import tool_schemas

    data_dir = resolve_data_dir()
    tasks = load_tasks(data_dir)
    book = GoldBook(seed=load_seed(data_dir), tasks=tasks)
    inputs = {
        "tasks": tasks,
        "book": book,
        "agent_prompt": agent_system_prompt(load_policy(data_dir), additional_notes=True),
        "guidelines": load_user_guidelines(data_dir),
        "tools": tool_schemas(),
        "profile": load_profile(ProfileName.DEFAULT, data_dir),
    }
    for task_id in tasks:
        _ = book[task_id].db_hash
    return inputs


async def oracle_outcome(inputs: dict[str, Any], task: Any) -> Any:
    """``task``'s scenario run offline (built-in oracle agent, scripted customer, no judge)."""
    from tau2_retail.engine.scenario import Scenario
    from tau2_retail.models.builtin import builtin_model
    from tau2_retail.testing.offline import run_offline

    return await run_offline(
        Scenario(task=task, trial=0, trials=1, seed=300),
        agent=builtin_model("builtin:oracle", task, role="agent"),
        judge_model=None,
        book=inputs["book"],
        profile=inputs["profile"],
    )


def rendered_folder(inputs: dict[str, Any], scratch: Path, outcome: Any) -> Any:
    """``outcome``'s artifacts under ``scratch``, as contents (``ScenarioFiles``), not written."""
    from tau2_retail.engine.prompts import user_system_prompt
    from tau2_retail.results.artifacts import scenario_files

    return scenario_files(
        scratch / outcome.scenario.name,
        outcome,
        agent_prompt=inputs["agent_prompt"],
        user_prompt=user_system_prompt(inputs["guidelines"], outcome.scenario.task),
        tools=inputs["tools"],
        config={"run_id": "bench"},
    )


async def _one_pass(
    inputs: dict[str, Any], scratch: Path, scenario_ms: list[float], artifacts_ms: list[float]
) -> None:
    """Every scenario once: its conversation and scoring, then its artifacts, timed apart."""
    from tau2_retail.results.scenario_folder import put_scenario_files

    for task in inputs["tasks"].values():
        start = time.perf_counter()
        outcome = await oracle_outcome(inputs, task)
        middle = time.perf_counter()
        put_scenario_files(rendered_folder(inputs, scratch, outcome))
        end = time.perf_counter()
        scenario_ms.append((middle - start) * 1000)
        artifacts_ms.append((end - middle) * 1000)


def summary_times(run_dir: Path, repeats: int) -> dict[str, Any]:
    """In process: build + write the summaries from the metrics; and the summarize command."""
    from tau2_retail.results.artifacts import load_run_metrics
    from tau2_retail.results.summary import read_run_args, write_run_summary

    start = time.perf_counter()
    metrics = load_run_metrics(run_dir).records
    load_s = time.perf_counter() - start
    run_args = read_run_args(run_dir)
    assert run_args is not None, f"{run_dir} has no run_args.json"
    scratch = Path(tempfile.mkdtemp(prefix="tau2-bench-summary-"))
    build = []
    try:
        for _ in range(repeats):
            start = time.perf_counter()
            summary = write_run_summary(
                scratch,
                metrics,
                expected=run_args.expected,
                trials=run_args.trials,
                configuration=run_args.configuration,
                versions={},
            )
            build.append(time.perf_counter() - start)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    command = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "tau2_retail", "summarize", str(run_dir)],
            cwd=ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        command.append(time.perf_counter() - start)
    return {
        "scenarios": len(metrics),
        "pass_hat_k": [entry.k for entry in summary.pass_hat_k],
        "build_and_write_s": median(build),
        "load_metrics_s": load_s,
        "summarize_command_s": median(command),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the run directories")
    args = parse_with_data(parser)

    work = Path(tempfile.mkdtemp(prefix="tau2-bench-offline-"))
    figures: dict[str, Any] = {"machine": machine(), "targets": TARGETS}
    print(f"machine: {figures['machine']}", flush=True)
    try:
        figures.update(measure(work / "runs", work / "probe", args.repeats))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"runs kept in {work}")

    report(figures)
    path = write_json("offline", figures)
    print(f"\nwritten: {path.relative_to(ROOT)}")
    return 0


def measure(out: Path, probes: Path, repeats: int) -> dict[str, Any]:
    """Every figure of the report but the machine's: the runs go to ``out``, probes to
    ``probes``."""
    collect = [run_suite(["--collect-only", "-q", "-k", "tau2_retail"]) for _ in range(repeats)]
    print(f"  collect-only: {[round(r.wall_s, 2) for r in collect]} s", flush=True)
    n0 = repeated("n0", lambda rid: suite_args(out, rid, "-n", "0"), repeats, probes)
    n2 = repeated("n2", lambda rid: suite_args(out, rid, "-n", "2"), repeats, probes)
    t4 = repeated(
        "t4n8",
        lambda rid: suite_args(out, rid, "-n", "8", "--tau2-trials", "4"),
        repeats,
        probes,
    )
    runs = {"n0": n0, "n2": n2, "t4n8": t4}
    figures: dict[str, Any] = {"wall": wall_rows(collect, runs)}
    figures["wall_all_repeats_s"] = {
        "collect": [r.wall_s for r in collect],
        **{name: [r.wall_s for r in runs[name]["plain"]] for name in runs},
    }
    figures["processes"] = {name: process_rows(runs[name]["probed"]) for name in runs}
    figures["harness"] = {
        name: harness_times(runs[name]["probed"], out / f"{name}-probe") for name in runs
    }
    t4_dir = out / "t4n8-probe"
    figures["summary_trials4"] = summary_times(t4_dir, repeats)
    figures["harness_in_process"] = in_process_harness(repeats)
    figures["artifacts"] = {
        "n2": artifact_sizes(out / "n2-probe"),
        "t4n8": artifact_sizes(t4_dir),
    }
    figures["load_average_at_end"] = load_average()
    return figures


def wall_rows(collect: list[Run], runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The wall table: one row a command, medians of its plain (unprobed) repeats."""
    commands = [("pytest --collect-only -q -k tau2_retail", collect)]
    for name, label in (
        ("n0", "pytest -k tau2_retail -n 0"),
        ("n2", "pytest -k tau2_retail -n 2"),
        ("t4n8", "pytest -k tau2_retail -n 8 --tau2-trials 4"),
    ):
        commands.append((label, runs[name]["plain"]))
    return [
        {
            "command": label,
            "tests": repeats[0].test_count(),
            "wall_s": median(r.wall_s for r in repeats),
            "cpu_s": median(r.cpu_s for r in repeats),
            "returncode": repeats[0].returncode,
        }
        for label, repeats in commands
    ]


def report(figures: dict[str, Any]) -> None:
    print(machine_line(figures))
    print("\nWall time from the command to its exit (median of the repeats)\n")
    print(
        table(
            ["command", "tests", "wall s", "CPU s (all processes)", "exit"],
            [
                [r["command"], r["tests"], r["wall_s"], r["cpu_s"], r["returncode"]]
                for r in figures["wall"]
            ],
        )
    )
    print(
        "\nPer process (probed run): peak RSS; CPU s before the first test, in the tests (on an "
        "xdist controller: relaying them), after the last; timeline in s from the command\n"
    )
    print(_keyed_table(PROCESS_COLUMNS, figures["processes"]))
    print("\nPer scenario harness time (probed runs; ms)\n")
    print(_keyed_table(HARNESS_COLUMNS, {name: [h] for name, h in figures["harness"].items()}))
    _print_scale(figures["harness_in_process"], figures["summary_trials4"], figures["artifacts"])
    print_targets(_target_rows(figures))


# (header, key) of each column after the run's name: one list names the column and its figure
PROCESS_COLUMNS: tuple[Column, ...] = (
    ("process", "role"),
    ("peak RSS MB", "maxrss_mb"),
    ("CPU s", "cpu_s"),
    ("CPU before tests", "cpu_before_tests_s"),
    ("CPU in tests", "cpu_tests_s"),
    ("CPU after", "cpu_after_tests_s"),
    ("of which GC", "gc_s"),
    ("plugins imported", "plugin_imported_s"),
    ("collected", "collected_s"),
    ("first test", "first_test_s"),
    ("last test", "last_test_s"),
    ("exit", "exit_s"),
    ("scenarios", "scenarios"),
)
HARNESS_COLUMNS: tuple[Column, ...] = (
    ("scenarios", "scenarios"),
    ("set-up median (conversation+scoring+artifacts)", "setup_ms_median"),
    ("p90", "setup_ms_p90"),
    ("max", "setup_ms_max"),
    ("conversation median", "conversation_ms_median"),
    ("whole test median", "test_protocol_ms_median"),
    ("whole test CPU median", "test_protocol_cpu_ms_median"),
)


def _keyed_table(columns: tuple[Column, ...], entries: dict[str, list[dict[str, Any]]]) -> str:
    """A table with a row per entry of each run: the run's name, then ``columns``' figures."""
    rows = [
        {"run": name, **entry} for name, run_entries in entries.items() for entry in run_entries
    ]
    return column_table((("run", "run"), *columns), rows)


def _print_scale(h: dict[str, Any], s: dict[str, Any], artifacts: dict[str, Any]) -> None:
    """The in-process harness times, the 4-trial summaries, the artifacts' sizes."""
    print(
        f"\nIn process, without pytest ({h['scenarios']} scenario runs, ms, median): conversation"
        f" + scoring {h['conversation_and_scoring_ms_median']:.2f}, artifact writes "
        f"{h['artifacts_ms_median']:.2f} (p90 {h['artifacts_ms_p90']:.2f}), together "
        f"{h['total_ms_median']:.2f}"
    )
    print(
        f"\nScale, 4 trials ({s['scenarios']} scenarios): summaries + pass^k "
        f"(k = {s['pass_hat_k']}) built and written in {s['build_and_write_s']:.3f} s in process; "
        f"reading the metrics.json files {s['load_metrics_s']:.3f} s; "
        f"`python -m tau2_retail summarize` {s['summarize_command_s']:.3f} s"
    )
    for name, a in artifacts.items():
        print(
            f"artifacts ({name}): {a['scenarios']} scenarios, median "
            f"{a['per_scenario_kb_median']:.1f} KB per scenario (max "
            f"{a['per_scenario_kb_max']:.1f}), {a['total_mb']:.1f} MB in all"
        )


def _target_rows(figures: dict[str, Any]) -> list[list[Any]]:
    wall = {r["command"]: r["wall_s"] for r in figures["wall"]}
    worker_rss = max(
        (p["maxrss_mb"] for ps in figures["processes"].values() for p in ps),
        default=float("nan"),
    )
    measured = [
        ("pytest -k tau2_retail -n 2, wall s", "n2_wall_s", wall["pytest -k tau2_retail -n 2"]),
        (
            "pytest --collect-only -q -k tau2_retail, wall s",
            "collect_wall_s",
            wall["pytest --collect-only -q -k tau2_retail"],
        ),
        ("peak RSS of any pytest process, MB", "worker_maxrss_mb", worker_rss),
        (
            "summaries + pass^k, 456 scenarios, s",
            "summary_s",
            figures["summary_trials4"]["build_and_write_s"],
        ),
    ]
    return [
        [label, TARGETS[target], value, verdict(value, TARGETS[target])]
        for label, target, value in measured
    ]


if __name__ == "__main__":
    sys.exit(main())
