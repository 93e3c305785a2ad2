"""The built-in models: the oracle self-check on all 114 tasks, the noop floor, their scripts."""

from __future__ import annotations

import asyncio
import json

import pytest

from tau2_retail.data.gold import GoldBook
from tau2_retail.data.seed import load_seed
from tau2_retail.data.tasks import Task
from tau2_retail.engine.conversation import run_conversation
from tau2_retail.engine.conversation_setup import ScenarioPrompts
from tau2_retail.engine.ending import StopReason
from tau2_retail.engine.prompts import GREETING
from tau2_retail.engine.transcript import ConversationResult
from tau2_retail.errors import ConfigError
from tau2_retail.models.builtin import (
    ANYTHING_ELSE,
    BUILTIN_AGENTS,
    BUILTIN_USERS,
    CUSTOMER_DONE,
    CUSTOMER_MAX_TURNS,
    CUSTOMER_YES,
    NoopAgent,
    OracleAgent,
    ScriptedCustomer,
    builtin_model,
    is_builtin,
)
from tau2_retail.models.messages import Message, Role
from tau2_retail.tools.database import SeedDatabase
from tau2_retail.tools.schemas import tool_schemas
from tau2_retail.tools.store import Store

NOOP_MATCHES = {"10", "12", "24", "25", "50", "57", "62", "65", "67", "68", "105"}
TOOLS = tool_schemas()


@pytest.fixture(scope="module")
def seed_db(data_dir) -> SeedDatabase:
    return load_seed(data_dir)


@pytest.fixture(scope="module")
def golds(seed_db, tasks) -> GoldBook:
    return GoldBook(seed=seed_db, tasks=tasks)


async def conversation(task: Task, seed_db: SeedDatabase, *, agent: str) -> ConversationResult:
    return await run_conversation(
        agent=builtin_model(agent, task, role="agent"),
        user=builtin_model("builtin:customer", task, role="user"),
        prompts=ScenarioPrompts(agent="agent prompt", user="user prompt", tools=TOOLS),
        store=Store(seed_db),
    )


def play(task: Task, seed_db: SeedDatabase, *, agent: str) -> ConversationResult:
    return asyncio.run(conversation(task, seed_db, agent=agent))


async def play_all(tasks, seed_db, agent: str) -> dict[str, ConversationResult]:
    """Every task's conversation, one after the other."""
    return {
        task_id: await conversation(task, seed_db, agent=agent) for task_id, task in tasks.items()
    }


# -- the self-check and the floor ------------------------------------------------------------------


def test_oracle_and_customer_reach_agent_exit_with_the_gold_database_on_all_tasks(
    tasks, seed_db, golds
):
    assert len(tasks) == 114
    results = asyncio.run(play_all(tasks, seed_db, "builtin:oracle"))
    wrong_ending = {
        task_id: f"{r.stop_reason.value} {r.detail}"
        for task_id, r in results.items()
        if r.stop_reason is not StopReason.AGENT_EXIT
    }
    wrong_db = [
        task_id for task_id, r in results.items() if not r.store.matches(golds[task_id].store)
    ]
    assert wrong_ending == {}
    assert wrong_db == []
    # The oracle's recorded actions are exactly the reference actions of the gold replay.
    assert all(r.actions == golds[task_id].actions for task_id, r in results.items())


def test_noop_matches_the_gold_state_on_exactly_the_eleven_seed_tasks(tasks, seed_db, golds):
    results = asyncio.run(play_all(tasks, seed_db, "builtin:noop"))
    assert {r.stop_reason for r in results.values()} == {StopReason.AGENT_EXIT}
    matching = {task_id for task_id, r in results.items() if r.store.matches(golds[task_id].store)}
    assert matching == NOOP_MATCHES
    assert all(r.store.diff_from_seed() == {} for r in results.values())


def test_the_builtin_run_is_deterministic(tasks, seed_db):
    first = play(tasks["0"], seed_db, agent="builtin:oracle")
    second = play(tasks["0"], seed_db, agent="builtin:oracle")
    assert first.messages == second.messages
    assert first.actions == second.actions


# -- the oracle -----------------------------------------------------------------------------------


def test_oracle_transcript_shape_on_task_0(tasks, seed_db):
    task = tasks["0"]
    result = play(task, seed_db, agent="builtin:oracle")
    calls = [c for m in result.messages for c in m.tool_calls]
    gold = [(a.name, a.plain_arguments()) for a in task.actions]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [*gold, ("end_conversation", {})]
    # One call per turn, then a report, the customer's stop, and end_conversation.
    assert all(len(m.tool_calls) <= 1 for m in result.messages)
    texts = [(m.role, m.content) for m in result.messages if not m.tool_calls and m.role != "tool"]
    assert texts[0] == (Role.ASSISTANT, GREETING)
    assert texts[-2][1].endswith(ANYTHING_ELSE)
    assert texts[-1] == (Role.USER, CUSTOMER_DONE)


