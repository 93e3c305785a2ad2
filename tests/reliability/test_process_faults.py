"""Process faults: an xdist worker killed with SIGKILL mid-run, Ctrl-C (SIGINT) or SIGTERM
mid-run, then ``--tau2-resume``; SIGKILL of the whole run, then ``summarize``; a writer killed
mid-write.
Nothing finished is lost, nothing half-written stays, and the resumed run's summary equals
that of a run that was never interrupted.

The endpoint holds chosen scenarios in a hang (the worker is then provably mid-scenario) and
tells the test through an event; a test-side probe in the project's conftest records which
process runs which scenario, so the test kills exactly the worker that runs the victim.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tau2_retail.plugins.repeated_interrupt import TERMINATED_NOTICE
from tau2_retail.testing.bench import Bench
from tau2_retail.testing.child import ready_child
from tau2_retail.testing.loopback_server import Completion, Hang, HttpError, Reply
from tau2_retail.testing.run_files import files_under, temp_files
from tau2_retail.testing.scripted_endpoint import HoldAgent, Request, ScriptedEndpoint, always

WAIT_SECONDS = 60.0
ARTIFACTS = (
    "metrics.json",
    "transcript.json",
    "conversation_log.txt",
    "final_agent_response.json",
    "reference_answer.json",
    "db_diff.json",
    "scenario_config/agent_system_prompt.txt",
    "scenario_config/user_system_prompt.txt",
    "scenario_config/tools.json",
    "scenario_config/scenario.json",
)


def _scenario(task: str) -> str:
    return f"tau2_retail__{task}"


def assert_artifacts_intact(run_dir: Path, scenarios: list[str]) -> None:
    """Each scenario's files all present and readable; no temporary file anywhere."""
    for scenario in scenarios:
        for name in ARTIFACTS:
            path = run_dir / scenario / name
            text = path.read_text(encoding="utf-8")
            if path.suffix == ".json":
                json.loads(text)
    assert temp_files(run_dir) == []


def comparable(run_summary: Mapping[str, Any]) -> dict[str, Any]:
    """A summary without what legitimately differs between two runs of the same scenarios:
    timings, the run id and how it was given."""
    summary: dict[str, Any] = json.loads(json.dumps(run_summary))
    settings = summary["configuration"]["settings"]
    for key in ("run_id", "resume"):
        settings.pop(key)
        summary["configuration"]["sources"].pop(key)
    summary["configuration"].pop("run_id")
    for row in summary["scenarios"]:
        row.pop("duration_seconds")
    return summary


# -- SIGKILL -----------------------------------------------------------------------------------

KILL_TASKS = ("0", "1", "5", "6", "7", "8", "9", "11")
VICTIM = "6"
CONFIG_DEBRIS = Path("scenario_config", ".tmp-tools.json.k1ll3d")


def test_worker_killed_loses_only_its_scenario(
    bench: Bench, endpoint: ScriptedEndpoint, tmp_path: Path
) -> None:
    victim = HoldAgent()
    endpoint.faults[VICTIM] = victim
    pids = tmp_path / "pids"
    pids.mkdir()
    bench.env["RELIABILITY_PID_DIR"] = str(pids)
    started = bench.start(
        "-n", "2", "--tau2-run-id=killed", f"--tau2-tasks={','.join(KILL_TASKS)}",
        *endpoint.args("agent"),
    )  # fmt: skip
    try:
        assert victim.held.wait(WAIT_SECONDS), "the victim scenario never reached the endpoint"
        worker = int((pids / f"test_tau2_retail[{_scenario(VICTIM)}]").read_text())
        assert worker != started.process.pid, "the victim must run in an xdist worker"
        os.kill(worker, signal.SIGKILL)
        run = started.wait()
    finally:
        started.kill()
    assert run.returncode == 1, run.output
    assert f"crashed while running 'test_scenarios.py::test_tau2_retail[{_scenario(VICTIM)}]'" in (
        run.output
    )
    assert "lost scenarios: 1" in run.stdout

    run_dir = bench.run_dir("killed")
    others = [_scenario(task) for task in KILL_TASKS if task != VICTIM]
    summary = bench.summary("killed")
    assert summary["lost"] == [_scenario(VICTIM)]
    assert summary["counts"] == {
        "expected": len(KILL_TASKS),
        "reported": len(others),
        "scored": len(others),
        "succeeded": len(others),
        "failed": 0,
        "infra_errors": 0,
        "lost": 1,
    }
    assert (
        f"Lost scenarios (no metrics; excluded from rates): 1\n  {_scenario(VICTIM)}: "
        "no metrics.json (interrupted, or its process was lost)\n"
        in (run_dir / "all_summary.txt").read_text()
    )
    assert_artifacts_intact(run_dir, others)
    assert not (run_dir / _scenario(VICTIM) / "metrics.json").exists()

    # a worker killed while writing leaves its temporary file (see the test below): plant
    # that debris in the victim's folder, as the kill could have
    victim_dir = run_dir / _scenario(VICTIM)
    for debris in (victim_dir / ".tmp-transcript.json.k1ll3d", victim_dir / CONFIG_DEBRIS):
        debris.parent.mkdir(parents=True, exist_ok=True)
        debris.write_text('{"messages": [{"role": "assis')

    # --tau2-resume runs the lost scenario only, and the run is whole
    victim.release.set()
    before = {path: path.stat().st_mtime_ns for path in files_under(run_dir / others[0])}
    rerun = bench.run(
        "-n", "2", "--tau2-resume=killed", f"--tau2-tasks={','.join(KILL_TASKS)}",
        *endpoint.args("agent"),
    )  # fmt: skip
    assert rerun.returncode == 0, rerun.output
    assert set(rerun.outcomes()) == {_scenario(VICTIM)}
    assert {path: path.stat().st_mtime_ns for path in files_under(run_dir / others[0])} == before
    final = bench.summary("killed")
    assert (final["counts"]["succeeded"], final["counts"]["lost"]) == (len(KILL_TASKS), 0)
    assert_artifacts_intact(run_dir, [*others, _scenario(VICTIM)])


