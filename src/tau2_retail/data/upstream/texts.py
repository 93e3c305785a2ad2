"""Everything the tau2 profile shows a model, derived once per process from the pinned sources."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from tau2_retail.data.files import read_verified
from tau2_retail.data.tasks import load_policy, load_user_guidelines
from tau2_retail.data.upstream.prompts import (
    JudgeTemplate,
    derive_agent_prompt,
    derive_agent_stop_rule,
    derive_endings,
    derive_first_agent_message,
    derive_judge,
    derive_user_prompt,
    render_scenario,
)
from tau2_retail.data.upstream.source import (
    AGENT_SOURCE,
    JUDGE_SOURCE,
    ORCHESTRATOR_SOURCE,
    TASKS_SOURCE,
    TOOL_SOURCE,
    TOOLKIT_SOURCE,
    USER_SOURCE,
    load_source,
)
from tau2_retail.data.upstream.tool_schemas import derive_tool_schemas
from tau2_retail.errors import DataError

__all__ = ["UpstreamTexts", "load_upstream_texts"]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamTexts:
    """Upstream's model-visible text and conversation rules, as derived from its sources."""

    agent_system_prompt: str
    tools: tuple[Mapping[str, Any], ...]
    first_agent_message: str
    agent_can_stop: bool
    user_system_prompts: Mapping[str, str]
    judge: JudgeTemplate
    endings: frozenset[str]

    def user_system_prompt(self, task_id: str) -> str:
        return self.user_system_prompts[task_id]


def _user_scenarios(data_dir: Path) -> dict[str, Any]:
    source = "tasks.json"
    raw = json.loads(read_verified(data_dir, source))
    scenarios = {}
    for task in raw:
        if not isinstance(task, dict) or not isinstance(task.get("user_scenario"), dict):
            raise DataError(f"{data_dir / source}: a task without a user_scenario object")
        scenarios[str(task["id"])] = task["user_scenario"]
    return scenarios


@cache
def load_upstream_texts(data_dir: Path) -> UpstreamTexts:
    """Derive the tau2 profile's text from ``<data_dir>/upstream/src/tau2/...`` (once per folder).

    Raises ``DataError``/``DigestMismatch`` for a missing or altered source (file, digests,
    fix) and ``UpstreamSourceError`` naming a construct a changed pin no longer has.
    """
    agent = load_source(data_dir, AGENT_SOURCE)
    orchestrator = load_source(data_dir, ORCHESTRATOR_SOURCE)
    user = load_source(data_dir, USER_SOURCE)
    tasks = load_source(data_dir, TASKS_SOURCE)
    guidelines = load_user_guidelines(data_dir)
    return UpstreamTexts(
        agent_system_prompt=derive_agent_prompt(agent, policy=load_policy(data_dir)),
        tools=derive_tool_schemas(
            toolkit=load_source(data_dir, TOOLKIT_SOURCE), tool=load_source(data_dir, TOOL_SOURCE)
        ),
        first_agent_message=derive_first_agent_message(orchestrator),
        agent_can_stop=derive_agent_stop_rule(agent),
        user_system_prompts={
            task_id: derive_user_prompt(
                user, guidelines=guidelines, scenario=render_scenario(tasks, scenario)
            )
            for task_id, scenario in _user_scenarios(data_dir).items()
        },
        judge=derive_judge(load_source(data_dir, JUDGE_SOURCE)),
        endings=derive_endings(orchestrator),
    )
