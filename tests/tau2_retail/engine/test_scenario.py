"""One scenario end to end (issue 12, item 2): a judge outage is an infra error of the judge
role, and ``rejudge`` scores the saved conversation without running it again."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from tau2_retail import codec
from tau2_retail.data.gold import GoldBook
from tau2_retail.data.tasks import Task
from tau2_retail.engine.profiles import Profile
from tau2_retail.engine.scenario import (
    SavedConversationError,
    Scenario,
    ScenarioOutcome,
    rejudge,
    run_scenario,
)
from tau2_retail.errors import EndpointError
from tau2_retail.models.builtin import builtin_model
from tau2_retail.models.config import EndpointConfig
from tau2_retail.models.openai_client import OpenAIChatModel
from tau2_retail.testing.loopback_server import Completion, HttpError, LoopbackOpenAIServer
from tau2_retail.testing.offline import run_offline
from tau2_retail.tools.store import Store


class NoSleep:
    async def __call__(self, seconds: float) -> None:
        return None


@pytest.fixture(scope="module")
def judged_task(book: GoldBook) -> Task:
    return next(task for task in book.tasks.values() if task.nl_assertions)


def judge_model(server: LoopbackOpenAIServer) -> OpenAIChatModel:
    config = EndpointConfig(
        model="judge", base_url=server.base_url, max_retries=1, timeout_seconds=5.0
    )
    return OpenAIChatModel(config, sleep=NoSleep())


def all_met(task: Task) -> Completion:
    verdicts = [
        {"index": n, "passed": True, "reason": "ok"} for n in range(1, len(task.nl_assertions) + 1)
    ]
    return Completion(
        content=json.dumps({"score": 1, "reason": "fine", "nl_assertion_verdicts": verdicts})
    )


async def run(
    task: Task, book: GoldBook, judge: OpenAIChatModel, profile: Profile
) -> ScenarioOutcome:
    return await run_offline(
        Scenario(task=task, trial=0, trials=1, seed=300),
        agent=builtin_model("builtin:oracle", task, role="agent"),
        judge_model=judge,
        book=book,
        profile=profile,
    )


def saved(outcome: ScenarioOutcome) -> Mapping[str, Any]:
    return json.loads(json.dumps(outcome.conversation.to_json()))


async def rejudged(
    outcome: ScenarioOutcome,
    book: GoldBook,
    judge: OpenAIChatModel,
    profile: Profile,
    *,
    transcript: Mapping[str, Any] | None = None,
    expected_db_hash: str | None = None,
) -> ScenarioOutcome:
    """``rejudge`` of the outcome's saved transcript, expecting the database it reached
    (unless told another transcript or hash)."""
    return await rejudge(
        outcome.scenario,
        transcript=saved(outcome) if transcript is None else transcript,
        judge_model=judge,
        gold=book[outcome.scenario.task.id],
        seed=book.seed,
        expected_db_hash=expected_db_hash or outcome.metrics.db_state_actual_hash,
        profile=profile,
    )


@pytest.mark.asyncio
async def test_a_judge_outage_is_an_infra_error_of_the_judge_and_rejudge_scores_it(
    book, judged_task, default_profile
):
    with LoopbackOpenAIServer(replies=[HttpError.server_error(503)] * 2) as server:
        async with judge_model(server) as judge:
            outcome = await run(judged_task, book, judge, default_profile)
    metrics = outcome.metrics
    assert outcome.is_infra_error
    assert (metrics.infra_error, metrics.infra_role, metrics.needs_judging) == (
        True,
        "judge",
        True,
    )
    assert metrics.stop_reason == "agent_exit"  # the conversation itself ended well
    assert "judge: model 'judge'" in metrics.stop_detail
    assert "HTTP 503" in outcome.infra_detail
    assert codec.encode(metrics)["requests"]["judge"] == {
        "requests": 1,
        "attempts": 2,
        "retries": 1,
        "failed": 1,
        "wait_seconds": round(metrics.requests["judge"].wait_seconds, 3),
    }
    assert (codec.encode(metrics)["infra_role"], codec.encode(metrics)["needs_judging"]) == (
        "judge",
        True,
    )

    with LoopbackOpenAIServer(replies=[all_met(judged_task)]) as server:
        async with judge_model(server) as judge:
            again = await rejudged(outcome, book, judge, default_profile)
        assert len(server.requests) == 1  # only the judge: the conversation did not run again
    assert not again.is_infra_error
    assert not again.metrics.needs_judging
    assert "needs_judging" not in codec.encode(again.metrics)
    assert again.metrics.is_successful is True
    assert again.metrics.nl_assertion_pass_rate == 1.0
    assert again.conversation.to_json() == outcome.conversation.to_json()


@pytest.mark.asyncio
async def test_a_judge_endpoint_refusing_the_request_keeps_its_whole_reply(
    book, judged_task, default_profile
):
    """The judge's failure said its whole reply was in the scenario's endpoint_error.txt, which
    only a failure during the conversation wrote: 300 characters were all there was."""
    body = json.dumps({"error": {"message": "1 validation error: " + "detail " * 200}})
    with LoopbackOpenAIServer(replies=[HttpError(status=400, body=body)]) as server:
        async with judge_model(server) as judge:
            outcome = await run(judged_task, book, judge, default_profile)
    assert outcome.metrics.infra_role == "judge"
    assert "endpoint_error.txt" in outcome.infra_detail
    assert outcome.conversation.error_body == ""  # the conversation itself ended well
    assert outcome.error_body == body

    with LoopbackOpenAIServer(replies=[all_met(judged_task)]) as server:
        async with judge_model(server) as judge:
            again = await rejudged(outcome, book, judge, default_profile)
    assert again.error_body == ""  # judged: the reply of the failed attempt is stale


@pytest.mark.asyncio
async def test_rejudge_refuses_a_transcript_that_does_not_replay(
    book, judged_task, default_profile
):
    with LoopbackOpenAIServer(replies=[all_met(judged_task)]) as server:
        async with judge_model(server) as judge:
            outcome = await run(judged_task, book, judge, default_profile)
            with pytest.raises(SavedConversationError):
                await rejudged(outcome, book, judge, default_profile, expected_db_hash="0" * 64)
            with pytest.raises(SavedConversationError):
                await rejudged(
                    outcome,
                    book,
                    judge,
                    default_profile,
                    transcript={"messages": "nope"},
                    expected_db_hash="0" * 64,
                )


@pytest.mark.asyncio
async def test_a_prose_judge_is_an_infra_error_of_the_judge_and_rejudge_scores_it(
    book, judged_task, default_profile
):
    # Issue 18, item 2: a reply that cannot be read twice is the judge's failure, not the
    # agent's; its tokens count, the replies are kept, and resume judges it again.
    prose = Completion(content="The agent did everything right.", completion_tokens=7)
    with LoopbackOpenAIServer(replies=[prose, prose]) as server:
        async with judge_model(server) as judge:
            outcome = await run(judged_task, book, judge, default_profile)
        assert len(server.requests) == 2
    metrics = outcome.metrics
    assert outcome.is_infra_error
    assert (metrics.infra_role, metrics.needs_judging, metrics.stop_reason) == (
        "judge",
        True,
        "agent_exit",
    )
    assert metrics.stop_detail.startswith(
        "judge: unreadable reply, also when asked again: no JSON object in the reply: "
        "The agent did everything right."
    )
    assert metrics.is_successful is False
    assert metrics.judge_score is None  # no judgement of the agent was made
    assert metrics.judge_unreadable_replies == 2
    assert metrics.token_usage["judge"].n_calls == 2
    assert metrics.token_usage["judge"].completion == 14
    judge_json = codec.encode(metrics)
    assert judge_json["judge_unreadable_replies"] == 2
    assert judge_json["requests"]["judge"]["requests"] == 2
    assert judge_json["requests"]["judge"]["failed"] == 0
    assert outcome.judge is not None
    assert codec.encode(outcome.judge)["unreadable_replies"] == [prose.content] * 2

    with LoopbackOpenAIServer(replies=[all_met(judged_task)]) as server:
        async with judge_model(server) as judge:
            again = await rejudged(outcome, book, judge, default_profile)
    assert not again.is_infra_error
    assert again.metrics.is_successful is True
    assert "judge_unreadable_replies" not in codec.encode(again.metrics)


@pytest.mark.asyncio
async def test_prose_once_then_json_scores_the_agent(book, judged_task, default_profile):
    prose = Completion(content="Looks good to me.")
    with LoopbackOpenAIServer(replies=[prose, all_met(judged_task)]) as server:
        async with judge_model(server) as judge:
            outcome = await run(judged_task, book, judge, default_profile)
    metrics = outcome.metrics
    assert not outcome.is_infra_error
    assert (metrics.is_successful, metrics.nl_assertion_pass_rate) == (True, 1.0)
    assert metrics.judge_unreadable_replies == 1
    assert metrics.requests["judge"].requests == 2
    assert metrics.needs_judging is False


class DownUser:
    """A user endpoint that is down (its client gave up after retries)."""

    name = "down"

    async def complete(self, messages, *, tools=None, seed=None):
        raise EndpointError("model 'u' at http://127.0.0.1:9/v1 failed after 3 attempt(s)")


@pytest.mark.asyncio
async def test_the_infra_role_is_the_endings_failed_role(book, judged_task, default_profile):
    # issue 20: the role comes typed from where the conversation ended; metrics.json records
    # the same text as before ("user: ...")
    outcome = await run_scenario(
        Scenario(task=judged_task, trial=0, trials=1, seed=300),
        agent=builtin_model("builtin:oracle", judged_task, role="agent"),
        user=DownUser(),
        judge_model=None,
        gold=book[judged_task.id],
        store=Store(book.seed),
        profile=default_profile,
    )
    assert outcome.conversation.ending.failed_role == "user"
    record = codec.encode(outcome.metrics)
    assert (record["stop_reason"], record["infra_error"], record["infra_role"]) == (
        "infra_error",
        True,
        "user",
    )
    assert record["stop_detail"] == (
        "user: model 'u' at http://127.0.0.1:9/v1 failed after 3 attempt(s)"
    )
