"""The two profiles of a run: ours (``default``) and upstream tau2-bench's (``tau2``).

A profile decides everything a model sees and everything the harness decides about it: the
agent's system prompt and tools, the user simulator's prompt, the conversation's routing and
endings, the request parameters, the judge and the reward.

- ``default``: the policy with our notes, our tool descriptions plus ``end_conversation``, our
  user prompt and judge, identifier normalization on, success = DB_STATE_MATCH and CLEAN_EXIT
  and NL_ASSERTION.
- ``tau2``: upstream's text derived from its pinned sources (``data.upstream``): its agent
  prompt, its 16 tool schemas in its order (no ``end_conversation``: the agent cannot end the
  call; a transfer does not end it either), its user prompt; the user's stop token ends the
  conversation at once; identifier normalization off; ``temperature`` 0.0 for the three roles
  and ``tool_choice`` "auto" for the agent unless configured; upstream's judge and reward
  (``reward_basis``: DB and NL_ASSERTION; 0 unless the conversation ended by ``user_stop`` or
  ``agent_stop``); a scenario succeeds when that reward is 1, so pass^k is upstream's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from tau2_retail.data.tasks import Task, load_policy, load_user_guidelines
from tau2_retail.data.upstream import UpstreamTexts, load_upstream_texts
from tau2_retail.engine.conversation import ConversationRules, StopReason
from tau2_retail.engine.judge import JudgeResult, judge_scenario
from tau2_retail.engine.profiles.tau2_judge import judge_upstream
from tau2_retail.engine.prompts import agent_system_prompt, user_system_prompt
from tau2_retail.errors import ConfigError, DataError
from tau2_retail.models.config import EndpointConfig
from tau2_retail.models.messages import Message
from tau2_retail.models.protocol import ChatModel
from tau2_retail.tools.dispatch import Action
from tau2_retail.tools.schemas import tool_schemas

__all__ = [
    "PROFILE_NAMES",
    "REWARD_BASES",
    "SCORED_ENDINGS",
    "Profile",
    "ProfileName",
    "load_profile",
    "parse_profile_name",
    "request_config",
    "upstream_reward",
]


class ProfileName(StrEnum):
    DEFAULT = "default"
    TAU2 = "tau2"


PROFILE_NAMES: Final = tuple(name.value for name in ProfileName)

REWARD_BASES: Final = frozenset({"DB", "NL_ASSERTION"})
"""The reward components of the retail tasks that the tau2 profile computes."""

_UPSTREAM_TEMPERATURE: Final = 0.0
_UPSTREAM_TOOL_CHOICE: Final = "auto"
# Upstream's endings that score: the user's or the agent's own stop. Our ``agent_exit`` is the
# agent's stop in the default profile (the tau2 profile never produces it).
SCORED_ENDINGS: Final = frozenset({StopReason.USER_STOP, StopReason.AGENT_EXIT})


def request_config(profile: ProfileName, role: str, config: EndpointConfig) -> EndpointConfig:
    """``config`` with the request parameters of ``profile`` for ``role``.

    tau2: ``temperature`` 0.0 for every role unless configured, and ``tool_choice`` "auto" on
    the agent's requests unless the extra body sets one (upstream's defaults). The default
    profile sends only what is configured.
    """
    if profile is not ProfileName.TAU2:
        return config
    temperature = _UPSTREAM_TEMPERATURE if config.temperature is None else config.temperature
    extra_body = dict(config.extra_body)
    if role == "agent":
        extra_body.setdefault("tool_choice", _UPSTREAM_TOOL_CHOICE)
    return dataclasses.replace(config, temperature=temperature, extra_body=extra_body)


def parse_profile_name(raw: str) -> ProfileName:
    """``default`` or ``tau2``; raises ``ConfigError`` naming the accepted values."""
    try:
        return ProfileName(raw.strip())
    except ValueError:
        raise ConfigError(
            f"profile {raw!r} is not known; expected one of {', '.join(PROFILE_NAMES)}"
        ) from None


def upstream_reward(
    *,
    task: Task,
    stop_reason: StopReason,
    db_match: bool,
    judge: JudgeResult | None,
    judge_configured: bool,
) -> float | None:
    """Upstream's reward: 0 unless the conversation ended by a stop; else the product of the
    ``reward_basis`` components. None when an NL component is needed and no judge is configured.
    """
    if stop_reason not in SCORED_ENDINGS:
        return 0.0
    reward = 1.0
    if "DB" in task.reward_basis and not db_match:
        reward = 0.0
    if "NL_ASSERTION" in task.reward_basis and task.nl_assertions:
        if not judge_configured:
            return None
        if judge is None or judge.error is not None or judge.pass_count != judge.total:
            reward = 0.0
    return reward


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    """What one profile shows the models and decides; built once per process."""

    name: ProfileName
    agent_prompt: str
    tools: tuple[Mapping[str, Any], ...]
    rules: ConversationRules
    user_guidelines: str
    upstream: UpstreamTexts | None = None

    @property
    def is_tau2(self) -> bool:
        return self.name is ProfileName.TAU2

    def user_prompt(self, task: Task) -> str:
        if self.upstream is not None:
            return self.upstream.user_system_prompt(task.id)
        return user_system_prompt(self.user_guidelines, task)

    def judges(self, task: Task) -> bool:
        """Whether this task's assertions are judged in this profile."""
        if not task.nl_assertions:
            return False
        return not self.is_tau2 or "NL_ASSERTION" in task.reward_basis

    async def judge(
        self,
        model: ChatModel,
        *,
        task: Task,
        messages: Sequence[Message],
        reference_actions: Sequence[Action],
        recorded_actions: Sequence[Action],
        seed: int | None,
    ) -> JudgeResult:
        if self.upstream is not None:
            return await judge_upstream(
                model, self.upstream.judge, assertions=task.nl_assertions, messages=messages
            )
        return await judge_scenario(
            model,
            assertions=task.nl_assertions,
            messages=messages,
            reference_actions=reference_actions,
            recorded_actions=recorded_actions,
            seed=seed,
        )


