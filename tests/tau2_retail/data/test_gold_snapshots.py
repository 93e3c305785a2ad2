"""Gold snapshots: per task, the expected database diff against the seed, the reference
actions and the expected hash. A change in the tools or the data shows up here as a diff.

They live in the suite's own tests, never in the benchmark: a benchmark user cannot update or
delete them. The release's ``gold_digests.json`` is pinned to them here, and a benchmark run
checks every replay against those digests (``GoldMismatch``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from tau2_retail.data.gold import GoldBook, gold_digest, pinned_gold_digests
from tau2_retail.data.seed import load_seed
from tau2_retail.data.tasks import Task
from tau2_retail.errors import GoldMismatch
from tau2_retail.tools.store import Store

TASK_COUNT = 114  # tasks.json at the pinned upstream commit
SNAPSHOTS = Path(__file__).parent / "__snapshots__" / "test_gold_snapshots"


@pytest.fixture
def gold_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(JSONSnapshotExtension)


def test_task_count_matches_snapshots(tasks: Mapping[str, Task]) -> None:
    assert list(tasks) == [str(i) for i in range(TASK_COUNT)]


@pytest.mark.parametrize("task_id", [str(i) for i in range(TASK_COUNT)], ids=lambda i: f"task_{i}")
def test_gold(task_id: str, book: GoldBook, gold_snapshot: SnapshotAssertion) -> None:
    assert book[task_id].to_json() == gold_snapshot


def test_pinned_digests_are_the_snapshots() -> None:
    from_snapshots = {
        str(i): gold_digest(json.loads((SNAPSHOTS / f"test_gold[task_{i}].json").read_text()))
        for i in range(TASK_COUNT)
    }
    assert dict(pinned_gold_digests()) == from_snapshots


def test_a_replay_that_differs_from_its_digest_is_a_harness_error(
    data_dir: Path, tasks: Mapping[str, Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a tool that silently changed behaviour: cancelling ignores the reason it is given
    import dataclasses

    from tau2_retail.tools import registry, writes

    def drifted(store: Store, *, order_id: str, reason: str) -> str:
        return writes.cancel_pending_order(store, order_id=order_id, reason="no longer needed")

    spec = registry.TOOLS["cancel_pending_order"]
    monkeypatch.setitem(registry.TOOLS, spec.name, dataclasses.replace(spec, run=drifted))
    cancelling = next(
        task.id
        for task in tasks.values()
        if any(
            action.name == "cancel_pending_order"
            and action.plain_arguments().get("reason") == "ordered by mistake"
            for action in task.actions
        )
    )
    fresh = GoldBook(seed=load_seed(data_dir), tasks=tasks)
    with pytest.raises(GoldMismatch, match=rf"gold replay of task {cancelling} differs"):
        fresh[cancelling]
