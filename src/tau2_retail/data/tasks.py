"""The 114 retail scenarios: tasks.json joined with the split labels and the persona labels.

Validation happens here, where the JSON enters: :func:`parse_tasks` checks the structure of
``tasks.json``, ``split_tasks.json`` and ``tasks_voice.json`` and raises :class:`DataError`
naming the file, the task and what is wrong. :func:`load_tasks` reads the verified files of a
data folder and calls it, once per process per folder state.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tau2_retail.data.files import read_verified
from tau2_retail.errors import DataError
from tau2_retail.tools.record_shapes import freeze, thaw
from tau2_retail.tools.registry import TOOL_NAMES

__all__ = [
    "GoldAction",
    "Task",
    "load_policy",
    "load_tasks",
    "load_user_guidelines",
    "parse_tasks",
    "render_task_table",
    "task_rows",
    "task_totals",
    "trial_seeds",
    "unknown_task_ids",
]

_TASKS = "tasks.json"
_SPLITS = "split_tasks.json"
_VOICE = "tasks_voice.json"
_SPLIT_LABELS = ("train", "test")

# Per-process caches keyed by the folder and the (size, mtime_ns) of the files read, so a
# changed file is read and verified again instead of served stale.
_tasks_cache: dict[tuple[str, tuple[tuple[int, int], ...]], Mapping[str, Task]] = {}
_text_cache: dict[tuple[str, int, int], str] = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class GoldAction:
    """One expected tool call of a task, as upstream lists it (``action_id`` is dropped).

    ``arguments`` is read-only all the way down (nested arrays are tuples), because tasks are
    shared by every scenario of the process; :meth:`plain_arguments` gives a fresh JSON-shaped
    copy (lists and dicts) to hand to a tool.
    """

    name: str
    arguments: Mapping[str, Any]

    def __post_init__(self) -> None:
        # object.__setattr__ is the documented way to normalize a field of a frozen dataclass.
        object.__setattr__(self, "arguments", freeze(self.arguments))

    def plain_arguments(self) -> dict[str, Any]:
        """A mutable, JSON-serializable copy of the arguments."""
        thawed: dict[str, Any] = thaw(self.arguments)
        return thawed


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """One retail scenario: the simulated customer's instructions and the evaluation criteria."""

    id: str
    split: str
    persona_name: str
    reason_for_call: str
    task_instructions: str
    known_info: str | None
    unknown_info: str | None
    actions: tuple[GoldAction, ...]
    communicate_info: tuple[str, ...]
    nl_assertions: tuple[str, ...]
    reward_basis: tuple[str, ...]

    @property
    def scenario_name(self) -> str:
        """The benchmark's name for this scenario, ``tau2_retail__<id>``."""
        return f"tau2_retail__{self.id}"


class _Problem(Exception):
    """A structural problem inside one task; parse_tasks adds the file and task to it."""


def _decode(data: bytes, label: str) -> Any:
    try:
        return json.loads(data)
    except ValueError as error:
        raise DataError(f"{label}: not valid JSON ({error})") from error


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Problem(f"{where} must be an object, got {type(value).__name__}")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _Problem(f"{where} must be a string, got {type(value).__name__}")
    return value


def _optional_text(value: Any, where: str) -> str | None:
    return None if value is None else _text(value, where)


