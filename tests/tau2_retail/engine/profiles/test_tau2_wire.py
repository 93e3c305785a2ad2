"""The tau2 profile on the wire: for all 114 tasks, what reaches a loopback endpoint is upstream's.

A ``ScriptedEndpoint`` in the tau2 profile plays agent, user and judge through the harness's
real ``OpenAIChatModel`` clients (``Harness`` with the tau2 bundle, as the pytest fixture and
the ``run`` command use it). The scripted agent makes the task's gold calls and reports, the
scripted customer stops; the judge meets every assertion. Every request is then compared with
upstream tau2-bench's digests (``tests/tau2_retail/tau2_profile_digests.json``): system
prompts, tools in order and each tool, request parameters, the seed; and every task scores
upstream's reward 1.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tau2_retail.data.tasks import Task, load_user_guidelines, trial_seeds
from tau2_retail.engine.harness import DataBundle, Harness, Roles, load_bundle
from tau2_retail.engine.profiles import ProfileName
from tau2_retail.engine.scenario import Scenario, ScenarioOutcome
from tau2_retail.models.builtin import BUILTIN_CUSTOMER, BUILTIN_ORACLE
from tau2_retail.models.choice import ModelChoice
from tau2_retail.models.config import EndpointConfig
from tau2_retail.results.artifacts import load_pending_judgement, write_outcome
from tau2_retail.testing.loopback_server import Completion, HttpError, LoopbackOpenAIServer
from tau2_retail.testing.scripted_endpoint import ScriptedEndpoint
from tests.tau2_retail.upstream_digests import DIGESTS, json_digest, text_digest

SEED = trial_seeds(300, 1)[0]


@pytest.fixture(scope="module")
def bundle(data_dir: Path) -> DataBundle:
    return load_bundle(data_dir, profile=ProfileName.TAU2)


@pytest.fixture(scope="module")
def tasks(bundle: DataBundle) -> Mapping[str, Task]:
    return bundle.tasks


@pytest.fixture(scope="module")
def endpoint(data_dir: Path, bundle: DataBundle) -> Iterator[ScriptedEndpoint]:
    scripted = ScriptedEndpoint(
        bundle.tasks, load_user_guidelines(data_dir), profile=bundle.profile
    )
    with scripted.server:
        yield scripted


@pytest.fixture(scope="module")
def outcomes(bundle: DataBundle, endpoint: ScriptedEndpoint) -> dict[str, ScenarioOutcome]:
    def choice(role: str) -> ModelChoice:
        name = f"scripted-{role}"
        config = EndpointConfig(model=name, base_url=endpoint.base_url, max_retries=0)
        return ModelChoice(name=name, endpoint=config)

    roles = Roles(agent=choice("agent"), user=choice("user"), judge=choice("judge"))

    async def run_all() -> dict[str, ScenarioOutcome]:
        limit = asyncio.Semaphore(16)
        async with Harness(bundle=bundle, roles=roles) as harness:

            async def one(task: Task) -> ScenarioOutcome:
                async with limit:
                    scenario = Scenario(task=task, trial=0, trials=1, seed=SEED)
                    return await harness.run(scenario)

            done = await asyncio.gather(*(one(task) for task in bundle.tasks.values()))
        return {outcome.scenario.task.id: outcome for outcome in done}

    return asyncio.run(run_all())


def bodies(endpoint: ScriptedEndpoint, role: str, task_id: str) -> list[Mapping[str, Any]]:
    return [request.body for request in endpoint.requests(task_id, role)]


def test_every_task_scores_upstreams_reward_1(outcomes: dict[str, ScenarioOutcome]) -> None:
    assert len(outcomes) == 114
    rewards = {task_id: o.metrics.tau2_reward for task_id, o in outcomes.items()}
    assert {task_id for task_id, r in rewards.items() if r != 1.0} == set()
    assert {o.conversation.stop_reason.value for o in outcomes.values()} == {"user_stop"}
    assert all(o.metrics.is_successful and o.metrics.profile == "tau2" for o in outcomes.values())
    breakdowns = {o.metrics.success_breakdown["not_applicable"] for o in outcomes.values()}
    assert all("CLEAN_EXIT" in names for names in breakdowns)


def test_agent_requests_are_upstreams(
    outcomes: dict[str, ScenarioOutcome], endpoint: ScriptedEndpoint
) -> None:
    params = DIGESTS["agent_request_params"]
    for task_id in outcomes:
        requests = bodies(endpoint, "agent", task_id)
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
    outcomes: dict[str, ScenarioOutcome], endpoint: ScriptedEndpoint
) -> None:
    for task_id in outcomes:
        first, second = bodies(endpoint, "user", task_id)
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
    outcomes: dict[str, ScenarioOutcome], endpoint: ScriptedEndpoint, tasks: Mapping[str, Task]
) -> None:
    judged = 0
    for task_id, outcome in outcomes.items():
        task = tasks[task_id]
        requests = bodies(endpoint, "judge", task_id)
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


def test_a_judge_outage_is_rejudged_with_upstreams_judge_and_reward(
    bundle: DataBundle, tmp_path: Path
) -> None:
    task = next(
        t for t in bundle.tasks.values() if t.nl_assertions and "NL_ASSERTION" in t.reward_basis
    )
    results = [
        {"expectedOutcome": a, "reasoning": "shown", "metExpectation": True}
        for a in task.nl_assertions
    ]
    met = Completion(content=json.dumps({"results": results}))
    with LoopbackOpenAIServer(replies=[HttpError.server_error(503), met]) as server:
        config = EndpointConfig(model="judge", base_url=server.base_url, max_retries=0)
        roles = Roles(
            agent=ModelChoice(name=BUILTIN_ORACLE, endpoint=None),
            user=ModelChoice(name=BUILTIN_CUSTOMER, endpoint=None),
            judge=ModelChoice(name="judge", endpoint=config),
        )

        async def go() -> tuple[ScenarioOutcome, ScenarioOutcome]:
            async with Harness(bundle=bundle, roles=roles) as harness:
                down = await harness.run(Scenario(task=task, trial=0, trials=1, seed=SEED))
                folder = write_outcome(tmp_path, down, prompts=harness.prompts(task), config={})
                pending = load_pending_judgement(folder)
                assert pending is not None
                again = await harness.rejudge(
                    down.scenario, transcript=pending.transcript, expected_db_hash=pending.db_hash
                )
                return down, again

        down, again = asyncio.run(go())
        bodies = [request.body for request in server.requests]
    assert (down.metrics.profile, down.metrics.infra_role, down.metrics.needs_judging) == (
        "tau2",
        "judge",
        True,
    )
    assert (again.metrics.profile, again.metrics.tau2_reward) == ("tau2", 1.0)
    assert again.metrics.is_successful
    assert not again.metrics.infra_error
    assert len(bodies) == 2  # the judge twice; the conversation ran once
    for body in bodies:
        assert text_digest(body["messages"][0]["content"]) == DIGESTS["nl_judge_system_prompt"]
        assert body["temperature"] == 0.0
        assert "seed" not in body
