"""Run summaries: figures computed by hand, pass^k, slices, the text, and ``summarize``."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from tau2_retail import codec
from tau2_retail.cli.main import main
from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.engine.scenario import Scenario
from tau2_retail.errors import ArtifactError, ArtifactFormatError
from tau2_retail.models.builtin import builtin_model
from tau2_retail.results import summary as summary_module
from tau2_retail.results.artifacts import scenario_dir, scenario_files
from tau2_retail.results.records import RunArgs, RunConfiguration, RunSummary
from tau2_retail.results.scenario_folder import put_scenario_files
from tau2_retail.results.summary import pass_hat_k, write_run_args
from tau2_retail.testing.offline import OfflineData

REPO = Path(__file__).resolve().parents[3]
CONFIGURATION = RunConfiguration.of_models(agent="gpt-test", user="gpt-user", judge="gpt-judge")
VERSIONS = {"tau2_retail": "0.1.0", "python": "3.11"}


def wilson(k: int, n: int) -> dict[str, Any]:
    """The ``ci95`` keys of a Wilson interval, from scipy (an independent reference)."""
    ci = binomtest(k, n).proportion_ci(method="wilson")
    return {"ci95": [pytest.approx(ci.low), pytest.approx(ci.high)], "ci95_method": "wilson"}


def metric(
    task_id: str,
    *,
    trial: int = 0,
    trials: int = 1,
    db: bool = True,
    exit_: bool = True,
    nl: tuple[int, int] | None = None,
    nl_total: int | None = None,
    judge_score: float | None = None,
    infra: bool = False,
    action: bool = True,
    split: str = "train",
    persona: str = "lisa_brenner",
    stop_reason: str | None = None,
    turns: int = 4,
    duration: float = 2.0,
) -> ScenarioMetrics:
    """A metrics record shaped like ``tau2_retail.engine.scenario.build_metrics`` produces."""
    stop = stop_reason or ("infra_error" if infra else "agent_exit" if exit_ else "max_steps")
    nl_passed = None if nl is None else nl[0] == nl[1]
    task_ok = db and nl_passed is not False and not infra
    name = f"tau2_retail__{task_id}"
    record: dict[str, Any] = {
        "format_version": 1,
        "scenario_name": name,
        "scenario_id": name if trials == 1 else f"{name}-trial{trial + 1}",
        "task_id": task_id,
        "trial": trial + 1,
        "seed": 1,
        "split": split,
        "persona_name": persona,
        "total_turns": turns,
        "turns": [{"timestamp": 0.0, "role": "user", "text": "hi"}] * turns,
        "duration_seconds": duration,
        "latency_stats": {},
        "stop_reason": stop,
        "stop_detail": "agent: connection refused" if infra else "",
        "infra_error": infra,
        "clean_exit": exit_ and not infra,
        "db_state_expected_hash": "e",
        "db_state_actual_hash": "e" if db else "a",
        "db_state_match": db,
        "is_action_match": action,
        "nl_assertion_total": nl[1] if nl else (nl_total or 0),
        "token_usage": {
            "agent": {"n_calls": 2, "prompt": 100, "completion": 10},
            "user": {"n_calls": 1, "prompt": 50, "completion": 5},
            "judge": (
                {"n_calls": 1, "prompt": 200, "completion": 20}
                if judge_score is not None
                else {"n_calls": 0, "prompt": 0, "completion": 0}
            ),
        },
        "success_breakdown": {},
        "is_successful": task_ok and exit_,
        "is_task_successful": task_ok,
        "profile": "default",
        "tau2_reward": 1.0 if task_ok and stop in ("agent_exit", "user_stop") else 0.0,
        "requests": {},
    }
    if nl is not None:
        record["nl_assertion_pass_count"] = nl[0]
        record["nl_assertion_pass_rate"] = nl[0] / nl[1]
    if judge_score is not None:
        record["judge_score"] = judge_score
    return codec.decode_value(ScenarioMetrics, record)


def build_summary(
    metrics: list[ScenarioMetrics], *, configuration: RunConfiguration | None, **options: Any
) -> dict[str, Any]:
    """The summary as its JSON, which these tests pin key by key."""
    return codec.encode(
        summary_module.build_summary(metrics, configuration=configuration, **options)
    )


def write_run_summary(run_dir: Path, metrics: list[ScenarioMetrics], **options: Any) -> Any:
    return codec.encode(summary_module.write_run_summary(run_dir, metrics, **options))


def render_summary_text(summary: dict[str, Any]) -> str:
    return summary_module.render_summary_text(codec.decode_value(RunSummary, summary))


def mixed() -> list[ScenarioMetrics]:
    """Six scored scenarios (3 pass), one infra error; tasks 7 and 8 are lost."""
    return [
        metric("5", nl=(3, 3), judge_score=0.9, split="test", persona="matt_delaney"),
        metric("0"),
        metric("1", action=False, split="test", persona="matt_delaney"),
        metric("2", db=False, persona="matt_delaney"),
        metric("3", exit_=False, split="test", turns=200, duration=31.25),
        metric("4", nl=(1, 2), judge_score=0.5),
        metric("6", infra=True),
    ]


def mixed_summary() -> dict[str, Any]:
    return build_summary(
        mixed(),
        expected=[f"tau2_retail__{n}" for n in range(8)],
        trials=1,
        configuration=CONFIGURATION,
        versions=VERSIONS,
        lost=["tau2_retail__8"],
    )


# -- figures -----------------------------------------------------------------------------------


def test_counts_and_rates_by_hand() -> None:
    summary = mixed_summary()
    assert summary["counts"] == {
        "expected": 9,
        "reported": 7,
        "scored": 6,
        "succeeded": 3,
        "failed": 3,
        "infra_errors": 1,
        "lost": 2,
    }
    assert summary["success_rate"] == {"passed": 3, "total": 6, "rate": 0.5, **wilson(3, 6)}
    assert summary["task_success_rate"] == {
        "passed": 4,
        "total": 6,
        "rate": 4 / 6,
        **wilson(4, 6),
    }
    signals = summary["signals"]
    five_of_six = {"passed": 5, "total": 6, "rate": 5 / 6, **wilson(5, 6)}
    assert signals["DB_STATE_MATCH"] == {"gating": True, **five_of_six}
    assert signals["CLEAN_EXIT"] == {"gating": True, **five_of_six}
    assert signals["ACTION_MATCH"] == {"gating": False, "excluded": True, **five_of_six}
    assert signals["NL_ASSERTION"] == {
        "applicable": True,
        "gating": True,
        "unit": "assertions",
        "passed": 4,
        "total": 5,
        "rate": 0.8,
        # two tasks' assertions (1 of 2, 3 of 3) are clusters: the bootstrap over tasks, whose
        # resamples give 1/2 (the first task twice), 4/5 (both) or 1 (the second twice)
        "ci95": [0.5, 1.0],
        "ci95_method": "task-bootstrap",
        "scenarios": 2,
        "scenarios_passed": 1,
    }
    assert summary["judge_score"] == {"mean": pytest.approx(0.7), "n": 2}
    assert summary["tau2_reward"] == {"mean": 0.5, "n": 6}
    assert summary["pass_hat_k"] == []
    assert summary["stop_reasons"] == {"agent_exit": 5, "infra_error": 1, "max_steps": 1}
    assert summary["token_usage"] == {
        "agent": {"n_calls": 14, "prompt": 700, "completion": 70},
        "user": {"n_calls": 7, "prompt": 350, "completion": 35},
        "judge": {"n_calls": 2, "prompt": 400, "completion": 40},
    }
    assert summary["infra_errors"] == [
        {"scenario_id": "tau2_retail__6", "detail": "agent: connection refused"}
    ]
    assert summary["lost"] == ["tau2_retail__7", "tau2_retail__8"]
    assert summary["configuration"] == codec.encode(CONFIGURATION)
    assert summary["versions"] == VERSIONS
    assert summary["models"] == {"agent": "gpt-test", "user": "gpt-user", "judge": "gpt-judge"}


def test_rates_by_split_and_persona() -> None:
    summary = mixed_summary()
    assert summary["by_split"] == {
        "test": {"n": 3, "succeeded": 2, "success_rate": 2 / 3, **wilson(2, 3)},
        "train": {"n": 3, "succeeded": 1, "success_rate": 1 / 3, **wilson(1, 3)},
    }
    assert summary["by_persona"] == {
        "lisa_brenner": {"n": 3, "succeeded": 1, "success_rate": 1 / 3, **wilson(1, 3)},
        "matt_delaney": {"n": 3, "succeeded": 2, "success_rate": 2 / 3, **wilson(2, 3)},
    }


def test_scenario_rows_sorted_and_compact() -> None:
    rows = mixed_summary()["scenarios"]
    assert [row["task_id"] for row in rows] == ["0", "1", "2", "3", "4", "5", "6"]
    assert [row["status"] for row in rows] == [
        "PASS",
        "PASS",
        "FAIL",
        "FAIL",
        "FAIL",
        "PASS",
        "INFRA",
    ]
    assert rows[4] == {
        "scenario_id": "tau2_retail__4",
        "task_id": "4",
        "trial": 1,
        "status": "FAIL",
        "is_successful": False,
        "is_task_successful": False,
        "db_state_match": True,
        "clean_exit": True,
        "nl_assertion_pass_rate": 0.5,
        "nl_assertion_pass_count": 1,
        "nl_assertion_total": 2,
        "is_action_match": True,
        "judge_score": 0.5,
        "tau2_reward": 0.0,
        "stop_reason": "agent_exit",
        "total_turns": 4,
        "duration_seconds": 2.0,
    }


def test_summary_is_json() -> None:
    summary = mixed_summary()
    assert json.loads(json.dumps(summary)) == summary


def test_nl_not_applicable_without_a_judge() -> None:
    records = [metric("0"), metric("2", nl_total=1, db=False)]
    summary = build_summary(
        records,
        expected=None,
        trials=1,
        configuration=RunConfiguration.of_models(agent="builtin:oracle"),
        versions={},
    )
    nl = summary["signals"]["NL_ASSERTION"]
    assert nl["applicable"] is False
    assert nl["reason"] == "no judge configured"
    text = render_summary_text(summary)
    assert "NL-Assertion pass: not applicable (no judge configured)\n" in text
    assert "Judge model: none (NL assertions not judged)\n" in text
    assert summary["judge_score"] == {"mean": None, "n": 0}


def test_nl_not_applicable_when_no_selected_task_has_assertions() -> None:
    summary = build_summary(
        [metric("0")],
        expected=None,
        trials=1,
        configuration=RunConfiguration.of_models(agent="a", judge="gpt-judge"),
        versions={},
    )
    assert summary["signals"]["NL_ASSERTION"]["reason"] == "no scored scenario has NL assertions"
    assert summary["models"]["judge"] == "gpt-judge"


def test_infra_only_and_empty_runs_have_no_rates() -> None:
    summary = build_summary(
        [metric("0", infra=True)],
        expected=["tau2_retail__0", "tau2_retail__1"],
        trials=1,
        configuration=None,
        versions={},
    )
    assert summary["success_rate"] == {"passed": 0, "total": 0, "rate": None, "ci95": None}
    assert summary["tau2_reward"] == {"mean": None, "n": 0}
    assert summary["counts"]["lost"] == 1
    text = render_summary_text(summary)
    assert "Overall success rate: n/a (0 scenarios)\n" in text
    assert "  (no scored scenarios)\n" in text


def test_duplicate_scenario_ids_are_a_caller_bug() -> None:
    with pytest.raises(ValueError, match="tau2_retail__0"):
        build_summary(
            [metric("0"), metric("0")], expected=None, trials=1, configuration=None, versions={}
        )


def test_trials_must_be_positive() -> None:
    with pytest.raises(ValueError, match="trials"):
        build_summary([], expected=None, trials=0, configuration=None, versions={})


# -- pass^k ------------------------------------------------------------------------------------


def _trials(task_id: str, flags: list[bool | None]) -> list[ScenarioMetrics]:
    """One record per trial: True/False is success/failure, None an infra error."""
    return [
        metric(task_id, trial=t, trials=len(flags), db=bool(flag), infra=flag is None)
        for t, flag in enumerate(flags)
    ]


def test_pass_hat_k_by_hand() -> None:
    # Task 0: 3/4; task 1: 1/4; task 2: two infra errors, the two scored trials pass.
    records = [
        *_trials("0", [True, True, False, True]),
        *_trials("1", [False, False, True, False]),
        *_trials("2", [None, True, None, True]),
    ]
    summary = build_summary(records, expected=None, trials=4, configuration=None, versions={})
    # k=1: (3/4 + 1/4 + 1) / 3; k=2: (C(3,2)/C(4,2) + 0 + C(2,2)/C(2,2)) / 3 = (1/2 + 0 + 1) / 3;
    # k=3: (C(3,3)/C(4,3) + 0) / 2 (task 2 has only 2 scored trials); k=4: (0 + 0) / 2.
    values = [(e["k"], e["value"], e["tasks"]) for e in summary["pass_hat_k"]]
    assert values == [
        (1, pytest.approx(2 / 3), 3),
        (2, pytest.approx(0.5), 3),
        (3, pytest.approx(0.125), 2),
        (4, 0.0, 2),
    ]
    for entry in summary["pass_hat_k"][:3]:
        low, high = entry["ci95"]
        assert entry["ci95_method"] == "task-bootstrap"
        assert 0 <= low <= entry["value"] <= high <= 1
    # k=4: every task's term is 0, so the bootstrap cannot vary: Wilson's 0 of 2 tasks
    assert summary["pass_hat_k"][3]["ci95"] == [0.0, pytest.approx(wilson(0, 2)["ci95"][1])]
    assert summary["pass_hat_k"][3]["ci95_method"] == "wilson-tasks"
    text = render_summary_text(summary)
    assert "pass^1: 0.6667 [" in text
    assert "pass^3: 0.1250 [" in text
    assert "] (2 tasks)\n" in text
    assert summary["counts"]["infra_errors"] == 2


def test_pass_hat_k_function() -> None:
    assert pass_hat_k({"a": [True] * 4, "b": [True, False]}, 2) == (0.5, 2)
    assert pass_hat_k({"a": [True]}, 2) == (None, 0)
    with pytest.raises(ValueError, match="k must be"):
        pass_hat_k({}, 0)


# -- the text ----------------------------------------------------------------------------------


def test_summary_text() -> None:
    text = render_summary_text(mixed_summary())
    lines = text.splitlines()
    assert lines[:6] == [
        "tau2 retail benchmark: run summary",
        "",
        "Profile:     default",
        "Agent model: gpt-test",
        "User model:  gpt-user",
        "Judge model: gpt-judge",
    ]
    assert "Scenarios: 9 expected, 6 scored (3 succeeded, 3 failed), 1 infra error, 2 lost" in lines
    assert "tau2_retail__0  PASS    ok    ok    n/a        4      2.0s  agent_exit" in lines
    assert "tau2_retail__3  FAIL    ok    FAIL  n/a      200     31.2s  max_steps" in lines
    assert "tau2_retail__4  FAIL    ok    ok    1/2        4      2.0s  agent_exit" in lines
    assert "tau2_retail__6  INFRA   -     -     -          4      2.0s  infra_error" in lines
    for expected_line in [
        "Overall success rate: 50.00% (3/6 scenarios) [18.8, 81.2]",
        "Task success rate (CLEAN_EXIT ignored): 66.67% (4/6 scenarios) [30.0, 90.3]",
        "DB-State match: 83.33% (5/6 scenarios) [43.6, 97.0]",
        "Clean exit: 83.33% (5/6 scenarios) [43.6, 97.0]",
        "NL-Assertion pass: 80.00% (4/5 assertions) [50.0, 100.0]; 1/2 scenarios with all "
        "assertions met",
        "Action match (excluded from success): 83.33% (5/6 scenarios) [43.6, 97.0]",
        "Judge score (informational): mean 0.700 over 2",
        "tau2 reward (informational): mean 0.5000 over 6",
        "Stop reasons: agent_exit 5, infra_error 1, max_steps 1",
        summary_module.INTERVAL_NOTE,
        "Infra errors (excluded from rates): 1",
        "  tau2_retail__6: agent: connection refused",
        "Lost scenarios (no metrics; excluded from rates): 2",
        "  tau2_retail__7",
        "  tau2_retail__8",
        "  agent  14 calls, 700 prompt, 70 completion tokens",
        "  judge  2 calls, 400 prompt, 40 completion tokens",
        "Success rate by split:",
        "  test   66.67% (2/3 scenarios) [20.8, 93.9]",
        "  train  33.33% (1/3 scenarios) [6.1, 79.2]",
        "Success rate by persona:",
        "  lisa_brenner  33.33% (1/3 scenarios) [6.1, 79.2]",
        "  matt_delaney  66.67% (2/3 scenarios) [20.8, 93.9]",
    ]:
        assert expected_line in lines, expected_line
    assert "pass^" not in text


def test_write_run_summary(tmp_path: Path) -> None:
    summary = write_run_summary(
        tmp_path / "run",
        mixed(),
        expected=None,
        trials=1,
        configuration=CONFIGURATION,
        versions=VERSIONS,
    )
    run = tmp_path / "run"
    assert json.loads((run / "summary.json").read_text()) == summary
    all_metrics = json.loads((run / "all_metrics.json").read_text())
    assert [m["task_id"] for m in all_metrics] == ["0", "1", "2", "3", "4", "5", "6"]
    assert all_metrics[0] == codec.encode(metric("0"))
    assert (run / "all_summary.txt").read_text() == render_summary_text(summary)
    assert sorted(p.name for p in run.iterdir()) == [
        "all_metrics.json",
        "all_summary.txt",
        "summary.json",
    ]


# -- property ----------------------------------------------------------------------------------

_records = st.lists(
    st.fixed_dictionaries(
        {
            "task": st.integers(0, 5),
            "infra": st.booleans(),
            "db": st.booleans(),
            "exit": st.booleans(),
            "nl": st.none()
            | st.integers(1, 3).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
            "judge": st.none() | st.floats(0, 1),
            "split": st.sampled_from(["train", "test"]),
            "persona": st.sampled_from(["lisa_brenner", "matt_delaney"]),
        }
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(
    records=_records, trials=st.integers(1, 4), lost=st.lists(st.integers(100, 110), unique=True)
)
def test_rates_are_bounded_and_counts_add_up(
    records: list[dict[str, Any]], trials: int, lost: list[int]
) -> None:
    seen: dict[int, int] = {}
    metrics = []
    for raw in records:
        trial = seen.get(raw["task"], 0)
        seen[raw["task"]] = trial + 1
        record = metric(
            str(raw["task"]),
            trial=trial,
            trials=2,
            infra=raw["infra"],
            db=raw["db"],
            exit_=raw["exit"],
            nl=raw["nl"],
            judge_score=raw["judge"],
            split=raw["split"],
            persona=raw["persona"],
        )
        metrics.append(record)
    summary = build_summary(
        metrics,
        expected=None,
        trials=trials,
        configuration=None,
        versions={},
        lost=[f"tau2_retail__{n}" for n in lost],
    )
    counts = summary["counts"]
    assert counts["succeeded"] + counts["failed"] == counts["scored"]
    assert counts["scored"] + counts["infra_errors"] + counts["lost"] == counts["expected"]
    assert counts["scored"] == sum(1 for m in metrics if not m.infra_error)
    rates = [
        summary["success_rate"],
        summary["task_success_rate"],
        *(s for s in summary["signals"].values() if "rate" in s),
    ]
    for rate in rates:
        assert rate["total"] == 0 or 0 <= rate["rate"] <= 1
        assert 0 <= rate["passed"] <= rate["total"]
    for entry in summary["pass_hat_k"]:
        assert entry["value"] is None or 0 <= entry["value"] <= 1
    for groups in (summary["by_split"], summary["by_persona"]):
        assert sum(g["n"] for g in groups.values()) == counts["scored"]
        assert all(0 <= g["success_rate"] <= 1 for g in groups.values())
    for value in (summary["judge_score"]["mean"], summary["tau2_reward"]["mean"]):
        assert value is None or 0 <= value <= 1
    render_summary_text(summary)


# -- summarize, end to end ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_run(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder written by the engine: oracle on tasks 0 and 1, noop on task 3."""
    run_dir = tmp_path_factory.mktemp("runs") / "run-1"
    data = OfflineData.load(data_dir)
    for task_id, agent in (("0", "builtin:oracle"), ("1", "builtin:oracle"), ("3", "builtin:noop")):
        task = data.tasks[task_id]
        scenario = Scenario(task=task, trial=0, trials=1, seed=None)
        outcome = data.run(scenario, builtin_model(agent, task, role="agent"))
        put_scenario_files(
            scenario_files(
                scenario_dir(run_dir, scenario.name, 0, 1),
                outcome,
                agent_prompt=data.agent_prompt,
                user_prompt=data.user_prompt(task),
                tools=[],
                config={},
            )
        )
    return run_dir


