"""The tau2 profile on the wire: for all 114 tasks, what reaches a loopback endpoint is upstream's.

One ``LoopbackOpenAIServer`` plays agent, user and judge through the real ``OpenAIChatModel``.
The scripted agent makes the task's gold calls, reports, and the scripted user stops; the
judge meets every assertion. Every request is then compared with upstream tau2-bench's
digests (``tests/tau2_retail/tau2_profile_digests.json``): system prompts, tools in order and
each tool, request parameters, the seed; and every task scores upstream's reward 1.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tau2_retail.data.gold import GoldBook
from tau2_retail.data.seed import load_seed
from tau2_retail.data.tasks import Task, load_tasks, trial_seeds
from tau2_retail.engine.profiles import Profile, ProfileName, load_profile, request_config
from tau2_retail.engine.scenario import Scenario, ScenarioOutcome, run_scenario
from tau2_retail.models.config import EndpointConfig
from tau2_retail.models.openai_client import OpenAIChatModel
from tau2_retail.testing.loopback_server import (
    Completion,
    LoopbackOpenAIServer,
    Reply,
    ReplyToolCall,
)
from tau2_retail.tools.store import Store
from tests.tau2_retail.upstream_digests import DIGESTS, json_digest, text_digest

SEED = trial_seeds(300, 1)[0]
STOP = "Thank you, that is all. ###STOP###"
OPENING = re.compile(r"task (\d+) needs help")


class ScriptedParties:
    """Answers as agent (tools in the request), judge (its system prompt) or user (otherwise)."""

    def __init__(
        self, tasks: Mapping[str, Task], judge_prompt: str, user_prompts: Mapping[str, str]
    ) -> None:
        self.tasks = tasks
        self.judge_prompt = judge_prompt
        self.task_of_user_prompt = {prompt: task_id for task_id, prompt in user_prompts.items()}
        self.log: list[tuple[str, str, Mapping[str, Any]]] = []
        self.lock = threading.Lock()

    def __call__(self, body: Mapping[str, Any]) -> Reply:
        messages = body["messages"]
        reply: Reply
        if "tools" in body:
            role = "agent"
            match = OPENING.search(messages[2]["content"])
            assert match is not None
            task_id = match.group(1)
            calls = tuple(
                ReplyToolCall(
                    name=action.name, arguments=json.dumps(action.plain_arguments()), id=f"c{n}"
                )
                for n, action in enumerate(self.tasks[task_id].actions)
            )
            if messages[-1]["role"] == "user" and calls:
                reply = Completion(content=None, tool_calls=calls)
            else:
                reply = Completion(content="All done. Anything else?")
        elif messages[0]["content"] == self.judge_prompt:
            role = "judge"
            match = OPENING.search(messages[1]["content"])
            assert match is not None
            task_id = match.group(1)
            assertions = self.tasks[task_id].nl_assertions
            results = [
                {"expectedOutcome": a, "reasoning": "shown", "metExpectation": True}
                for a in assertions
            ]
            reply = Completion(content=json.dumps({"results": results}))
        else:
            role = "user"
            task_id = self.task_of_user_prompt[messages[0]["content"]]
            own = [m for m in messages if m["role"] == "assistant"]
            reply = Completion(content=STOP if own else f"task {task_id} needs help")
        with self.lock:
            self.log.append((role, task_id, body))
        return reply

    def requests(self, role: str, task_id: str) -> list[Mapping[str, Any]]:
        return [body for r, t, body in self.log if r == role and t == task_id]


@pytest.fixture(scope="module")
def tasks(data_dir: Path) -> dict[str, Task]:
    return dict(load_tasks(data_dir))


@pytest.fixture(scope="module")
def profile(data_dir: Path, tasks: dict[str, Task]) -> Profile:
    return load_profile(ProfileName.TAU2, data_dir, tasks=tasks)


@pytest.fixture(scope="module")
def parties(tasks: dict[str, Task], profile: Profile) -> ScriptedParties:
    assert profile.upstream is not None
    return ScriptedParties(
        tasks,
        profile.upstream.judge.system_prompt,
        {task_id: profile.user_prompt(task) for task_id, task in tasks.items()},
    )


@pytest.fixture(scope="module")
def server(parties: ScriptedParties) -> Iterator[LoopbackOpenAIServer]:
    with LoopbackOpenAIServer(responder=parties) as running:
        yield running


@pytest.fixture(scope="module")
def outcomes(
    data_dir: Path,
    tasks: dict[str, Task],
    profile: Profile,
    server: LoopbackOpenAIServer,
) -> dict[str, ScenarioOutcome]:
    book = GoldBook(seed=load_seed(data_dir), tasks=tasks)

    def client(role: str) -> OpenAIChatModel:
        config = EndpointConfig(model=f"scripted-{role}", base_url=server.base_url, max_retries=0)
        return OpenAIChatModel(request_config(profile.name, role, config))

    async def run_all() -> dict[str, ScenarioOutcome]:
        agent, user, judge = client("agent"), client("user"), client("judge")
        limit = asyncio.Semaphore(16)

        async def one(task: Task) -> ScenarioOutcome:
            async with limit:
                return await run_scenario(
                    Scenario(task=task, trial=0, trials=1, seed=SEED),
                    agent=agent,
                    user=user,
                    judge_model=judge,
                    gold=book[task.id],
                    store=Store(book.seed),
                    agent_prompt=profile.agent_prompt,
                    user_prompt=profile.user_prompt(task),
                    tools=profile.tools,
                    profile=profile,
                )

        try:
            done = await asyncio.gather(*(one(task) for task in tasks.values()))
        finally:
            for model in (agent, user, judge):
                await model.close()
        return {outcome.scenario.task.id: outcome for outcome in done}

    return asyncio.run(run_all())


def test_every_task_scores_upstreams_reward_1(outcomes: dict[str, ScenarioOutcome]) -> None:
    assert len(outcomes) == 114
    rewards = {task_id: o.metrics["tau2_reward"] for task_id, o in outcomes.items()}
    assert {task_id for task_id, r in rewards.items() if r != 1.0} == set()
    assert {o.conversation.stop_reason.value for o in outcomes.values()} == {"user_stop"}
    assert all(
        o.metrics["is_successful"] and o.metrics["profile"] == "tau2" for o in outcomes.values()
    )
    breakdowns = {
        tuple(o.metrics["success_breakdown"]["not_applicable"]) for o in outcomes.values()
    }
    assert all("CLEAN_EXIT" in names for names in breakdowns)


def test_agent_requests_are_upstreams(
    outcomes: dict[str, ScenarioOutcome], parties: ScriptedParties
) -> None:
    params = DIGESTS["agent_request_params"]
    for task_id in outcomes:
        requests = parties.requests("agent", task_id)
        assert requests, task_id
        for body in requests:
            assert text_digest(body["messages"][0]["content"]) == DIGESTS["agent_system_prompt"]
            assert body["messages"][1] == {
                "role": "assistant",
                "content": DIGESTS["agent_first_message"],
            }
            names = [tool["function"]["name"] for tool in body["tools"]]
            assert names == DIGESTS["tools_in_order"]
            assert json_digest(body["tools"]) == DIGESTS["tools"]
            for tool in body["tools"]:
                assert json_digest(tool) == DIGESTS["tool"][tool["function"]["name"]]
            assert body["temperature"] == params["temperature"]
            assert body["tool_choice"] == params["tool_choice"]
            assert body["seed"] == SEED


def test_user_requests_are_upstreams_with_roles_flipped(
    outcomes: dict[str, ScenarioOutcome], parties: ScriptedParties
) -> None:
    for task_id in outcomes:
        first, second = parties.requests("user", task_id)
        for body in (first, second):
            assert (
                text_digest(body["messages"][0]["content"])
                == (DIGESTS["user_system_prompt"][task_id])
            )
            assert "tools" not in body
            assert "tool_choice" not in body
            assert body["temperature"] == 0.0
            assert body["seed"] == SEED
        # the simulator sees the agent as "user" and itself as "assistant", tool traffic hidden
        assert [m["role"] for m in second["messages"]] == [
            "system",
            "user",
            "assistant",
            "user",
        ]
        assert second["messages"][1]["content"] == DIGESTS["agent_first_message"]


def test_judge_requests_are_upstreams(
    outcomes: dict[str, ScenarioOutcome], parties: ScriptedParties, tasks: dict[str, Task]
) -> None:
    judged = 0
    for task_id, outcome in outcomes.items():
        task = tasks[task_id]
        requests = parties.requests("judge", task_id)
        expected = 1 if task.nl_assertions and "NL_ASSERTION" in task.reward_basis else 0
        assert len(requests) == expected, task_id
        for body in requests:
            judged += 1
            assert text_digest(body["messages"][0]["content"]) == DIGESTS["nl_judge_system_prompt"]
            for key, value in DIGESTS["nl_judge_request_params"].items():
                assert body[key] == value
            assert "seed" not in body
            assert "tools" not in body
            content = body["messages"][1]["content"]
            assert repr(list(task.nl_assertions)) in content
            greeting = f"assistant: {DIGESTS['agent_first_message']}\n"
            assert greeting in content
            assert outcome.judge is not None
            assert outcome.judge.pass_count == outcome.judge.total
    assert judged == 40
