"""A small mixed run, scored by hand: pytest outcomes, run summary, and every artifact.

One loopback server plays agent and judge; the scripted customer is the user. The agent ends
the conversation at once (so only tasks whose gold database is the seed match), except on
task 3 where the endpoint answers 500 (an infra error, with no retries):

    task  split  persona       assertions  ending       DB   judge          result
    0     train  lisa_brenner  0           agent_exit   no   -              FAIL (DB)
    3     train  matt_delaney  1           infra_error  -    -              ERROR
    10    train  lisa_brenner  0           agent_exit   yes  -              PASS
    12    test   lisa_brenner  0           agent_exit   yes  -              PASS
    24    train  lisa_brenner  1           agent_exit   yes  0/1 (fails)    FAIL (NL only)
    62    test   matt_delaney  2           agent_exit   yes  2/2            PASS

Tasks 24 and 62 have no reference write, so only they match the (empty) recorded actions.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tau2_retail.engine.judge import JUDGE_SYSTEM_PROMPT
from tau2_retail.testing.run_files import METRICS_KEYS, unversioned_json

from .conftest import CHAT, END, SEED_DB_TASKS, SERVER_ERROR, Bench, ScriptedEndpoint

MIXED_TASKS = ("0", "3", "10", "12", "24", "62")
FILES = {
    "transcript.json",
    "conversation_log.txt",
    "final_agent_response.json",
    "reference_answer.json",
    "db_diff.json",
    "metrics.json",
    "scenario_config/agent_system_prompt.txt",
    "scenario_config/user_system_prompt.txt",
    "scenario_config/tools.json",
    "scenario_config/scenario.json",
}

# the NL assertions of the mixed run: task 24's 1 (not met) and another task's 2 (met), so the
# bootstrap over the two tasks: 0 (task 24 twice), 2/3 (both) or 1 (the other twice)
NL = "[0.0, 100.0]"


def figures(rate: dict[str, Any]) -> dict[str, Any]:
    """A rate's entry without its interval (tested on its own)."""
    return {key: value for key, value in rate.items() if not key.startswith("ci95")}


def run_mixed(bench: Bench, endpoint: ScriptedEndpoint, xdist: tuple[str, ...]) -> pytest.RunResult:
    endpoint.agent["3"] = SERVER_ERROR
    endpoint.judge_fails["24"] = {1}
    return bench.run(
        *xdist,
        "-rfE",
        f"--tau2-tasks={','.join(MIXED_TASKS)}",
        "--tau2-run-id=mix",
        *endpoint.agent_args(),
        *endpoint.judge_args(),
    )


def short_summary(result: pytest.RunResult, word: str) -> list[str]:
    prefix = f"{word} test_scenarios.py::test_tau2_retail["
    return sorted(
        line[len(prefix) :].split("]")[0] for line in result.stdout.lines if line.startswith(prefix)
    )