def test_summarize_rebuilds_from_artifacts(
    real_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "copy"
    shutil.copytree(real_run, run_dir)
    write_run_args(
        run_dir,
        RunArgs(
            argv=("pytest",),
            trials=1,
            expected=("tau2_retail__0", "tau2_retail__1", "tau2_retail__3", "tau2_retail__4"),
            configuration=RunConfiguration.of_models(agent="builtin:oracle"),
            versions=VERSIONS,
        ),
    )
    assert main(["summarize", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert out == (run_dir / "all_summary.txt").read_text(encoding="utf-8")
    assert "Agent model: builtin:oracle" in out
    assert "Overall success rate: 66.67% (2/3 scenarios)" in out
    assert "NL-Assertion pass: not applicable (no judge configured)" in out
    assert (
        "Lost scenarios (no metrics; excluded from rates): 1\n  tau2_retail__4: no metrics.json "
        "(not run, interrupted, or its process was lost)\n" in out
    )
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["counts"]["lost"] == 1
    assert summary["versions"] == VERSIONS
    assert len(json.loads((run_dir / "all_metrics.json").read_text())) == 3


def test_summarize_without_run_args_infers_trials(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for record in [*_trials("0", [True, False]), *_trials("1", [True, True])]:
        directory = scenario_dir(tmp_path, record.scenario_name, record.trial - 1, 2)
        directory.mkdir(parents=True)
        (directory / "metrics.json").write_text(json.dumps(codec.encode(record)))
    assert main(["summarize", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Trials:      2" in out
    assert "pass^2: 0.5000 [" in out
    assert "Agent model: not recorded" in out


def test_summarize_a_run_killed_before_any_result_lists_every_expected_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = ("tau2_retail__0", "tau2_retail__1-trial1", "tau2_retail__1-trial2")
    write_run_args(
        tmp_path,
        RunArgs(
            argv=("pytest",),
            trials=2,
            expected=expected,
            configuration=RunConfiguration.of_models(agent="my-agent"),
            versions=VERSIONS,
        ),
    )
    assert main(["summarize", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Scenarios: 3 expected, 0 scored (0 succeeded, 0 failed), 0 infra errors, 3 lost" in out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["lost"] == list(expected)
    assert summary["configuration"]["agent"]["model"] == "my-agent"


def test_summarize_an_empty_folder_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["summarize", str(tmp_path)]) == 2
    assert "has no run_args.json and no scenario metrics" in capsys.readouterr().err
    assert main(["summarize", str(tmp_path / "missing")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_summarize_with_broken_run_args_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "tau2_retail__0"
    directory.mkdir()
    (directory / "metrics.json").write_text(json.dumps(codec.encode(metric("0"))))
    (tmp_path / "run_args.json").write_text('{"trials": "two"}')
    assert main(["summarize", str(tmp_path)]) == 2
    assert "run_args.json: 'trials' must be an integer, got 'two'" in capsys.readouterr().err


def test_summarize_module_entry_point(real_run: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "tau2_retail", "summarize", str(real_run)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Overall success rate: 66.67% (2/3 scenarios)" in done.stdout
    assert (real_run / "summary.json").is_file()


# -- the tau2 profile --------------------------------------------------------------------------


def _tau2(task_id: str, trial: int, reward: float | None) -> ScenarioMetrics:
    record = metric(task_id, trial=trial, trials=2, stop_reason="user_stop", exit_=False)
    return dataclasses.replace(
        record,
        profile="tau2",
        tau2_reward=reward,
        is_successful=reward == 1.0,
        # as the tau2 policy scores it (tau2_retail.engine.profiles.policy.Tau2Policy)
        success_breakdown={"not_applicable": ("CLEAN_EXIT",)},
    )


def test_tau2_profile_headline_is_upstreams_reward_then_our_signals() -> None:
    records = [_tau2("0", 0, 1.0), _tau2("0", 1, 0.0), _tau2("1", 0, 1.0), _tau2("1", 1, None)]
    summary = build_summary(
        records, expected=None, trials=2, configuration=CONFIGURATION, versions=VERSIONS
    )
    assert summary["profile"] == "tau2"
    assert summary["tau2_reward"] == {"mean": 2 / 3, "n": 3, "not_scorable": 1}
    # upstream's pass^k over the trials that have a reward: task 1 has one (pass^1 only)
    assert [(entry["value"], entry["tasks"]) for entry in summary["pass_hat_k"]] == [
        (0.75, 2),
        (0.0, 1),
    ]
    assert codec.encode(codec.decode_value(RunSummary, summary)) == summary
    lines = summary_module.headline_lines(codec.decode_value(RunSummary, summary))
    assert lines[:4] == [
        "tau2 reward (upstream): mean 0.6667 over 3 scenarios; 1 not scorable without a judge",
        # pass^1: task 0 gives 1/2, task 1 gives 1: the bootstrap over the two tasks
        "pass^1: 0.7500 [0.5000, 1.0000] (2 tasks)",
        # one task, term 0: Wilson's 0 of 1 task
        "pass^2: 0.0000 [0.0000, 0.7935] (1 task)",
        "Our signals (beside upstream's reward; CLEAN_EXIT not applicable):",
    ]
    assert not [line for line in lines if line.startswith("Clean exit")]
    text = render_summary_text(summary)
    assert "Profile:     tau2\n" in text
    assert "tau2 reward (informational)" not in text
    # the scenario lines: CLEAN_EXIT is not applicable, not FAIL (these never ended cleanly)
    header = next(line for line in text.splitlines() if line.startswith("scenario "))
    exit_column = header.index("EXIT")
    rows = [line for line in text.splitlines() if line.startswith("tau2_retail__")]
    assert len(rows) == 4
    assert {row[exit_column : exit_column + 4] for row in rows} == {"n/a "}
    # summary.json says so too: no 0% of a signal the profile does not score
    assert summary["signals"]["CLEAN_EXIT"] == {
        "applicable": False,
        "reason": "not scored by the tau2 profile (upstream's reward: a customer's stop ends too)",
        "gating": True,
    }
    assert {row["clean_exit"] for row in summary["scenarios"]} == {None}


def test_the_default_profile_shows_each_scenarios_clean_exit() -> None:
    records = [metric("0", exit_=False), metric("1")]
    text = render_summary_text(
        build_summary(
            records, expected=None, trials=1, configuration=CONFIGURATION, versions=VERSIONS
        )
    )
    header = next(line for line in text.splitlines() if line.startswith("scenario "))
    exit_column = header.index("EXIT")
    rows = [line for line in text.splitlines() if line.startswith("tau2_retail__")]
    assert [row[exit_column : exit_column + 4] for row in rows] == ["FAIL", "ok  "]


def test_profile_comes_from_the_metrics_or_the_configuration() -> None:
    default = build_summary(
        [metric("0")], expected=None, trials=1, configuration=CONFIGURATION, versions=VERSIONS
    )
    assert default["profile"] == "default"
    assert "not_scorable" not in default["tau2_reward"]
    configured = build_summary(
        [],
        expected=None,
        trials=1,
        configuration=RunConfiguration.of_models(agent="a", settings={"profile": "tau2"}),
        versions={},
    )
    assert configured["profile"] == "tau2"
    unrecorded = build_summary([], expected=None, trials=1, configuration=None, versions={})
    assert unrecorded["profile"] == "default"


def test_a_record_without_its_profile_is_not_read_as_ours() -> None:
    """Issue 27 item 5: a record without a profile is incomplete, never the default's."""
    record = codec.encode(metric("0"))
    del record["profile"]
    with pytest.raises(ArtifactError, match="'profile' is missing"):
        codec.decode_value(ScenarioMetrics, record)


def test_an_unknown_profile_in_a_run_file_is_an_error_naming_the_file(tmp_path: Path) -> None:
    """A profile this version does not know is never read as ours (issue 27 item 4)."""
    record = codec.encode(metric("0")) | {"profile": "tau3"}
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(record))
    with pytest.raises(ArtifactError) as raised:
        codec.read(ScenarioMetrics, path)
    assert str(raised.value) == (
        f"{path}: 'profile': profile 'tau3' is not known (this version reads 'default', 'tau2')"
    )
    summary = build_summary(
        [metric("0")], expected=None, trials=1, configuration=CONFIGURATION, versions=VERSIONS
    )
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(summary | {"profile": "mixed-up"}))
    with pytest.raises(ArtifactError, match=r"summary\.json: 'profile': profile 'mixed-up' is not"):
        codec.read(RunSummary, path)


def test_a_run_of_two_profiles_is_mixed_and_reads_with_our_headline() -> None:
    mixed = build_summary(
        [metric("0"), dataclasses.replace(metric("1"), profile="tau2")],
        expected=None,
        trials=1,
        configuration=CONFIGURATION,
        versions=VERSIONS,
    )
    assert mixed["profile"] == "mixed"
    assert "not_scorable" not in mixed["tau2_reward"]
    text = render_summary_text(mixed)
    assert "Profile:     mixed\n" in text
    assert "Clean exit: " in text
    assert "tau2 reward (informational): " in text


def test_summarize_counts_an_empty_metrics_file_as_lost_with_its_reason(
    real_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a power loss leaves: not a "not valid JSON" stop, a lost scenario that says why."""
    run_dir = tmp_path / "copy"
    shutil.copytree(real_run, run_dir)
    (run_dir / "tau2_retail__3" / "metrics.json").write_text("")

    assert main(["summarize", str(run_dir)]) == 0

    out = capsys.readouterr().out
    assert "Lost scenarios (no metrics; excluded from rates): 1\n  tau2_retail__3: " in out
    assert "not valid JSON" in out
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["lost"] == ["tau2_retail__3"]
    assert summary["counts"]["scored"] == 2


def test_summarize_without_run_args_keeps_the_recorded_versions(
    real_run: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "copy"
    shutil.copytree(real_run, run_dir)
    assert main(["summarize", str(run_dir)]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["versions"] = VERSIONS
    (run_dir / "summary.json").write_text(json.dumps(summary))

    assert main(["summarize", str(run_dir)]) == 0

    assert json.loads((run_dir / "summary.json").read_text())["versions"] == VERSIONS


def _judged(task_id: str, *, replies: int, unreadable: int, infra: bool = False) -> ScenarioMetrics:
    record = metric(task_id, nl=None if infra else (1, 1), judge_score=None if infra else 1.0)
    stats = {"requests": replies, "attempts": replies, "failed": 0, "wait_seconds": 0.0}
    requests = {"judge": stats}
    raw = codec.encode(record) | {"requests": requests, "judge_unreadable_replies": unreadable}
    if infra:
        raw |= {"infra_error": True, "infra_role": "judge", "needs_judging": True}
    return codec.decode_value(ScenarioMetrics, raw)


def _judge_summary(metrics: list[ScenarioMetrics], profile: str = "default") -> RunSummary:
    records = [dataclasses.replace(m, profile=profile) for m in metrics]
    return summary_module.build_summary(
        records, expected=None, trials=1, configuration=CONFIGURATION, versions=VERSIONS
    )


def test_a_judge_whose_replies_mostly_cannot_be_read_is_named_in_the_summary() -> None:
    # Issue 18, item 2: 4 of 6 replies unreadable (two scenarios unreadable twice, two judged
    # at once) -> the judge does not follow the format.
    records = [
        _judged("0", replies=2, unreadable=2, infra=True),
        _judged("1", replies=2, unreadable=2, infra=True),
        _judged("2", replies=1, unreadable=0),
        _judged("3", replies=1, unreadable=0),
    ]
    summary = _judge_summary(records)
    assert codec.encode(summary)["judge_replies"] == {
        "total": 6,
        "unreadable": 4,
        "follows_format": False,
    }
    line = summary_module.judge_format_line(summary)
    assert line == (
        "JUDGE DOES NOT FOLLOW THE REPLY FORMAT: 4 of 6 judge replies could not be read (each "
        "asked again once; still unreadable, an infra error of the judge role); check that the "
        "judge model answers with the JSON object its prompt asks for"
    )
    assert line in summary_module.render_summary_text(summary).splitlines()
    assert summary.counts.infra_errors == 2
    assert codec.decode_value(RunSummary, codec.encode(summary)) == summary


def test_a_few_unreadable_judge_replies_are_counted_not_alarmed() -> None:
    records = [_judged("0", replies=2, unreadable=1), _judged("1", replies=1, unreadable=0)]
    summary = _judge_summary(records)
    assert summary.judge_replies.follows_format
    assert summary_module.judge_format_line(summary) == (
        "Judge: 1 of 3 judge replies could not be read (each asked again once; still "
        "unreadable, an infra error of the judge role)"
    )
    tau2 = _judge_summary([_judged("0", replies=1, unreadable=1)], profile="tau2")
    assert summary_module.judge_format_line(tau2) == (
        "JUDGE DOES NOT FOLLOW THE REPLY FORMAT: 1 of 1 judge replies could not be read "
        "(scored as upstream does (NL not met)); check that the judge model answers with the "
        "JSON object its prompt asks for"
    )


def test_all_readable_judge_replies_say_nothing() -> None:
    summary = _judge_summary([_judged("0", replies=1, unreadable=0)])
    assert summary_module.judge_format_line(summary) is None
    assert "Judge:" not in summary_module.render_summary_text(summary)


def test_a_misplaced_metrics_json_is_never_counted_and_summarize_refuses_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tau2_retail.results.artifacts import load_run_metrics

    for task in ("0", "1"):
        folder = tmp_path / f"tau2_retail__{task}"
        folder.mkdir()
        (folder / "metrics.json").write_text(json.dumps(codec.encode(metric("0"))))

    loaded = load_run_metrics(tmp_path)
    assert [m.scenario_id for m in loaded.records] == ["tau2_retail__0"]
    assert loaded.incomplete["tau2_retail__1"].startswith("misplaced metrics.json: ")
    assert main(["summarize", str(tmp_path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert "is not a readable run: " in lines[0]
    assert (
        "tau2_retail__1/metrics.json records scenario tau2_retail__0, not tau2_retail__1"
        in (lines[0])
    )


# -- the format version (issue 27 item 5) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("stated", "found"),
    [
        (None, "no format_version (a pre-release version of tau2_retail wrote it)"),
        (2, "format_version 2"),
        ("1", "format_version '1'"),
    ],
)
def test_a_run_file_of_another_format_is_refused_naming_the_file_and_versions(
    tmp_path: Path, stated: object, found: str, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [*_trials("0", [True, False]), *_trials("1", [True, True])]
    summary = build_summary(records, expected=None, trials=2, configuration=None, versions={})
    del summary["format_version"]
    if stated is not None:
        summary["format_version"] = stated
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(summary))
    expected = (
        f"{path}: {found}; this version reads format_version 1 only (re-run the scenarios, or "
        "read the folder with the version that wrote it)"
    )
    with pytest.raises(ArtifactFormatError) as raised:
        summary_module.read_summary(tmp_path)
    assert str(raised.value) == expected
    # a scenario's record of another format: summarize refuses the folder, counts nothing lost
    folder = tmp_path / "tau2_retail__0"
    folder.mkdir()
    record = codec.encode(metric("0"))
    del record["format_version"]
    if stated is not None:
        record["format_version"] = stated
    (folder / "metrics.json").write_text(json.dumps(record))
    assert main(["summarize", str(tmp_path)]) == 2
    assert f"{folder / 'metrics.json'}: {found}; this version reads" in capsys.readouterr().err


def test_every_record_written_states_its_format_first() -> None:
    records = [*_trials("0", [True, False]), metric("2")]
    summary = build_summary(records, expected=None, trials=2, configuration=None, versions={})
    assert next(iter(summary)) == "format_version"
    assert summary["format_version"] == 1
    for record in codec.encode(records, list[ScenarioMetrics]):
        assert next(iter(record)) == "format_version"


def test_a_summary_read_back_equals_the_one_written() -> None:
    records = [*_trials("0", [True, False]), *_trials("1", [True, True]), metric("2")]
    current = build_summary(records, expected=None, trials=2, configuration=None, versions={})
    assert codec.encode(codec.decode_value(RunSummary, current)) == current
    assert current["flaky_tasks"] == [{"task_id": "0", "passed": 1, "trials": 2}]
    assert "Flaky tasks (trials disagree): 1\n  task 0: 1/2 trials passed\n" in (
        render_summary_text(current)
    )
