"""The suite against a model server: wall time against the ideal, harness CPU per completion.

Run from the repository root (about ten minutes: the model latency is real sleeping)::

    TAU2_DATA_DIR=/path/to/data .venv/bin/python benchmarks/bench_server.py

The server is ``tau2_retail.testing.loopback_server`` in a process of its own (so its thread
does not compete for the GIL of the process that measures; ``_scripted_server.py``), answering
every completion after ``--latency`` seconds (default 0.1) from a fixed scripted dialogue. Both
the agent and the simulated user are endpoint models at that server
(``--tau2-agent-model=bench-agent``, ``--tau2-user-model=bench-user``); no judge. Per scenario,
20 completions reach it:

- user: 2 (the opening request, the scripted customer's; then ``###STOP###`` once the agent
  asks whether anything else is needed);
- agent: 16 tool-call turns (the task's gold actions in order, then reads,
  ``get_product_details`` of seed products, up to 16), 1 text turn (the report, ending in
  "Is there anything else I can help you with?"), and 1 ``end_conversation`` call after the
  user's stop: 18.

Four tasks (10, 12, 26, 50) have ``transfer_to_human_agents`` among their gold actions, which
ends the conversation at once (6, 6, 9 and 2 completions): 2223 completions per 114 scenarios.
So every scenario ends in ``agent_exit`` with the gold database (114/114 succeed, a check that
the measured runs did the real work). Completions are counted twice: by the server (requests
answered, per model) and by the suite (``token_usage.<role>.n_calls`` in every
``metrics.json``); the table shows the server's count and the script checks they agree.

Measured for ``pytest -k tau2_retail -n N`` (N = 1, 4, 8; the 115 gold snapshot tests run too),
and ``--tau2-trials 4`` at ``-n 8`` (456 scenarios):

- wall from the command to its exit; ideal = start-up + completions x latency / N, where
  start-up is the time from the command to the server's first request (interpreter, plugins,
  collection, xdist workers, data, the gold tests, importing ``openai``); ratio = wall / ideal;
  also the model phase alone (first request to last reply) against completions x latency / N,
  and the time from the last reply to the exit (the last artifacts, workers' and controller's
  shutdown, summaries);
- harness CPU per completion = the CPU time the pytest workers spent inside the scenario
  tests (probe: ``time.process_time`` from ``pytest_runtest_logstart`` to ``logfinish``: client,
  tools, scoring, artifacts, reporting) / the completions of those scenarios, leaving out each
  worker's first scenario, which also pays the once-per-process set-up (importing ``openai``,
  building the two clients; shown on its own as "first scenario CPU s"); "incl. first
  scenarios" counts every scenario test; "tree CPU" is the whole pytest tree's CPU
  (``os.wait4``: start-up, collection and the gold tests included) / all completions;
- per worker peak RSS; artifacts per scenario; the server's own CPU per completion (it runs
  on the same 2 cores, as a real local model server would not).

Prints tables and writes ``benchmarks/results/server.json``. Timings are never asserted.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from _measure import (
    ROOT,
    SCENARIO_TEST,
    Run,
    artifact_sizes,
    completions_from_metrics,
    load_average,
    machine,
    machine_line,
    median,
    run_suite,
    write_json,
)
from _scripted_server import COMPLETIONS_PER_SCENARIO, ServerProcess, run_args
from _tables import (
    Column,
    column_table,
    parse_with_data,
    print_run,
    print_targets,
    run_columns,
    verdict,
)

TARGETS = {"wall_over_ideal_n8": 1.15, "cpu_ms_per_completion": 3.0, "worker_maxrss_mb": 150.0}


# -- the measurements -------------------------------------------------------------------------


def measure(
    server: ServerProcess,
    *,
    workers: int,
    trials: int,
    latency: float,
    work: Path,
    label: str,
    tasks: str | None = None,
) -> dict[str, Any]:
    server.command("reset")
    out = work / "runs"
    args = ["-k", "tau2_retail", "-q", "-n", str(workers), *run_args(server, out, label)]
    args += ["--tau2-trials", str(trials)]
    if tasks:
        args.append(f"--tau2-tasks={tasks}")
    run: Run = run_suite(args, probe_dir=work / "probe" / label)
    stats = server.command("stats")
    run_dir = out / label
    figures = {
        "label": label,
        "workers": workers,
        "trials": trials,
        **_figures(run, stats, run_dir, workers=workers, latency=latency),
        "artifacts": artifact_sizes(run_dir),
        "processes": _processes(run),
        "load_average_after": load_average(),
    }
    print_run(label, run, figures)
    shutil.rmtree(run_dir, ignore_errors=True)
    return figures


def _figures(
    run: Run, stats: dict[str, Any], run_dir: Path, *, workers: int, latency: float
) -> dict[str, Any]:
    """One run's counts, times, CPU and memory (``measure`` adds its labels and details)."""
    completions = sum(stats["requests"].values())
    by_role: Counter[str] = Counter()
    recorded = completions_from_metrics(run_dir)
    for usage in recorded.values():
        by_role.update(usage)
    scenarios = run.scenario_tests()
    calls = {sid: usage["agent"] + usage["user"] for sid, usage in recorded.items()}
    steady = [t for t in scenarios if not t["first"]]
    steady_calls = sum(calls.get(t["scenario_id"], 0) for t in steady)
    startup = stats["first_request"] - run.started if stats["first_request"] else float("nan")
    last_reply = (stats["last_request"] or run.started) + latency
    ideal = startup + completions * latency / workers
    summary = json.loads((run_dir / "summary.json").read_text())
    return {
        "scenarios": len(scenarios),
        "returncode": run.returncode,
        "result": run.last_line(),
        "succeeded": summary["counts"]["succeeded"],
        "completions": completions,
        "completions_by_model": stats["requests"],
        "completions_recorded_by_suite": dict(by_role),
        "completions_agree": by_role["agent"] + by_role["user"] == completions,
        "wall_s": run.wall_s,
        "startup_s": startup,
        "after_last_reply_s": run.started + run.wall_s - last_reply,
        "ideal_s": ideal,
        "wall_over_ideal": run.wall_s / ideal,
        # From the first request to the last reply, against completions x latency / workers.
        "model_phase_over_ideal": (last_reply - run.started - startup)
        / (completions * latency / workers),
        "harness_cpu_ms_per_completion": (
            sum(t["cpu"] for t in steady) / steady_calls * 1000 if steady_calls else float("nan")
        ),
        "scenario_tests_cpu_ms_per_completion": sum(t["cpu"] for t in scenarios)
        / completions
        * 1000,
        "first_scenario_cpu_s_median": median(t["cpu"] for t in scenarios if t["first"]),
        "tree_cpu_ms_per_completion": run.cpu_s / completions * 1000,
        "tree_cpu_s": run.cpu_s,
        "server_cpu_s": stats["cpu_s"],
        "server_cpu_ms_per_completion": stats["cpu_s"] / completions * 1000,
        "worker_maxrss_mb": max((p["maxrss_mb"] for p in run.workers), default=float("nan")),
        "controller_maxrss_mb": (run.controller or {}).get("maxrss_mb", float("nan")),
        "server_maxrss_mb": stats["maxrss_mb"],
    }