def _texts(value: Any, where: str) -> tuple[str, ...]:
    """A list of strings; missing, null and empty all mean none."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _Problem(f"{where} must be a list of strings, got {type(value).__name__}")
    return tuple(_text(item, f"{where}[{index}]") for index, item in enumerate(value))


def _actions(value: Any) -> tuple[GoldAction, ...]:
    where = "evaluation_criteria.actions"
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _Problem(f"{where} must be a list, got {type(value).__name__}")
    actions = []
    for index, raw in enumerate(value):
        action = _object(raw, f"{where}[{index}]")
        name = _text(action.get("name"), f"{where}[{index}].name")
        if name not in TOOL_NAMES:
            raise _Problem(f"{where}[{index}].name {name!r} is not a known retail tool")
        arguments = _object(action.get("arguments", {}), f"{where}[{index}].arguments")
        actions.append(GoldAction(name=name, arguments=arguments))
    return tuple(actions)


def _task(raw: dict[str, Any], *, task_id: str, split: str, persona: str) -> Task:
    scenario = _object(raw.get("user_scenario"), "user_scenario")
    instructions = _object(scenario.get("instructions"), "user_scenario.instructions")
    criteria = _object(raw.get("evaluation_criteria"), "evaluation_criteria")
    prefix = "user_scenario.instructions."
    return Task(
        id=task_id,
        split=split,
        persona_name=persona,
        reason_for_call=_text(instructions.get("reason_for_call"), prefix + "reason_for_call"),
        task_instructions=_text(
            instructions.get("task_instructions"), prefix + "task_instructions"
        ),
        known_info=_optional_text(instructions.get("known_info"), prefix + "known_info"),
        unknown_info=_optional_text(instructions.get("unknown_info"), prefix + "unknown_info"),
        actions=_actions(criteria.get("actions")),
        communicate_info=_texts(
            criteria.get("communicate_info"), "evaluation_criteria.communicate_info"
        ),
        nl_assertions=_texts(criteria.get("nl_assertions"), "evaluation_criteria.nl_assertions"),
        reward_basis=_texts(criteria.get("reward_basis"), "evaluation_criteria.reward_basis"),
    )


def _split_labels(raw: Any, label: str) -> tuple[frozenset[str], dict[str, str]]:
    """The ``base`` ids and each id's split label, from split_tasks.json."""
    if not isinstance(raw, dict):
        raise DataError(f"{label}: expected an object of id lists")
    lists: dict[str, frozenset[str]] = {}
    for key in ("base", *_SPLIT_LABELS):
        ids = raw.get(key)
        if not isinstance(ids, list) or not all(isinstance(item, str) for item in ids):
            raise DataError(f"{label}: {key!r} must be a list of task id strings")
        lists[key] = frozenset(ids)
    both = lists["train"] & lists["test"]
    if both:
        raise DataError(f"{label}: tasks {sorted(both)} are in both train and test")
    labels = {task_id: split for split in _SPLIT_LABELS for task_id in lists[split]}
    return lists["base"], labels


def _persona(voice: dict[str, Any], task_id: str) -> str:
    try:
        persona = voice["configs"][task_id]["configs"]["control"]["persona_name"]
    except (KeyError, TypeError) as error:
        raise _Problem("no configs[id].configs.control.persona_name") from error
    if not isinstance(persona, str) or not persona:
        raise _Problem("configs[id].configs.control.persona_name must be a non-empty string")
    return persona


def parse_tasks(
    tasks_json: bytes, split_json: bytes, voice_json: bytes, *, source: str
) -> dict[str, Task]:
    """Join and validate the three task files; ``source`` names their folder in messages.

    Keeps the tasks listed in ``split_tasks.json["base"]``, ordered by integer id. Raises
    :class:`DataError` naming the file, the task id and the problem.
    """
    tasks_label = os.path.join(source, _TASKS)
    split_label = os.path.join(source, _SPLITS)
    voice_label = os.path.join(source, _VOICE)
    raw_tasks = _decode(tasks_json, tasks_label)
    base, splits = _split_labels(_decode(split_json, split_label), split_label)
    voice = _decode(voice_json, voice_label)
    if not isinstance(raw_tasks, list):
        raise DataError(f"{tasks_label}: expected a list of tasks")
    if not isinstance(voice, dict):
        raise DataError(f"{voice_label}: expected an object with 'configs'")

    parsed: dict[int, Task] = {}
    for index, raw in enumerate(raw_tasks):
        task_id = raw.get("id") if isinstance(raw, dict) else None
        if not isinstance(task_id, str) or not task_id.isdigit() or str(int(task_id)) != task_id:
            raise DataError(f"{tasks_label}: entry {index} has no decimal string 'id'")
        if int(task_id) in parsed:
            raise DataError(f"{tasks_label}: task {task_id!r} appears twice")
        if task_id not in base:
            continue
        split = splits.get(task_id)
        if split is None:
            raise DataError(f"{split_label}: task {task_id!r} is in neither train nor test")
        try:
            persona = _persona(voice, task_id)
        except _Problem as problem:
            raise DataError(f"{voice_label}: task {task_id!r}: {problem}") from problem
        try:
            parsed[int(task_id)] = _task(raw, task_id=task_id, split=split, persona=persona)
        except _Problem as problem:
            raise DataError(f"{tasks_label}: task {task_id!r}: {problem}") from problem
    return {task.id: task for _, task in sorted(parsed.items())}


