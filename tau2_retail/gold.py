"""The gold replay: per task, the expected database and the reference actions (spec §6).

A task's gold actions, reads included, run in order through the real dispatcher on a fresh
store; an action that fails is skipped and the replay goes on. The final store is the
expected database and the recorded actions are the reference actions: one replay gives both,
so they can never disagree. The result is pure, so it is computed once per process per task.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tau2_retail.datafiles import resolve_data_dir
from tau2_retail.errors import DataError
from tau2_retail.seed import load_seed
from tau2_retail.tasks import Task, load_tasks
from tools.database import SeedDatabase
from tools.dispatch import Action, ToolResult, dispatch
from tools.store import Store

__all__ = ["Gold", "GoldBook", "gold_command", "replay_calls"]


def replay_calls(
    seed: SeedDatabase, calls: Iterable[tuple[str, Any]]
) -> tuple[Store, list[ToolResult]]:
    """Apply ``(name, arguments)`` calls to a fresh store; failed calls change nothing more."""
    store = Store(seed)
    results = [dispatch(store, name, arguments) for name, arguments in calls]
    return store, results


@dataclass(slots=True, kw_only=True)
class Gold:
    """A task's expected final database (never mutate it) and reference actions."""

    task_id: str
    store: Store
    actions: tuple[Action, ...]
    _hash: str | None = field(default=None, repr=False)

    @property
    def db_hash(self) -> str:
        """The canonical hash of the expected database, computed on first use."""
        if self._hash is None:
            self._hash = self.store.hash()
        return self._hash

    def to_json(self) -> dict[str, Any]:
        return {
            "db_diff": self.store.diff_from_seed(),
            "reference_actions": [action.to_json() for action in self.actions],
            "db_hash": self.db_hash,
        }


def compute_gold(task: Task, seed: SeedDatabase) -> Gold:
    store, results = replay_calls(seed, ((a.name, a.plain_arguments()) for a in task.actions))
    actions = tuple(result.action for result in results if result.action is not None)
    return Gold(task_id=task.id, store=store, actions=actions)


class GoldBook:
    """Gold results of one data folder's tasks, each replayed once and kept."""

    __slots__ = ("_golds", "seed", "tasks")

    def __init__(self, *, seed: SeedDatabase, tasks: Mapping[str, Task]) -> None:
        self.seed = seed
        self.tasks = tasks
        self._golds: dict[str, Gold] = {}

    def __getitem__(self, task_id: str) -> Gold:
        gold = self._golds.get(task_id)
        if gold is None:
            task = self.tasks.get(task_id)
            if task is None:
                raise DataError(f"unknown task id {task_id!r} (known: 0..{len(self.tasks) - 1})")
            gold = compute_gold(task, self.seed)
            self._golds[task_id] = gold
        return gold


def gold_command(args: argparse.Namespace) -> int:
    data_dir = resolve_data_dir(args.data_dir)
    tasks = load_tasks(data_dir)
    book = GoldBook(seed=load_seed(data_dir), tasks=tasks)
    ids = list(args.ids) or list(tasks)
    output = {task_id: book[task_id].to_json() for task_id in ids}
    json.dump(output, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0