def _processes(run: Run) -> list[dict[str, Any]]:
    """Per process of the run: peak RSS, CPU, scenarios run, and its marks' times."""
    return [
        {
            "role": process["role"],
            "maxrss_mb": process["maxrss_mb"],
            "cpu_s": process["cpu_user_s"] + process["cpu_sys_s"],
            "scenarios": sum(SCENARIO_TEST in nodeid for nodeid in process["tests"]),
            "cpu_after_last_test_s": process["cpu_user_s"]
            + process["cpu_sys_s"]
            - process["cpu_marks"].get("last_test", 0.0),
            **{name: value - run.started for name, value in process["marks"].items()},
        }
        for process in sorted(run.processes, key=lambda p: p["role"])
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--workers", default="1,4,8", help="comma-separated -n values")
    parser.add_argument("--repeats", type=int, default=3, help="runs per -n (>= 4 workers)")
    parser.add_argument("--repeats-serial", type=int, default=1, help="runs at -n 1 (4 min each)")
    parser.add_argument("--trials-workers", type=int, default=8, help="-n of the 4-trial run")
    parser.add_argument("--no-trials", action="store_true", help="skip the 4-trial run")
    parser.add_argument("--tasks", help="only these task ids (--tau2-tasks), for a quick look")
    args = parse_with_data(parser)

    figures: dict[str, Any] = {
        "machine": machine(),
        "latency_s": args.latency,
        "completions_per_scenario": COMPLETIONS_PER_SCENARIO,
        "targets": TARGETS,
        "runs": [],
    }
    print(f"machine: {figures['machine']}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="tau2-bench-server-"))
    server = ServerProcess(args.latency)
    try:
        figures["runs"] = _all_runs(server, args, work)
    finally:
        server.close()
        shutil.rmtree(work, ignore_errors=True)
    figures["load_average_at_end"] = load_average()
    report(figures)
    path = write_json("server", figures)
    print(f"\nwritten: {path.relative_to(ROOT)}")
    return 0


def _all_runs(server: ServerProcess, args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    """The runs the options ask for: each -n its repeats, then the 4-trial run."""
    runs = []
    for workers in (int(n) for n in args.workers.split(",")):
        repeats = args.repeats_serial if workers == 1 else args.repeats
        for number in range(repeats):
            label = f"n{workers}-{number}"
            runs.append(
                measure(
                    server,
                    workers=workers,
                    trials=1,
                    latency=args.latency,
                    work=work,
                    label=label,
                    tasks=args.tasks,
                )
            )
    if not args.no_trials:
        runs.append(
            measure(
                server,
                workers=args.trials_workers,
                trials=4,
                latency=args.latency,
                work=work,
                label=f"trials4-n{args.trials_workers}",
                tasks=args.tasks,
            )
        )
    return runs


def grouped(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median figures per (workers, trials)."""
    groups: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault((run["workers"], run["trials"]), []).append(run)
    rows = []
    for (workers, trials), members in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        keys = (
            "wall_s",
            "ideal_s",
            "startup_s",
            "after_last_reply_s",
            "wall_over_ideal",
            "model_phase_over_ideal",
            "harness_cpu_ms_per_completion",
            "scenario_tests_cpu_ms_per_completion",
            "first_scenario_cpu_s_median",
            "tree_cpu_ms_per_completion",
            "worker_maxrss_mb",
            "server_cpu_ms_per_completion",
        )
        row: dict[str, Any] = {key: median(m[key] for m in members) for key in keys}
        row.update(
            workers=workers,
            trials=trials,
            repeats=len(members),
            scenarios=members[0]["scenarios"],
            completions=members[0]["completions"],
            succeeded=members[0]["succeeded"],
            agree=all(m["completions_agree"] for m in members),
            artifact_kb=members[0]["artifacts"]["per_scenario_kb_median"],
        )
        rows.append(row)
    return rows


def report(figures: dict[str, Any]) -> None:
    print(
        f"{machine_line(figures)}; latency {figures['latency_s']} s per completion, "
        f"{figures['completions_per_scenario']} completions per scenario\n"
    )
    rows = grouped(figures["runs"])
    figures["table"] = rows
    print(column_table(RUNS_COLUMNS, rows))
    print_targets(_checks(rows))


RUNS_COLUMNS: tuple[Column, ...] = (
    ("-n", "workers"),
    ("trials", "trials"),
    ("runs", "repeats"),
    *run_columns("agree"),
    ("first request to last reply / ideal", "model_phase_over_ideal"),
    ("after last reply s", "after_last_reply_s"),
    ("harness CPU ms/completion", "harness_cpu_ms_per_completion"),
    ("incl. first scenarios", "scenario_tests_cpu_ms_per_completion"),
    ("first scenario CPU s", "first_scenario_cpu_s_median"),
    ("tree CPU ms/completion", "tree_cpu_ms_per_completion"),
    ("server CPU ms/completion", "server_cpu_ms_per_completion"),
    ("worker peak RSS MB", "worker_maxrss_mb"),
    ("artifacts KB/scenario", "artifact_kb"),
)
"""The main table: one row per (workers, trials), the medians of its runs."""


def _checks(rows: list[dict[str, Any]]) -> list[list[Any]]:
    """The targets table's rows: target, limit, measured, verdict."""
    n8 = [r for r in rows if r["workers"] == 8 and r["trials"] == 1]
    cpu = max(r["harness_cpu_ms_per_completion"] for r in rows)
    rss = max(r["worker_maxrss_mb"] for r in rows)
    checks = []
    if n8:
        limit = TARGETS["wall_over_ideal_n8"]
        measured = n8[0]["wall_over_ideal"]
        checks.append(["wall / ideal at -n 8", limit, measured, verdict(measured, limit)])
    limit = TARGETS["cpu_ms_per_completion"]
    checks.append(["harness CPU per completion, ms (worst run)", limit, cpu, verdict(cpu, limit)])
    limit = TARGETS["worker_maxrss_mb"]
    checks.append(["peak RSS per worker, MB (worst run)", limit, rss, verdict(rss, limit)])
    return checks


if __name__ == "__main__":
    sys.exit(main())