# The one scenario-running test that also runs without workers (the -n 0 smoke test): every
# other one runs once, with -n 2.
@pytest.mark.parametrize("xdist", [("-n", "0"), ("-n", "2")], ids=["n0", "n2"])
def test_mixed_run_outcomes_summary_and_artifacts(
    bench: Bench, endpoint: ScriptedEndpoint, xdist: tuple[str, ...]
) -> None:
    result = run_mixed(bench, endpoint, xdist)
    check_mixed_artifacts(bench.run_dir("mix"))

    # a model failure is a test failure; an infra error is a pytest ERROR
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert short_summary(result, "FAILED") == ["tau2_retail__0", "tau2_retail__24"]
    assert short_summary(result, "ERROR") == ["tau2_retail__3"]
    outcomes = result.parseoutcomes()
    assert (outcomes["passed"], outcomes["errors"]) == (3, 1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_tau2_retail[[]tau2_retail__3[]]*",
            "*Tau2InfraError: infra_error: agent: model 'test-agent' at *HTTP 500*"
            "re-run with --tau2-resume mix)",
        ]
    )
    assert endpoint.agent_requests == Counter(dict.fromkeys(MIXED_TASKS, 1))
    assert endpoint.judge_requests == Counter({"24": 1, "62": 1})

    summary = bench.summary("mix")
    # pytest counts the failed subtest of __24 besides __24 itself; the summary counts
    # scenarios, each once, and NL assertions in their own unit
    assert summary["counts"] == {
        "expected": 6,
        "reported": 6,
        "scored": 5,
        "succeeded": 3,
        "failed": 2,
        "infra_errors": 1,
        "lost": 0,
    }
    assert [(row["scenario_id"], row["status"]) for row in summary["scenarios"]] == [
        ("tau2_retail__0", "FAIL"),
        ("tau2_retail__3", "INFRA"),
        ("tau2_retail__10", "PASS"),
        ("tau2_retail__12", "PASS"),
        ("tau2_retail__24", "FAIL"),
        ("tau2_retail__62", "PASS"),
    ]
    assert figures(summary["success_rate"]) == {"passed": 3, "total": 5, "rate": 0.6}
    assert summary["success_rate"]["ci95"] == [
        pytest.approx(0.2307, abs=1e-4),
        pytest.approx(0.8824, abs=1e-4),
    ]
    assert figures(summary["task_success_rate"]) == {"passed": 3, "total": 5, "rate": 0.6}
    signals = summary["signals"]
    assert figures(signals["DB_STATE_MATCH"]) == {
        "gating": True,
        "passed": 4,
        "total": 5,
        "rate": 0.8,
    }
    assert figures(signals["CLEAN_EXIT"]) == {"gating": True, "passed": 5, "total": 5, "rate": 1.0}
    assert figures(signals["NL_ASSERTION"]) == {
        "applicable": True,
        "gating": True,
        "unit": "assertions",
        "passed": 2,
        "total": 3,
        "rate": pytest.approx(2 / 3),
        "scenarios": 2,
        "scenarios_passed": 1,
    }
    assert figures(signals["ACTION_MATCH"]) == {
        "gating": False,
        "excluded": True,
        "passed": 2,
        "total": 5,
        "rate": 0.4,
    }
    assert summary["judge_score"] == {"mean": pytest.approx(0.55), "n": 2}
    assert summary["tau2_reward"] == {"mean": pytest.approx(0.6), "n": 5}
    assert summary["pass_hat_k"] == []
    assert summary["stop_reasons"] == {"agent_exit": 5, "infra_error": 1}
    usage = summary["token_usage"]
    assert (usage["agent"]["n_calls"], usage["user"]["n_calls"], usage["judge"]["n_calls"]) == (
        5,
        6,
        2,
    )
    assert {name: figures(group) for name, group in summary["by_split"].items()} == {
        "test": {"n": 2, "succeeded": 2, "success_rate": 1.0},
        "train": {"n": 3, "succeeded": 1, "success_rate": pytest.approx(1 / 3)},
    }
    assert {name: figures(group) for name, group in summary["by_persona"].items()} == {
        "lisa_brenner": {"n": 4, "succeeded": 2, "success_rate": 0.5},
        "matt_delaney": {"n": 1, "succeeded": 1, "success_rate": 1.0},
    }
    assert summary["flaky_tasks"] == []  # one trial: nothing to disagree
    [infra] = summary["infra_errors"]
    assert infra["scenario_id"] == "tau2_retail__3"
    assert infra["detail"].startswith(f"agent: model 'test-agent' at {endpoint.base_url}")
    assert "HTTP 500" in infra["detail"]
    assert summary["models"] == {
        "agent": "test-agent",
        "user": "builtin:customer",
        "judge": "test-judge",
    }

    text = (bench.run_dir("mix") / "all_summary.txt").read_text(encoding="utf-8").splitlines()
    for line in (
        "Scenarios: 6 expected, 5 scored (3 succeeded, 2 failed), 1 infra error, 0 lost",
        "Overall success rate: 60.00% (3/5 scenarios) [23.1, 88.2]",
        "DB-State match: 80.00% (4/5 scenarios) [37.6, 96.4]",
        f"NL-Assertion pass: 66.67% (2/3 assertions) {NL}; 1/2 scenarios with all assertions met",
        "Action match (excluded from success): 40.00% (2/5 scenarios) [11.8, 76.9]",
        "tau2 reward (informational): mean 0.6000 over 5",
        "Infra errors (excluded from rates): 1",
    ):
        assert line in text
    assert any(line.startswith("  tau2_retail__3: agent: model 'test-agent'") for line in text)
    # the section in the order people read it: rates, infra and lost, where the run and its
    # report are; it closes the output (only pytest's closing line follows). The failed
    # scenarios are listed once, in pytest's short summary above it (-rA), not again here.
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "= tau2 retail =" in line)
    assert lines[start + 1 :] == [
        "Overall success rate: 60.00% (3/5 scenarios) [23.1, 88.2]",
        "Task success rate (CLEAN_EXIT ignored): 60.00% (3/5 scenarios) [23.1, 88.2]",
        "DB-State match: 80.00% (4/5 scenarios) [37.6, 96.4]",
        "Clean exit: 100.00% (5/5 scenarios) [56.6, 100.0]",
        f"NL-Assertion pass: 66.67% (2/3 assertions) {NL}; 1/2 scenarios with all assertions met",
        "Action match (excluded from success): 40.00% (2/5 scenarios) [11.8, 76.9]",
        "infra errors: 1, lost scenarios: 0 (excluded from the rates; see all_summary.txt)",
        f"run directory: {bench.run_dir('mix')}",
        f"report: {bench.run_dir('mix') / 'report.html'}",
        lines[-1],
    ]
    assert lines[-1].startswith("=")
    assert " failed" in lines[-1]
    assert any(line.startswith("FAILED") and "tau2_retail__0]" in line for line in lines[:start])
    # pytest's own failure message starts with the short reason
    assert "DB: 1 record differs" in lines