def _file_state(path: Path) -> tuple[int, int]:
    try:
        stat = path.stat()
    except FileNotFoundError:
        # read_verified raises the proper message with the fix right after.
        return (-1, -1)
    return (stat.st_size, stat.st_mtime_ns)


def load_tasks(data_dir: Path) -> Mapping[str, Task]:
    """The scenarios of ``data_dir`` by id, ordered by integer id, files verified.

    Cached per process per folder; a changed file is verified and parsed again.
    """
    names = (_TASKS, _SPLITS, _VOICE)
    key = (str(data_dir.resolve()), tuple(_file_state(data_dir / name) for name in names))
    cached = _tasks_cache.get(key)
    if cached is None:
        tasks_json, split_json, voice_json = (read_verified(data_dir, name) for name in names)
        parsed = parse_tasks(tasks_json, split_json, voice_json, source=str(data_dir))
        cached = _tasks_cache[key] = MappingProxyType(parsed)
    return cached


def _load_text(data_dir: Path, name: str) -> str:
    path = data_dir / name
    key = (str(path.resolve()), *_file_state(path))
    text = _text_cache.get(key)
    if text is None:
        try:
            text = read_verified(data_dir, name).decode("utf-8")
        except UnicodeDecodeError as error:
            raise DataError(f"{path}: not UTF-8 text ({error})") from error
        _text_cache[key] = text
    return text


def load_policy(data_dir: Path) -> str:
    """The retail agent policy (``policy.md``), verified, cached per process."""
    return _load_text(data_dir, "policy.md")


def load_user_guidelines(data_dir: Path) -> str:
    """The user-simulator guidelines (``user_simulator/simulation_guidelines.md``), verified."""
    return _load_text(data_dir, "user_simulator/simulation_guidelines.md")


def trial_seeds(base_seed: int, trials: int) -> tuple[int, ...]:
    """The seed of each trial, by tau2's rule (shared by all tasks).

    ``random.Random(base_seed)``, then one ``randint(0, 1_000_000)`` per trial.
    """
    if trials < 0:
        raise ValueError(f"trials must be >= 0, got {trials}")
    rng = random.Random(base_seed)
    return tuple(rng.randint(0, 1_000_000) for _ in range(trials))


def task_rows(tasks: Mapping[str, Task]) -> list[dict[str, Any]]:
    return [
        {
            "id": task.id,
            "split": task.split,
            "persona": task.persona_name,
            "actions": len(task.actions),
            "nl_assertions": len(task.nl_assertions),
        }
        for task in tasks.values()
    ]


def task_totals(tasks: Mapping[str, Task]) -> dict[str, int]:
    values = list(tasks.values())
    return {
        "tasks": len(values),
        **{split: sum(task.split == split for task in values) for split in _SPLIT_LABELS},
        "with_nl_assertions": sum(bool(task.nl_assertions) for task in values),
        "nl_assertions": sum(len(task.nl_assertions) for task in values),
    }


def render_task_table(rows: Sequence[dict[str, Any]], totals: Mapping[str, int]) -> str:
    columns = ("id", "split", "persona", "actions", "nl_assertions")
    widths = {
        column: max(len(column), *(len(str(row[column])) for row in rows)) for column in columns
    }
    numeric = {"actions", "nl_assertions"}

    def line(values: Mapping[str, Any]) -> str:
        cells = (
            f"{values[column]!s:>{widths[column]}}"
            if column in numeric
            else f"{values[column]!s:<{widths[column]}}"
            for column in columns
        )
        return "  ".join(cells).rstrip()

    lines = [line({column: column for column in columns}), *(line(row) for row in rows)]
    lines.append(
        f"{totals['tasks']} tasks (train {totals['train']}, test {totals['test']}); "
        f"{totals['with_nl_assertions']} with NL assertions, "
        f"{totals['nl_assertions']} assertions in all"
    )
    return "\n".join(lines)


def unknown_task_ids(wanted: Iterable[str], tasks: Mapping[str, Task], given_as: str = "") -> str:
    """What to say of the ids in ``wanted`` that name no task (``given_as``: the option that
    gave them); empty when every one names a task. The one wording of this mistake."""
    unknown = [task_id for task_id in wanted if task_id not in tasks]
    if not unknown:
        return ""
    where = f" for {given_as}" if given_as else ""
    return f"unknown task id(s) {', '.join(unknown)}{where}; valid ids are 0..{len(tasks) - 1}"
