"""The CI gate's exit status, lost scenarios, and ``--tau2-resume`` giving the summary of an
uninterrupted run.

The loopback endpoint is the agent and ends every conversation at once: task 0 fails (its gold
database is not the seed), 10 and 12 pass, and 3 is an infra error while the endpoint answers
500 (no retries). Tasks 0, 3, 10: success rate 1/2 = 50%, one infra error.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest

from .conftest import END, SERVER_ERROR, Bench, ScriptedEndpoint, distributed

TASKS = "--tau2-tasks=0,3,10,12"


@pytest.mark.parametrize(
    ("gate", "status", "line"),
    [
        (
            ("--tau2-min-pass-rate=0.5", "--tau2-max-infra-errors=1"),
            pytest.ExitCode.OK,
            "tau2 gate: profile default, success rate 50.00% [9.5, 90.5] (threshold 50.00%), "
            "infra errors 1 (max 1): PASS",
        ),
        (
            ("--tau2-min-pass-rate=0.5",),
            pytest.ExitCode.TESTS_FAILED,
            "tau2 gate: profile default, success rate 50.00% [9.5, 90.5] (threshold 50.00%), "
            "infra errors 1 (max 0): FAIL",
        ),
        (
            ("--tau2-min-pass-rate=0.51", "--tau2-max-infra-errors=1"),
            pytest.ExitCode.TESTS_FAILED,
            "tau2 gate: profile default, success rate 50.00% [9.5, 90.5] (threshold 51.00%), "
            "infra errors 1 (max 1): FAIL",
        ),
    ],
    ids=["pass", "fail-by-infra", "fail-by-rate"],
)
def test_the_gate_sets_the_exit_status_from_rate_and_infra_errors(
    bench: Bench,
    endpoint: ScriptedEndpoint,
    xdist: tuple[str, ...],
    gate: tuple[str, ...],
    status: pytest.ExitCode,
    line: str,
) -> None:
    endpoint.agent["3"] = SERVER_ERROR

    result = bench.run(*xdist, "--tau2-tasks=0,3,10", *endpoint.agent_args(), *gate)

    # whatever pytest counted (one failure, one error), the gate decides the status
    result.assert_outcomes(passed=1, failed=1, errors=1)
    assert result.ret == status
    assert line in result.stdout.lines


def test_a_failing_test_of_the_users_own_keeps_the_run_failed_whatever_the_gate_says(
    bench: Bench, endpoint: ScriptedEndpoint, xdist: tuple[str, ...]
) -> None:
    (bench.path / "test_mine.py").write_text("def test_mine():\n    assert False\n")

    result = bench.run(
        *xdist,
        "test_scenarios.py",
        "test_mine.py",
        "--tau2-tasks=10",
        *endpoint.agent_args(),
        "--tau2-min-pass-rate=0.5",
    )

    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert (
        "tau2 gate: profile default, success rate 100.00% [20.7, 100.0] (threshold 50.00%), "
        "infra errors 0 (max 0): PASS" in result.stdout.lines
    )
    result.stdout.fnmatch_lines(
        ["tau2: 1 test(s) outside the benchmark failed (first: test_mine.py::test_mine)*"]
    )


def test_without_a_gate_failures_and_errors_fail_the_run(
    bench: Bench, endpoint: ScriptedEndpoint
) -> None:
    endpoint.agent["0"] = SERVER_ERROR  # only an infra error and a pass

    result = bench.run("--tau2-tasks=0,10", *endpoint.agent_args())

    result.assert_outcomes(passed=1, errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert not [line for line in result.stdout.lines if line.startswith("tau2 gate:")]


# -- resume ---------------------------------------------------------------------------------

RUN_FILES = ("summary.json", "all_summary.txt", "all_metrics.json", "run_args.json")


def comparable(summary: dict[str, Any]) -> dict[str, Any]:
    """``summary.json`` without what differs between two runs of the same scenarios."""
    summary = copy.deepcopy(summary)
    for row in summary["scenarios"]:
        del row["duration_seconds"]
    configuration = summary["configuration"]
    del configuration["run_id"]
    for name in ("run_id", "resume"):
        del configuration["settings"][name]
        del configuration["sources"][name]
    return summary


def test_resume_reruns_incomplete_and_infra_scenarios_to_the_uninterrupted_summary(
    bench: Bench, endpoint: ScriptedEndpoint, xdist: tuple[str, ...]
) -> None:
    endpoint.agent["3"] = SERVER_ERROR
    first = bench.run(*xdist, TASKS, "--tau2-run-id=res", *endpoint.agent_args())
    first.assert_outcomes(passed=2, failed=1, errors=1)
    # a power loss while __12 was being written: its metrics.json is empty (not complete:
    # resume runs it again) and the summaries (written at the end) are missing; run_args.json
    # was written, durably, before the first scenario started
    run_dir = bench.run_dir("res")
    (run_dir / "tau2_retail__12" / "metrics.json").write_text("")
    for name in RUN_FILES:
        if name != "run_args.json":
            (run_dir / name).unlink()
    endpoint.reset()

    # the endpoint still fails: __3 runs again and stays an infra error, __12 completes
    second = bench.run(*xdist, TASKS, "--tau2-resume=res", *endpoint.agent_args())

    second.assert_outcomes(passed=1, errors=1, deselected=None if distributed(xdist) else 2)
    assert endpoint.agent_requests == Counter({"3": 1, "12": 1})
    assert "tau2: resuming: 2 scenario(s) already complete" in second.stdout.lines
    summary = bench.summary("res")
    assert summary["counts"]["expected"] == 4
    assert [entry["scenario_id"] for entry in summary["infra_errors"]] == ["tau2_retail__3"]
    endpoint.agent["3"] = END  # the endpoint is back
    endpoint.reset()

    third = bench.run(*xdist, TASKS, "--tau2-resume=res", *endpoint.agent_args())

    third.assert_outcomes(failed=1, deselected=None if distributed(xdist) else 3)
    assert endpoint.agent_requests == Counter({"3": 1})
    assert "tau2: resuming: 3 scenario(s) already complete" in third.stdout.lines
    assert third.ret == pytest.ExitCode.TESTS_FAILED

    uninterrupted = bench.run("-n", "0", TASKS, "--tau2-run-id=ref", *endpoint.agent_args())
    uninterrupted.assert_outcomes(passed=2, failed=2)
    summary = bench.summary("res")
    assert summary["counts"]["infra_errors"] == 0
    assert comparable(summary) == comparable(bench.summary("ref"))
    assert (
        bench.read_json("res", "run_args.json")["expected"]
        == (bench.read_json("ref", "run_args.json")["expected"])
    )
    assert (run_dir / "all_summary.txt").is_file()
    complete = bench.summary("res")
    endpoint.reset()

    # nothing left to run: the run's summary again, and the status of the whole run
    fourth = bench.run(*xdist, TASKS, "--tau2-resume=res", *endpoint.agent_args())

    assert not endpoint.agent_requests
    assert "tau2: resuming: 4 scenario(s) already complete" in fourth.stdout.lines
    fourth.stdout.fnmatch_lines(["Overall success rate: 50.00% (2/4 scenarios)*"])
    assert fourth.ret == pytest.ExitCode.TESTS_FAILED  # two scenarios failed, as uninterrupted
    assert comparable(bench.summary("res")) == comparable(complete)


def test_a_crashed_worker_loses_only_its_scenario_and_the_gate_counts_it(bench: Bench) -> None:
    # only with workers: without xdist a crash ends the whole session
    with (bench.path / "conftest.py").open("a", encoding="utf-8") as conftest:
        conftest.write(
            # the worker dies before the scenario ran (no record): the scenario is lost
            "import os\n\n\n"
            "def pytest_runtest_setup(item):\n"
            "    if item.nodeid.endswith('[tau2_retail__12]'):\n"
            "        os._exit(3)\n"
        )

    result = bench.run(
        "-n",
        "2",
        "--tau2-tasks=0,10,12",
        "--tau2-agent-model=builtin:noop",
        "--tau2-run-id=crash",
        "--tau2-min-pass-rate=0.5",
    )

    result.assert_outcomes(passed=1, failed=2)
    assert "worker 'gw" in result.stdout.str()
    summary = bench.summary("crash")
    assert summary["lost"] == ["tau2_retail__12"]
    assert summary["counts"] == {
        "expected": 3,
        "reported": 2,
        "scored": 2,
        "succeeded": 1,
        "failed": 1,
        "infra_errors": 0,
        "lost": 1,
    }
    assert "infra errors: 0, lost scenarios: 1 (excluded from the rates; see all_summary.txt)" in (
        result.stdout.lines
    )
    # the rate (1/2) meets the threshold, but a lost scenario counts against the infra limit
    assert (
        "tau2 gate: profile default, success rate 50.00% [9.5, 90.5] (threshold 50.00%), "
        "infra errors 1 (max 0): FAIL" in result.stdout.lines
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
