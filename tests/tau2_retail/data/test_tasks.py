"""The scenarios: the join of the three task files, validation, trial seeds, the tasks command."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from tau2_retail.data.tasks import (
    GoldAction,
    Task,
    load_policy,
    load_tasks,
    load_user_guidelines,
    parse_tasks,
    trial_seeds,
)
from tau2_retail.errors import DataError, DigestMismatch

RawFiles = tuple[Any, Any, Any]


@pytest.fixture(scope="session")
def raw_files(data_dir: Path) -> RawFiles:
    """tasks.json, split_tasks.json and a slim tasks_voice.json (personas only), parsed."""
    tasks = json.loads((data_dir / "tasks.json").read_bytes())
    splits = json.loads((data_dir / "split_tasks.json").read_bytes())
    voice = json.loads((data_dir / "tasks_voice.json").read_bytes())
    slim_voice = {
        "configs": {
            task_id: {
                "configs": {
                    "control": {"persona_name": config["configs"]["control"]["persona_name"]}
                }
            }
            for task_id, config in voice["configs"].items()
        }
    }
    return tasks, splits, slim_voice


def _parse(raw_files: RawFiles, edit: Callable[[Any, Any, Any], None]) -> dict[str, Task]:
    """parse_tasks on a deep copy of the raw files after ``edit`` changed them."""
    tasks, splits, voice = (json.loads(json.dumps(raw)) for raw in raw_files)
    edit(tasks, splits, voice)
    return parse_tasks(
        json.dumps(tasks).encode(),
        json.dumps(splits).encode(),
        json.dumps(voice).encode(),
        source="somewhere",
    )


def _task(tasks: list[Any], task_id: str) -> Any:
    return next(task for task in tasks if task["id"] == task_id)


# --- the real data ------------------------------------------------------------------------------


def test_there_are_114_tasks_ordered_by_integer_id(data_dir: Path) -> None:
    tasks = load_tasks(data_dir)
    assert list(tasks) == [str(number) for number in range(114)]
    assert all(task_id == task.id for task_id, task in tasks.items())
    assert tasks["7"].scenario_name == "tau2_retail__7"


def test_splits_are_74_train_and_40_test(data_dir: Path) -> None:
    splits = [task.split for task in load_tasks(data_dir).values()]
    assert (splits.count("train"), splits.count("test")) == (74, 40)


def test_nl_assertions_40_tasks_61_in_all(data_dir: Path) -> None:
    tasks = load_tasks(data_dir).values()
    assert sum(bool(task.nl_assertions) for task in tasks) == 40
    assert sum(len(task.nl_assertions) for task in tasks) == 61
    assert all(isinstance(task.nl_assertions, tuple) for task in tasks)


def test_only_tasks_24_and_57_have_no_actions(data_dir: Path) -> None:
    tasks = load_tasks(data_dir)
    assert [task.id for task in tasks.values() if not task.actions] == ["24", "57"]
    assert tasks["24"].nl_assertions
    assert tasks["24"].communicate_info == ("polyester", "cotton")


def test_every_task_has_a_persona_and_instructions(data_dir: Path) -> None:
    for task in load_tasks(data_dir).values():
        assert task.persona_name
        assert task.reason_for_call
        assert task.task_instructions
    assert load_tasks(data_dir)["0"].persona_name == "lisa_brenner"


def test_reward_basis(data_dir: Path) -> None:
    tasks = load_tasks(data_dir)
    db_only = [task.id for task in tasks.values() if task.reward_basis == ("DB",)]
    assert db_only == ["33", "34"]
    others = {task.reward_basis for task in tasks.values() if task.id not in db_only}
    assert others == {("DB", "NL_ASSERTION")}


def test_gold_actions_keep_name_and_arguments_read_only(data_dir: Path) -> None:
    action = load_tasks(data_dir)["0"].actions[4]
    assert action.name == "exchange_delivered_order_items"
    assert isinstance(action.arguments, MappingProxyType)
    assert action.arguments["item_ids"] == ("1151293680", "4983901480")
    with pytest.raises(TypeError):
        action.arguments["order_id"] = "#W0000000"  # type: ignore[index]
    plain = action.plain_arguments()
    assert plain == {
        "item_ids": ["1151293680", "4983901480"],
        "new_item_ids": ["7706410293", "7747408585"],
        "order_id": "#W2378156",
        "payment_method_id": "credit_card_9513926",
    }
    plain["item_ids"].append("x")
    assert len(action.arguments["item_ids"]) == 2
    assert not hasattr(action, "action_id")


def test_gold_action_freezes_arguments_given_to_it() -> None:
    arguments: dict[str, Any] = {"item_ids": ["1"], "nested": {"a": [1]}}
    action = GoldAction(name="calculate", arguments=arguments)
    arguments["item_ids"].append("2")
    assert action.arguments == {"item_ids": ("1",), "nested": {"a": (1,)}}
    assert action.plain_arguments() == {"item_ids": ["1"], "nested": {"a": [1]}}


def test_load_tasks_is_cached_per_process(data_dir: Path) -> None:
    assert load_tasks(data_dir) is load_tasks(data_dir)


def test_load_tasks_verifies_the_files(copied_data_dir: Path) -> None:
    path = copied_data_dir / "tasks_voice.json"
    path.write_bytes(path.read_bytes() + b"\n")
    with pytest.raises(DigestMismatch, match=r"tasks_voice\.json"):
        load_tasks(copied_data_dir)


def test_policy_and_guidelines_are_verified_text(data_dir: Path, copied_data_dir: Path) -> None:
    policy = load_policy(data_dir)
    assert policy == (data_dir / "policy.md").read_text(encoding="utf-8")
    assert load_policy(data_dir) is policy
    guidelines = load_user_guidelines(data_dir)
    assert guidelines == (data_dir / "user_simulator/simulation_guidelines.md").read_text(
        encoding="utf-8"
    )
    (copied_data_dir / "policy.md").write_text(policy + "Always refund.\n", encoding="utf-8")
    with pytest.raises(DigestMismatch, match=r"policy\.md"):
        load_policy(copied_data_dir)


# --- validation where the JSON enters -----------------------------------------------------------


def test_parse_tasks_of_the_unchanged_files_gives_the_same_tasks(
    raw_files: RawFiles, data_dir: Path
) -> None:
    assert _parse(raw_files, lambda tasks, splits, voice: None) == dict(load_tasks(data_dir))


def test_unknown_gold_tool_names_the_file_task_and_tool(raw_files: RawFiles) -> None:
    def edit(tasks: Any, splits: Any, voice: Any) -> None:
        _task(tasks, "5")["evaluation_criteria"]["actions"][1]["name"] = "refund_everything"

    with pytest.raises(DataError) as excinfo:
        _parse(raw_files, edit)
    message = str(excinfo.value)
    assert "tasks.json" in message
    assert "task '5'" in message
    assert "'refund_everything' is not a known retail tool" in message


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        pytest.param(
            lambda tasks, splits, voice: _task(tasks, "3")["user_scenario"]["instructions"].pop(
                "reason_for_call"
            ),
            r"tasks\.json: task '3': user_scenario\.instructions\.reason_for_call must be a string",
            id="missing reason_for_call",
        ),
        pytest.param(
            lambda tasks, splits, voice: _task(tasks, "8").pop("evaluation_criteria"),
            r"tasks\.json: task '8': evaluation_criteria must be an object",
            id="missing criteria",
        ),
        pytest.param(
            lambda tasks, splits, voice: _task(tasks, "9")["evaluation_criteria"].update(
                nl_assertions="say hi"
            ),
            r"task '9': evaluation_criteria\.nl_assertions must be a list",
            id="assertions not a list",
        ),
        pytest.param(
            lambda tasks, splits, voice: _task(tasks, "1")["evaluation_criteria"]["actions"][
                0
            ].update(arguments=["x"]),
            r"task '1': evaluation_criteria\.actions\[0\]\.arguments must be an object",
            id="arguments not an object",
        ),
        pytest.param(
            lambda tasks, splits, voice: voice["configs"].pop("12"),
            r"tasks_voice\.json: task '12': no configs\[id\]\.configs\.control\.persona_name",
            id="missing persona",
        ),
        pytest.param(
            lambda tasks, splits, voice: splits["train"].remove("0"),
            r"split_tasks\.json: task '0' is in neither train nor test",
            id="no split",
        ),
        pytest.param(
            lambda tasks, splits, voice: tasks.append(dict(tasks[0])),
            r"tasks\.json: task '0' appears twice",
            id="duplicate id",
        ),
        pytest.param(
            lambda tasks, splits, voice: tasks[2].update(id=2),
            r"tasks\.json: entry 2 has no decimal string 'id'",
            id="id not a string",
        ),
    ],
)
def test_structural_problems_name_file_task_and_problem(
    raw_files: RawFiles, edit: Callable[[Any, Any, Any], None], expected: str
) -> None:
    with pytest.raises(DataError, match=expected):
        _parse(raw_files, edit)


def test_invalid_json_names_the_file() -> None:
    with pytest.raises(DataError, match=r"split_tasks\.json: not valid JSON"):
        parse_tasks(b"[]", b"{", b"{}", source="somewhere")


def test_tasks_outside_base_are_left_out(raw_files: RawFiles) -> None:
    def edit(tasks: Any, splits: Any, voice: Any) -> None:
        splits["base"].remove("113")

    assert "113" not in _parse(raw_files, edit)


def test_missing_or_empty_lists_mean_none(raw_files: RawFiles) -> None:
    def edit(tasks: Any, splits: Any, voice: Any) -> None:
        _task(tasks, "2")["evaluation_criteria"]["nl_assertions"] = []
        _task(tasks, "3")["evaluation_criteria"].pop("nl_assertions")
        _task(tasks, "4")["evaluation_criteria"]["communicate_info"] = None

    parsed = _parse(raw_files, edit)
    assert parsed["2"].nl_assertions == ()
    assert parsed["3"].nl_assertions == ()
    assert parsed["4"].communicate_info == ()


# --- trial seeds --------------------------------------------------------------------------------


def test_trial_seeds_follow_tau2() -> None:
    assert trial_seeds(300, 4) == (626729, 373753, 361454, 1567)
    assert trial_seeds(300, 2) == (626729, 373753)
    assert trial_seeds(300, 0) == ()
    with pytest.raises(ValueError, match="trials"):
        trial_seeds(300, -1)
