"""Shards: every selected task in exactly one share, shares balanced, the split reproducible."""

from __future__ import annotations

from pathlib import Path

import pytest

from tau2_retail.data.tasks import Task, load_tasks
from tau2_retail.engine.shards import shard_tasks, task_cost


@pytest.fixture(scope="module")
def all_tasks(data_dir: Path) -> list[Task]:
    return list(load_tasks(data_dir).values())


@pytest.mark.parametrize("count", [1, 2, 4, 7])
def test_the_shares_cover_every_task_once(all_tasks: list[Task], count: int) -> None:
    shares = [shard_tasks(all_tasks, index=i, count=count) for i in range(1, count + 1)]

    ids = [task.id for share in shares for task in share]
    assert sorted(ids) == sorted(task.id for task in all_tasks)
    assert len(ids) == len(set(ids))


def test_the_shares_are_balanced_by_estimated_cost(all_tasks: list[Task]) -> None:
    costs = [
        sum(task_cost(task) for task in shard_tasks(all_tasks, index=i, count=4))
        for i in range(1, 5)
    ]

    assert max(costs) - min(costs) <= max(task_cost(task) for task in all_tasks)


def test_a_share_keeps_the_given_order_and_is_the_same_every_time(all_tasks: list[Task]) -> None:
    share = shard_tasks(all_tasks, index=2, count=4)

    assert share == shard_tasks(list(all_tasks), index=2, count=4)
    positions = [all_tasks.index(task) for task in share]
    assert positions == sorted(positions)


def test_a_share_outside_one_to_n_is_refused(all_tasks: list[Task]) -> None:
    with pytest.raises(ValueError, match="expected 1 <= I <= N"):
        shard_tasks(all_tasks, index=5, count=4)
