"""Scenarios of the real data run by the engine offline: the built-in customer against an agent
of the test's choosing, without pytest or the plugin (tests of artifacts, summaries, the report).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tau2_retail.data.gold import GoldBook
from tau2_retail.data.seed import load_seed
from tau2_retail.data.tasks import Task, load_policy, load_tasks, load_user_guidelines
from tau2_retail.engine.profiles import Profile, ProfileName, load_profile
from tau2_retail.engine.prompts import agent_system_prompt, user_system_prompt
from tau2_retail.engine.scenario import Scenario, ScenarioOutcome, run_scenario
from tau2_retail.models.builtin import builtin_model
from tau2_retail.models.protocol import ChatModel
from tau2_retail.tools.database import SeedDatabase
from tau2_retail.tools.store import Store

__all__ = ["OfflineData", "run_offline"]


@dataclass(frozen=True, slots=True)
class OfflineData:
    """The data folder loaded once: tasks, seed, gold book, the agent's system prompt (policy),
    the user guidelines and the default profile."""

    tasks: Mapping[str, Task]
    seed: SeedDatabase
    book: GoldBook
    agent_prompt: str
    guidelines: str
    profile: Profile

    @classmethod
    def load(cls, data_dir: Path) -> OfflineData:
        tasks = load_tasks(data_dir)
        seed = load_seed(data_dir)
        return cls(
            tasks=tasks,
            seed=seed,
            book=GoldBook(seed=seed, tasks=tasks),
            agent_prompt=agent_system_prompt(load_policy(data_dir)),
            guidelines=load_user_guidelines(data_dir),
            profile=load_profile(ProfileName.DEFAULT, data_dir),
        )

    def user_prompt(self, task: Task) -> str:
        """The built-in customer's system prompt for ``task``."""
        return user_system_prompt(self.guidelines, task)

    def run(
        self, scenario: Scenario, agent: ChatModel, judge_model: ChatModel | None = None
    ) -> ScenarioOutcome:
        """Run ``scenario`` on a fresh store with ``agent`` and the built-in customer."""
        return asyncio.run(
            run_offline(
                scenario, agent=agent, judge_model=judge_model, book=self.book, profile=self.profile
            )
        )


async def run_offline(
    scenario: Scenario,
    *,
    agent: ChatModel,
    judge_model: ChatModel | None,
    book: GoldBook,
    profile: Profile,
) -> ScenarioOutcome:
    """Run ``scenario`` on a fresh copy of ``book``'s seed with ``agent`` and the built-in
    customer (the tests' and benchmarks' way to run one scenario without an endpoint)."""
    task = scenario.task
    return await run_scenario(
        scenario,
        agent=agent,
        user=builtin_model("builtin:customer", task, role="user"),
        judge_model=judge_model,
        gold=book[task.id],
        store=Store(book.seed),
        profile=profile,
    )
