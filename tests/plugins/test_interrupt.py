"""Ctrl-C with the plugins users really have loaded (syrupy, hypothesis, anyio, xdist) and
``filterwarnings = error``: exit 2, the summaries of what finished, the resume command; then
``--tau2-resume`` alone (no repeated ``--tau2-tasks``) completes the run."""

from __future__ import annotations

import os
import re
import signal
import time
import warnings

import pytest

from tau2_retail.plugins import repeated_interrupt
from tau2_retail.plugins.repeated_interrupt import (
    FORCED_QUIT_NOTICE,
    REPEATED_INTERRUPT_NOTICE,
    TERMINATED_NOTICE,
    RepeatedInterrupt,
    forced_quit_status,
)
from tau2_retail.results.stopped_spending import STOPPED_SPENDING_FILE
from tau2_retail.testing.bench import USER_INI

from .conftest import Bench, distributed

# Ctrl-C as a CI runner sends it: SIGINT to the main pytest process (xdist stops its workers)
_SIGINT = """\
import os
import signal


def pytest_runtest_call(item):
    if item.nodeid.endswith("[tau2_retail__5]"):
        main = os.getppid() if hasattr(item.config, "workerinput") else os.getpid()
        os.kill(main, signal.SIGINT)
"""

TASKS = "0,1,2,3,5,6,7,8,9,11"


@pytest.mark.parametrize("sent", ["SIGINT", "SIGTERM"])
def test_ctrl_c_ends_with_exit_2_the_summaries_and_the_resume_command(
    bench: Bench, xdist: tuple[str, ...], sent: str
) -> None:
    """SIGTERM (``timeout``, a CI job's time limit, ``docker stop``) stops the run as Ctrl-C
    does: it killed it at once, with no summary, report or closing lines."""
    # a user's ini, without the ``-p no:syrupy ...`` of the other plugin tests
    (bench.path / "pytest.ini").write_text(USER_INI, encoding="utf-8")
    (bench.path / "conftest.py").write_text(_SIGINT.replace("SIGINT", sent), encoding="utf-8")

    result = bench.run(*xdist, f"--tau2-tasks={TASKS}", "--tau2-run-id=int")

    output = result.stdout.str() + result.stderr.str()
    assert "syrupy" in result.stdout.str()  # the plugin users have is loaded
    assert result.ret == pytest.ExitCode.INTERRUPTED, output
    terminated = result.stderr.str().count(TERMINATED_NOTICE.strip())
    assert terminated == (sent == "SIGTERM"), output
    assert "INTERNALERROR" not in output
    assert "Traceback" not in output
    run_dir = bench.run_dir("int")
    for name in ("summary.json", "all_summary.txt", "run_args.json", "report.html"):
        assert (run_dir / name).is_file(), name
    on_disk = {path.parent.name for path in run_dir.glob("*/metrics.json")}
    summary = bench.summary("int")
    finished = {row["scenario_id"] for row in summary["scenarios"]}
    # every scenario that finished is in the summary: its record is written (a Ctrl-C during
    # __5's test assertions comes after the scenario itself ran and was scored)
    assert finished == on_disk
    assert len(finished) >= 3
    assert not (run_dir / STOPPED_SPENDING_FILE).exists()  # no prices: nothing counted
    assert "interrupted_cost" not in summary
    assert "stopped_spending_counted" not in summary
    resume = [line for line in result.stdout.lines if "resume with: " in line]
    assert len(resume) == 1
    assert resume[0].endswith("--tau2-resume=int")
    # the last line, below pytest's KeyboardInterrupt banner and its count of tests
    assert [line for line in result.stdout.lines if line.strip()][-1] == resume[0]
    assert result.stdout.str().index("KeyboardInterrupt") < result.stdout.str().index(resume[0])
    # scenarios Ctrl-C kept from starting are "not run (interrupted)", not lost
    reasons = summary["lost_reasons"]
    assert "not run (the session ended before it started)" not in reasons.values()
    unstarted = [key for key, reason in reasons.items() if reason == "not run (interrupted)"]
    counts = next(line for line in result.stdout.lines if line.startswith("infra errors: "))
    if unstarted:
        assert f"not run (interrupted): {len(unstarted)} (excluded" in counts
    assert f"lost scenarios: {len(summary['lost']) - len(unstarted)}" in counts
    assert not [line for line in result.stdout.lines if line.startswith("LOST ")]

    # resume reads the tasks from the stored run: no --tau2-tasks
    (bench.path / "conftest.py").unlink()
    resumed = bench.run(*xdist, "--tau2-resume=int")

    assert resumed.ret == pytest.ExitCode.OK, resumed.stdout.str()
    rerun = resumed.parseoutcomes().get("passed", 0)
    assert rerun == 10 - len(on_disk)
    summary = bench.summary("int")
    assert [row["scenario_id"] for row in summary["scenarios"]] == [
        f"tau2_retail__{task}" for task in TASKS.split(",")
    ]
    assert summary["lost"] == []
    if not distributed(xdist):
        assert resumed.parseoutcomes().get("deselected") == len(on_disk)


