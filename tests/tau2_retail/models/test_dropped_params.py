"""A parameter the suite supplies and a model refuses (OpenAI's reasoning models and the tau2
profile's ``temperature``, Mistral's models and the trial's ``seed``) is left out, as upstream
tau2 (litellm's ``drop_params``) leaves it out; one the user configured stays the user's to fix.
Against the real loopback server."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest

from tau2_retail.engine.profiles import policy_for
from tau2_retail.errors import EndpointError
from tau2_retail.models import EndpointConfig, OpenAIChatModel
from tau2_retail.models.dropped_params import DROPPABLE, supplied
from tau2_retail.testing.loopback_model import RecordedSleeps
from tau2_retail.testing.loopback_server import Completion, HttpError, LoopbackOpenAIServer

from .conftest import HELLO

# OpenAI's answer to a reasoning model (o3, gpt-5) sent temperature 0.0
NO_TEMPERATURE = HttpError.openai(
    400,
    "Unsupported value: 'temperature' does not support 0.0 with this model. Only the default "
    "(1) value is supported.",
    code="unsupported_value",
)


# Mistral's models (on Mistral's API or Azure AI Foundry) take no seed
NO_SEED = HttpError(
    status=422,
    body=json.dumps(
        {
            "detail": [
                {
                    "type": "extra_forbidden",
                    "loc": ["body", "seed"],
                    "msg": "Extra inputs are not permitted",
                    "input": 300,
                }
            ]
        }
    ),
)

# Mistral's API puts the detail inside its error's message ({"object": "error", "message":
# {"detail": [...]}, ...}); the LiteLLM proxy (1.108.7, an openai/ model in its model_list)
# answers with its own 422 carrying that detail as Python's repr (the body as it sent it)
NO_SEED_BEHIND_LITELLM = HttpError(
    status=422,
    body=json.dumps(
        {
            "error": {
                "message": "litellm.BadRequestError: OpenAIException - {'detail': [{'type': "
                "'extra_forbidden', 'loc': ['body', 'seed'], 'msg': 'Extra inputs are not "
                "permitted', 'input': 1}]}\n\nLiteLLM: model group 'mistral-large' failed with "
                "the error above. No fallback was attempted.",
                "type": "invalid_request_message_error",
                "param": None,
                "code": "422",
            }
        },
        separators=(",", ":"),
    ),
)


def _model(
    server: LoopbackOpenAIServer,
    droppable: frozenset[str],
    notices: list[str],
    **fields: Any,
) -> Any:
    config = EndpointConfig(
        **{
            "model": "gpt-5",
            "base_url": server.base_url,
            "temperature": 0.0,
            "max_retries": 0,
            "seed": 7,
        }
        | fields
    )
    return OpenAIChatModel(
        config, sleep=RecordedSleeps(), droppable=droppable, notice=notices.append
    )


def test_the_tau2_profile_supplies_temperature_only_where_none_is_configured() -> None:
    policy = policy_for("tau2")
    bare = EndpointConfig(model="gpt-5")
    assert supplied(bare, policy.request_config("agent", bare)) == {"temperature", "seed"}
    chosen = EndpointConfig(model="gpt-5", temperature=0.5, seed=1)
    assert supplied(chosen, policy.request_config("agent", chosen)) == frozenset()
    assert supplied(bare, policy_for("default").request_config("agent", bare)) == {"seed"}


@pytest.mark.parametrize(
    ("reply", "name", "status", "kept"),
    [
        (NO_TEMPERATURE, "temperature", 400, "seed"),
        (NO_SEED, "seed", 422, "temperature"),
        (NO_SEED_BEHIND_LITELLM, "seed", 422, "temperature"),
    ],
    ids=["temperature", "seed", "seed-behind-litellm"],
)
@pytest.mark.asyncio
async def test_a_supplied_parameter_the_model_refuses_is_left_out_from_then_on(
    openai_server: LoopbackOpenAIServer, reply: HttpError, name: str, status: int, kept: str
) -> None:
    openai_server.enqueue(reply, Completion(content="Hello."), Completion(content="Hi."))
    notices: list[str] = []
    async with _model(openai_server, frozenset({name}), notices, seed=None) as model:
        first = await model.complete(HELLO, seed=300)
        second = await model.complete(HELLO, seed=301)
        assert model.breaker.consecutive_failures == 0

    assert (first.content, first.attempts, second.attempts) == ("Hello.", 2, 1)
    sent = [request.body for request in openai_server.requests]
    assert [name in body for body in sent] == [True, False, False]
    assert all(kept in body and body["model"] == "gpt-5" for body in sent)  # the other stays
    assert len(notices) == 1
    assert f"does not take the request parameter {name} (HTTP {status})" in notices[0]


@pytest.mark.parametrize(
    ("reply", "droppable", "said"),
    [
        # a temperature the user configured is never left out
        (NO_TEMPERATURE, frozenset(), "Unsupported value: 'temperature'"),
        (NO_SEED, frozenset({"temperature"}), "extra_forbidden"),
        # another refusal is not taken for a refused parameter
        (
            HttpError.openai(400, "Invalid value for 'messages'."),
            frozenset(DROPPABLE),
            "'messages'",
        ),
    ],
    ids=["configured-temperature", "configured-seed", "another-400"],
)
@pytest.mark.asyncio
async def test_what_is_not_left_out_fails_at_once(
    openai_server: LoopbackOpenAIServer, reply: HttpError, droppable: frozenset[str], said: str
) -> None:
    openai_server.enqueue(reply)
    notices: list[str] = []
    async with _model(openai_server, droppable, notices) as model:
        with pytest.raises(EndpointError, match=said):
            await model.complete(HELLO, seed=300)
    assert len(openai_server.requests) == 1
    assert notices == []


@pytest.mark.asyncio
async def test_requests_in_flight_when_the_refusal_came_are_sent_again_too(
    openai_server: LoopbackOpenAIServer,
) -> None:
    """Two conversations on one client: both first requests carry the seed and are refused;
    the second refusal comes after the first dropped it, and is sent again all the same."""
    openai_server.enqueue(
        dataclasses.replace(NO_SEED, latency=0.2),
        NO_SEED,
        Completion(content="one"),
        Completion(content="two"),
    )
    notices: list[str] = []
    async with _model(openai_server, frozenset({"seed"}), notices, seed=None) as model:
        turns = await asyncio.gather(model.complete(HELLO, seed=1), model.complete(HELLO, seed=2))

    assert sorted(turn.content for turn in turns) == ["one", "two"]
    assert [turn.attempts for turn in turns] == [2, 2]
    assert len(notices) == 1