def read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def files_under(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def check_mixed_artifacts(run_dir: Path) -> None:
    judged = {"24", "62"}

    scenario_dirs = {f"tau2_retail__{task}" for task in MIXED_TASKS}
    run_files = {"all_summary.txt", "all_metrics.json", "summary.json", "run_args.json"}
    assert {p.name for p in run_dir.iterdir() if p.is_dir()} == scenario_dirs
    assert run_files <= {p.name for p in run_dir.iterdir() if p.is_file()}
    for task in MIXED_TASKS:
        folder = run_dir / f"tau2_retail__{task}"
        extra = {"judge_result.json"} if task in judged else set()
        if task == "3":  # the infra error: the endpoint's whole error body is kept
            extra.add("endpoint_error.txt")
        assert files_under(folder) == FILES | extra
        metrics = read(folder / "metrics.json")
        assert metrics.keys() >= METRICS_KEYS
        assert (metrics["scenario_id"], metrics["trial"], metrics["seed"]) == (
            f"tau2_retail__{task}",
            1,
            626729,
        )
        assert set(metrics["token_usage"]) == {"agent", "user", "judge"}
        for usage in metrics["token_usage"].values():
            assert set(usage) == {"n_calls", "prompt", "completion"}
        for turn in metrics["turns"]:
            assert set(turn) == {"timestamp", "role", "text"}
        assert set(metrics["success_breakdown"]) == {
            "passed",
            "failed",
            "not_applicable",
            "excluded",
        }
        assert metrics["success_breakdown"]["excluded"] == ["ACTION_MATCH"]
        if task != "3":
            assert ("nl_assertion_pass_rate" in metrics) is (task in judged)
            assert ("judge_score" in metrics) is (task in judged)
        assert (read(folder / "db_diff.json") == {}) is (task in SEED_DB_TASKS)
        assert read(folder / "final_agent_response.json") == [{"format_version": 1, "actions": []}]
        reference = read(folder / "reference_answer.json")
        assert (reference["actions"] == []) is (task in judged)
        config = read(folder / "scenario_config" / "scenario.json")
        assert (config["task_id"], config["trial"], config["seed"]) == (task, 1, 626729)
        assert {"split", "persona_name", "nl_assertions", "config"} <= config.keys()
        log = (folder / "conversation_log.txt").read_text(encoding="utf-8")
        assert "Hi! How can I help you today?" in log

    breakdown = read(run_dir / "tau2_retail__24" / "metrics.json")["success_breakdown"]
    assert breakdown["failed"] == ["NL_ASSERTION"]
    assert breakdown["passed"] == ["DB_STATE_MATCH", "CLEAN_EXIT"]
    judge = read(run_dir / "tau2_retail__24" / "judge_result.json")
    assert set(judge) == {
        "format_version",
        "score",
        "reason",
        "raw_reply",
        "judge_input",
        "nl_assertion_verdicts",
        "nl_assertion_pass_count",
        "nl_assertion_total",
        "nl_assertion_pass_rate",
    }
    assert judge["judge_input"]["system_prompt"] == JUDGE_SYSTEM_PROMPT
    assert [(v["index"], v["passed"], v["reason"]) for v in judge["nl_assertion_verdicts"]] == [
        (1, False, "not said")
    ]
    assert (judge["nl_assertion_pass_count"], judge["nl_assertion_total"]) == (0, 1)

    # every record states its format first (issue 27 item 5): the run's files, each scenario's
    # (final_agent_response.json's one object too); the spec-shaped data files none
    assert unversioned_json(run_dir) == []
    folder = run_dir / "tau2_retail__24"
    assert next(iter(read(folder / "judge_result.json").items())) == ("format_version", 1)
    assert "format_version" not in read(folder / "db_diff.json")
    assert isinstance(read(folder / "scenario_config" / "tools.json"), list)

    # the run files: every scenario's metrics once, the run's arguments
    all_metrics = read(run_dir / "all_metrics.json")
    assert all_metrics == [
        read(run_dir / f"tau2_retail__{task}" / "metrics.json") for task in MIXED_TASKS
    ]
    run_args = read(run_dir / "run_args.json")
    assert run_args["trials"] == 1
    assert run_args["expected"] == sorted(f"tau2_retail__{task}" for task in MIXED_TASKS)
    assert run_args["configuration"]["run_id"] == "mix"


def test_trials_are_scored_per_trial_with_pass_hat_k(
    bench: Bench, endpoint: ScriptedEndpoint, xdist: tuple[str, ...]
) -> None:
    # trial 2 of task 10 (seed 373753) only talks: the customer stops, the ending is user_stop;
    # the DB still matches, so the task succeeds but the scenario does not
    endpoint.agent["10"] = lambda seed: END if seed == 626729 else CHAT

    result = bench.run(
        *xdist, "--tau2-tasks=10,12", "--tau2-trials=2", "--tau2-run-id=tri", *endpoint.agent_args()
    )

    result.assert_outcomes(passed=3, failed=1)
    summary = bench.summary("tri")
    assert [(row["scenario_id"], row["status"]) for row in summary["scenarios"]] == [
        ("tau2_retail__10-trial1", "PASS"),
        ("tau2_retail__10-trial2", "FAIL"),
        ("tau2_retail__12-trial1", "PASS"),
        ("tau2_retail__12-trial2", "PASS"),
    ]
    assert summary["trials"] == 2
    assert figures(summary["success_rate"]) == {"passed": 3, "total": 4, "rate": 0.75}
    assert figures(summary["task_success_rate"]) == {"passed": 4, "total": 4, "rate": 1.0}
    # two trials of a task are one cluster: the bootstrap over the 2 tasks (1/2 or 2/2 each)
    assert summary["success_rate"]["ci95"] == [0.5, 1.0]
    assert summary["success_rate"]["ci95_method"] == "task-bootstrap"
    # every trial of every task passed: Wilson's over the 2 tasks, not over 4 trials
    assert summary["task_success_rate"]["ci95"] == [pytest.approx(0.3424, abs=1e-4), 1.0]
    assert summary["task_success_rate"]["ci95_method"] == "wilson-tasks"
    assert summary["flaky_tasks"] == [{"task_id": "10", "passed": 1, "trials": 2}]
    assert summary["stop_reasons"] == {"agent_exit": 3, "user_stop": 1}
    assert summary["tau2_reward"] == {"mean": 1.0, "n": 4}
    # pass^1 = (1/2 + 2/2) / 2; pass^2 = (C(1,2)/C(2,2) + C(2,2)/C(2,2)) / 2
    assert [(e["k"], e["value"], e["tasks"], e["ci95"]) for e in summary["pass_hat_k"]] == [
        (1, 0.75, 2, [0.5, 1.0]),
        (2, 0.5, 2, [0.0, 1.0]),
    ]
    text = (bench.run_dir("tri") / "all_summary.txt").read_text(encoding="utf-8")
    assert (
        "pass^1: 0.7500 [0.5000, 1.0000] (2 tasks)\npass^2: 0.5000 [0.0000, 1.0000] (2 tasks)\n"
    ) in text
    assert "Flaky tasks (trials disagree): 1\n  task 10: 1/2 trials passed\n" in text
    # the terminal's rates carry pass^1..k right after the overall rate
    lines = result.stdout.lines
    overall = lines.index("Overall success rate: 75.00% (3/4 scenarios) [50.0, 100.0]")
    assert lines[overall + 1] == (
        "pass^1 0.7500 [0.5000, 1.0000], pass^2 0.5000 [0.0000, 1.0000] (2 tasks)"
    )
    for task in ("10", "12"):
        seeds = [bench.metrics("tri", f"tau2_retail__{task}/trial-{k}")["seed"] for k in (1, 2)]
        assert seeds == [626729, 373753]
    assert bench.metrics("tri", "tau2_retail__10/trial-2")["stop_reason"] == "user_stop"


def test_a_report_that_runs_out_of_memory_costs_one_line_not_the_session_end(
    bench: Bench, xdist: tuple[str, ...]
) -> None:
    """A big run's report.html once raised MemoryError out of the session's end: a traceback,
    no tau2 section, no gate, exit 1, though every scenario passed and summary.json was
    written."""
    (bench.path / "conftest.py").write_text(
        "from tau2_retail.plugins import controller\n\n"
        "def out_of_memory(run_dir):\n"
        "    raise MemoryError\n\n"
        "controller.write_report = out_of_memory\n",
        encoding="utf-8",
    )

    run = bench.run(*xdist, "--tau2-tasks=10,12", "--tau2-min-pass-rate=1", "--tau2-run-id=mem")

    assert run.ret == pytest.ExitCode.OK, run.output
    assert "tau2: report.html not written: MemoryError" in run.stdout.lines
    assert "Overall success rate: 100.00% (2/2 scenarios) [34.2, 100.0]" in run.stdout.lines
    (gate,) = [line for line in run.stdout.lines if line.startswith("tau2 gate:")]
    assert gate.endswith(": PASS"), gate
    assert "Traceback" not in run.output
    assert bench.summary("mem")["counts"]["succeeded"] == 2
    assert not (bench.run_dir("mem") / "report.html").exists()