def test_sigterm_during_a_scenario_test_without_workers_says_so_on_stderr(bench: Bench) -> None:
    """Without xdist the signal lands while pytest captures the test's output, file
    descriptor 2 included: the notice went into that capture and was lost with it (the run
    stopped, silently). Under ``-n 2`` the controller captures nothing, so it was seen."""
    (bench.path / "pytest.ini").write_text(USER_INI, encoding="utf-8")
    (bench.path / "conftest.py").write_text(_SIGINT.replace("SIGINT", "SIGTERM"), encoding="utf-8")

    result = bench.run("-n", "0", "--tau2-tasks=0,5", "--tau2-run-id=term")

    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, output
    assert result.stderr.str().count(TERMINATED_NOTICE.strip()) == 1, output
    assert TERMINATED_NOTICE.strip() not in result.stdout.str()


# Ctrl-C pressed again while the run writes its summary raised KeyboardInterrupt inside that
# work: Python's traceback, no summary.json, death by SIGINT instead of exit 2.
_SIGINT_AGAIN = (
    _SIGINT
    + """

def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):
        os.kill(os.getpid(), signal.SIGINT)
"""
)
# ... and a third press (while pytest reports the first, then in the summary): quit at once
_SIGINT_THRICE = (
    _SIGINT_AGAIN
    + """

def pytest_keyboard_interrupt(excinfo):
    os.kill(os.getpid(), signal.SIGINT)
"""
)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_ctrl_c_pressed_again_while_stopping_is_a_notice_not_a_traceback(
    bench: Bench, workers: str
) -> None:
    (bench.path / "pytest.ini").write_text(USER_INI, encoding="utf-8")
    (bench.path / "conftest.py").write_text(_SIGINT_AGAIN, encoding="utf-8")

    result = bench.run("-n", workers, f"--tau2-tasks={TASKS}", "--tau2-run-id=again")

    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, output
    assert "Traceback" not in output
    assert result.stderr.str().count(REPEATED_INTERRUPT_NOTICE.strip()) == 1, output
    run_dir = bench.run_dir("again")
    finished = {path.parent.name for path in run_dir.glob("*/metrics.json")}
    assert {row["scenario_id"] for row in bench.summary("again")["scenarios"]} == finished
    assert result.stdout.lines[-1].endswith("--tau2-resume=again")


def _sigterm(conftest: str) -> str:
    """``conftest`` sending SIGTERM where it sends SIGINT, each signal another (not the same one
    again, as within :data:`SAME_SIGTERM_SECONDS`)."""
    return re.sub(
        r"( +)(os\.kill\(os\.getpid\(\))",
        r"\1__import__('time').sleep(1.2)\n\1\2",
        conftest.replace("SIGINT", "SIGTERM"),
    )


@pytest.mark.parametrize("sent", ["SIGINT", "SIGTERM"])
def test_ctrl_c_a_third_time_quits_at_once_and_the_run_resumes(bench: Bench, sent: str) -> None:
    """Further presses were ignored until the stop ended: a stop that hung could be left only
    with ``kill``. SIGTERM counts the same way, and says so in its own name."""
    (bench.path / "pytest.ini").write_text(USER_INI, encoding="utf-8")
    thrice = _SIGINT_THRICE if sent == "SIGINT" else _sigterm(_SIGINT_THRICE)
    (bench.path / "conftest.py").write_text(thrice, encoding="utf-8")

    result = bench.run(f"--tau2-tasks={TASKS}", "--tau2-run-id=thrice")

    output = result.stdout.str() + result.stderr.str()
    assert result.ret == forced_quit_status(signal.Signals[sent]), output
    assert "Traceback" not in output
    named = "Ctrl-C" if sent == "SIGINT" else sent
    assert REPEATED_INTERRUPT_NOTICE.strip().replace("Ctrl-C", named) in result.stderr.str()
    assert FORCED_QUIT_NOTICE.strip().replace("Ctrl-C", named) in result.stderr.str(), output
    assert not (bench.run_dir("thrice") / "summary.json").exists()

    (bench.path / "conftest.py").unlink()
    resumed = bench.run("--tau2-resume=thrice")

    assert resumed.ret == pytest.ExitCode.OK, resumed.stdout.str()
    summary = bench.summary("thrice")
    assert len(summary["scenarios"]) == len(TASKS.split(","))
    assert summary["lost"] == []


