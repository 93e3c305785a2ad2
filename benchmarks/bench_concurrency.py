"""Hundreds of conversations in flight: ``--tau2-concurrency`` against a slow model server.

Run from the repository root (about six minutes on an idle machine; the model latency is real
sleeping)::

    TAU2_DATA_DIR=/path/to/data .venv/bin/python benchmarks/bench_concurrency.py
    # a user's environment: only the runtime dependencies, from the wheel
    python -m venv /tmp/rt && /tmp/rt/bin/pip install .
    TAU2_DATA_DIR=... .venv/bin/python benchmarks/bench_concurrency.py --python /tmp/rt/bin/python

The server is the scripted dialogue of ``bench_server.py`` (``_scripted_server.py``: 20
completions per scenario, 2223 per 114 scenarios, every scenario a success) in a process of its
own, answering each completion after ``--latency`` seconds (default 1.0). The runs (``--runs``;
the default leaves out ``n8``):

- ``c114``: ``-n 0 --tau2-concurrency 114``: the 114 scenarios in flight in one process;
- ``n2c57``: ``-n 2 --dist each --tau2-concurrency 57``: the same 114 in two workers;
- ``c456``: ``-n 0 --tau2-concurrency 456 --tau2-trials 4``: 456 scenarios, all in flight;
- ``c456n2``: ``-n 2 --dist each --tau2-concurrency 228 --tau2-trials 4``: the 456 in two;
- ``c912``: ``-n 0 --tau2-concurrency 912 --tau2-trials 8``: pass^8's 912 in one process;
- ``c912n2``: ``-n 2 --dist each --tau2-concurrency 456 --tau2-trials 8``: the 912 in two;
- ``n8``: ``-n 8``, one scenario in flight per worker.

The last table puts the runs beside upstream tau2's measured figures for the same 114 tasks.

Ideal = start-up (command to the server's first request) + the model phase a perfect harness
would need: max(longest scenario, 20 completions x latency; all completions x latency / slots),
slots = workers x concurrency. Harness CPU per completion = the CPU the test-running processes
spent between their first scenario test's start and their last test's end, divided by the
completions: conversations, client, tools, scoring, artifacts, pytest reporting (``openai`` is
imported by the probe at configure time, so its one-time import counts as start-up, shown apart).
Start-up per process: CPU from the interpreter's start to the probe's import (interpreter,
``pytest``), to the end of ``pytest_configure`` (entry-point plugins: xdist, asyncio, tau2 and
the package's modules; pytest's assertion rewriting of them), ``import openai``, the data
(tasks, policy, seed parsed and verified during parametrization), the rest of collection, and
to the first test (xdist hand-over, session fixtures). A first run, not measured, writes the
bytecode caches an ordinary environment has after any run (pytest's rewritten modules too):
this machine sets ``PYTHONDONTWRITEBYTECODE``, which in a fresh venv would leave every process
compiling and rewriting the package's modules.

Before and after each row, the host's speed: a fixed Python workload timed in a fresh process
on the idle machine (``_measure.reference_ms``, the median of nine, about 0.5 s). A virtual
machine's cores do not keep one speed; read a row's CPU and wall figures beside it. Likewise
the file system's: the milliseconds to create, write and rename one small file in the folder
the runs write to (``_measure.file_ms``; a scenario writes ten), which on this project's VM
moved from 0.02 to 1.2 ms within minutes, on the same disk. The runs write under ``TMPDIR``
(the system's temporary folder by default): ``TMPDIR=/dev/shm`` measures the harness without
the disk.

Prints tables and writes ``benchmarks/results/concurrency.json``. Timings are never asserted.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from _concurrency_report import PHASES, TARGETS, report
from _measure import (
    ROOT,
    Run,
    completions_from_metrics,
    file_ms,
    load_average,
    machine,
    reference_ms,
    run_suite,
    write_json,
)
from _scripted_server import COMPLETIONS_PER_SCENARIO, ServerProcess, run_args
from _tables import parse_with_data, print_run

RUNS = {
    "c114": {"workers": 0, "concurrency": 114, "trials": 1},
    "n2c57": {"workers": 2, "concurrency": 57, "trials": 1},
    "c456": {"workers": 0, "concurrency": 456, "trials": 4},
    "c456n2": {"workers": 2, "concurrency": 228, "trials": 4},
    "c912": {"workers": 0, "concurrency": 912, "trials": 8},
    "c912n2": {"workers": 2, "concurrency": 456, "trials": 8},
    "n8": {"workers": 8, "concurrency": 1, "trials": 1},
}
DEFAULT_RUNS = ("c114", "n2c57", "c456", "c456n2", "c912", "c912n2")


def _phase_cpu(process: dict[str, Any]) -> dict[str, float]:
    cpu = process["cpu_marks"]
    phases: dict[str, float] = {}
    for name, start, end in PHASES:
        if end is None:
            continue
        if end in cpu and (start is None or start in cpu):
            phases[name] = cpu[end] - (cpu[start] if start else 0.0)
    if "collected" in cpu and "configured" in cpu:
        known = sum(
            phases.get(name, 0.0)
            for name in ("import openai", "data (tasks, policy, seed, verified)")
        )
        phases["rest of collection"] = cpu["collected"] - cpu["configured"] - known
    if "first_test" in cpu:
        phases["total before the first test"] = cpu["first_test"]
    return phases


def _pytest_args(label: str, spec: dict[str, int], server: ServerProcess, out: Path) -> list[str]:
    args = [
        "-q",
        "-p",
        "no:cacheprovider",
        "-n",
        str(spec["workers"]),
        *run_args(server, out, label),
        f"--tau2-trials={spec['trials']}",
        f"--tau2-concurrency={spec['concurrency']}",
    ]
    if spec["workers"] and spec["concurrency"] > 1:
        args += ["--dist", "each"]
    return args


def measure(
    server: ServerProcess,
    label: str,
    spec: dict[str, int],
    *,
    latency: float,
    work: Path,
    python: str | None,
) -> dict[str, Any]:
    server.command("reset")
    host_before = reference_ms()
    files_before = file_ms(work / "probe-files")
    load_before = load_average()
    out = work / "runs"
    args = _pytest_args(label, spec, server, out)
    if python:
        cwd = work / "empty"
        cwd.mkdir(exist_ok=True)
        args += ["--pyargs", "tests_tau2_retail"]
    else:
        cwd = ROOT
        args += ["-k", "tau2_retail"]
    run: Run = run_suite(
        args,
        probe_dir=work / "probe" / label,
        python=python or sys.executable,
        cwd=cwd,
        preimport_openai=True,
    )
    stats = server.command("stats")
    run_dir = out / label
    figures = {
        "label": label,
        **spec,
        **_figures(run, stats, run_dir, spec, latency=latency, load_before=load_before),
        "processes": _processes(run),
        "load_average_after": load_average(),
        "reference_ms": [host_before, reference_ms()],
        "file_ms": [files_before, file_ms(work / "probe-files")],
    }
    tail = figures["after_last_reply_s"]
    print_run(
        label,
        run,
        figures,
        f"start-up {figures['startup_s']:.2f} s",
        f"max RSS {figures['max_rss_mb']:.0f} MB",
        f"reference work {figures['reference_ms'][0]:.1f} / {figures['reference_ms'][1]:.1f} ms",
        f"a file {figures['file_ms'][0]:.2f} / {figures['file_ms'][1]:.2f} ms",
        f"after the last reply: tests {tail['tests']:.1f} s, session end "
        f"{tail['session_end']:.1f} s, exit {tail['exit']:.1f} s",
    )
    shutil.rmtree(run_dir, ignore_errors=True)
    return figures


def _figures(
    run: Run,
    stats: dict[str, Any],
    run_dir: Path,
    spec: dict[str, int],
    *,
    latency: float,
    load_before: tuple[float, float, float],
) -> dict[str, Any]:
    """One run's counts, times, CPU and memory (``measure`` adds its labels and processes)."""
    completions = sum(stats["requests"].values())
    recorded = completions_from_metrics(run_dir)
    suite_count = sum(usage["agent"] + usage["user"] for usage in recorded.values())
    startup = stats["first_request"] - run.started if stats["first_request"] else float("nan")
    slots = max(spec["workers"], 1) * spec["concurrency"]
    model_phase = max(COMPLETIONS_PER_SCENARIO * latency, completions * latency / slots)
    ideal = startup + model_phase
    runners = [p for p in run.processes if p["role"] != "controller" or not spec["workers"]]
    test_cpu = sum(
        p["cpu_marks"]["last_test"] - p["cpu_marks"]["first_test"]
        for p in runners
        if "last_test" in p["cpu_marks"] and "first_test" in p["cpu_marks"]
    )
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    last_reply = (stats["last_request"] or run.started) + latency
    return {
        "scenarios": summary["counts"]["expected"],
        "succeeded": summary["counts"]["succeeded"],
        "scored": summary["counts"]["scored"],
        "infra_errors": summary["counts"]["infra_errors"] + summary["counts"]["lost"],
        "load_average_before": load_before,
        "returncode": run.returncode,
        "result": run.last_line(),
        "completions": completions,
        "completions_agree": suite_count == completions,
        "wall_s": run.wall_s,
        "startup_s": startup,
        "ideal_s": ideal,
        "wall_over_ideal": run.wall_s / ideal,
        "last_reply_to_exit_s": run.started + run.wall_s - last_reply,
        "after_last_reply_s": _tail(run, last_reply),
        "tree_cpu_s": run.cpu_s,
        "harness_cpu_ms_per_completion": test_cpu / completions * 1000 if completions else 0,
        "server_cpu_ms_per_completion": stats["cpu_s"] / completions * 1000 if completions else 0,
        "max_rss_mb": max((p["maxrss_mb"] for p in run.processes), default=float("nan")),
    }


