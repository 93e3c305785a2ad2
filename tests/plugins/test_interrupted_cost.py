"""What the scenarios a Ctrl-C (or -x, or a timeout) stopped unscored had spent: stated under the
Cost line, naming what stopped them, and in ``summary.json`` (``interrupted_cost``,
``interrupted_by``), with prices and no budget, in one process and on two workers, and kept by
a resume and by ``summarize``; and what a scenario the budget stopped ahead of a test -x then
kept from running had spent (``not_run_cost``).

The loopback endpoint plays the agent, the customer and the judge, each priced; it holds the
second agent request of chosen scenarios in a hang (never billed), so when the test sends
SIGINT every scenario has either finished (its record holds its cost) or spent its first
requests and hangs: what the endpoint billed is exactly the records' total and what the
interrupted ones had spent.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tau2_retail.data.tasks import Task, load_user_guidelines
from tau2_retail.results.stopped_spending import STOPPED_SPENDING_FILE
from tau2_retail.testing.bench import Run
from tau2_retail.testing.loopback_server import Completion, Hang, Reply
from tau2_retail.testing.scripted_endpoint import END, Request, ScriptedEndpoint

from .conftest import Bench, in_one_process_and_two_workers

PRICES = {
    "price-agent": {"input": 2.0, "output": 8.0},
    "price-user": {"input": 0.5, "output": 1.5},
    "price-judge": {"input": 3.0, "output": 12.0},
}
TASKS = ("0", "1", "2", "3", "4", "5", "6", "7")
HELD = frozenset({"1", "4", "6"})
WAIT_SECONDS = 60.0


class HoldSecondAgentRequest:
    """A fault: the second agent request of each scenario of ``tasks`` hangs (its first one,
    and the customer's opening, are answered and billed); ``all_held`` is set once every one
    of them hangs."""

    def __init__(self, tasks: frozenset[str]) -> None:
        self.tasks = tasks
        self.held: set[str] = set()
        self.all_held = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, request: Request) -> Reply | None:
        if request.task_id not in self.tasks or request.role != "agent" or request.attempt < 1:
            return None
        with self._lock:
            self.held.add(request.task_id)
            if self.held == self.tasks:
                self.all_held.set()
        return Hang()


@pytest.fixture
def three_roles(tasks: Mapping[str, Task], data_dir: Path) -> Iterator[ScriptedEndpoint]:
    scripted = ScriptedEndpoint(tasks, load_user_guidelines(data_dir))
    with scripted.server:
        yield scripted


def _args(endpoint: ScriptedEndpoint, prices: Mapping[str, object] = PRICES) -> list[str]:
    return [
        *endpoint.args("agent", model="price-agent", max_retries=0),
        *endpoint.args("user", model="price-user"),
        *endpoint.args("judge", model="price-judge"),
        f"--tau2-prices={json.dumps(prices)}",
    ]


def _interrupted_run(
    bench: Bench, endpoint: ScriptedEndpoint, workers: tuple[str, ...], run_id: str
) -> tuple[Run, float]:
    """Run ``TASKS`` with every scenario in flight, send SIGINT to the main process once the
    others finished and the held ones hang; returns the run and what the endpoint billed."""
    hold = HoldSecondAgentRequest(HELD)
    endpoint.default_fault = hold
    before = endpoint.server.billed_usd(PRICES)
    run_dir = bench.run_dir(run_id)
    free = {f"tau2_retail__{task}" for task in TASKS if task not in HELD}
    started = bench.start(
        *workers, *_args(endpoint), f"--tau2-tasks={','.join(TASKS)}", f"--tau2-run-id={run_id}"
    )
    try:
        assert hold.all_held.wait(WAIT_SECONDS), "the held scenarios never reached the endpoint"
        deadline = time.monotonic() + WAIT_SECONDS
        while {path.parent.name for path in run_dir.glob("*/metrics.json")} != free:
            assert time.monotonic() < deadline, "the other scenarios wrote no records"
            time.sleep(0.05)
        started.process.send_signal(signal.SIGINT)  # to the main process, as a CI runner sends it
        run = started.wait()
    finally:
        started.kill()
    endpoint.default_fault = None
    assert run.returncode == pytest.ExitCode.INTERRUPTED, run.output
    return run, endpoint.server.billed_usd(PRICES) - before


@in_one_process_and_two_workers(conversations=8)
def test_what_the_interrupted_scenarios_spent_is_stated_beside_the_records_total(
    bench: Bench, three_roles: ScriptedEndpoint, workers: tuple[str, ...]
) -> None:
    """Ctrl-C with scenarios in flight: what they had spent was nowhere (the Cost line sums
    the records, and an interrupted scenario has none)."""
    run, billed = _interrupted_run(bench, three_roles, workers, "int")

    summary = bench.summary("int")
    assert {row["scenario_id"] for row in summary["scenarios"]} == {
        f"tau2_retail__{task}" for task in TASKS if task not in HELD
    }
    interrupted = summary.get("interrupted_cost", 0.0)
    assert interrupted > 0
    assert summary["interrupted_by"] == ["interrupt"]
    assert summary["cost"]["total"] + interrupted == pytest.approx(billed, abs=1e-5)
    line = (
        f"  and ${interrupted:,.4f} spent by the scenarios the interrupt stopped unscored "
        "(no record: not in the total)"
    )
    assert line in run.stdout
    assert line in (bench.run_dir("int") / "all_summary.txt").read_text(encoding="utf-8")
    ledger = bench.run_dir("int") / STOPPED_SPENDING_FILE
    assert summary["stopped_spending_counted"] == ledger.stat().st_size  # all in the summary


def test_a_resume_and_summarize_keep_what_the_interrupted_scenarios_spent(
    bench: Bench, three_roles: ScriptedEndpoint
) -> None:
    """The ledger the interrupted run's summary counted stays in the run folder: a resume and
    summarize add only what was appended past the offset that summary counted (nothing)."""
    workers = ("-n", "0", "--tau2-concurrency=8")
    _interrupted_run(bench, three_roles, workers, "res")
    first = bench.summary("res")
    interrupted = first["interrupted_cost"]
    ledger = bench.run_dir("res") / STOPPED_SPENDING_FILE
    lines = ledger.read_bytes()
    assert first["stopped_spending_counted"] == len(lines)

    resumed = bench.run(*workers, *_args(three_roles), "--tau2-resume=res")

    assert resumed.ret == 0, resumed.output
    summary = bench.summary("res")
    assert summary["counts"]["scored"] == len(TASKS)
    assert summary["interrupted_cost"] == interrupted  # spent and billed, though now scored
    billed = three_roles.server.billed_usd(PRICES)  # both invocations
    assert summary["cost"]["total"] + interrupted == pytest.approx(billed, abs=1e-5)

    summarized = bench.python("-m", "tau2_retail", "summarize", str(bench.run_dir("res")))

    assert summarized.returncode == 0, summarized.stderr
    assert bench.summary("res")["interrupted_cost"] == interrupted
    assert bench.summary("res")["stopped_spending_counted"] == len(lines)
    assert ledger.read_bytes() == lines  # the resume's scenarios all finished: nothing added


@pytest.mark.parametrize(
    ("workers", "held", "ended"),
    [
        (
            ("-n", "0", "--tau2-concurrency=8"),
            frozenset(TASKS) - {"0"},
            pytest.ExitCode.TESTS_FAILED,
        ),
        # --dist each deals 0, 2, 3 and 5 to one worker; the other's scenarios finish. xdist's
        # controller ends a session -x stopped as interrupted.
        (
            ("-n", "2", "--dist", "each", "--tau2-concurrency=4"),
            frozenset({"2", "3", "5"}),
            pytest.ExitCode.INTERRUPTED,
        ),
    ],
    ids=["one-process", "two-workers"],
)
def test_x_counts_what_the_scenarios_started_ahead_had_spent_and_says_x_stopped_them(
    bench: Bench,
    three_roles: ScriptedEndpoint,
    workers: tuple[str, ...],
    held: frozenset[str],
    ended: pytest.ExitCode,
) -> None:
    """``-x``: the scenarios started ahead of the failing test are cancelled without an
    interrupt; pytest tears the session's fixtures down in that test's teardown, before the run
    writes its summary, so what they had spent is in it (not left in the ledger). The line
    said "the interrupt" stopped them."""
    hold = HoldSecondAgentRequest(held)
    three_roles.default_fault = hold
    # scenario 0 fails (it ends at once, its database is not the gold one), once the others
    # have spent their first requests
    three_roles.agent["0"] = Completion(tool_calls=END.tool_calls, latency=3.0)

    run = bench.run(
        *workers, "-x", *_args(three_roles), f"--tau2-tasks={','.join(TASKS)}", "--tau2-run-id=x"
    )

    assert hold.all_held.is_set(), "the held scenarios never reached the endpoint"
    assert run.ret == ended, run.output
    summary = bench.summary("x")
    scored = {f"tau2_retail__{task}" for task in TASKS if task not in held}
    assert {row["scenario_id"] for row in summary["scenarios"]} == scored
    interrupted = summary["interrupted_cost"]
    assert interrupted > 0
    billed = three_roles.server.billed_usd(PRICES)
    assert summary["cost"]["total"] + interrupted == pytest.approx(billed, abs=1e-5)
    line = (
        f"  and ${interrupted:,.4f} spent by the scenarios -x/--maxfail stopped unscored "
        "(no record: not in the total)"
    )
    assert line in run.stdout
    assert "the interrupt" not in run.stdout
    assert summary["interrupted_by"] == ["maxfail"]
    ledger = bench.run_dir("x") / STOPPED_SPENDING_FILE
    assert summary["stopped_spending_counted"] == ledger.stat().st_size


# what pytest-timeout's signal method does (its SIGALRM handler, for the whole test): the test
# sends the signal once the held scenario hangs, so the timeout fires mid-conversation. It fails
# the test where the signal lands; here only in the event loop's wait for I/O, where a test
# waiting for its scenario spends its time (landing in a read's callback, it fails that
# request instead: an infra error, nothing cancelled), else it tries again 50 ms later.
SIGNAL_TIMEOUT = """
import signal

import pytest


def _timeout(signum, frame):
    if frame is not None and frame.f_code.co_name == "select":
        pytest.fail("Timeout (>30.0s) from pytest-timeout.")
    signal.setitimer(signal.ITIMER_REAL, 0.05)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    signal.signal(signal.SIGALRM, _timeout)
    try:
        return (yield)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
"""


def test_a_timeout_counts_what_its_scenario_had_spent_and_says_a_timeout_stopped_it(
    bench: Bench, three_roles: ScriptedEndpoint
) -> None:
    """pytest-timeout's signal method fails a scenario's test while its conversation runs: the
    scenario is cancelled (its test is over), what it had spent is counted, and the line said
    "the interrupt" stopped it."""
    bench.pytester.makeconftest(SIGNAL_TIMEOUT)
    hold = HoldSecondAgentRequest(frozenset({"0"}))
    three_roles.default_fault = hold
    started = bench.start(
        "-n", "0", "--tau2-concurrency=1", *_args(three_roles), "--tau2-tasks=0,1",
        "--tau2-run-id=alarm",
    )  # fmt: skip
    try:
        assert hold.all_held.wait(WAIT_SECONDS), "the held scenario never reached the endpoint"
        started.process.send_signal(signal.SIGALRM)
        run = started.wait()
    finally:
        started.kill()

    assert "Timeout (>30.0s) from pytest-timeout." in run.output
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.output
    summary = bench.summary("alarm")
    assert [row["scenario_id"] for row in summary["scenarios"]] == ["tau2_retail__1"]
    interrupted = summary["interrupted_cost"]
    assert interrupted > 0
    billed = three_roles.server.billed_usd(PRICES)
    assert summary["cost"]["total"] + interrupted == pytest.approx(billed, abs=1e-5)
    assert (
        f"  and ${interrupted:,.4f} spent by the scenarios a timeout stopped unscored "
        "(no record: not in the total)"
    ) in run.stdout
    assert summary["interrupted_by"] == ["timeout"]


# a judge request's estimate (its 1,024 output tokens at $10,000 per million) never fits the
# budget: the scenarios with NL assertions (2, 3 and 4 of TASKS) are stopped by the budget at
# their judge, having spent their conversation; the others finish
JUDGE_REFUSED = {**PRICES, "price-judge": {"input": 3.0, "output": 10_000.0}}


@pytest.mark.parametrize(
    ("workers", "ended"),
    [
        (("-n", "0", "--tau2-concurrency=8"), pytest.ExitCode.TESTS_FAILED),
        # --dist each deals 0, 2, 3 and 5 to one worker (-x stops it), 1, 4, 6 and 7 to the other
        (("-n", "2", "--dist", "each", "--tau2-concurrency=4"), pytest.ExitCode.INTERRUPTED),
    ],
    ids=["one-process", "two-workers"],
)
def test_what_the_budget_stopped_ahead_of_a_test_x_never_ran_is_counted(
    bench: Bench, three_roles: ScriptedEndpoint, workers: tuple[str, ...], ended: pytest.ExitCode
) -> None:
    """A scenario started ahead of its test and stopped by the budget told what it had spent,
    and that the budget stopped it, through its test's report only: -x stopped the session
    before that test ran, and the amount was in neither not_run_cost nor interrupted_cost
    (and the scenario was listed as lost)."""
    # scenario 0 fails (it ends at once), once the others have finished or been stopped
    three_roles.agent["0"] = Completion(tool_calls=END.tool_calls, latency=3.0)

    run = bench.run(
        *workers, "-x", *_args(three_roles, JUDGE_REFUSED), "--tau2-max-cost=5",
        f"--tau2-tasks={','.join(TASKS)}", "--tau2-run-id=ahead",
    )  # fmt: skip

    assert run.ret == ended, run.output
    summary = bench.summary("ahead")
    assert not {"tau2_retail__2", "tau2_retail__3"} & {
        r["scenario_id"] for r in summary["scenarios"]
    }
    stopped = summary.get("not_run_cost", 0.0)
    billed = three_roles.server.billed_usd(JUDGE_REFUSED)
    counted = summary["cost"]["total"] + stopped + summary.get("interrupted_cost", 0.0)
    assert counted == pytest.approx(billed, abs=1e-5), (summary["cost"]["total"], stopped, billed)
    assert f"  and ${stopped:,.4f} spent by the scenarios the budget stopped unscored" in run.stdout
    # listed as the budget's, as the line says (they were lost: "not run (the session ended
    # before it started)" in one process, "not run (interrupted)" on two workers)
    assert {"tau2_retail__2", "tau2_retail__3"} <= set(summary["not_run"])
    assert not {"tau2_retail__2", "tau2_retail__3"} & set(summary["lost"])
    assert "NOT RUN (budget) tau2_retail__2" in run.stdout
