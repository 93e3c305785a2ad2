"""The suite against a model server: wall time against the ideal, harness CPU per completion.

Run from the repository root (about ten minutes: the model latency is real sleeping)::

    TAU2_DATA_DIR=/path/to/data .venv/bin/python benchmarks/bench_server.py

The server is ``tau2_retail.testing.loopback_server`` in a process of its own (so its thread
does not compete for the GIL of the process that measures), answering every completion after
``--latency`` seconds (default 0.1) from a fixed scripted dialogue. Both the agent and the
simulated user are endpoint models at that server (``--tau2-agent-model=bench-agent``,
``--tau2-user-model=bench-user``); no judge. Per scenario, 20 completions reach it:

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
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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
    table,
    verdict,
    write_json,
)

AGENT_MODEL = "bench-agent"
USER_MODEL = "bench-user"
AGENT_TOOL_TURNS = 16
COMPLETIONS_PER_SCENARIO = AGENT_TOOL_TURNS + 2 + 2
BACKLOG = 2048
ANYTHING_ELSE = "Is there anything else I can help you with?"
TARGETS = {"wall_over_ideal_n8": 1.15, "cpu_ms_per_completion": 3.0, "worker_maxrss_mb": 150.0}


# -- the server process -----------------------------------------------------------------------


class ScriptedDialogue:
    """The responder: a fixed agent and customer, finding the task from the request itself."""

    def __init__(self, data_dir: Path) -> None:
        from tau2_retail.data.seed import load_seed
        from tau2_retail.data.tasks import load_tasks, load_user_guidelines
        from tau2_retail.engine.prompts import user_system_prompt
        from tau2_retail.models.builtin import ScriptedCustomer

        tasks = load_tasks(data_dir)
        guidelines = load_user_guidelines(data_dir)
        self.opening_of = {task.id: ScriptedCustomer(task).opening() for task in tasks.values()}
        self.task_by_opening = {text: tasks[task_id] for task_id, text in self.opening_of.items()}
        self.task_by_user_prompt = {
            user_system_prompt(guidelines, task): task for task in tasks.values()
        }
        products = list(load_seed(data_dir).tables["products"])
        self.padding = [
            ("get_product_details", {"product_id": products[i % len(products)]})
            for i in range(AGENT_TOOL_TURNS)
        ]
        self._calls: dict[str, list[tuple[str, str]]] = {}
        self.counts: Counter[str] = Counter()
        self.first: float | None = None
        self.last: float | None = None
        self.cpu_at_reset = 0.0

    def __call__(self, body: Any) -> Any:
        from tau2_retail.testing.loopback_server import Completion, HttpError

        now = time.monotonic()
        if self.first is None:
            self.first = now
        self.last = now
        model = body.get("model")
        self.counts[str(model)] += 1
        messages = body["messages"]
        if model == USER_MODEL:
            return Completion(content=self.user_reply(messages))
        if model == AGENT_MODEL:
            return self.agent_reply(messages)
        return HttpError.openai(404, f"unknown model {model!r}")

    def user_reply(self, messages: list[dict[str, Any]]) -> str:
        # The simulator's own past turns are 'assistant' in its view, the agent's text 'user'.
        if not any(m["role"] == "assistant" for m in messages):
            task = self.task_by_user_prompt[messages[0]["content"]]
            return self.opening_of[task.id]
        if "anything else" in (messages[-1].get("content") or "").lower():
            return "No, that's all I needed. Thank you! ###STOP###"
        return "Yes, please go ahead."

    def agent_reply(self, messages: list[dict[str, Any]]) -> Any:
        from tau2_retail.testing.loopback_server import Completion, ReplyToolCall

        opening = next(m["content"] for m in messages if m["role"] == "user")
        task = self.task_by_opening[opening]
        made = sum(len(m.get("tool_calls") or ()) for m in messages if m["role"] == "assistant")
        calls = self.calls_of(task)
        if made < len(calls):
            name, arguments = calls[made]
            return Completion(tool_calls=(ReplyToolCall(name=name, arguments=arguments),))
        last = messages[-1]
        if last["role"] == "user" and "###STOP###" in (last.get("content") or ""):
            return Completion(tool_calls=(ReplyToolCall(name="end_conversation"),))
        return Completion(content=f"I have taken care of your request. {ANYTHING_ELSE}")

    def calls_of(self, task: Any) -> list[tuple[str, str]]:
        """The agent's tool calls for ``task`` (name, JSON arguments), computed once."""
        calls = self._calls.get(task.id)
        if calls is None:
            calls = [(a.name, json.dumps(a.plain_arguments())) for a in task.actions]
            padding = self.padding[: max(0, AGENT_TOOL_TURNS - len(calls))]
            calls += [(name, json.dumps(arguments)) for name, arguments in padding]
            self._calls[task.id] = calls
        return calls

    def stats(self) -> dict[str, Any]:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "requests": dict(self.counts),
            "first_request": self.first,
            "last_request": self.last,
            "cpu_s": usage.ru_utime + usage.ru_stime - self.cpu_at_reset,
            "maxrss_mb": usage.ru_maxrss / 1024,
        }

    def reset(self) -> None:
        self.counts.clear()
        self.first = self.last = None
        usage = resource.getrusage(resource.RUSAGE_SELF)
        self.cpu_at_reset = usage.ru_utime + usage.ru_stime