_SIGINT_AT_THE_END = """\
import os
import signal


def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):
        os.kill(os.getpid(), signal.SIGINT)
"""


@pytest.mark.parametrize("workers", ["0", "2"])
def test_ctrl_c_while_a_finished_run_writes_its_summaries_does_not_stop_them(
    bench: Bench, workers: str
) -> None:
    """One press while the run wrote its summaries and report (a run of 912 takes seconds
    there) raised KeyboardInterrupt in that work: a traceback and no summary.json."""
    (bench.path / "pytest.ini").write_text(USER_INI, encoding="utf-8")
    (bench.path / "conftest.py").write_text(_SIGINT_AT_THE_END, encoding="utf-8")

    result = bench.run("-n", workers, "--tau2-tasks=0,1,2", "--tau2-run-id=end")

    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.OK, output
    assert "Traceback" not in output
    assert result.stderr.str().count(REPEATED_INTERRUPT_NOTICE.strip()) == 1, output
    assert len(bench.summary("end")["scenarios"]) == 3
    assert (bench.run_dir("end") / "report.html").is_file()


# A worker still stopping 5 s after the controller shut its gateway down: execnet sends the
# worker a SIGINT of its own (gateway_base's _terminate_execution), as a loaded machine does to
# a worker writing its last scenario; each such worker repeated the controller's notice.
_SIGINT_THEN_A_SLOW_WORKER = (
    _SIGINT
    + """

def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):
        import time

        time.sleep(8)
"""
)


def test_ctrl_c_under_xdist_gets_one_notice_however_long_the_workers_take(
    bench: Bench,
) -> None:
    (bench.path / "pytest.ini").write_text(USER_INI, encoding="utf-8")
    (bench.path / "conftest.py").write_text(
        _SIGINT_THEN_A_SLOW_WORKER
        + """

def pytest_keyboard_interrupt(excinfo):
    os.kill(os.getpid(), signal.SIGINT)
""",
        encoding="utf-8",
    )

    result = bench.run("-n", "2", f"--tau2-tasks={TASKS}", "--tau2-run-id=slow")

    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, output
    assert "Traceback" not in output
    assert result.stderr.str().count(REPEATED_INTERRUPT_NOTICE.strip()) == 1, output
    assert FORCED_QUIT_NOTICE.strip() not in output
    assert (bench.run_dir("slow") / "summary.json").is_file()


def test_a_worker_takes_ctrl_c_silently() -> None:
    exits: list[int] = []
    adapter = RepeatedInterrupt(exit_now=exits.append, speaks=False)
    adapter._pressed(signal.SIGINT, None)
    assert exits == []
    adapter._pressed(signal.SIGINT, None)
    assert exits == [130]


def test_the_teams_own_tests_keep_pytests_ctrl_c(bench: Bench) -> None:
    """The plugin is loaded in every pytest session of a project: its Ctrl-C handling took over
    a session of the team's own tests too, with a notice about scenarios it did not have."""
    (bench.path / "pytest.ini").write_text(USER_INI, encoding="utf-8")
    (bench.path / "conftest.py").write_text(_SIGINT_AT_THE_END, encoding="utf-8")
    (bench.path / "test_mine.py").write_text("def test_mine():\n    pass\n", encoding="utf-8")

    result = bench.run("test_mine.py")

    assert REPEATED_INTERRUPT_NOTICE.strip() not in result.stderr.str()
    assert result.ret != pytest.ExitCode.OK  # pytest's own answer to a Ctrl-C there


def test_the_teams_own_tests_keep_the_default_sigterm(bench: Bench) -> None:
    (bench.path / "pytest.ini").write_text(USER_INI, encoding="utf-8")
    (bench.path / "test_mine.py").write_text(
        "import os, signal\n\n\ndef test_mine():\n    os.kill(os.getpid(), signal.SIGTERM)\n",
        encoding="utf-8",
    )

    result = bench.run("test_mine.py")

    assert result.ret == -signal.SIGTERM
    assert TERMINATED_NOTICE.strip() not in result.stderr.str()