def _check_reward_bases(tasks: Mapping[str, Task]) -> None:
    for task in tasks.values():
        unknown = sorted(set(task.reward_basis) - REWARD_BASES)
        if unknown:
            raise DataError(
                f"task {task.id!r}: reward_basis {', '.join(unknown)} is not computed by the "
                f"tau2 profile (it computes {', '.join(sorted(REWARD_BASES))})"
            )


def load_profile(
    name: ProfileName,
    data_dir: Path,
    *,
    agent_notes: bool = True,
    tasks: Mapping[str, Task] | None = None,
) -> Profile:
    """Build profile ``name`` from the verified data (and, for ``tau2``, the pinned sources).

    Raises ``DataError`` (missing or altered file, with digests and the fix) or
    ``UpstreamSourceError`` (a construct a changed pin lacks).
    """
    guidelines = load_user_guidelines(data_dir)
    if name is ProfileName.DEFAULT:
        return Profile(
            name=name,
            agent_prompt=agent_system_prompt(load_policy(data_dir), additional_notes=agent_notes),
            tools=tuple(tool_schemas()),
            rules=ConversationRules(),
            user_guidelines=guidelines,
        )
    if tasks is not None:
        _check_reward_bases(tasks)
    upstream = load_upstream_texts(data_dir)
    return Profile(
        name=name,
        agent_prompt=upstream.agent_system_prompt,
        tools=upstream.tools,
        rules=ConversationRules(
            greeting=upstream.first_agent_message,
            greeting_is_a_step=False,
            exit_tools=frozenset(),
            available_tools=frozenset(tool["function"]["name"] for tool in upstream.tools),
            normalize_ids=False,
            user_grace_turn=False,
            retry_empty_agent=False,
        ),
        user_guidelines=guidelines,
        upstream=upstream,
    )