def serve(latency: float) -> int:
    """Server mode: print the base URL, then answer ``stats``/``reset`` lines until stdin ends."""
    from tau2_retail.data.files import resolve_data_dir
    from tau2_retail.testing.loopback_server import LoopbackOpenAIServer

    dialogue = ScriptedDialogue(resolve_data_dir())
    # a listen backlog as uvicorn's (vLLM's server) and the kernel's default cap: 912
    # conversations connect within milliseconds
    with LoopbackOpenAIServer(
        responder=dialogue, latency=latency, record=False, backlog=BACKLOG
    ) as server:
        print(json.dumps({"base_url": server.base_url}), flush=True)
        for line in sys.stdin:
            command = line.strip()
            if command == "stats":
                print(json.dumps(dialogue.stats()), flush=True)
            elif command == "reset":
                dialogue.reset()
                print("{}", flush=True)
    return 0


class ServerProcess:
    """The benchmark's handle on the server process."""

    def __init__(self, latency: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", "--latency", str(latency)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.base_url: str = self._read()["base_url"]

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the server process ended before answering")
        value: dict[str, Any] = json.loads(line)
        return value

    def command(self, text: str) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)


# -- the measurements -------------------------------------------------------------------------


def run_args(server: ServerProcess, out: Path, label: str) -> list[str]:
    """The pytest options of a run whose agent and user are the server's scripted models."""
    return [
        f"--tau2-output-dir={out}",
        f"--tau2-run-id={label}",
        f"--tau2-agent-model={AGENT_MODEL}",
        f"--tau2-agent-base-url={server.base_url}",
        f"--tau2-user-model={USER_MODEL}",
        f"--tau2-user-base-url={server.base_url}",
    ]


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
    args = [
        "-k",
        "tau2_retail",
        "-q",
        "-n",
        str(workers),
        *run_args(server, out, label),
        "--tau2-trials",
        str(trials),
    ]
    if tasks:
        args.append(f"--tau2-tasks={tasks}")
    run: Run = run_suite(args, probe_dir=work / "probe" / label)
    stats = server.command("stats")
    run_dir = out / label
    completions = sum(stats["requests"].values())
    recorded = completions_from_metrics(run_dir)
    by_role: Counter[str] = Counter()
    for usage in recorded.values():
        by_role.update(usage)
    scenarios = run.scenario_tests()
    calls = {sid: usage["agent"] + usage["user"] for sid, usage in recorded.items()}
    steady = [t for t in scenarios if not t["first"]]
    firsts = [t for t in scenarios if t["first"]]
    steady_calls = sum(calls.get(t["scenario_id"], 0) for t in steady)
    scenario_cpu = sum(t["cpu"] for t in scenarios)
    startup = stats["first_request"] - run.started if stats["first_request"] else float("nan")
    last_reply = (stats["last_request"] or run.started) + latency
    ideal = startup + completions * latency / workers
    summary = json.loads((run_dir / "summary.json").read_text())
    figures = {
        "label": label,
        "workers": workers,
        "trials": trials,
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
        "scenario_tests_cpu_ms_per_completion": scenario_cpu / completions * 1000,
        "first_scenario_cpu_s_median": median(t["cpu"] for t in firsts),
        "tree_cpu_ms_per_completion": run.cpu_s / completions * 1000,
        "tree_cpu_s": run.cpu_s,
        "server_cpu_s": stats["cpu_s"],
        "server_cpu_ms_per_completion": stats["cpu_s"] / completions * 1000,
        "worker_maxrss_mb": max((p["maxrss_mb"] for p in run.workers), default=float("nan")),
        "controller_maxrss_mb": (run.controller or {}).get("maxrss_mb", float("nan")),
        "server_maxrss_mb": stats["maxrss_mb"],
        "artifacts": artifact_sizes(run_dir),
        "processes": [
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
        ],
        "load_average_after": load_average(),
    }
    print(
        f"  {label}: wall {run.wall_s:.1f} s, ideal {ideal:.1f} s "
        f"(x{figures['wall_over_ideal']:.3f}), {completions} completions, harness CPU "
        f"{figures['harness_cpu_ms_per_completion']:.2f} ms/completion, rc {run.returncode}, "
        f"load {load_average()[0]:.2f}: {run.last_line()}",
        flush=True,
    )
    shutil.rmtree(run_dir, ignore_errors=True)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--workers", default="1,4,8", help="comma-separated -n values")
    parser.add_argument("--repeats", type=int, default=3, help="runs per -n (>= 4 workers)")
    parser.add_argument("--repeats-serial", type=int, default=1, help="runs at -n 1 (4 min each)")
    parser.add_argument("--trials-workers", type=int, default=8, help="-n of the 4-trial run")
    parser.add_argument("--no-trials", action="store_true", help="skip the 4-trial run")
    parser.add_argument("--tasks", help="only these task ids (--tau2-tasks), for a quick look")
    args = parser.parse_args()
    if args.serve:
        return serve(args.latency)
    if not os.environ.get("TAU2_DATA_DIR"):
        parser.error("set TAU2_DATA_DIR to the data folder")

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
        for workers in (int(n) for n in args.workers.split(",")):
            repeats = args.repeats_serial if workers == 1 else args.repeats
            for number in range(repeats):
                figures["runs"].append(
                    measure(
                        server,
                        workers=workers,
                        trials=1,
                        latency=args.latency,
                        work=work,
                        label=f"n{workers}-{number}",
                        tasks=args.tasks,
                    )
                )
        if not args.no_trials:
            figures["runs"].append(
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
    finally:
        server.close()
        shutil.rmtree(work, ignore_errors=True)
    figures["load_average_at_end"] = load_average()
    report(figures)
    path = write_json("server", figures)
    print(f"\nwritten: {path.relative_to(ROOT)}")
    return 0


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
    print(
        table(
            [
                "-n",
                "trials",
                "runs",
                "scenarios (succeeded)",
                "completions",
                "wall s",
                "ideal s",
                "wall/ideal",
                "start-up s",
                "first request to last reply / ideal",
                "after last reply s",
                "harness CPU ms/completion",
                "incl. first scenarios",
                "first scenario CPU s",
                "tree CPU ms/completion",
                "server CPU ms/completion",
                "worker peak RSS MB",
                "artifacts KB/scenario",
            ],
            [
                [
                    r["workers"],
                    r["trials"],
                    r["repeats"],
                    f"{r['scenarios']} ({r['succeeded']})",
                    r["completions"] if r["agree"] else f"{r['completions']} (suite disagrees)",
                    r["wall_s"],
                    r["ideal_s"],
                    r["wall_over_ideal"],
                    r["startup_s"],
                    r["model_phase_over_ideal"],
                    r["after_last_reply_s"],
                    r["harness_cpu_ms_per_completion"],
                    r["scenario_tests_cpu_ms_per_completion"],
                    r["first_scenario_cpu_s_median"],
                    r["tree_cpu_ms_per_completion"],
                    r["server_cpu_ms_per_completion"],
                    r["worker_maxrss_mb"],
                    r["artifact_kb"],
                ]
                for r in rows
            ],
        )
    )
    n8 = [r for r in rows if r["workers"] == 8 and r["trials"] == 1]
    cpu = max(r["harness_cpu_ms_per_completion"] for r in rows)
    rss = max(r["worker_maxrss_mb"] for r in rows)
    checks = []
    if n8:
        checks.append(
            [
                "wall / ideal at -n 8",
                TARGETS["wall_over_ideal_n8"],
                n8[0]["wall_over_ideal"],
                verdict(n8[0]["wall_over_ideal"], TARGETS["wall_over_ideal_n8"]),
            ]
        )
    checks.append(
        [
            "harness CPU per completion, ms (worst run)",
            TARGETS["cpu_ms_per_completion"],
            cpu,
            verdict(cpu, TARGETS["cpu_ms_per_completion"]),
        ]
    )
    checks.append(
        [
            "peak RSS per worker, MB (worst run)",
            TARGETS["worker_maxrss_mb"],
            rss,
            verdict(rss, TARGETS["worker_maxrss_mb"]),
        ]
    )
    print("\nTargets\n")
    print(table(["target", "limit", "measured", "verdict"], checks))


if __name__ == "__main__":
    sys.exit(main())