def test_the_sigterm_gnu_timeout_sends_twice_at_once_counts_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``timeout`` signals the run, then its whole process group: the run got two SIGTERMs at
    once, and said "already stopping" for the second (a third signal then quit at once)."""
    clock = iter([100.0, 100.01, 100.5, 102.0, 104.0])
    monkeypatch.setattr(repeated_interrupt.time, "monotonic", lambda: next(clock))
    exits: list[int] = []
    adapter = RepeatedInterrupt(exit_now=exits.append, speaks=False)
    adapter._pid = os.getpid()
    with pytest.raises(KeyboardInterrupt):  # SIGINT's handler in a test: Python's own
        adapter._terminated(signal.SIGTERM, None)
    adapter._installed = True  # pytest took the KeyboardInterrupt: the session stops
    adapter._terminated(signal.SIGTERM, None)  # the group's copy, 10 ms later
    adapter._terminated(signal.SIGTERM, None)  # 0.5 s later: the same, again
    assert adapter._presses == 0
    adapter._terminated(signal.SIGTERM, None)  # a second SIGTERM: the notice
    assert adapter._presses == 1
    adapter._terminated(signal.SIGTERM, None)  # a third: quit at once
    assert exits == [128 + signal.SIGTERM]


def test_a_forked_child_dies_by_sigterm_as_ever() -> None:
    """multiprocessing's terminate() sends SIGTERM to a child forked by the agent's code,
    which inherits the run's handler: it raised KeyboardInterrupt there."""
    adapter = RepeatedInterrupt()
    outer = signal.signal(signal.SIGTERM, signal.SIG_DFL)  # this session's own plugin's
    adapter.pytest_sessionstart()
    try:
        with warnings.catch_warnings():  # 3.12+: fork of a process with threads (xdist's);
            warnings.simplefilter("ignore", DeprecationWarning)  # the child only signals
            child = os.fork()
        if child == 0:  # the child: the handler must let SIGTERM end it
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
            finally:
                os._exit(7)
        _, status = os.waitpid(child, 0)
    finally:
        adapter.restore()
        restored = signal.signal(signal.SIGTERM, outer)
    assert os.WIFSIGNALED(status), status
    assert os.WTERMSIG(status) == signal.SIGTERM
    assert restored is signal.SIG_DFL


def test_the_third_press_quits_with_the_shells_status_and_later_ones_do_nothing() -> None:
    exits: list[int] = []
    adapter = RepeatedInterrupt(exit_now=exits.append)
    for _ in range(4):
        adapter._pressed(signal.SIGINT, None)
    assert exits == [130]


# Ctrl-C landing inside another plugin's old-style hook wrapper (hypothesis has one around
# pytest_runtest_makereport): pluggy warns about the wrapper's teardown, and under
# ``filterwarnings = error`` that warning was an INTERNALERROR (exit 3) instead of exit 2. With
# scenarios started ahead (--tau2-concurrency) a process spends more of its time in such hooks.
_SIGINT_IN_A_WRAPPER = """\
import os
import signal

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    yield
    if call.when == "call" and item.nodeid.endswith("[tau2_retail__1]"):
        os.kill(os.getpid(), signal.SIGINT)
"""


def test_ctrl_c_inside_an_old_style_hook_wrapper_is_an_interruption(bench: Bench) -> None:
    # a user's ini, without the ``-p no:syrupy ...`` of the other plugin tests
    (bench.path / "pytest.ini").write_text(USER_INI, encoding="utf-8")
    (bench.path / "conftest.py").write_text(_SIGINT_IN_A_WRAPPER, encoding="utf-8")

    result = bench.run(
        "-n", "0", "--tau2-tasks=0,1,2", "--tau2-concurrency=3", "--tau2-run-id=wrapped"
    )

    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, output
    assert "INTERNALERROR" not in output
    assert (bench.run_dir("wrapped") / "summary.json").is_file()


# Ctrl-C while xdist's workers are still starting: before any scenario ran (syrupy, loaded
# beside us, then warned that it received no worker reports: a traceback and exit 1)
_SIGINT_AT_WORKER_START = """\
import os
import signal


def pytest_configure(config):
    # one Ctrl-C: the first worker's start-up sends it
    if getattr(config, "workerinput", {}).get("workerid") == "gw0":
        os.kill(os.getppid(), signal.SIGINT)
"""


def test_ctrl_c_while_the_workers_start_is_exit_2_without_a_traceback(bench: Bench) -> None:
    # a user's ini, without the ``-p no:syrupy ...`` of the other plugin tests
    (bench.path / "pytest.ini").write_text(USER_INI, encoding="utf-8")
    (bench.path / "conftest.py").write_text(_SIGINT_AT_WORKER_START, encoding="utf-8")

    result = bench.run("-n", "2", "--tau2-tasks=0,1", "--tau2-run-id=early")

    output = result.stdout.str() + result.stderr.str()
    assert "syrupy" in result.stdout.str()  # the plugin users have is loaded
    assert result.ret == pytest.ExitCode.INTERRUPTED, output
    assert "Traceback" not in output
    assert "INTERNALERROR" not in output
    assert "UserWarning" not in output
