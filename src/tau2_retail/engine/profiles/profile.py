"""The two profiles of a run: ours (``default``) and upstream tau2-bench's (``tau2``).

A profile decides everything a model sees and everything the harness decides about it: the
agent's system prompt and tools, the user simulator's prompt, the conversation's routing and
endings, the request parameters, the judge and the reward. A :class:`Profile` holds the text,
loaded from the data; its :attr:`~Profile.policy` (:mod:`.policy`) holds the decisions.

- ``default``: the policy with our notes, our tool descriptions plus ``end_conversation``, our
  user prompt and judge, identifier normalization on, success = DB_STATE_MATCH and CLEAN_EXIT
  and NL_ASSERTION.
- ``tau2``: upstream's text derived from its pinned sources (``data.upstream``): its agent
  prompt, its 16 tool schemas in its order (no ``end_conversation``: the agent cannot end the
  call; a transfer does not end it either), its user prompt; the user's stop token ends the
  conversation at once; identifier normalization off; upstream's request defaults, judge and
  reward (:class:`~.policy.Tau2Policy`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tau2_retail.data.tasks import Task, load_policy, load_user_guidelines
from tau2_retail.data.upstream import UpstreamTexts, load_upstream_texts
from tau2_retail.engine.conversation_setup import ConversationRules, ScenarioPrompts
from tau2_retail.engine.judge import judge_scenario
from tau2_retail.engine.judge_result import JudgeResult
from tau2_retail.engine.profiles.policy import (
    REWARD_BASES,
    ProfileName,
    ProfilePolicy,
    policy_for,
)
from tau2_retail.engine.profiles.tau2_judge import judge_upstream
from tau2_retail.engine.prompts import agent_system_prompt, user_system_prompt
from tau2_retail.errors import DataError
from tau2_retail.models.messages import Message
from tau2_retail.models.protocol import ChatModel
from tau2_retail.tools.dispatch import Action
from tau2_retail.tools.schemas import tool_schemas

__all__ = ["Profile", "load_profile"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    """What one profile shows the models, and its decisions (``policy``); built once per
    process by :func:`load_profile`."""

    policy: ProfilePolicy
    agent_prompt: str
    tools: tuple[Mapping[str, Any], ...]
    rules: ConversationRules
    user_guidelines: str
    upstream: UpstreamTexts | None = None

    @property
    def name(self) -> ProfileName:
        return ProfileName(self.policy.name)

    def user_prompt(self, task: Task) -> str:
        if self.upstream is not None:
            return self.upstream.user_system_prompt(task.id)
        return user_system_prompt(self.user_guidelines, task)

    def prompts(self, task: Task) -> ScenarioPrompts:
        """What this profile shows the models in ``task``'s conversation."""
        return ScenarioPrompts(
            agent=self.agent_prompt, user=self.user_prompt(task), tools=self.tools
        )

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


def _load_default(
    data_dir: Path, *, agent_notes: bool, tasks: Mapping[str, Task] | None
) -> Profile:
    return Profile(
        policy=policy_for(ProfileName.DEFAULT),
        agent_prompt=agent_system_prompt(load_policy(data_dir), additional_notes=agent_notes),
        tools=tuple(tool_schemas()),
        rules=ConversationRules(),
        user_guidelines=load_user_guidelines(data_dir),
    )


def _load_tau2(data_dir: Path, *, agent_notes: bool, tasks: Mapping[str, Task] | None) -> Profile:
    guidelines = load_user_guidelines(data_dir)
    if tasks is not None:
        _check_reward_bases(tasks)
    upstream = load_upstream_texts(data_dir)
    return Profile(
        policy=policy_for(ProfileName.TAU2),
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
            tool_calls_are_steps=False,
        ),
        user_guidelines=guidelines,
        upstream=upstream,
    )


_LOADERS: Final[dict[ProfileName, Callable[..., Profile]]] = {
    ProfileName.DEFAULT: _load_default,
    ProfileName.TAU2: _load_tau2,
}


def load_profile(
    name: ProfileName,
    data_dir: Path,
    *,
    agent_notes: bool = True,
    tasks: Mapping[str, Task] | None = None,
) -> Profile:
    """Build profile ``name`` from the verified data (and, for ``tau2``, the pinned sources).

    ``agent_notes`` False gives the agent the policy alone (default profile only). Raises
    ``DataError`` (missing or altered file, with digests and the fix) or
    ``UpstreamSourceError`` (a construct a changed pin lacks).
    """
    return _LOADERS[name](data_dir, agent_notes=agent_notes, tasks=tasks)
