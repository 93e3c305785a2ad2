"""The gold replay: per task, the expected database and the reference actions (spec §6).

A task's gold actions, reads included, run in order through the real dispatcher on a fresh
store; an action that fails is skipped and the replay goes on. The final store is the
expected database and the recorded actions are the reference actions: one replay gives both,
so they can never disagree. The result is pure, so it is computed once per process per task.

Each replay is checked against ``gold_digests.json`` (shipped with the package: the sha256 of
every task's ``Gold.to_json()``, the same records the suite's gold snapshots hold). A replay that
differs raises :class:`GoldMismatch`: the installed tools or data disagree with this release, and
no score computed against that gold would mean anything.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from tau2_retail.data.tasks import Task, unknown_task_ids
from tau2_retail.errors import DataError, GoldMismatch
from tau2_retail.tools.database import SeedDatabase
from tau2_retail.tools.dispatch import Action, ToolResult, dispatch
from tau2_retail.tools.store import Store

__all__ = ["Gold", "GoldBook", "gold_digest", "pinned_gold_digests", "replay_calls"]

GOLD_DIGESTS_FILE = "gold_digests.json"


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


def gold_digest(gold_json: Mapping[str, Any]) -> str:
    """The sha256 of a gold record in its canonical JSON form (sorted keys, compact, UTF-8)."""
    text = json.dumps(gold_json, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@functools.cache
def pinned_gold_digests() -> Mapping[str, str]:
    """``{task id: digest}`` shipped with this release (``tau2_retail/data/gold_digests.json``)."""
    text = resources.files(__package__).joinpath(GOLD_DIGESTS_FILE).read_text(encoding="utf-8")
    digests: dict[str, str] = json.loads(text)
    return digests


def _check_pinned(gold: Gold) -> None:
    expected = pinned_gold_digests().get(gold.task_id)
    actual = gold_digest(gold.to_json())
    if expected is not None and actual != expected:
        raise GoldMismatch(
            f"harness error: the gold replay of task {gold.task_id} differs from the digest "
            f"pinned with this release (expected {expected}, got {actual}); the installed tools "
            "or data disagree with the release, so no score against it means anything. "
            "Reinstall tau2-retail-pytest and run `python -m tau2_retail data verify`; "
            f"`python -m tau2_retail gold {gold.task_id}` shows the replay."
        )


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
            if problem := unknown_task_ids([task_id], self.tasks):
                raise DataError(problem)
            task = self.tasks[task_id]
            gold = compute_gold(task, self.seed)
            _check_pinned(gold)
            self._golds[task_id] = gold
        return gold
