"""What a pytest process needs to run scenarios: the data bundle and the models of a task.

Loaded lazily, once per process (each xdist worker has its own), and kept on the plugin
object rather than in module globals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tau2_retail.data.files import DATA_DIR_ENV, resolve_data_dir
from tau2_retail.data.gold import GoldBook
from tau2_retail.data.seed import load_seed
from tau2_retail.data.tasks import Task, load_tasks, trial_seeds
from tau2_retail.engine.profiles import Profile, ProfileName, load_profile, request_config
from tau2_retail.engine.scenario import Scenario
from tau2_retail.plugins.options import ModelSettings, Tau2Settings

if TYPE_CHECKING:
    from tau2_retail.models.openai_client import OpenAIChatModel

__all__ = ["DataBundle", "endpoint_model", "load_bundle", "select_scenarios"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DataBundle:
    """The verified data of one folder and what is derived from it once per process."""

    data_dir: Path
    tasks: Mapping[str, Task]
    golds: GoldBook
    profile: Profile

    @property
    def agent_prompt(self) -> str:
        return self.profile.agent_prompt

    @property
    def tools(self) -> Sequence[Mapping[str, Any]]:
        return self.profile.tools


def load_bundle(settings: Tau2Settings) -> DataBundle:
    # From the environment, let the data layer read TAU2_DATA_DIR itself so its messages name
    # the variable; an option or ini value is an explicit folder.
    from_env = settings.sources["data_dir"] == DATA_DIR_ENV
    data_dir = resolve_data_dir(None if from_env else settings["data_dir"] or None)
    tasks = load_tasks(data_dir)
    return DataBundle(
        data_dir=data_dir,
        tasks=tasks,
        golds=GoldBook(seed=load_seed(data_dir), tasks=tasks),
        profile=load_profile(
            ProfileName(settings["profile"]),
            data_dir,
            agent_notes=settings["agent_notes"],
            tasks=tasks,
        ),
    )


def select_scenarios(settings: Tau2Settings, tasks: Mapping[str, Task]) -> list[Scenario]:
    """The scenarios of this run: tasks by split and ids, times trials, with tau2 seeds.

    Raises ``ValueError`` naming unknown task ids.
    """
    wanted = settings["tasks"]
    if wanted:
        unknown = [task_id for task_id in wanted if task_id not in tasks]
        if unknown:
            raise ValueError(
                f"--tau2-tasks: unknown task id(s) {', '.join(unknown)}; "
                f"known ids are 0..{len(tasks) - 1}"
            )
    split = settings["split"]
    chosen = [
        task
        for task in tasks.values()
        if (not wanted or task.id in wanted) and (split == "base" or task.split == split)
    ]
    trials = settings["trials"]
    seeds = trial_seeds(settings["seed"], trials)
    return [
        Scenario(task=task, trial=trial, trials=trials, seed=seeds[trial])
        for task in chosen
        for trial in range(trials)
    ]


def endpoint_model(
    model: ModelSettings, *, role: str, profile: ProfileName = ProfileName.DEFAULT
) -> OpenAIChatModel:
    """The client of an endpoint model with the profile's request parameters (caller closes)."""
    assert model.endpoint is not None  # only called for endpoint settings
    from tau2_retail.models.openai_client import OpenAIChatModel

    return OpenAIChatModel(request_config(profile, role, model.endpoint))