def _tail(run: Run, last_reply: float) -> dict[str, float]:
    """Where the time after the server's last reply went (seconds): the tests still to report
    (the endings of the conversations that just finished, their folders, pytest's per-test
    protocol), the session's end (summaries, ``report.html``, the terminal section) and the
    interpreter's exit, from the probe's marks (monotonic clock, shared by the processes)."""
    controller = run.controller or {}
    marks = controller.get("marks", {})
    last_test = max(
        (p["marks"]["last_test"] for p in run.processes if "last_test" in p["marks"]),
        default=float("nan"),
    )
    end = run.started + run.wall_s
    unconfigure = marks.get("unconfigure", float("nan"))
    return {
        "tests": last_test - last_reply,
        "session_end": unconfigure - last_test,
        "exit": end - unconfigure,
    }


def _processes(run: Run) -> list[dict[str, Any]]:
    """Per process of the run: peak RSS, CPU, garbage collection, start-up CPU by phase."""
    return [
        {
            "role": p["role"],
            "maxrss_mb": p["maxrss_mb"],
            "cpu_s": p["cpu_user_s"] + p["cpu_sys_s"],
            "gc_s": sum(p["gc_seconds"]),
            "gc_seconds_by_generation": p["gc_seconds"],
            "gc_runs_by_generation": p["gc_runs"],
            "phases_cpu_s": _phase_cpu(p),
        }
        for p in sorted(run.processes, key=lambda p: p["role"])
    ]


