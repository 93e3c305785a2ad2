"""What a pytest process needs to run scenarios: the data bundle and the scenarios selected.

Loaded lazily, once per process (each xdist worker has its own), and kept on the plugin
object rather than in module globals.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tau2_retail.data.files import DATA_DIR_ENV, resolve_data_dir
from tau2_retail.data.tasks import Task, load_tasks, trial_seeds, unknown_task_ids
from tau2_retail.engine import harness
from tau2_retail.engine.harness import DataBundle
from tau2_retail.engine.scenario import Scenario
from tau2_retail.engine.shards import shard_tasks
from tau2_retail.plugins.options import Tau2Settings

__all__ = ["DataBundle", "load_bundle", "scenario_ids", "select_scenarios"]


def _data_dir(settings: Tau2Settings) -> Path:
    # From the environment, let the data layer read TAU2_DATA_DIR itself so its messages name
    # the variable; an option or ini value is an explicit folder.
    from_env = settings.source("data_dir") == DATA_DIR_ENV
    return resolve_data_dir(None if from_env else settings.data_dir or None)


def load_bundle(settings: Tau2Settings) -> DataBundle:
    data_dir = _data_dir(settings)
    return harness.load_bundle(data_dir, agent_notes=settings.agent_notes, profile=settings.profile)


def scenario_ids(settings: Tau2Settings) -> list[str]:
    """The ids of the scenarios the processes parametrize (before ``-k``/``-m``), from the
    tasks alone; raises ``DataError`` (no data) or ``ValueError`` (unknown task ids)."""
    return [scenario.id for scenario in select_scenarios(settings, load_tasks(_data_dir(settings)))]


def select_scenarios(settings: Tau2Settings, tasks: Mapping[str, Task]) -> list[Scenario]:
    """The scenarios of this run: tasks by split and ids (and shard), times trials, with seeds.

    Raises ``ValueError`` naming unknown task ids.
    """
    wanted = settings.tasks
    if problem := unknown_task_ids(wanted, tasks):
        raise ValueError(f"--tau2-tasks: {problem}")
    split = settings.split
    chosen = [
        task
        for task in tasks.values()
        if (not wanted or task.id in wanted) and (split == "base" or task.split == split)
    ]
    shard = settings.shard
    if shard is not None:
        # after --tau2-tasks and --tau2-split, before -k: every shard computes the same split
        chosen = shard_tasks(chosen, index=shard[0], count=shard[1])
    trials = settings.trials
    seeds = trial_seeds(settings.seed, trials)
    return [
        Scenario(task=task, trial=trial, trials=trials, seed=seeds[trial])
        for task in chosen
        for trial in range(trials)
    ]
