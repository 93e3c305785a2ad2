"""Shards: a deterministic, balanced share of a run's tasks for one of N machines.

``shard_tasks`` splits the chosen tasks into N shares by a greedy longest-first rule on an
estimated cost (the task's gold actions plus one, a proxy for its turns, times its trials), so
the shares take about the same time; ties break by task id, so every machine computes the same
split from the same selection. A task never straddles two shares: all its trials stay together
and pass^k stays computable in each shard and after ``merge``.
"""

from __future__ import annotations

from collections.abc import Iterable

from tau2_retail.data.tasks import Task

__all__ = ["shard_tasks", "task_cost"]


def task_cost(task: Task) -> int:
    """The estimated cost of one scenario of ``task`` (its gold actions plus one)."""
    return len(task.actions) + 1


def _numeric(task_id: str) -> tuple[int, str]:
    return (int(task_id), task_id) if task_id.isdigit() else (-1, task_id)


def shard_tasks(tasks: Iterable[Task], *, index: int, count: int) -> list[Task]:
    """The tasks of shard ``index`` (1-based) of ``count``, in their given order."""
    if not 1 <= index <= count:
        raise ValueError(f"shard {index}/{count}: expected 1 <= I <= N")
    chosen = list(tasks)
    loads = [(0, 0, shard) for shard in range(count)]  # (cost, tasks, shard number)
    owner: dict[str, int] = {}
    for task in sorted(chosen, key=lambda t: (-task_cost(t), _numeric(t.id))):
        cost, number, shard = min(loads)
        loads[shard] = (cost + task_cost(task), number + 1, shard)
        owner[task.id] = shard
    return [task for task in chosen if owner[task.id] == index - 1]