_WRITER = """
import itertools, sys
from pathlib import Path
from tau2_retail.results.atomic import write_json_atomic

folder = Path(sys.argv[1])
values = [{"n": n, "blob": [str(n) * 64] * 20000} for n in range(3)]
print("ready", flush=True)
for i in itertools.count():
    write_json_atomic(folder / f"file{i % 4}.json", values[i % 3])
"""


def test_a_writer_killed_mid_write_leaves_no_half_file_under_a_real_name(
    tmp_path: Path, bench: Bench
) -> None:
    """SIGKILL at random moments of a loop of 1.3 MB atomic writes: every file under its real
    name is always complete; only temporary files can stay behind (resume removes them)."""
    values = [{"n": n, "blob": [str(n) * 64] * 20000} for n in range(3)]
    rng = random.Random(20261130)
    for _ in range(12):
        with ready_child(_WRITER, str(tmp_path), env=bench.env):
            time.sleep(rng.uniform(0.01, 0.1))
        for path in tmp_path.glob("file*.json"):
            assert json.loads(path.read_text(encoding="utf-8")) in values, path


# -- SIGINT ------------------------------------------------------------------------------------

INT_TASKS = ("0", "1", "5", "6", "7", "8", "9", "11", "13", "14", "17", "18")
# a mix of outcomes, so that "equal summaries" means something
FAILING = "13"  # the agent only sends empty messages: agent_error, a scored failure
BROKEN = "14"  # the endpoint always answers 503: infra_error, which resume runs again


class Gate:
    """Once ``after`` scenarios have ended, each new scenario hangs (until the run is killed).

    When both workers hang, every scenario they started before has finished and written its
    artifacts: the moment to press Ctrl-C.
    """

    def __init__(self, after: int) -> None:
        self.after = after
        self.ended = 0
        self.held: set[str] = set()
        self.both_held = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, request: Request) -> Reply | None:
        last = request.body["messages"][-1]
        with self._lock:
            if last["role"] == "user" and "###STOP###" in (last.get("content") or ""):
                self.ended += 1
            elif request.attempt == 0 and self.ended >= self.after:
                self.held.add(request.task_id)
                if len(self.held) == 2:
                    self.both_held.set()
                return Hang()
        return None


def _faults(endpoint: ScriptedEndpoint, gate: Gate | None) -> None:
    endpoint.reset()
    endpoint.default_fault = gate
    endpoint.faults[FAILING] = always(Completion(content=""))
    endpoint.faults[BROKEN] = always(HttpError.server_error(503))


def test_ctrl_c_then_resume_equals_an_uninterrupted_run(
    bench: Bench, endpoint: ScriptedEndpoint
) -> None:
    """Ctrl-C in a terminal signals the whole process group; a CI runner may signal only
    the main process (xdist then stops the workers itself). SIGTERM (``timeout``, a CI job's
    time limit, ``docker stop``; systemd signals the whole group) stops the run the same way;
    it killed it, with no summary (SIGTERM to the main process alone: tests/plugins/
    test_interrupt.py). Each, against one baseline."""
    common = (
        "-n", "2", f"--tau2-tasks={','.join(INT_TASKS)}",
        *endpoint.args("agent", max_retries=0),
    )  # fmt: skip
    _faults(endpoint, None)
    baseline = bench.run(*common, "--tau2-run-id=baseline")
    assert baseline.returncode == 1, baseline.output
    expected = comparable(bench.summary("baseline"))
    for sent in (("group", signal.SIGINT), ("main", signal.SIGINT), ("group", signal.SIGTERM)):
        _interrupt_and_resume(bench, endpoint, common, sent, expected)


