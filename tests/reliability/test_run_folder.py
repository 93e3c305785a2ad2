"""The run folder is owned and whole from its first second (issue 21, item 1).

Before any scenario starts, the controller has created the run folder, locked it (``run.lock``,
an OS advisory lock held for the run's life) and described it (``run_args.json``: the settings
and the expected scenarios). So a second run with the same id and a resume of a live run stop at
start-up naming the live process; after SIGKILL the lock is gone with the process, resume
refuses another configuration and ``summarize`` lists every expected scenario without a result.
"""

from __future__ import annotations

import json
import os
import signal
import socket

import pytest

from tau2_retail.testing.bench import Bench, error_lines
from tau2_retail.testing.scripted_endpoint import HoldAgent, ScriptedEndpoint

WAIT_SECONDS = 60.0
TASKS = ("0", "1", "5")


def _scenario(task: str) -> str:
    return f"tau2_retail__{task}"


def test_a_live_run_owns_its_folder_and_a_killed_one_stays_described(
    bench: Bench, endpoint: ScriptedEndpoint
) -> None:
    first = HoldAgent()
    endpoint.faults[TASKS[0]] = first
    common = ("-n", "0", f"--tau2-tasks={','.join(TASKS)}", *endpoint.agent_args())
    started = bench.start(*common, "--tau2-run-id=live")
    run_dir = bench.run_dir("live")
    try:
        assert first.held.wait(WAIT_SECONDS), "the first scenario never reached the endpoint"
        # described before the first scenario ended: the settings and the expected list
        run_args = json.loads((run_dir / "run_args.json").read_text(encoding="utf-8"))
        assert run_args["expected"] == [_scenario(task) for task in TASKS]
        assert run_args["configuration"]["agent"]["model"] == "test-agent"
        holder = json.loads((run_dir / "run.lock").read_text(encoding="utf-8"))
        assert holder["pid"] == started.process.pid

        # a second run with the same id, and a resume of the live run: exit 4, one line
        live = f"pid {started.process.pid} on host {socket.gethostname()}"
        for option in ("--tau2-run-id=live", "--tau2-resume=live"):
            second = bench.run(*common, option)
            assert second.returncode == pytest.ExitCode.USAGE_ERROR, second.output
            lines = error_lines(second.stderr)
            assert len(lines) == 1, second.stderr
            assert f"run live is in use by {live} (started " in lines[0]
            assert "Traceback" not in second.output
        assert not list(run_dir.glob("*/metrics.json"))  # nothing ran twice

        os.kill(started.process.pid, signal.SIGKILL)  # no summary, no final run_args.json
        killed = started.wait()
    finally:
        started.kill()
    assert killed.returncode == -signal.SIGKILL
    assert not (run_dir / "summary.json").exists()

    # after SIGKILL: the lock died with its process, the description stayed
    other_model = bench.run(
        "-n", "0", "--tau2-resume=live", *endpoint.args("agent", model="other-agent")
    )  # fmt: skip
    assert other_model.returncode == pytest.ExitCode.USAGE_ERROR, other_model.output
    assert "agent_model: stored 'test-agent', now 'other-agent'" in other_model.stderr
    assert not list(run_dir.glob("*/metrics.json"))

    summarize = bench.python("-m", "tau2_retail", "summarize", str(run_dir))
    assert summarize.returncode == 0, summarize.stderr
    summary = bench.summary("live")
    assert summary["lost"] == [_scenario(task) for task in TASKS]
    assert summary["counts"]["expected"] == len(TASKS)
    assert "Lost scenarios (no metrics; excluded from rates): 3" in summarize.stdout

    # the same settings resume and complete the run
    first.release.set()
    resumed = bench.run(*common, "--tau2-resume=live")
    assert resumed.returncode == pytest.ExitCode.OK, resumed.output
    final = bench.summary("live")
    assert (final["counts"]["succeeded"], final["counts"]["lost"]) == (len(TASKS), 0)


def test_summarize_and_merge_of_a_live_run_are_refused_naming_its_pid(
    bench: Bench, endpoint: ScriptedEndpoint
) -> None:
    """Issue 30, item 16: ``summarize`` used to write its summaries into a live run's folder,
    and ``merge`` read it while it grew. Both stop with exit 4 naming the live process, and
    write nothing."""
    held = HoldAgent()
    endpoint.faults[TASKS[0]] = held
    started = bench.start(
        "-n", "0", f"--tau2-tasks={TASKS[0]}", *endpoint.agent_args(), "--tau2-run-id=live"
    )  # fmt: skip
    run_dir = bench.run_dir("live")
    into = bench.run_dir("merged")
    try:
        assert held.held.wait(WAIT_SECONDS), "the scenario never reached the endpoint"
        before = sorted(path.name for path in run_dir.iterdir())
        live = f"pid {started.process.pid} on host {socket.gethostname()} (started "

        summarize = bench.python("-m", "tau2_retail", "summarize", str(run_dir))
        merge = bench.python("-m", "tau2_retail", "merge", str(run_dir), "--into", str(into))

        for refused in (summarize, merge):
            assert refused.returncode == 4, refused.stderr
            lines = refused.stderr.splitlines()
            assert len(lines) == 1, refused.stderr
            assert lines[0].startswith(f"error: {run_dir} is in use by {live}"), lines[0]
            assert lines[0].endswith("then run this command again")
        assert sorted(path.name for path in run_dir.iterdir()) == before
        assert not (run_dir / "summary.json").exists()
        assert not into.exists()
    finally:
        started.kill()  # its lock goes with it

    summarized = bench.python("-m", "tau2_retail", "summarize", str(run_dir))
    assert summarized.returncode == 0, summarized.stderr
    assert bench.summary("live")["lost"] == [_scenario(TASKS[0])]


def test_a_stopped_session_counts_the_scenarios_it_never_started(bench: Bench) -> None:
    """``-x`` stops the session after the first failure: the scenarios it selected but never
    started are expected and lost (one line for them all), not silently absent."""
    run = bench.run(
        "-n", "0", "-x", "--tau2-tasks=0,1,5", "--tau2-run-id=stopped",
        "--tau2-agent-model=builtin:noop",
    )  # fmt: skip
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.output
    summary = bench.summary("stopped")
    assert summary["counts"]["expected"] == 3
    assert summary["counts"]["reported"] == 1
    assert summary["lost"] == [_scenario("1"), _scenario("5")]
    assert (
        "tau2: the session stopped early; 2 selected scenario(s) did not run (counted as lost); "
        "resume with: " in run.stdout
    )
    assert "LOST tau2_retail__1" not in run.stdout  # one line for them, not one each