def test_oracle_report_tells_the_communicate_info(tasks):
    task = next(t for t in tasks.values() if t.communicate_info)
    report = OracleAgent(task).report()
    assert report.startswith("I have taken care of your request. ")
    assert report.endswith(ANYTHING_ELSE)
    for fact in task.communicate_info:
        assert fact.strip() in report


@pytest.mark.asyncio
async def test_oracle_ends_on_a_stop_token_and_repeats_the_question_otherwise(tasks):
    task = next(t for t in tasks.values() if not t.actions)
    oracle = OracleAgent(task)
    greeting = Message(role=Role.ASSISTANT, content=GREETING)
    first = await oracle.complete([greeting, Message(role=Role.USER, content="Hi.")])
    assert first.content == oracle.report()
    reported = Message(role=Role.ASSISTANT, content=first.content)
    again = await oracle.complete([greeting, reported, Message(role=Role.USER, content="Hm.")])
    assert again.content == ANYTHING_ELSE
    done = Message(role=Role.USER, content="Bye ###STOP###")
    ending = await oracle.complete([greeting, reported, done])
    assert ending.content is None
    assert [c.name for c in ending.tool_calls] == ["end_conversation"]
    assert ending.usage.n_calls == 1


@pytest.mark.asyncio
async def test_noop_ends_at_once(tasks):
    turn = await NoopAgent(tasks["0"]).complete([])
    assert [c.name for c in turn.tool_calls] == ["end_conversation"]
    assert turn.tool_calls[0].arguments == "{}"


# -- the scripted customer ------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_customer_opens_with_the_request_then_says_yes_then_stops(tasks):
    task = tasks["0"]
    customer = ScriptedCustomer(task)
    system = Message(role=Role.SYSTEM, content="prompt")
    agent_says = Message(role=Role.USER, content=GREETING)
    opening = await customer.complete([system, agent_says])
    assert opening.content == f"{task.reason_for_call.strip()} {(task.known_info or '').strip()}"
    mine = Message(role=Role.ASSISTANT, content=opening.content)
    asked = Message(role=Role.USER, content="Shall I proceed?")
    assert (await customer.complete([system, agent_says, mine, asked])).content == CUSTOMER_YES
    done = Message(role=Role.USER, content=f"Done. {ANYTHING_ELSE}")
    assert (await customer.complete([system, agent_says, mine, done])).content == CUSTOMER_DONE
    assert "###STOP###" in CUSTOMER_DONE


@pytest.mark.asyncio
async def test_customer_stops_after_a_bounded_number_of_turns(tasks):
    customer = ScriptedCustomer(tasks["0"])
    messages = [Message(role=Role.USER, content=GREETING)]
    for _ in range(CUSTOMER_MAX_TURNS):
        messages.append(Message(role=Role.ASSISTANT, content="me"))
        messages.append(Message(role=Role.USER, content="Please hold."))
    assert (await customer.complete(messages)).content == CUSTOMER_DONE


# -- names ----------------------------------------------------------------------------------------


def test_builtin_names(tasks):
    assert BUILTIN_AGENTS == ("builtin:oracle", "builtin:noop")
    assert BUILTIN_USERS == ("builtin:customer",)
    assert is_builtin("builtin:oracle")
    assert not is_builtin("gpt-4.1")
    task = tasks["0"]
    assert isinstance(builtin_model("builtin:oracle", task, role="agent"), OracleAgent)
    assert isinstance(builtin_model("builtin:noop", task, role="agent"), NoopAgent)
    assert isinstance(builtin_model("builtin:customer", task, role="user"), ScriptedCustomer)
    for name in (*BUILTIN_AGENTS, *BUILTIN_USERS):
        role = "agent" if name in BUILTIN_AGENTS else "user"
        assert builtin_model(name, task, role=role).name == name


@pytest.mark.parametrize(
    ("name", "role", "message"),
    [
        (
            "builtin:customer",
            "agent",
            "'builtin:customer' is not a built-in agent model; "
            "built-in agent models: builtin:oracle, builtin:noop",
        ),
        (
            "builtin:oracle",
            "user",
            "'builtin:oracle' is not a built-in user model; built-in user models: builtin:customer",
        ),
        (
            "builtin:oracel",
            "agent",
            "'builtin:oracel' is not a built-in agent model; "
            "built-in agent models: builtin:oracle, builtin:noop",
        ),
    ],
)
def test_builtin_model_rejects_the_wrong_name_or_role(tasks, name, role, message):
    with pytest.raises(ConfigError) as caught:
        builtin_model(name, tasks["0"], role=role)
    assert str(caught.value) == message