def _interrupt_and_resume(
    bench: Bench,
    endpoint: ScriptedEndpoint,
    common: tuple[str, ...],
    sent: tuple[str, signal.Signals],
    expected: dict[str, Any],
) -> None:
    target, signum = sent
    run_id = f"interrupted-{target}-{signum.name}"
    gate = Gate(after=2)
    _faults(endpoint, gate)
    started = bench.start(*common, f"--tau2-run-id={run_id}")
    try:
        assert gate.both_held.wait(WAIT_SECONDS), "the workers were never both held"
        if target == "group":
            os.killpg(started.process.pid, signum)
        else:
            started.process.send_signal(signum)
        run = started.wait()
    finally:
        started.kill()
    assert run.returncode == pytest.ExitCode.INTERRUPTED, (sent, run.output)
    assert (TERMINATED_NOTICE.strip() in run.output) == (signum == signal.SIGTERM), run.output

    # the summary of what finished: every finished scenario, and only those
    run_dir = bench.run_dir(run_id)
    finished = {path.parent.name for path in run_dir.glob("*/metrics.json")}
    assert len(finished) >= gate.after
    assert not finished & {_scenario(task) for task in gate.held}
    summary = bench.summary(run_id)
    assert {row["scenario_id"] for row in summary["scenarios"]} == finished
    assert summary["counts"]["reported"] == len(finished)
    assert "Scenarios: " in (run_dir / "all_summary.txt").read_text()
    assert_artifacts_intact(run_dir, sorted(finished))

    # resume runs the rest (and the infra error again), and ends where the baseline ended
    _faults(endpoint, None)
    resumed = bench.run(*common, f"--tau2-resume={run_id}")
    assert resumed.returncode == 1, (sent, resumed.output)
    rerun = set(resumed.outcomes())
    all_scenarios = {_scenario(task) for task in INT_TASKS}
    assert rerun == (all_scenarios - finished) | {_scenario(BROKEN)}
    assert comparable(bench.summary(run_id)) == expected
    assert_artifacts_intact(run_dir, sorted(all_scenarios))


def test_sigkill_keeps_finished_artifacts_and_summarize_reads_them(
    bench: Bench, endpoint: ScriptedEndpoint
) -> None:
    """SIGKILL of the whole run (a CI runner's last resort after SIGTERM, the OOM killer) ends
    every process at once: no summary is written, but every finished scenario's artifacts are
    whole and ``python -m tau2_retail summarize`` turns them into one."""
    gate = Gate(after=2)
    _faults(endpoint, gate)
    started = bench.start(
        "-n", "2", f"--tau2-tasks={','.join(INT_TASKS)}", "--tau2-run-id=killed",
        *endpoint.args("agent", max_retries=0),
    )  # fmt: skip
    try:
        assert gate.both_held.wait(WAIT_SECONDS), "the workers were never both held"
        os.killpg(started.process.pid, signal.SIGKILL)
        run = started.wait()
    finally:
        started.kill()
    assert run.returncode == -signal.SIGKILL
    run_dir = bench.run_dir("killed")
    assert not (run_dir / "summary.json").exists()
    finished = {path.parent.name for path in run_dir.glob("*/metrics.json")}
    assert len(finished) >= gate.after
    assert_artifacts_intact(run_dir, sorted(finished))

    summarize = bench.python("-m", "tau2_retail", "summarize", str(run_dir))
    assert summarize.returncode == 0, summarize.stderr
    summary = bench.summary("killed")
    assert {row["scenario_id"] for row in summary["scenarios"]} == finished


