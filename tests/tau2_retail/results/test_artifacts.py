"""Per-scenario artifacts of real outcomes (built-in oracle/noop agents, scripted customer)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tau2_retail import codec
from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.engine.scenario import Scenario, ScenarioOutcome
from tau2_retail.errors import ArtifactError
from tau2_retail.models.builtin import builtin_model
from tau2_retail.models.messages import AssistantTurn, Message, Role, ToolCall, Usage
from tau2_retail.results.artifacts import (
    is_complete,
    load_pending_judgement,
    load_run_metrics,
    render_conversation_log,
    scenario_dir,
    scenario_files,
    validate_name,
)
from tau2_retail.results.atomic import write_bytes_atomic
from tau2_retail.results.scenario_folder import put_scenario_files
from tau2_retail.testing.fake_models import FunctionModel
from tau2_retail.testing.offline import OfflineData
from tau2_retail.testing.run_files import METRICS_KEYS

TOOLS = [
    {
        "type": "function",
        "function": {"name": "end_conversation", "description": "End.", "parameters": {}},
    }
]
CONFIG = {"agent_model": "builtin:oracle", "user_model": "builtin:customer", "api_key": "***"}

JUDGE_KEYS = {
    "score",
    "reason",
    "judge_input",
    "nl_assertion_verdicts",
    "nl_assertion_pass_count",
    "nl_assertion_total",
    "nl_assertion_pass_rate",
}
TASK_WITH_ASSERTION = "2"  # 11 gold actions, one NL assertion


def fixed_judge(reply: str) -> FunctionModel:
    """A judge model that always sends the same reply."""
    usage = Usage(n_calls=1, prompt=120, completion=30)
    return FunctionModel("test:judge", lambda messages: AssistantTurn(content=reply, usage=usage))


Runner = Callable[..., tuple[ScenarioOutcome, str, str]]


@pytest.fixture(scope="module")
def run(data_dir: Path) -> Runner:
    """Run one scenario with built-in models; returns the outcome and the two prompts."""
    data = OfflineData.load(data_dir)

    def runner(
        task_id: str,
        *,
        agent: str = "builtin:oracle",
        judge_reply: str | None = None,
        trial: int = 0,
        trials: int = 1,
    ) -> tuple[ScenarioOutcome, str, str]:
        task = data.tasks[task_id]
        scenario = Scenario(task=task, trial=trial, trials=trials, seed=626729)
        outcome = data.run(
            scenario,
            builtin_model(agent, task, role="agent"),
            None if judge_reply is None else fixed_judge(judge_reply),
        )
        return outcome, data.agent_prompt, data.user_prompt(task)

    return runner


def _write(directory: Path, outcome: ScenarioOutcome, agent_prompt: str, user_prompt: str) -> None:
    put_scenario_files(
        scenario_files(
            directory,
            outcome,
            agent_prompt=agent_prompt,
            user_prompt=user_prompt,
            tools=TOOLS,
            config=CONFIG,
        )
    )


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


# -- names and layout --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["tau2_retail__0", "run-2026.01.01", "A", "7_x-y.z"],
    # not the scenario id as the test id: see SCENARIO_SHAPED_ID in tests/conftest.py
    ids=["scenario", "run", "letter", "mixed"],
)
def test_valid_names(name: str) -> None:
    assert validate_name("run id", name) == name


@pytest.mark.parametrize("name", ["", "..", ".hidden", "-x", "_x", "a/b", "a\\b", "a b", "é"])
def test_invalid_names_are_refused(name: str) -> None:
    with pytest.raises(ArtifactError, match=r"invalid run id"):
        validate_name("run id", name)


def test_scenario_dir_layout(tmp_path: Path) -> None:
    assert scenario_dir(tmp_path, "tau2_retail__3", 0, 1) == tmp_path / "tau2_retail__3"
    assert scenario_dir(tmp_path, "tau2_retail__3", 0, 4) == tmp_path / "tau2_retail__3/trial-1"
    assert scenario_dir(tmp_path, "tau2_retail__3", 3, 4) == tmp_path / "tau2_retail__3/trial-4"


def test_scenario_dir_refuses_escape_and_bad_trial(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="scenario name"):
        scenario_dir(tmp_path, "../elsewhere", 0, 1)
    with pytest.raises(ValueError, match="trial"):
        scenario_dir(tmp_path, "tau2_retail__3", 4, 4)
    with pytest.raises(ValueError, match="trial"):
        scenario_dir(tmp_path, "tau2_retail__3", -1, 2)


# -- the files of one scenario ----------------------------------------------------------------


def test_artifacts_of_a_passing_scenario(run: Runner, tmp_path: Path) -> None:
    outcome, agent_prompt, user_prompt = run("0")
    assert outcome.metrics.is_successful
    directory = tmp_path / "tau2_retail__0"
    _write(directory, outcome, agent_prompt, user_prompt)

    names = sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*"))
    assert names == [
        "conversation_log.txt",
        "db_diff.json",
        "final_agent_response.json",
        "metrics.json",
        "reference_answer.json",
        "scenario_config",
        "scenario_config/agent_system_prompt.txt",
        "scenario_config/scenario.json",
        "scenario_config/tools.json",
        "scenario_config/user_system_prompt.txt",
        "transcript.json",
    ]
    metrics = _json(directory / "metrics.json")
    assert metrics == codec.encode(outcome.metrics)
    assert codec.decode_value(ScenarioMetrics, metrics) == outcome.metrics
    assert metrics.keys() >= METRICS_KEYS
    assert _json(directory / "transcript.json") == outcome.conversation.to_json()
    assert _json(directory / "db_diff.json") == {}

    recorded = _json(directory / "final_agent_response.json")
    assert isinstance(recorded, list)
    assert len(recorded) == 1
    assert list(recorded[0]) == ["format_version", "actions"]  # the spec's shape, versioned
    assert recorded[0]["actions"] == [a.to_json() for a in outcome.conversation.actions]
    assert all(a.keys() == {"name", "arguments"} for a in recorded[0]["actions"])
    reference = _json(directory / "reference_answer.json")
    assert reference == {
        "format_version": 1,
        "actions": [a.to_json() for a in outcome.gold.actions],
    }
    assert reference["actions"]  # task 0 has write actions

    config_dir = directory / "scenario_config"
    assert (config_dir / "agent_system_prompt.txt").read_text(encoding="utf-8") == agent_prompt
    assert (config_dir / "user_system_prompt.txt").read_text(encoding="utf-8") == user_prompt
    assert _json(config_dir / "tools.json") == TOOLS
    assert _json(config_dir / "scenario.json") == {
        "format_version": 1,
        "scenario_name": "tau2_retail__0",
        "scenario_id": "tau2_retail__0",
        "task_id": "0",
        "trial": 1,
        "trials": 1,
        "seed": 626729,
        "split": "train",
        "persona_name": "lisa_brenner",
        "nl_assertions": [],
        "config": CONFIG,
    }
    assert is_complete(directory)


def test_conversation_log_is_readable(run: Runner, tmp_path: Path) -> None:
    outcome, agent_prompt, user_prompt = run("0")
    _write(tmp_path, outcome, agent_prompt, user_prompt)
    log = (tmp_path / "conversation_log.txt").read_text(encoding="utf-8")
    blocks = log.rstrip("\n").split("\n\n")
    assert len(blocks) == len(outcome.conversation.messages) + 1
    assert blocks[-1] == "=== ended: agent_exit"  # how the conversation ended comes last
    assert blocks[0].endswith(" agent:\nHi! How can I help you today?")
    assert blocks[1].split("\n")[0].endswith(" user:")
    first_call = outcome.conversation.messages[2].tool_calls[0]
    assert blocks[2].endswith(f" agent -> {first_call.name}({first_call.arguments})")
    assert blocks[3].split("\n")[0].endswith(f" tool {first_call.name}:")
    assert " agent -> end_conversation({})" in log


def test_conversation_log_format_exactly() -> None:
    call = ToolCall(id="c1", name="get_user_details", arguments='{"user_id": "u1"}')
    messages = [
        Message(role=Role.ASSISTANT, content="Hi! How can I help you today?"),
        Message(role=Role.USER, content="Cancel my order."),
        Message(role=Role.ASSISTANT, content="Let me check.", tool_calls=(call,)),
        Message(
            role=Role.TOOL,
            content="Error: User not found",
            tool_call_id="c1",
            name="get_user_details",
            error=True,
        ),
    ]
    text = render_conversation_log(messages, [0.0, 1.5, 2.25, 3.0])
    assert text == (
        "[1970-01-01T00:00:00.000+00:00] agent:\nHi! How can I help you today?\n\n"
        "[1970-01-01T00:00:01.500+00:00] user:\nCancel my order.\n\n"
        "[1970-01-01T00:00:02.250+00:00] agent:\nLet me check.\n"
        '[1970-01-01T00:00:02.250+00:00] agent -> get_user_details({"user_id": "u1"})\n\n'
        "[1970-01-01T00:00:03.000+00:00] tool get_user_details (error):\n"
        "Error: User not found\n"
    )


def test_failing_scenario_has_its_db_diff(run: Runner, tmp_path: Path) -> None:
    outcome, agent_prompt, user_prompt = run("0", agent="builtin:noop")
    assert not outcome.metrics.db_state_match
    _write(tmp_path, outcome, agent_prompt, user_prompt)
    diff = _json(tmp_path / "db_diff.json")
    assert diff == outcome.db_diff
    assert diff
    for records in diff.values():
        for pair in records.values():
            assert pair.keys() == {"actual", "expected"}
    assert _json(tmp_path / "final_agent_response.json") == [{"format_version": 1, "actions": []}]


def test_judge_result_when_a_judge_ran(run: Runner, tmp_path: Path) -> None:
    reply = json.dumps(
        {
            "score": 0.4,
            "reason": "The agent never said how many options there were.",
            "nl_assertion_verdicts": [{"index": 1, "passed": False, "reason": "not said"}],
        }
    )
    outcome, agent_prompt, user_prompt = run(TASK_WITH_ASSERTION, judge_reply=reply)
    assert outcome.judge is not None
    _write(tmp_path, outcome, agent_prompt, user_prompt)
    judged = _json(tmp_path / "judge_result.json")
    assert judged == codec.encode(outcome.judge)
    assert judged.keys() >= JUDGE_KEYS
    assert judged["judge_input"].keys() == {"system_prompt", "user_content"}
    assert judged["nl_assertion_total"] == 1
    assert judged["nl_assertion_pass_count"] == 0
    metrics = _json(tmp_path / "metrics.json")
    assert metrics["nl_assertion_pass_rate"] == 0.0
    assert metrics["judge_score"] == pytest.approx(0.4)
    assert not metrics["is_successful"]
    scenario = _json(tmp_path / "scenario_config" / "scenario.json")
    assert scenario["nl_assertions"] == list(outcome.scenario.task.nl_assertions)


def test_trial_metadata_in_a_multi_trial_run(run: Runner, tmp_path: Path) -> None:
    outcome, agent_prompt, user_prompt = run("5", trial=2, trials=3)
    directory = scenario_dir(tmp_path, outcome.scenario.name, 2, 3)
    _write(directory, outcome, agent_prompt, user_prompt)
    assert directory == tmp_path / "tau2_retail__5" / "trial-3"
    scenario = _json(directory / "scenario_config" / "scenario.json")
    assert (scenario["scenario_id"], scenario["trial"], scenario["trials"]) == (
        "tau2_retail__5-trial3",
        3,
        3,
    )
    # one numbering: test id -trial3, folder trial-3, metrics "trial": 3
    assert _json(directory / "metrics.json")["trial"] == 3


# -- completeness ------------------------------------------------------------------------------


def test_metrics_json_is_written_last(
    run: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcome, agent_prompt, user_prompt = run("0")
    order: list[str] = []

    def spy(path: Path, data: bytes, *, durable: bool = True) -> None:
        order.append(path.name)
        write_bytes_atomic(path, data, durable=durable)

    monkeypatch.setattr("tau2_retail.results.atomic.write_bytes_atomic", spy)
    _write(tmp_path, outcome, agent_prompt, user_prompt)
    assert order[-1] == "metrics.json"
    assert order.count("metrics.json") == 1
    assert len(order) == 10


def test_a_failed_rewrite_leaves_the_scenario_incomplete(
    run: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcome, agent_prompt, user_prompt = run("0")
    _write(tmp_path, outcome, agent_prompt, user_prompt)
    assert is_complete(tmp_path)

    def failing(path: Path, data: bytes, *, durable: bool = True) -> None:
        if path.name == "db_diff.json":
            raise ArtifactError(f"cannot write {path}: disk full")
        write_bytes_atomic(path, data, durable=durable)

    monkeypatch.setattr("tau2_retail.results.atomic.write_bytes_atomic", failing)
    with pytest.raises(ArtifactError, match=r"db_diff\.json"):
        _write(tmp_path, outcome, agent_prompt, user_prompt)
    assert not (tmp_path / "metrics.json").exists()
    assert not is_complete(tmp_path)


def test_stale_judge_result_is_removed(run: Runner, tmp_path: Path) -> None:
    (tmp_path / "judge_result.json").write_text("{}")
    outcome, agent_prompt, user_prompt = run("0")
    _write(tmp_path, outcome, agent_prompt, user_prompt)
    assert not (tmp_path / "judge_result.json").exists()


@pytest.mark.parametrize(
    ("content", "complete"),
    [
        (None, False),
        ("", False),
        ("{", False),
        ("[1]", False),
        ("\xff", False),
        ('{"a": 1}', False),
    ],
)
def test_is_complete(tmp_path: Path, content: str | None, complete: bool) -> None:
    """Only a whole record is complete: empty (a power loss), truncated or foreign is not."""
    if content is not None:
        (tmp_path / "metrics.json").write_bytes(content.encode("latin-1"))
    assert is_complete(tmp_path) is complete


# -- reading a run back ------------------------------------------------------------------------


def _metrics_file(run: Runner, run_dir: Path, task_id: str, trial: int, trials: int) -> None:
    outcome, agent_prompt, user_prompt = run(task_id, trial=trial, trials=trials)
    directory = scenario_dir(run_dir, outcome.scenario.name, trial, trials)
    _write(directory, outcome, agent_prompt, user_prompt)


def test_load_run_metrics_sorts_by_task_number_then_trial(run: Runner, tmp_path: Path) -> None:
    _metrics_file(run, tmp_path, "10", 0, 2)
    _metrics_file(run, tmp_path, "2", 1, 2)
    _metrics_file(run, tmp_path, "2", 0, 2)
    (tmp_path / "tau2_retail__11").mkdir()  # started, never completed
    (tmp_path / "summary.json").write_text("{}")
    loaded = load_run_metrics(tmp_path)
    assert [(m.task_id, m.trial) for m in loaded.records] == [("2", 1), ("2", 2), ("10", 1)]
    assert loaded.incomplete == {}


@pytest.mark.parametrize("content", ["", '{"task_id": ', '{"scenario_id": "x"}'])
def test_an_empty_or_truncated_metrics_file_is_incomplete_not_fatal(
    run: Runner, tmp_path: Path, content: str
) -> None:
    """What a power loss leaves: the scenario is not complete (re-run it), and it is named."""
    _metrics_file(run, tmp_path, "1", 0, 1)
    broken = tmp_path / "tau2_retail__2" / "metrics.json"
    broken.parent.mkdir()
    broken.write_text(content)
    loaded = load_run_metrics(tmp_path)
    assert [m.scenario_id for m in loaded.records] == ["tau2_retail__1"]
    assert list(loaded.incomplete) == ["tau2_retail__2"]
    assert "tau2_retail__2/metrics.json" in loaded.incomplete["tau2_retail__2"]
    assert not is_complete(broken.parent)


def test_real_artifacts_round_trip(run: Runner, tmp_path: Path) -> None:
    for task_id in ("3", "1"):
        outcome, agent_prompt, user_prompt = run(task_id)
        _write(tmp_path / outcome.scenario.name, outcome, agent_prompt, user_prompt)
    loaded = load_run_metrics(tmp_path).records
    assert [m.scenario_id for m in loaded] == ["tau2_retail__1", "tau2_retail__3"]


def test_request_stats_infra_role_and_needs_judging_round_trip(run: Runner, tmp_path: Path) -> None:
    import dataclasses

    from tau2_retail.models.messages import RequestStats

    outcome, agent_prompt, user_prompt = run("0")
    assert outcome.metrics.requests["user"].requests > 0  # the scripted customer was asked
    assert load_pending_judgement(tmp_path) is None  # nothing written yet
    _write(tmp_path, outcome, agent_prompt, user_prompt)
    assert load_pending_judgement(tmp_path) is None  # judged (or not judgeable): not pending
    stats = RequestStats(requests=1, attempts=3, failed=1, wait_seconds=2.5)
    pending = dataclasses.replace(
        outcome,
        metrics=dataclasses.replace(
            outcome.metrics,
            infra_error=True,
            infra_role="judge",
            needs_judging=True,
            requests={**outcome.metrics.requests, "judge": stats},
        ),
    )
    _write(tmp_path, pending, agent_prompt, user_prompt)
    raw = _json(tmp_path / "metrics.json")
    assert raw["requests"]["judge"] == {
        "requests": 1,
        "attempts": 3,
        "retries": 2,
        "failed": 1,
        "wait_seconds": 2.5,
    }
    assert (raw["infra_role"], raw["needs_judging"]) == ("judge", True)
    assert codec.decode_value(ScenarioMetrics, raw) == pending.metrics
    saved = load_pending_judgement(tmp_path)
    assert saved is not None
    assert saved.db_hash == outcome.metrics.db_state_actual_hash
    assert saved.transcript == _json(tmp_path / "transcript.json")
    # a record without the keys written only when set reads them unset
    del raw["infra_role"], raw["needs_judging"]
    unset = codec.decode_value(ScenarioMetrics, raw)
    assert (unset.infra_role, unset.needs_judging) == (None, False)


@pytest.mark.parametrize("failed_in", ["conversation", "judge"])
def test_an_endpoint_error_body_is_written_whole_and_removed_when_stale(
    run: Runner, tmp_path: Path, failed_in: str
) -> None:
    import dataclasses

    outcome, agent_prompt, user_prompt = run("0")
    body = "1 validation error\n" + "z" * 5000
    if failed_in == "conversation":
        conversation = dataclasses.replace(outcome.conversation, error_body=body)
        failed = dataclasses.replace(outcome, conversation=conversation)
    else:  # the judge's reply: the metrics said it was there, and nothing wrote it
        failed = dataclasses.replace(outcome, judge_error_body=body)
    _write(tmp_path, failed, agent_prompt, user_prompt)
    assert (tmp_path / "endpoint_error.txt").read_text(encoding="utf-8") == body + "\n"
    _write(tmp_path, outcome, agent_prompt, user_prompt)
    assert not (tmp_path / "endpoint_error.txt").exists()


def test_a_symlinked_scenario_folder_is_refused(run: Runner, tmp_path: Path) -> None:
    outcome, agent_prompt, user_prompt = run("0")
    outside = tmp_path / "outside"
    outside.mkdir()
    link = tmp_path / "run" / "tau2_retail__0"
    link.parent.mkdir()
    link.symlink_to(outside)
    with pytest.raises(ArtifactError, match=r"is a symbolic link .*outside the run directory"):
        _write(link, outcome, agent_prompt, user_prompt)
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("linked", ["scenario_config", "transcript.json"])
def test_a_symlink_anywhere_under_a_scenario_folder_is_refused(
    run: Runner, tmp_path: Path, linked: str
) -> None:
    # issue 21: a symlinked scenario_config/ inside the scenario folder was followed
    outcome, agent_prompt, user_prompt = run("0")
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = tmp_path / "run" / "tau2_retail__0"
    folder.mkdir(parents=True)
    (folder / linked).symlink_to(outside / linked)
    with pytest.raises(ArtifactError, match=rf"{linked} is a symbolic link .*outside the run"):
        _write(folder, outcome, agent_prompt, user_prompt)
    assert list(outside.iterdir()) == []
    assert not (folder / "metrics.json").exists()


def test_a_too_long_run_id_is_refused() -> None:
    from tau2_retail.results.artifacts import validate_name

    assert validate_name("run id", "r" * 100) == "r" * 100
    with pytest.raises(ArtifactError, match=r"\(300 characters\): at most 100 characters"):
        validate_name("run id", "r" * 300)
