"""The tau2 profile's decisions: routing and endings, tools, request parameters, judge, reward."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tau2_retail.data.seed import load_seed
from tau2_retail.data.tasks import Task, load_policy, load_tasks
from tau2_retail.engine.conversation import run_conversation
from tau2_retail.engine.conversation_setup import Limits, ScenarioPrompts
from tau2_retail.engine.ending import StopReason
from tau2_retail.engine.judge_result import JudgeResult, Verdict
from tau2_retail.engine.profiles import (
    Profile,
    ProfileName,
    load_profile,
    parse_profile_name,
    policy_for,
    upstream_reward,
)
from tau2_retail.engine.profiles.tau2_judge import NO_RESULT_REASON, judge_upstream
from tau2_retail.engine.prompts import agent_system_prompt
from tau2_retail.engine.transcript import ConversationResult
from tau2_retail.errors import ConfigError
from tau2_retail.models.config import EndpointConfig
from tau2_retail.models.messages import AssistantTurn, Message, Role, ToolCall
from tau2_retail.tools.database import SeedDatabase
from tau2_retail.tools.store import Store


class Scripted:
    """A model answering from a list of turns, recording what it was sent."""

    def __init__(self, *turns: AssistantTurn) -> None:
        self.turns = list(turns)
        self.calls: list[Sequence[Message]] = []

    @property
    def name(self) -> str:
        return "scripted"

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        seed: int | None = None,
    ) -> AssistantTurn:
        self.calls.append(tuple(messages))
        return self.turns.pop(0)


def text(content: str) -> AssistantTurn:
    return AssistantTurn(content=content)


def calls(*pairs: tuple[str, dict[str, Any]]) -> AssistantTurn:
    return AssistantTurn(
        content=None,
        tool_calls=tuple(
            ToolCall(id=f"c{n}", name=name, arguments=json.dumps(arguments))
            for n, (name, arguments) in enumerate(pairs)
        ),
    )


@pytest.fixture(scope="module")
def seed(data_dir: Path) -> SeedDatabase:
    return load_seed(data_dir)


@pytest.fixture(scope="module")
def tasks(data_dir: Path) -> Mapping[str, Task]:
    return load_tasks(data_dir)


@pytest.fixture(scope="module")
def tau2(data_dir: Path, tasks: Mapping[str, Task]) -> Profile:
    return load_profile(ProfileName.TAU2, data_dir, tasks=tasks)


@pytest.fixture(scope="module")
def default(data_dir: Path) -> Profile:
    return load_profile(ProfileName.DEFAULT, data_dir)


def converse(
    profile: Profile, seed: SeedDatabase, agent: Scripted, user: Scripted, **limits: Any
) -> ConversationResult:
    return asyncio.run(
        run_conversation(
            agent=agent,
            user=user,
            prompts=ScenarioPrompts(
                agent=profile.agent_prompt, user="user prompt", tools=profile.tools
            ),
            store=Store(seed),
            limits=Limits(**limits),
            rules=profile.rules,
        )
    )


# -- the profiles --------------------------------------------------------------------------------


def test_default_profile_is_ours_unchanged(default: Profile, data_dir: Path) -> None:
    assert default.agent_prompt == agent_system_prompt(load_policy(data_dir))
    assert default.tools[-1]["function"]["name"] == "end_conversation"
    assert default.rules.normalize_ids
    assert default.rules.user_grace_turn


def test_tau2_profile_has_no_end_conversation(tau2: Profile) -> None:
    names = [tool["function"]["name"] for tool in tau2.tools]
    assert len(names) == 16
    assert "end_conversation" not in names
    assert tau2.rules.exit_tools == frozenset()


def test_profile_names_are_checked() -> None:
    assert parse_profile_name(" tau2 ") is ProfileName.TAU2
    with pytest.raises(ConfigError, match="expected one of default, tau2"):
        parse_profile_name("tau3")


# -- request parameters --------------------------------------------------------------------------


def test_tau2_requests_default_to_upstreams_parameters() -> None:
    config = EndpointConfig(model="m")
    tau2 = policy_for(ProfileName.TAU2)
    agent = tau2.request_config("agent", config)
    user = tau2.request_config("user", config)
    assert (agent.temperature, agent.extra_body) == (0.0, {"tool_choice": "auto"})
    assert (user.temperature, user.extra_body) == (0.0, {})
    configured = dataclasses.replace(config, temperature=0.7, extra_body={"tool_choice": "none"})
    kept = tau2.request_config("agent", configured)
    assert (kept.temperature, kept.extra_body) == (0.7, {"tool_choice": "none"})
    assert policy_for(ProfileName.DEFAULT).request_config("agent", config) == config


# -- tools ---------------------------------------------------------------------------------------


def test_tau2_tools_do_not_normalize_identifiers(
    tau2: Profile, default: Profile, seed: SeedDatabase
) -> None:
    ask = (
        calls(("get_order_details", {"order_id": "w2378156"})),
        text("Found it."),
        text("Goodbye."),
    )
    results = {}
    for profile in (tau2, default):
        conversation = converse(
            profile, seed, Scripted(*ask), Scripted(text("hi"), text("###STOP###"))
        )
        (tool,) = [m for m in conversation.messages if m.role is Role.TOOL]
        results[profile.name] = tool.content
    assert results[ProfileName.TAU2] == "Error: Order not found"
    assert results[ProfileName.DEFAULT].startswith('{"order_id": "#W2378156"')


def test_tau2_agent_cannot_call_end_conversation(tau2: Profile, seed: SeedDatabase) -> None:
    agent = Scripted(calls(("end_conversation", {})), text("Bye."))
    conversation = converse(tau2, seed, agent, Scripted(text("hi"), text("###STOP###")))
    (tool,) = [m for m in conversation.messages if m.role is Role.TOOL]
    assert tool.content == "Error: Tool 'end_conversation' not found."
    assert conversation.stop_reason is StopReason.USER_STOP


# -- routing and endings -------------------------------------------------------------------------


def test_tau2_user_stop_ends_at_once(tau2: Profile, default: Profile, seed: SeedDatabase) -> None:
    for profile, agent_calls in ((tau2, 1), (default, 2)):
        agent = Scripted(text("How can I help?"), text("Goodbye."))
        conversation = converse(profile, seed, agent, Scripted(text("hi"), text("bye ###STOP###")))
        assert conversation.stop_reason is StopReason.USER_STOP
        assert len(agent.calls) == agent_calls  # the default profile grants a grace turn


def test_tau2_transfer_does_not_end_the_conversation(tau2: Profile, seed: SeedDatabase) -> None:
    agent = Scripted(calls(("transfer_to_human_agents", {"summary": "s"})), text("Transferred."))
    user = Scripted(text("human please"), text("###TRANSFER###"))
    conversation = converse(tau2, seed, agent, user)
    assert conversation.stop_reason is StopReason.USER_STOP
    assert conversation.messages[-1].content == "###TRANSFER###"


def test_tau2_steps_do_not_count_the_greeting(tau2: Profile, seed: SeedDatabase) -> None:
    # upstream: user (1), agent (2), then the step limit is checked before the user's next turn
    conversation = converse(tau2, seed, Scripted(text("a1")), Scripted(text("u1")), max_steps=2)
    assert (conversation.stop_reason, conversation.steps) == (StopReason.MAX_STEPS, 2)


def test_tau2_step_limit_wins_over_the_users_stop_it_coincides_with(
    tau2: Profile, seed: SeedDatabase
) -> None:
    conversation = converse(
        tau2, seed, Scripted(text("a1")), Scripted(text("u1"), text("###STOP###")), max_steps=3
    )
    assert conversation.stop_reason is StopReason.MAX_STEPS


# Upstream's orchestrator (src/tau2/orchestrator/orchestrator.py, half-duplex ``step``): the
# agent's message is one step; all its tool calls then run in one environment step (another
# step), whatever their number; the step and error limits are checked only after that
# environment step (not while a reply to tool calls is owed), the error limit last (it wins).
_MANY = 25


def _one_turn(profile: Profile, seed: SeedDatabase, tool: str, **limits: Any) -> ConversationResult:
    """A conversation whose agent answers the customer's first words with _MANY calls of
    ``tool`` in one turn."""
    turn = calls(*[(tool, {"expression": f"{n} + 1"}) for n in range(_MANY)])
    return converse(
        profile, seed, Scripted(turn, text("never asked")), Scripted(text("hi")), **limits
    )


def test_tau2_runs_every_tool_call_of_a_turn_as_one_step_as_upstream(
    tau2: Profile, seed: SeedDatabase
) -> None:
    # user 1, the agent's 25 calls 2 (the limit: upstream still owes their results), results 3
    conversation = _one_turn(tau2, seed, "calculate", max_steps=2)
    results = [m for m in conversation.messages if m.role is Role.TOOL]
    assert len(results) == _MANY
    assert (conversation.stop_reason, conversation.steps) == (StopReason.MAX_STEPS, 3)


def test_tau2_counts_every_tool_error_of_a_turn_then_stops_as_upstream(
    tau2: Profile, seed: SeedDatabase
) -> None:
    conversation = _one_turn(tau2, seed, "no_such_tool", max_steps=3, max_errors=3)
    # the step limit is reached by the same environment step: upstream reports the errors
    assert conversation.stop_reason is StopReason.TOO_MANY_ERRORS
    assert conversation.tool_errors == _MANY


def test_default_counts_each_tool_call_of_a_turn_toward_the_step_limit(
    default: Profile, seed: SeedDatabase
) -> None:
    # greeting 1, user 2, the agent's turn 3, then one step per call: 7 leaves room for four
    conversation = _one_turn(default, seed, "calculate", max_steps=7)
    results = [m for m in conversation.messages if m.role is Role.TOOL]
    assert len(results) == 4
    assert (conversation.stop_reason, conversation.steps) == (StopReason.MAX_STEPS, 7)
    assert conversation.detail == f"7 routed messages; 4 of the last turn's {_MANY} tool calls run"


def test_tau2_empty_agent_message_is_an_agent_error_at_once(
    tau2: Profile, seed: SeedDatabase
) -> None:
    agent = Scripted(text(""), text("never asked"))
    conversation = converse(tau2, seed, agent, Scripted(text("hi")))
    assert conversation.stop_reason is StopReason.AGENT_ERROR
    assert len(agent.calls) == 1
    # asked once: the detail must not say "twice" (the default profile's retry)
    assert conversation.detail == "the agent returned an empty message"


# -- reward --------------------------------------------------------------------------------------


def _judged(*passed: bool, error: str | None = None) -> JudgeResult:
    return JudgeResult(
        score=0.0,
        reason="",
        system_prompt="",
        user_content="",
        verdicts=tuple(
            Verdict(index=n, assertion="a", passed=p, reason="") for n, p in enumerate(passed, 1)
        ),
        error=error,
    )


def test_upstream_reward(tasks: Mapping[str, Task]) -> None:
    nl_task = next(t for t in tasks.values() if t.nl_assertions)
    db_only = tasks["33"]
    assert db_only.reward_basis == ("DB",)

    def reward(task: Task, **kwargs: Any) -> float | None:
        values: dict[str, Any] = {
            "stop_reason": StopReason.USER_STOP,
            "db_match": True,
            "judge": _judged(True),
            "judge_configured": True,
        }
        return upstream_reward(task=task, **(values | kwargs))

    assert reward(nl_task) == 1.0
    assert reward(nl_task, stop_reason=StopReason.MAX_STEPS) == 0.0
    assert reward(nl_task, stop_reason=StopReason.TOO_MANY_ERRORS) == 0.0
    assert reward(nl_task, db_match=False) == 0.0
    assert reward(nl_task, judge=_judged(True, False)) == 0.0
    assert reward(nl_task, judge=_judged(False, error="Judge error: x")) == 0.0
    assert reward(nl_task, judge=None, judge_configured=False) is None
    assert reward(db_only, judge=None, judge_configured=False) == 1.0


# -- upstream's judge ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "passed", "error"),
    [
        ('{"results": []}', (True, True), None),  # upstream's all() over no results
        (
            '{"results": [{"expectedOutcome": "x", "reasoning": "r", "metExpectation": "true"},'
            ' {"expectedOutcome": "y", "reasoning": "r", "metExpectation": false}]}',
            (True, False),
            None,
        ),
        ("```json\n{}\n```", (False, False), "the reply is not JSON"),
        ('{"results": [{"expectedOutcome": "x"}]}', (False, False), "lacks metExpectation"),
        (
            '{"results": [{"expectedOutcome": "x", "reasoning": "r", "metExpectation": "maybe"}]}',
            (False, False),
            "is not a boolean",
        ),
        # nested deeper than the decoder goes: upstream's json.loads raises too (it crashed here)
        ("[" * 100_000, (False, False), "nested too deeply"),
        # an extra key nested 600 deep: upstream reads the results (a walk of the whole reply
        # for lone surrogates crashed with RecursionError)
        (
            '{"results": [{"expectedOutcome": "x", "reasoning": "r", "metExpectation": true}],'
            ' "note": ' + '{"a": ' * 600 + "1" + "}" * 600 + "}",
            (True, True),
            None,
        ),
    ],
)
def test_upstream_judge_reads_replies_as_upstream(
    tau2: Profile, reply: str, passed: tuple[bool, ...], error: str | None
) -> None:
    assert tau2.upstream is not None
    judge = Scripted(text(reply))
    result = asyncio.run(
        judge_upstream(
            judge,
            tau2.upstream.judge,
            assertions=["first", "second"],
            messages=[Message(role=Role.ASSISTANT, content="Hi")],
        )
    )
    assert tuple(v.passed for v in result.verdicts) == passed
    if error is None:
        assert result.error is None
    else:
        assert result.error is not None
        assert error in result.error
        assert result.raw_reply == reply  # kept whole in the artifacts, as the default judge does
        # scored as upstream scores it (NL not met), never asked again, never the judge's infra
        # error; counted for the run summary's note on the judge's format
        assert (result.unreadable, result.unreadable_replies) == (False, (reply,))
    (request,) = judge.calls
    assert request[0].content == tau2.upstream.judge.system_prompt
    if reply == '{"results": []}':
        assert {v.reason for v in result.verdicts} == {NO_RESULT_REASON}
