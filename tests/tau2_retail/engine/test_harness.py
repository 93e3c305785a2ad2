"""``Harness``: the one way to build and run a scenario (pytest fixture and ``run`` command)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tau2_retail.engine.conversation_setup import Limits
from tau2_retail.engine.ending import StopReason
from tau2_retail.engine.harness import Harness, Roles, load_bundle
from tau2_retail.engine.scenario import Scenario
from tau2_retail.errors import ConfigError
from tau2_retail.models.builtin import BUILTIN_CUSTOMER, BUILTIN_NOOP, BUILTIN_ORACLE
from tau2_retail.models.choice import ModelChoice, choose_model
from tau2_retail.models.config import EndpointConfig
from tau2_retail.models.messages import Message
from tau2_retail.models.prices import PriceTable
from tau2_retail.results.artifacts import METRICS_FILE, read_metrics, write_outcome
from tau2_retail.testing.loopback_server import (
    Completion,
    Hang,
    LoopbackOpenAIServer,
    ReplyToolCall,
)

ORACLE = ModelChoice(name=BUILTIN_ORACLE, endpoint=None)
CUSTOMER = ModelChoice(name=BUILTIN_CUSTOMER, endpoint=None)


@pytest.fixture(scope="module")
def bundle(data_dir: Path):
    return load_bundle(data_dir)


def scenario(bundle, task_id: str, seed: int | None = 1) -> Scenario:
    return Scenario(task=bundle.tasks[task_id], trial=0, trials=1, seed=seed)


def test_a_builtin_run_reports_each_message_as_it_is_added(bundle):
    seen: list[Message] = []

    async def go():
        async with Harness(bundle=bundle, roles=Roles(agent=ORACLE, user=CUSTOMER)) as harness:
            return await harness.run(scenario(bundle, "0"), on_message=seen.append)

    outcome = asyncio.run(go())
    assert outcome.conversation.stop_reason is StopReason.AGENT_EXIT
    assert outcome.metrics.is_successful is True
    assert tuple(seen) == outcome.conversation.messages


def test_limits_reach_the_conversation(bundle):
    async def go():
        roles = Roles(agent=ORACLE, user=CUSTOMER)
        async with Harness(bundle=bundle, roles=roles, limits=Limits(max_steps=3)) as harness:
            return await harness.run(scenario(bundle, "0"))

    assert asyncio.run(go()).conversation.stop_reason is StopReason.MAX_STEPS


def test_the_writer_puts_artifacts_in_the_scenario_folder(bundle, tmp_path):
    async def go():
        async with Harness(bundle=bundle, roles=Roles(agent=ORACLE, user=CUSTOMER)) as harness:
            outcome = await harness.run(scenario(bundle, "3"))
            return outcome, harness.prompts(outcome.scenario.task)

    outcome, prompts = asyncio.run(go())
    folder = write_outcome(tmp_path, outcome, prompts=prompts, config={"k": "v"})
    assert folder == tmp_path / "tau2_retail__3"
    assert read_metrics(folder / METRICS_FILE) == outcome.metrics
    assert (folder / "scenario_config" / "user_system_prompt.txt").read_text() == prompts.user


def test_endpoint_clients_are_built_once_per_role_and_closed(bundle, closed):
    with LoopbackOpenAIServer() as server:
        end = Completion(tool_calls=(ReplyToolCall(id="e", name="end_conversation"),))
        server.enqueue(end, end)
        agent = ModelChoice(
            name="agent-model",
            endpoint=EndpointConfig(model="agent-model", base_url=server.base_url),
        )

        async def go():
            async with Harness(bundle=bundle, roles=Roles(agent=agent, user=CUSTOMER)) as h:
                first = await h.run(scenario(bundle, "10"))
                second = await h.run(scenario(bundle, "10"))
                assert closed == []
                return first, second

        first, second = asyncio.run(go())
    assert first.metrics.is_successful
    assert second.metrics.is_successful
    assert closed == ["agent-model"]
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("role", "name", "message"),
    [
        ("user", BUILTIN_ORACLE, "'builtin:oracle' is not a built-in user model"),
        ("judge", BUILTIN_NOOP, "accepted built-ins: none (the judge must be an endpoint)"),
        ("agent", "builtin:gpt", "accepted built-ins: builtin:oracle, builtin:noop"),
    ],
)
def test_choose_model_accepts_only_the_roles_builtins(role, name, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        choose_model(role, name, lambda model: EndpointConfig(model=model))


def test_choose_model_pairs_other_names_with_their_endpoint():
    choice = choose_model("judge", "gpt-x", lambda model: EndpointConfig(model=model))
    assert choice == ModelChoice(name="gpt-x", endpoint=EndpointConfig(model="gpt-x"))


def test_roles_refuse_a_model_with_neither_endpoint_nor_builtin_name():
    with pytest.raises(ConfigError, match="has no endpoint and is not a built-in agent model"):
        Roles(agent=ModelChoice(name="gpt-x", endpoint=None), user=CUSTOMER)


def test_rejudge_judges_the_saved_transcript_of_a_judge_outage(bundle, tmp_path):
    from tau2_retail.results.artifacts import load_pending_judgement
    from tau2_retail.testing.loopback_server import HttpError

    task = next(t for t in bundle.tasks.values() if t.nl_assertions)
    verdicts = [
        {"index": n, "passed": True, "reason": "ok"} for n in range(1, len(task.nl_assertions) + 1)
    ]
    met = Completion(
        content=json.dumps({"score": 1, "reason": "ok", "nl_assertion_verdicts": verdicts})
    )
    with LoopbackOpenAIServer(replies=[HttpError.server_error(503), met]) as server:
        judge = ModelChoice(
            name="judge",
            endpoint=EndpointConfig(model="judge", base_url=server.base_url, max_retries=0),
        )

        async def go():
            roles = Roles(agent=ORACLE, user=CUSTOMER, judge=judge)
            async with Harness(bundle=bundle, roles=roles) as harness:
                down = await harness.run(scenario(bundle, task.id))
                folder = write_outcome(tmp_path, down, prompts=harness.prompts(task), config={})
                pending = load_pending_judgement(folder)
                assert pending is not None
                again = await harness.rejudge(
                    down.scenario,
                    transcript=pending.transcript,
                    expected_db_hash=pending.db_hash,
                )
                return down, again

        down, again = asyncio.run(go())
        assert len(server.requests) == 2  # the judge twice; the conversation ran once
    assert (down.metrics.infra_role, down.metrics.needs_judging) == ("judge", True)
    assert again.metrics.is_successful
    assert not again.metrics.infra_error
    assert again.conversation.messages == down.conversation.messages


def test_rejudge_without_a_judge_is_a_config_error(bundle):
    async def go():
        async with Harness(bundle=bundle, roles=Roles(agent=ORACLE, user=CUSTOMER)) as harness:
            await harness.rejudge(scenario(bundle, "0"), transcript={}, expected_db_hash="")

    with pytest.raises(ConfigError, match="re-judging needs a judge model"):
        asyncio.run(go())


def test_an_interrupted_scenario_tells_what_its_requests_had_cost_without_a_budget(bundle):
    """With prices and no ``--tau2-max-cost`` nothing counted a scenario's spending: one
    cancelled in flight (Ctrl-C) left what its answered requests had cost nowhere."""
    reply = Completion(content="Let me look into that.", prompt_tokens=1000, completion_tokens=50)
    prices = {"agent-model": {"input": 2.0, "output": 8.0}}
    told: list[tuple[str, float]] = []
    with LoopbackOpenAIServer(replies=[reply, Hang()]) as server:
        agent = ModelChoice(
            name="agent-model",
            endpoint=EndpointConfig(model="agent-model", base_url=server.base_url),
        )

        async def go():
            async with Harness(
                bundle=bundle,
                roles=Roles(agent=agent, user=CUSTOMER),
                prices=PriceTable.parse(prices),
            ) as harness:
                stopped = scenario(bundle, "10")

                def tell(spent: float) -> None:
                    told.append((stopped.id, spent))

                running = asyncio.create_task(harness.run(stopped, on_interrupted=tell))
                while len(server.requests) < 2:  # the second one hangs
                    await asyncio.sleep(0.01)
                running.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await running

        asyncio.run(go())
        billed = server.billed_usd(prices)
    assert billed == pytest.approx((1000 * 2.0 + 50 * 8.0) / 1e6)
    assert told == [("tau2_retail__10", pytest.approx(billed))]
