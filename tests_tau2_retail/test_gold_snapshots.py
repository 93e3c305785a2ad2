"""Gold snapshots: per task, the expected database diff against the seed, the reference
actions and the expected hash. A change in the tools or the data shows up here as a diff."""

from __future__ import annotations

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from plugins.runtime import DataBundle

TASK_COUNT = 114  # tasks.json at the pinned upstream commit


@pytest.fixture
def gold_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(JSONSnapshotExtension)


def test_task_count_matches_snapshots(tau2_data: DataBundle) -> None:
    assert list(tau2_data.tasks) == [str(i) for i in range(TASK_COUNT)]


@pytest.mark.parametrize(
    "task_id", [str(i) for i in range(TASK_COUNT)], ids=lambda i: f"tau2_retail__{i}"
)
def test_gold(task_id: str, tau2_data: DataBundle, gold_snapshot: SnapshotAssertion) -> None:
    assert tau2_data.golds[task_id].to_json() == gold_snapshot