def offline_one_scenario(python: str | None, work: Path, repeats: int) -> list[dict[str, Any]]:
    """One scenario offline, command to exit: wall and CPU of the whole process."""
    rows = []
    base = ["-q", "-p", "no:cacheprovider", "--tau2-tasks=0", f"--tau2-output-dir={work / 'off'}"]
    if python:
        cwd = work / "empty"
        cwd.mkdir(exist_ok=True)
        args = [*base, "--pyargs", "tests_tau2_retail"]
    else:
        cwd, args = ROOT, [*base, "-k", "tau2_retail"]
    # not measured: leaves the bytecode caches a user's environment has after any run (this
    # machine sets PYTHONDONTWRITEBYTECODE, so a fresh venv would compile and rewrite the
    # package's modules in every process: about 0.8 s more per start here)
    run_suite(args, python=python or sys.executable, cwd=cwd, write_bytecode=True)
    for _ in range(repeats):
        run = run_suite(args, python=python or sys.executable, cwd=cwd)
        rows.append({"wall_s": run.wall_s, "cpu_s": run.cpu_s, "rc": run.returncode})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument(
        "--runs",
        default=",".join(DEFAULT_RUNS),
        help=f"comma-separated run labels, of {', '.join(RUNS)}",
    )
    parser.add_argument("--python", help="the interpreter of a runtime-only environment")
    parser.add_argument("--offline-repeats", type=int, default=5)
    args = parse_with_data(parser)
    figures: dict[str, Any] = {
        "machine": machine(),
        "latency_s": args.latency,
        "python": args.python or sys.executable,
        "targets": TARGETS,
        "runs": [],
    }
    print(f"machine: {figures['machine']}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="tau2-bench-concurrency-"))
    figures["work_dir"] = str(work)
    print(f"the runs write under {work}", flush=True)
    try:
        figures["offline"] = offline_one_scenario(args.python, work, args.offline_repeats)
        server = ServerProcess(args.latency)
        try:
            for label in args.runs.split(","):
                figures["runs"].append(
                    measure(
                        server,
                        label,
                        RUNS[label],
                        latency=args.latency,
                        work=work,
                        python=args.python,
                    )
                )
        finally:
            server.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    figures["load_average_at_end"] = load_average()
    report(figures)
    print(f"\nwritten: {write_json('concurrency', figures).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
