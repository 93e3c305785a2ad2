"""Load: 456 scenarios (all 114 tasks x 4 trials) at ``-n 8`` against the loopback endpoint,
with 5 % of the agent's requests failing transiently (429 with and without Retry-After, 500,
502, 503, dropped connections, invalid JSON bodies, no choices), one trial of four tasks
broken for good and one trial of four others failed by the model. Every scenario ends with
exactly one classified result: none lost, none counted twice.

Size: about 1,400 requests and 70 injected faults; about 30 s on two cores (the run is
killed, and the test failed, after 300 s). The faults are a function of the request, so a
run is reproducible. ``TAU2_RELIABILITY_LOAD=small`` runs the 40 tasks of the test split
(160 scenarios) on slower machines.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Mapping

from tau2_retail.data.tasks import Task, trial_seeds
from tau2_retail.testing.bench import Bench
from tau2_retail.testing.loopback_server import (
    Completion,
    Drop,
    HttpError,
    InvalidJson,
    NoChoices,
    Reply,
)
from tau2_retail.testing.run_files import temp_files
from tau2_retail.testing.scripted_endpoint import Request, ScriptedEndpoint

TRIALS = 4
WORKERS = "8"
FAULT_RATE = 0.05
TRANSIENT: dict[str, Reply] = {
    "429 Retry-After: 0": HttpError.rate_limited(retry_after="0"),
    "429": HttpError.rate_limited(),
    "500": HttpError.server_error(500),
    "502": HttpError.server_error(502),
    "503": HttpError.server_error(503),
    "dropped connection": Drop(),
    "invalid JSON body": InvalidJson(),
    "no choices": NoChoices(),
}
LOAD_TIMEOUT_SECONDS = 300.0
_OUTCOME_LINES = ("PASSED test_scenarios.py", "FAILED test_scenarios.py", "ERROR test_scenarios.py")


def _draw(request: Request) -> float:
    """A number in [0, 1) fixed by the request (same run, same faults)."""
    key = json.dumps(
        [request.task_id, request.seed, request.attempt, len(request.body["messages"])]
    )
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64


class Load:
    """5 % transient faults on every scenario's agent requests; one trial of a few tasks broken
    for good (429 on every attempt: infra errors) and one trial of a few others failed by the
    model (empty replies: agent_error)."""

    def __init__(self, *, broken: set[str], broken_seed: int, failing: set[str], failing_seed: int):
        self.broken = broken
        self.broken_seed = broken_seed
        self.failing = failing
        self.failing_seed = failing_seed
        self.injected: Counter[str] = Counter()

    def __call__(self, request: Request) -> Reply | None:
        if request.role != "agent":
            return None
        if request.task_id in self.broken and request.seed == self.broken_seed:
            return HttpError.rate_limited(retry_after="0")
        if request.task_id in self.failing and request.seed == self.failing_seed:
            return Completion(content="")
        draw = _draw(request)
        if draw < FAULT_RATE:
            kind = list(TRANSIENT)[int(draw / FAULT_RATE * len(TRANSIENT))]
            self.injected[kind] += 1
            return TRANSIENT[kind]
        return None


def _selected(tasks: Mapping[str, Task]) -> list[str]:
    if os.environ.get("TAU2_RELIABILITY_LOAD") == "small":
        return [task.id for task in tasks.values() if task.split == "test"]
    return list(tasks)


def _id(task: str, trial: int) -> str:
    return f"tau2_retail__{task}-trial{trial + 1}"


def test_load_every_scenario_gets_exactly_one_classified_result(
    bench: Bench, endpoint: ScriptedEndpoint, tasks: Mapping[str, Task]
) -> None:
    chosen = _selected(tasks)
    seeds = trial_seeds(300, TRIALS)
    load = Load(
        broken=set(chosen[0:4]),
        broken_seed=seeds[1],
        failing=set(chosen[4:8]),
        failing_seed=seeds[2],
    )
    endpoint.default_fault = load
    run = bench.run(
        "-n", WORKERS, "--dist=worksteal", f"--tau2-tasks={','.join(chosen)}",
        f"--tau2-trials={TRIALS}", "--tau2-run-id=load",
        *endpoint.args("agent", max_retries=3, timeout=10),
        timeout=LOAD_TIMEOUT_SECONDS,
    )  # fmt: skip
    assert run.returncode == 1, run.output[-5000:]

    everything = {_id(task, trial) for task in chosen for trial in range(TRIALS)}
    errors = {_id(task, 1) for task in load.broken}
    failures = {_id(task, 2) for task in load.failing}
    passes = everything - errors - failures

    # pytest: one outcome line per scenario, the right one
    lines = [line for line in run.stdout.splitlines() if line.startswith(_OUTCOME_LINES)]
    assert len(lines) == len(everything)
    outcomes = run.outcomes()
    assert {s for s, o in outcomes.items() if o == "passed"} == passes
    assert {s for s, o in outcomes.items() if o == "failed"} == failures
    assert {s for s, o in outcomes.items() if o == "error"} == errors

    # the summary: every scenario counted once, in its class
    summary = bench.summary("load")
    assert summary["counts"] == {
        "expected": len(everything),
        "reported": len(everything),
        "scored": len(everything) - len(errors),
        "succeeded": len(passes),
        "failed": len(failures),
        "infra_errors": len(errors),
        "lost": 0,
    }
    assert summary["stop_reasons"] == {
        "agent_exit": len(passes),
        "agent_error": len(failures),
        "infra_error": len(errors),
    }
    assert {e["scenario_id"] for e in summary["infra_errors"]} == errors
    assert [entry["k"] for entry in summary["pass_hat_k"]] == [1, 2, 3, 4]

    # the artifacts: one complete folder per scenario and trial, nothing half-written
    run_dir = bench.run_dir("load")
    on_disk = [
        json.loads(path.read_text(encoding="utf-8"))["scenario_id"]
        for path in run_dir.glob("tau2_retail__*/trial-*/metrics.json")
    ]
    assert sorted(on_disk) == sorted(everything)
    all_metrics = json.loads((run_dir / "all_metrics.json").read_text(encoding="utf-8"))
    assert sorted(m["scenario_id"] for m in all_metrics) == sorted(everything)
    assert temp_files(run_dir) == []

    # the faults were really there, and every transient one was survived
    assert sum(load.injected.values()) >= 0.02 * len(endpoint.log)
    assert len(load.injected) >= 6, load.injected