def test_ctrl_c_with_conversations_in_flight_keeps_the_finished_ones(
    bench: Bench, endpoint: ScriptedEndpoint
) -> None:
    """``--tau2-concurrency``: Ctrl-C cancels the conversations in flight, every finished one
    keeps its artifacts (its test may not have run yet), and resume completes the run."""
    common = (
        "-n", "0", "--tau2-concurrency=4", f"--tau2-tasks={','.join(INT_TASKS)}",
        *endpoint.args("agent", max_retries=0),
    )  # fmt: skip
    _faults(endpoint, None)
    baseline = bench.run(*common, "--tau2-run-id=baseline")
    assert baseline.returncode == 1, baseline.output
    expected = comparable(bench.summary("baseline"))

    gate = Gate(after=2)
    _faults(endpoint, gate)
    started = bench.start(*common, "--tau2-run-id=interrupted")
    run_dir = bench.run_dir("interrupted")
    try:
        assert gate.both_held.wait(WAIT_SECONDS), "two conversations were never held"
        # the two that ended write their artifacts right after their last reply
        deadline = time.monotonic() + WAIT_SECONDS
        while len(list(run_dir.glob("*/metrics.json"))) < gate.after:
            assert time.monotonic() < deadline, "the ended conversations wrote no artifacts"
            time.sleep(0.05)
        started.process.send_signal(signal.SIGINT)
        run = started.wait()
    finally:
        started.kill()
    assert run.returncode == pytest.ExitCode.INTERRUPTED, run.output
    finished = {path.parent.name for path in run_dir.glob("*/metrics.json")}
    assert len(finished) >= gate.after
    assert not finished & {_scenario(task) for task in gate.held}  # cancelled, not kept
    assert_artifacts_intact(run_dir, sorted(finished))

    _faults(endpoint, None)
    resumed = bench.run(*common, "--tau2-resume=interrupted")
    assert resumed.returncode == 1, resumed.output
    all_scenarios = {_scenario(task) for task in INT_TASKS}
    assert set(resumed.outcomes()) == (all_scenarios - finished) | {_scenario(BROKEN)}
    assert comparable(bench.summary("interrupted")) == expected


# -- a worker crash under --dist each ------------------------------------------------------------


_CRASH_ON_12 = (
    # before the scenario runs (its fixture): no record, so it is lost
    "\n\ndef pytest_runtest_logstart(nodeid, location):\n"
    "    worker = os.environ.get('PYTEST_XDIST_WORKER')  # not the controller\n"
    "    if worker and nodeid.endswith('[tau2_retail__12]'):\n"
    "        os._exit(3)\n"
)
EACH_TASKS = ("0", "10", "12", "24", "25", "50")


def test_a_worker_crash_under_dist_each_loses_only_its_scenario(bench: Bench) -> None:
    """xdist replaces the crashed worker; the replacement takes the dead worker's share (a
    share computed from its new id ``gw2`` did not exist: INTERNALERROR, 5 scenarios
    unaccounted) and runs what the dead one had not run. Only the crashed scenario is lost."""
    with (bench.path / "conftest.py").open("a", encoding="utf-8") as conftest:
        conftest.write(_CRASH_ON_12)
    run = bench.run(
        "-n", "2", "--dist", "each", f"--tau2-tasks={','.join(EACH_TASKS)}",
        "--tau2-agent-model=builtin:noop", "--tau2-run-id=each",
    )  # fmt: skip

    assert "INTERNALERROR" not in run.output, run.output
    assert "replacing crashed worker" in run.stdout
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.output
    summary = bench.summary("each")
    assert summary["lost"] == [_scenario("12")]
    assert summary["counts"]["expected"] == len(EACH_TASKS)
    assert summary["counts"]["reported"] == len(EACH_TASKS) - 1
    assert "LOST tau2_retail__12: no metrics.json (interrupted, or its process was lost)" in (
        run.stdout
    )


@pytest.mark.parametrize("dist", ["each", "load"])
def test_a_crashed_worker_that_is_not_replaced_loses_its_share_as_lost_scenarios(
    bench: Bench, dist: str
) -> None:
    """With ``--max-worker-restart=0`` xdist does not replace the crashed worker: what it had
    not run yet is lost, each scenario listed with the reason, and the run ends as under a
    replaced crash (exit 1, summaries written). syrupy, loaded beside us, then warned that a
    worker sent it no report: under ``filterwarnings = error`` a traceback and no summary."""
    with (bench.path / "conftest.py").open("a", encoding="utf-8") as conftest:
        conftest.write(_CRASH_ON_12)
    run = bench.run(
        "-n", "2", "--dist", dist, "--max-worker-restart=0", "--tau2-run-id=alone",
        f"--tau2-tasks={','.join(EACH_TASKS)}", "--tau2-agent-model=builtin:noop",
    )  # fmt: skip

    assert "INTERNALERROR" not in run.output, run.output
    assert "Traceback" not in run.output, run.output
    assert "crashed and worker restarting disabled" in run.stdout
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.output
    summary = bench.summary("alone")
    lost = summary["lost"]
    assert _scenario("12") in lost
    assert summary["counts"]["expected"] == len(EACH_TASKS)
    assert summary["counts"]["lost"] == len(lost)
    assert summary["counts"]["reported"] == len(EACH_TASKS) - len(lost)
    assert "LOST tau2_retail__12: no metrics.json (interrupted, or its process was lost)" in (
        run.stdout
    )
    not_run = [scenario for scenario in lost if scenario != _scenario("12")]
    if dist == "each":
        # the crashed worker's share of the six (dealt as --tau2-shard 1/2 deals them)
        assert not_run == [_scenario("24"), _scenario("25")]
    for scenario in not_run:
        assert f"LOST {scenario}: not run: its worker " in run.stdout
        assert "crashed and no worker took it over" in run.stdout
