"""OpenAIChatModel through the real ``openai`` client against the real loopback server."""

from __future__ import annotations

import asyncio
import json
import re
import ssl
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import openai
import pytest

from tau2_retail import codec
from tau2_retail.errors import (
    ContextWindowExceeded,
    EndpointDown,
    EndpointError,
    UnparsedModelOutput,
)
from tau2_retail.models import EndpointConfig, OpenAIChatModel
from tau2_retail.models.attempt_failure import BODY_EXCERPT_CHARS, connection_failure
from tau2_retail.models.messages import Message, Role, ToolCall, Usage
from tau2_retail.models.openai_client import MISSING_API_KEY
from tau2_retail.models.ramp import DEFAULT_INITIAL_WINDOW
from tau2_retail.models.sdk_transport import LIBRARY
from tau2_retail.testing.loopback_model import RecordedSleeps, loopback_model
from tau2_retail.testing.loopback_server import (
    Completion,
    Drop,
    Hang,
    HttpError,
    InvalidJson,
    LoopbackOpenAIServer,
    NoChoices,
    RawBody,
    ReplyToolCall,
    SlowDrip,
)

from .conftest import HELLO, KEY_ENV, SECRET

LOOKUP_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "find_user_id_by_email",
        "description": "Find a user id by email.",
        "parameters": {
            "type": "object",
            "properties": {"email": {"type": "string"}},
            "required": ["email"],
        },
    },
}


@pytest.fixture
def sleeps() -> RecordedSleeps:
    return RecordedSleeps()


@pytest.fixture
def make_model(
    openai_server: LoopbackOpenAIServer, sleeps: RecordedSleeps, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., OpenAIChatModel]:
    """Builds a model pointed at the loopback server, with no real sleeps and no jitter."""
    monkeypatch.setenv(KEY_ENV, SECRET)

    def make(**overrides: Any) -> OpenAIChatModel:
        fields: dict[str, Any] = {"api_key_env": KEY_ENV, "max_retries": 3, "sleep": sleeps}
        return loopback_model(openai_server, **(fields | overrides))

    return make


def ticking_clock(*times: float) -> Callable[[], float]:
    values: Iterator[float] = iter(times)
    return lambda: next(values)


# -- replies ------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_text_reply_carries_usage_and_latency(openai_server, make_model):
    openai_server.enqueue(
        Completion(content="Sure, which order?", prompt_tokens=42, completion_tokens=7)
    )
    async with make_model(clock=ticking_clock(100.0, 100.25)) as model:
        turn = await model.complete(HELLO)
    assert turn.content == "Sure, which order?"
    assert turn.tool_calls == ()
    assert turn.usage == Usage(n_calls=1, prompt=42, completion=7)
    assert turn.latency_seconds == pytest.approx(0.25)


@pytest.mark.asyncio
async def test_latency_is_measured_with_the_real_clock(openai_server, make_model):
    openai_server.enqueue(Completion(content="ok", latency=0.05))
    async with make_model() as model:
        turn = await model.complete(HELLO)
    assert turn.latency_seconds >= 0.05


@pytest.mark.asyncio
async def test_tool_call_keeps_id_name_and_raw_arguments(openai_server, make_model):
    arguments = '{"email": "yusuf.rossi@example.com"}'
    openai_server.enqueue(
        Completion(
            tool_calls=(
                ReplyToolCall(id="call_abc", name="find_user_id_by_email", arguments=arguments),
            )
        )
    )
    async with make_model() as model:
        turn = await model.complete(HELLO, tools=[LOOKUP_TOOL])
    assert turn.content is None
    assert turn.tool_calls == (
        ToolCall(id="call_abc", name="find_user_id_by_email", arguments=arguments),
    )


@pytest.mark.asyncio
async def test_what_the_server_requires_back_goes_back_with_the_history(openai_server, make_model):
    """Gemini 3 refuses a request whose earlier tool call lacks its ``thought_signature``, and
    DeepSeek's thinking mode one whose tool-call message lacks its ``reasoning_content`` (HTTP
    400 on the agent's second request: no such model could be measured). Both go back as they
    came; reasoning beside a text answer does not (DeepSeek's reasoner refuses it there)."""
    signature = {"google": {"thought_signature": "c2lnbmF0dXJl"}}
    lookup = ReplyToolCall(
        id="c1", name="find_user_id_by_email", arguments="{}", extra_content=signature
    )
    openai_server.enqueue(
        Completion(reasoning_content="Look the user up first.", tool_calls=(lookup,)),
        Completion(reasoning_content="Found.", content="You are user 1."),
        Completion(content="Bye."),
    )
    result = Message(role=Role.TOOL, tool_call_id="c1", name=lookup.name, content="user_1")
    async with make_model() as model:
        first = await model.complete(HELLO, tools=[LOOKUP_TOOL])
        history = (*HELLO, first.to_message(), result)
        second = await model.complete(history, tools=[LOOKUP_TOOL])
        thanks = Message(role=Role.USER, content="Thanks.")
        await model.complete((*history, second.to_message(), thanks), tools=[LOOKUP_TOOL])
    assert first.tool_calls[0].extra_content == signature
    assert second.reasoning_content == "Found."
    sent = openai_server.requests[2].body["messages"]
    assert sent[-4] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "find_user_id_by_email", "arguments": "{}"},
                "extra_content": signature,
            }
        ],
        "reasoning_content": "Look the user up first.",
    }
    assert sent[-2] == {"role": "assistant", "content": "You are user 1."}
    # recorded in the transcript as it came, and read back the same
    message = first.to_message()
    assert codec.decode(Message, json.dumps(codec.encode(message)), "t") == message


@pytest.mark.asyncio
async def test_parallel_tool_calls_keep_their_order(openai_server, make_model):
    openai_server.enqueue(
        Completion(
            content="Let me look both up.",
            tool_calls=(
                ReplyToolCall(
                    id="call_1", name="get_order_details", arguments='{"order_id": "#W1"}'
                ),
                ReplyToolCall(
                    id="call_2", name="get_order_details", arguments='{"order_id": "#W2"}'
                ),
            ),
        )
    )
    async with make_model() as model:
        turn = await model.complete(HELLO)
    assert turn.content == "Let me look both up."
    assert [(c.id, c.arguments) for c in turn.tool_calls] == [
        ("call_1", '{"order_id": "#W1"}'),
        ("call_2", '{"order_id": "#W2"}'),
    ]


@pytest.mark.asyncio
async def test_empty_string_arguments_become_an_empty_object(openai_server, make_model):
    openai_server.enqueue(
        Completion(
            tool_calls=(ReplyToolCall(id="call_x", name="list_all_product_types", arguments=""),)
        )
    )
    async with make_model() as model:
        turn = await model.complete(HELLO)
    assert turn.tool_calls[0].arguments == "{}"


@pytest.mark.asyncio
async def test_missing_tool_call_ids_are_generated_and_unique(openai_server, make_model):
    call = ReplyToolCall(name="list_all_product_types", omit_id=True)
    openai_server.enqueue(Completion(tool_calls=(call, call)), Completion(tool_calls=(call,)))
    async with make_model() as model:
        first = await model.complete(HELLO)
        second = await model.complete(HELLO)
    assert [c.id for c in first.tool_calls + second.tool_calls] == ["call_0", "call_1", "call_2"]


@pytest.mark.asyncio
async def test_malformed_tool_call_arguments_pass_through_raw(openai_server, make_model):
    openai_server.enqueue(
        Completion(
            tool_calls=(
                ReplyToolCall(id="call_m", name="get_user_details", arguments='{"user_id": '),
            )
        )
    )
    async with make_model() as model:
        turn = await model.complete(HELLO)
    assert turn.tool_calls == (
        ToolCall(id="call_m", name="get_user_details", arguments='{"user_id": '),
    )
    assert len(openai_server.requests) == 1


@pytest.mark.asyncio
async def test_empty_message_is_returned_not_retried(openai_server, make_model, sleeps):
    openai_server.enqueue(Completion(content=""))
    async with make_model() as model:
        turn = await model.complete(HELLO)
    assert turn.content == ""
    assert turn.is_empty
    assert sleeps.calls == []


@pytest.mark.asyncio
async def test_usage_is_counted_per_call_and_zero_when_absent(openai_server, make_model):
    openai_server.enqueue(
        Completion(content="a", prompt_tokens=100, completion_tokens=5),
        Completion(content="b", prompt_tokens=120, completion_tokens=6),
        Completion(content="c", include_usage=False),
    )
    async with make_model() as model:
        turns = [await model.complete(HELLO) for _ in range(3)]
    assert turns[2].usage == Usage(n_calls=1, prompt=0, completion=0)
    total = sum((t.usage for t in turns), Usage())
    assert total == Usage(n_calls=3, prompt=220, completion=11)


@pytest.mark.asyncio
async def test_default_usage_of_the_loopback_server_reaches_the_turn(openai_server, make_model):
    openai_server.enqueue(Completion(content="x" * 40))
    async with make_model() as model:
        turn = await model.complete((Message(role=Role.USER, content="y" * 80),))
    assert turn.usage == Usage(n_calls=1, prompt=20, completion=11)


# -- the request --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_request_shape_reaches_the_server(openai_server, make_model):
    openai_server.enqueue(Completion(content="done"))
    history = (
        Message(role=Role.SYSTEM, content="You are a retail agent."),
        Message(role=Role.USER, content="My email is a@b.c"),
        Message(
            role=Role.ASSISTANT,
            tool_calls=(
                ToolCall(id="call_1", name="find_user_id_by_email", arguments='{"email": "a@b.c"}'),
            ),
        ),
        Message(role=Role.TOOL, tool_call_id="call_1", name="find_user_id_by_email", content="u_1"),
    )
    extra = {"chat_template_kwargs": {"enable_thinking": False}, "top_k": 20}
    async with make_model(temperature=0.0, top_p=0.9, max_tokens=256, extra_body=extra) as model:
        await model.complete(history, tools=[LOOKUP_TOOL], seed=626729)

    (request,) = openai_server.requests
    body = request.body
    assert body["model"] == "agent-model"
    assert body["messages"] == [m.to_openai() for m in history]
    assert body["tools"] == [LOOKUP_TOOL]
    assert body["tool_choice"] == "auto"
    assert body["seed"] == 626729
    assert body["temperature"] == 0.0
    assert body["top_p"] == 0.9
    assert body["max_tokens"] == 256
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["top_k"] == 20
    assert request.header("Authorization") == f"Bearer {SECRET}"
    assert request.path == "/v1/chat/completions"


@pytest.mark.asyncio
async def test_unset_parameters_are_not_sent(openai_server, make_model):
    openai_server.enqueue(Completion(content="ok"))
    async with make_model() as model:
        await model.complete(HELLO, tools=[])
    body = openai_server.requests[0].body
    assert set(body) == {"model", "messages"}


@pytest.mark.asyncio
async def test_config_seed_is_the_default_and_a_call_seed_wins(openai_server, make_model):
    openai_server.enqueue(Completion(content="a"), Completion(content="b"))
    async with make_model(seed=300) as model:
        await model.complete(HELLO)
        await model.complete(HELLO, seed=1567)
    assert [r.body["seed"] for r in openai_server.requests] == [300, 1567]


@pytest.mark.asyncio
async def test_unset_key_variable_sends_a_placeholder(openai_server, make_model, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    openai_server.enqueue(Completion(content="ok"))
    async with make_model() as model:
        await model.complete(HELLO)
    assert openai_server.requests[0].header("authorization") == f"Bearer {MISSING_API_KEY}"


# -- retries ------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_429_waits_for_retry_after_then_succeeds(openai_server, make_model, sleeps):
    openai_server.enqueue(HttpError.rate_limited(retry_after="7"), Completion(content="ok"))
    async with make_model() as model:
        turn = await model.complete(HELLO)
    assert turn.content == "ok"
    assert sleeps.calls == [7.0]
    assert len(openai_server.requests) == 2


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        pytest.param({"Retry-After": "0.5"}, 0.5, id="fractional-seconds"),
        pytest.param({"Retry-After": "30"}, 30.0, id="at-the-backoff-cap"),
        pytest.param({"retry-after-ms": "250"}, 0.25, id="retry-after-ms"),
        # "+20s" becomes an HTTP date 20 s ahead when the test runs (not at collection: under
        # xdist a test may start minutes later); the date has whole seconds
        pytest.param({"Retry-After": "+20s"}, pytest.approx(20.0, abs=1.5), id="http-date"),
        pytest.param(
            {"Retry-After": format_datetime(datetime(2000, 1, 1, tzinfo=UTC), usegmt=True)},
            0.0,
            id="http-date-in-the-past",
        ),
        pytest.param({"Retry-After": "soon"}, 1.0, id="unreadable-falls-back-to-backoff"),
        # issue 21: a NaN reached the sleep and "wait_seconds": NaN (not JSON)
        pytest.param({"Retry-After": "nan"}, 1.0, id="nan-falls-back-to-backoff"),
        pytest.param({"Retry-After": "inf"}, 1.0, id="infinity-falls-back-to-backoff"),
        pytest.param(
            {"retry-after-ms": "nan", "Retry-After": "2"}, 2.0, id="nan-ms-then-retry-after"
        ),
    ],
)
@pytest.mark.asyncio
async def test_retry_after_forms(openai_server, make_model, sleeps, headers, expected):
    if headers.get("Retry-After") == "+20s":
        ahead = datetime.now(UTC) + timedelta(seconds=20)
        headers = {"Retry-After": format_datetime(ahead, usegmt=True)}
    openai_server.enqueue(
        HttpError(status=429, body='{"error": {"message": "slow down"}}', headers=headers),
        Completion(content="ok"),
    )
    async with make_model() as model:
        await model.complete(HELLO)
    assert sleeps.calls == [pytest.approx(expected)]


@pytest.mark.asyncio
async def test_429_without_retry_after_backs_off_exponentially(openai_server, make_model, sleeps):
    openai_server.enqueue(*[HttpError.rate_limited()] * 4, Completion(content="ok"))
    async with make_model(
        max_retries=4, backoff_base_seconds=0.5, backoff_max_seconds=3.0
    ) as model:
        await model.complete(HELLO)
    assert sleeps.calls == [0.5, 1.0, 2.0, 3.0]


@pytest.mark.asyncio
async def test_backoff_jitter_adds_at_most_a_tenth(openai_server, make_model, sleeps):
    openai_server.enqueue(*[HttpError.rate_limited()] * 2, Completion(content="ok"))
    async with make_model(jitter=lambda: 0.999) as model:
        await model.complete(HELLO)
    assert sleeps.calls == [pytest.approx(1.0999), pytest.approx(2.1998)]


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408])
@pytest.mark.asyncio
async def test_transient_server_errors_are_retried(openai_server, make_model, sleeps, status):
    openai_server.enqueue(HttpError.server_error(status), Completion(content="recovered"))
    async with make_model() as model:
        turn = await model.complete(HELLO)
    assert turn.content == "recovered"
    assert sleeps.calls == [1.0]


@pytest.mark.parametrize(
    "reply",
    [
        # Anthropic's OpenAI-compatible endpoint, overloaded
        pytest.param(
            HttpError(
                status=529,
                body=json.dumps(
                    {
                        "type": "error",
                        "error": {"type": "overloaded_error", "message": "Overloaded"},
                        "request_id": "req_011",
                    }
                ),
            ),
            id="anthropic-529",
        ),
        *[
            # Cloudflare's edge in front of the model server: its own HTML page
            pytest.param(
                HttpError(
                    status=status,
                    body=f"<!DOCTYPE html><html><head><title>llm.example.com | {status}: "
                    "A timeout occurred</title></head><body>cloudflare</body></html>",
                    content_type="text/html",
                ),
                id=f"cloudflare-{status}",
            )
            for status in (520, 521, 522, 523, 524)
        ],
        # vLLM 0.32, byte for byte: past its --max-num-queued-reqs, and its engine's crash
        # (the server then exits: the retry meets a refused connection)
        pytest.param(
            HttpError(
                status=503,
                body='{"error":{"message":"The engine is currently busy and cannot accept new '
                'requests. Please try again later or on a different instance.","type":"Service '
                'Unavailable","param":null,"code":503}}',
            ),
            id="vllm-busy-503",
        ),
        pytest.param(
            HttpError(
                status=500,
                body='{"error":{"message":"EngineCore encountered an issue. See stack trace '
                '(above) for the root cause.","type":"InternalServerError","param":null,'
                '"code":500}}',
            ),
            id="vllm-engine-dead-500",
        ),
    ],
)
@pytest.mark.asyncio
async def test_an_overloaded_server_or_its_gateways_timeout_is_retried(
    openai_server, make_model, sleeps, reply
):
    """Were refused at once "check the base URL, model name and API key": one overloaded
    moment made every scenario in flight an infra error."""
    openai_server.enqueue(reply, Completion(content="recovered"))
    async with make_model() as model:
        turn = await model.complete(HELLO)
    assert turn.content == "recovered"
    assert turn.attempts == 2
    assert sleeps.calls == [1.0]


# OpenAI's insufficient_quota 429 as the LiteLLM proxy (1.108.7) answers it: the message kept,
# the code and type its own (the body as it sent it)
QUOTA_BEHIND_LITELLM = HttpError(
    status=429,
    body=json.dumps(
        {
            "error": {
                "message": "litellm.RateLimitError: RateLimitError: OpenAIException - You "
                "exceeded your current quota, please check your plan and billing details.\n\n"
                "LiteLLM: model group 'gpt-4.1' failed with the error above. No fallback was "
                "attempted.",
                "type": "throttling_error",
                "param": None,
                "code": "429",
            }
        },
        separators=(",", ":"),
    ),
)


@pytest.mark.parametrize(
    "reply",
    [
        HttpError.openai(
            429,
            "You exceeded your current quota, please check your plan and billing details.",
            error_type="insufficient_quota",
            code="insufficient_quota",
        ),
        QUOTA_BEHIND_LITELLM,
    ],
    ids=["openai", "behind-litellm"],
)
@pytest.mark.asyncio
async def test_an_exhausted_quota_is_not_retried_and_counts_toward_the_breaker(
    openai_server, make_model, sleeps, reply
):
    """OpenAI's 429 ``insufficient_quota``: waiting does not refill an account (it was retried
    with backoff on every request, and as "busy, not down" never opened the breaker)."""
    openai_server.enqueue(reply)
    async with make_model() as model:
        with pytest.raises(EndpointError) as caught:
            await model.complete(HELLO)
        assert model.breaker.consecutive_failures == 1
    assert "HTTP 429 (not retried: the account's quota or credits are exhausted)" in str(
        caught.value
    )
    assert sleeps.calls == []
    assert len(openai_server.requests) == 1


def _behind_portkey(status: int, error: dict[str, Any], **headers: str) -> HttpError:
    """The server's error as the Portkey AI gateway (1.15.2, ``x-portkey-provider: openai``
    with ``x-portkey-custom-host``) answers it: status and code kept, the message prefixed."""
    body = {"error": {"param": None, "code": None} | error, "provider": "openai"}
    return HttpError(status=status, body=json.dumps(body, separators=(",", ":")), headers=headers)


# What the Portkey AI gateway (1.15.2) sent for a backend's replies, byte for byte; without it
# the suite reads each the same way (its retries are off by default: one attempt of the suite
# is one of the server)
BEHIND_PORTKEY = {
    "429 with Retry-After": (
        _behind_portkey(
            429,
            {
                "message": "openai error: Rate limit reached. Please try again later.",
                "type": "requests",
                "code": "rate_limit_exceeded",
            },
            **{"Retry-After": "7"},
        ),
        "retried",
    ),
    # the server dropped the connection
    "500 fetch failed": (
        HttpError(
            status=500,
            body='{"html-message":"Message: fetch failed Cause: SocketError: other side closed '
            'Name: TypeError"}',
        ),
        "retried",
    ),
    # the server's 200 was not JSON
    "500 something went wrong": (
        HttpError(status=500, body='{"status":"failure","message":"Something went wrong"}'),
        "retried",
    ),
    # the gateway's own timeout (x-portkey-request-timeout)
    "408 its timeout": (
        HttpError(
            status=408,
            body='{"error":{"message":"Request exceeded the timeout sent in the request: '
            '2000ms","type":"timeout_error","param":null,"code":null}}',
        ),
        "retried",
    ),
    "429 insufficient_quota": (
        _behind_portkey(
            429,
            {
                "message": "openai error: You exceeded your current quota, please check your "
                "plan and billing details.",
                "type": "insufficient_quota",
                "code": "insufficient_quota",
            },
        ),
        "quota",
    ),
    "400 context length": (
        _behind_portkey(
            400,
            {
                "message": "openai error: This model's maximum context length is 8192 tokens. "
                "However, your messages resulted in 9001 tokens. Please reduce the length of the "
                "messages.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            },
        ),
        "context",
    ),
    "400 Groq tool_use_failed": (
        _behind_portkey(
            400,
            {
                "message": "openai error: Failed to call a function. Please adjust your prompt. "
                "See 'failed_generation' for more details.",
                "type": "invalid_request_error",
                "code": "tool_use_failed",
            },
        ),
        "unparsed",
    ),
    "500 llama.cpp format": (
        _behind_portkey(
            500,
            {
                "message": "openai error: The model produced output that does not match the "
                "expected peg-native format",
                "type": "server_error",
                "code": 500,
            },
        ),
        "unparsed",
    ),
    # TGI's {"error": "Tool error: Failed to parse generated text: ..."}: an error that is a
    # string loses its text at the gateway, so nothing tells it from any refused request
    "422 TGI, its text lost": (
        _behind_portkey(422, {"message": "openai error: undefined", "type": None}),
        "refused",
    ),
}


@pytest.mark.parametrize(("reply", "read_as"), BEHIND_PORTKEY.values(), ids=list(BEHIND_PORTKEY))
@pytest.mark.asyncio
async def test_a_servers_error_behind_the_portkey_gateway_reads_as_without_it(
    openai_server, make_model, sleeps, reply, read_as
):
    openai_server.enqueue(reply, Completion(content="ok"))
    async with make_model(max_retries=1) as model:
        if read_as == "retried":
            assert (await model.complete(HELLO)).content == "ok"
            assert len(openai_server.requests) == 2
            # the server's Retry-After reaches the suite through the gateway; else the backoff
            assert sleeps.calls == ([7.0] if reply.headers else [1.0])
            return
        with pytest.raises(EndpointError) as caught:
            await model.complete(HELLO)
    expected = {
        "quota": EndpointError,
        "context": ContextWindowExceeded,
        "unparsed": UnparsedModelOutput,
        "refused": EndpointError,
    }[read_as]
    assert type(caught.value) is expected
    assert len(openai_server.requests) == 1
    if read_as == "quota":
        assert "the account's quota or credits are exhausted" in str(caught.value)


@pytest.mark.asyncio
async def test_exhausted_retries_raise_endpoint_error(openai_server, make_model, sleeps):
    openai_server.enqueue(*[HttpError.server_error(503)] * 3)
    async with make_model(max_retries=2) as model:
        with pytest.raises(EndpointError) as caught:
            await model.complete(HELLO)
    error = caught.value
    assert type(error) is EndpointError
    assert error.status == 503
    assert "after 3 attempt(s)" in str(error)
    assert "HTTP 503" in str(error)
    assert "The server had an error while processing your request." in str(error)
    assert error.body in str(error)
    assert sleeps.calls == [1.0, 2.0]
    assert len(openai_server.requests) == 3


@pytest.mark.asyncio
async def test_long_error_bodies_are_cut_to_an_excerpt(openai_server, make_model):
    openai_server.enqueue(HttpError(status=500, body="x" * 5000, content_type="text/plain"))
    async with make_model(max_retries=0) as model:
        with pytest.raises(EndpointError) as caught:
            await model.complete(HELLO)
    assert len(caught.value.body) == BODY_EXCERPT_CHARS
    assert "x" * 5000 not in str(caught.value)
    assert "after 1 attempt(s)" in str(caught.value)


@pytest.mark.asyncio
async def test_hang_past_the_timeout_is_retried_then_fails(openai_server, make_model, sleeps):
    openai_server.enqueue(Hang(), Hang())
    async with make_model(timeout_seconds=0.3, max_retries=1) as model:
        with pytest.raises(EndpointError) as caught:
            await model.complete(HELLO)
    assert caught.value.status is None
    assert "timeout" in str(caught.value)
    assert "after 2 attempt(s)" in str(caught.value)
    assert sleeps.calls == [1.0]
    assert len(openai_server.requests) == 2


@pytest.mark.asyncio
async def test_hang_then_reply_recovers(openai_server, make_model):
    openai_server.enqueue(Hang())
    # A responder rather than a second scripted reply: on a loaded machine the retry may time
    # out too, and must then find another answer rather than an exhausted script.
    openai_server.responder = lambda body: Completion(content="late but fine")
    async with make_model(timeout_seconds=0.3) as model:
        turn = await model.complete(HELLO)
    assert turn.content == "late but fine"


@pytest.mark.asyncio
async def test_dropped_connection_is_retried(openai_server, make_model, sleeps):
    openai_server.enqueue(Drop(), Completion(content="reconnected"))
    async with make_model() as model:
        turn = await model.complete(HELLO)
    assert turn.content == "reconnected"
    assert sleeps.calls == [1.0]


@pytest.mark.asyncio
async def test_dropped_connections_exhaust_into_endpoint_error(openai_server, make_model):
    openai_server.enqueue(Drop(), Drop())
    async with make_model(max_retries=1) as model:
        with pytest.raises(
            EndpointError, match=r"after 2 attempt\(s\): connection failed"
        ) as caught:
            await model.complete(HELLO)
    assert caught.value.status is None


@pytest.mark.asyncio
async def test_refused_connection_is_an_endpoint_error(make_model):
    with LoopbackOpenAIServer() as closed:
        base_url = closed.base_url
    async with make_model(base_url=base_url, max_retries=1) as model:
        with pytest.raises(EndpointError, match="connection failed"):
            await model.complete(HELLO)


def _raw_completion(message: dict[str, Any], **choice: Any) -> RawBody:
    """A chat completion of ``message`` exactly as given (a server's own shape of it); the
    ``choice`` keys replace or add to its choice's."""
    body = {
        "id": "chatcmpl-raw",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop", **choice}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }
    return RawBody(body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})


@pytest.mark.parametrize(
    ("content", "text"),
    [
        pytest.param([{"type": "text", "text": "How can I help?"}], "How can I help?", id="one"),
        pytest.param(
            [
                {"type": "thinking", "thinking": [{"type": "text", "text": "They want a return."}]},
                {"type": "text", "text": "Which order is it?"},
            ],
            "Which order is it?",
            id="mistral-thinking-then-text",
        ),
        pytest.param(
            [{"type": "text", "text": "Which "}, {"type": "text", "text": "order?"}],
            "Which order?",
            id="joined",
        ),
        pytest.param([{"type": "reasoning", "text": "notes"}], None, id="no-text-part"),
    ],
)
@pytest.mark.asyncio
async def test_content_sent_as_a_list_of_parts_reads_as_its_text_parts(
    openai_server, make_model, content, text
):
    # Mistral's reasoning models answer with a list of parts; it read as an unparseable reply,
    # retried until the breaker called the endpoint down: no such agent could be scored
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    openai_server.enqueue(
        _raw_completion({"role": "assistant", "content": content, "tool_calls": [call]})
    )
    async with make_model() as model:
        turn = await model.complete(HELLO)
    assert turn.content == text
    assert turn.tool_calls == (ToolCall(id="c1", name="f", arguments="{}"),)
    assert turn.usage.prompt == 12
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize(
    ("function", "call"),
    [
        pytest.param({"name": "", "arguments": "{}"}, ("", "{}"), id="empty-name"),
        pytest.param({"name": None, "arguments": "{}"}, ("", "{}"), id="null-name"),
        pytest.param({"name": "f", "arguments": [1, 2]}, ("f", "[1, 2]"), id="arguments-a-list"),
        pytest.param({"name": "f", "arguments": 5}, ("f", "5"), id="arguments-a-number"),
    ],
)
@pytest.mark.asyncio
async def test_a_wrong_tool_call_is_the_models_call_as_written(
    openai_server, make_model, function, call
):
    """vLLM's, SGLang's and TGI's tool parsers pass on what the model wrote: the tools answer
    it and the agent is scored on it. It was an unreadable reply: retried, an infra error,
    and the breaker called an endpoint answering 200 down."""
    raw = {"id": "c1", "type": "function", "function": function}
    openai_server.enqueue(
        _raw_completion({"role": "assistant", "content": None, "tool_calls": [raw]})
    )
    async with make_model() as model:
        turn = await model.complete(HELLO)
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [call]
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        pytest.param(InvalidJson(), "body is not JSON", id="invalid-json"),
        pytest.param(InvalidJson(content_type="text/html"), "body is not JSON", id="html"),
        # a RecursionError escaped the request: a traceback and a lost scenario, no role named
        pytest.param(
            InvalidJson(body="[" * 100_000 + "]" * 100_000),
            "body is JSON nested too deep to read",
            id="nested-too-deep",
        ),
        # read as "body is not JSON", where the body was JSON the reader could not convert
        pytest.param(
            InvalidJson(body='{"id": ' + "9" * 5000 + "}"),
            "body is JSON holding an integer of over 4300 digits",
            id="integer-too-long",
        ),
        pytest.param(RawBody(body=b"\x80{}"), "body is not JSON", id="not-utf8"),
        pytest.param(NoChoices(), "no choices", id="no-choices"),
        pytest.param(
            _raw_completion({"role": "assistant", "content": 7}),
            "the message content is neither a string nor a list of parts",
            id="content-a-number",
        ),
        pytest.param(
            _raw_completion({"role": "assistant", "content": ["Hello"]}),
            "a part of the message content is not an object",
            id="content-part-a-string",
        ),
        pytest.param(
            _raw_completion({"role": "assistant", "content": [{"type": "text"}]}),
            "a text part of the message content has no text",
            id="text-part-without-text",
        ),
        # OpenRouter: a provider's failure after generation began, with HTTP 200; it was the
        # agent's "empty message twice" (partial text went to the customer as its words)
        pytest.param(
            _raw_completion(
                {"role": "assistant", "content": "I have cancelled your or"},
                finish_reason="error",
                error={"code": 502, "message": "Provider returned error"},
            ),
            "the choice reports an error: Provider returned error",
            id="openrouter-choice-error",
        ),
        pytest.param(
            _raw_completion({"role": "assistant", "content": ""}, finish_reason="error"),
            "the choice reports an error: finish_reason error",
            id="finish-reason-error",
        ),
    ],
)
@pytest.mark.asyncio
async def test_unparseable_replies_are_retried_then_fail(
    openai_server, make_model, sleeps, reply, reason
):
    openai_server.enqueue(reply, reply)
    async with make_model(max_retries=1) as model:
        with pytest.raises(EndpointError) as caught:
            await model.complete(HELLO)
    message = str(caught.value)
    assert reason in message
    assert "after 2 attempt(s)" in message
    assert caught.value.status == 200
    assert caught.value.body in message
    assert sleeps.calls == [1.0]


@pytest.mark.asyncio
async def test_unparseable_reply_then_success(openai_server, make_model):
    openai_server.enqueue(InvalidJson(), NoChoices(), Completion(content="third time"))
    async with make_model() as model:
        turn = await model.complete(HELLO)
    assert turn.content == "third time"
    assert turn.usage.n_calls == 1


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(HttpError.context_length_exceeded(), id="openai"),
        pytest.param(
            HttpError.openai(
                400,
                "This model's maximum context length is 4096 tokens. However, you requested "
                "5000 tokens (4000 in the messages, 1000 in the completion).",
                error_type="BadRequestError",
            ),
            id="vllm",
        ),
        pytest.param(
            HttpError(
                status=400,
                body="the request exceeds the available context size",
                content_type="text/plain",
            ),
            id="llama-cpp-plain-text",
        ),
        # were infra errors: excluded from the rates, and every resume met the same overflow
        pytest.param(
            HttpError.openai(
                400,
                "The decoder prompt (length 5000) is longer than the maximum model length of "
                "4096. Make sure that `max_model_len` is no smaller than the number of text "
                "tokens.",
            ),
            id="vllm-v1-engine",
        ),
        # vLLM 0.32 (CPU build), byte for byte: a prompt of exactly --max-model-len tokens
        # leaves no room for one output token (one more token gets the wording above)
        pytest.param(
            HttpError(
                status=400,
                body='{"error":{"message":"max_tokens must be at least 1, got 0. '
                '(parameter=max_tokens, value=0)","type":"BadRequestError","param":"max_tokens",'
                '"code":400}}',
            ),
            id="vllm-prompt-fills-the-window",
        ),
        pytest.param(
            HttpError(
                status=400,
                body='{"error":{"message":"This model\'s maximum context length is 4096 tokens. '
                "However, your prompt contains at least 4097 input tokens, which exceeds this "
                "limit even without any output tokens. Please reduce the length of the input "
                'prompt. (parameter=input_tokens, value=4097)","type":"BadRequestError",'
                '"param":"input_tokens","code":400}}',
            ),
            id="vllm-0.32",
        ),
        # transformers serve 5.25 (--max-model-len 1024), byte for byte: a prompt over the
        # window, and one of exactly its length (no room for an answer); was an infra error
        pytest.param(
            HttpError(
                status=400,
                body='{"detail":"The prompt has 6686 tokens, but the model takes at most 1024, '
                'prompt and answer (`--max-model-len`)."}',
            ),
            id="transformers-serve",
        ),
        pytest.param(
            HttpError(
                status=400,
                body='{"detail":"The prompt has 1024 tokens, but the model takes at most 1024, '
                'prompt and answer (`--max-model-len`)."}',
            ),
            id="transformers-serve-prompt-fills-the-window",
        ),
        pytest.param(
            HttpError(
                status=422,
                body=json.dumps(
                    {
                        "error": "Input validation error: `inputs` tokens + `max_new_tokens` "
                        "must be <= 4096. Given: 5000 `inputs` tokens and 512 `max_new_tokens`",
                        "error_type": "validation",
                    }
                ),
            ),
            id="tgi-422",
        ),
        pytest.param(
            HttpError.openai(
                400,
                "The input token count (1200000) exceeds the maximum number of tokens allowed "
                "(1048576).",
            ),
            id="gemini",
        ),
        pytest.param(
            HttpError.openai(
                400, "upstream provider error: " + "x" * 400 + " (context_length_exceeded)"
            ),
            id="marker-after-300-characters",
        ),
        pytest.param(
            HttpError.openai(
                400,
                "This model's maximum prompt length is 131072 but the request contains 136973 "
                "tokens.",
            ),
            id="xai",
        ),
        pytest.param(
            HttpError(
                status=400,
                body=json.dumps({"detail": "Input is too long for requested model."}),
            ),
            id="bedrock-access-gateway",
        ),
        pytest.param(
            HttpError.openai(
                400, "input length and `max_tokens` exceed context limit: 174167 + 64000 > 200000"
            ),
            id="anthropic-with-max-tokens",
        ),
        pytest.param(
            HttpError.openai(
                400,
                "Please reduce the length of the messages or completion. Current length is "
                "9000 while limit is 8192",
            ),
            id="cerebras",
        ),
    ],
)
@pytest.mark.asyncio
async def test_context_length_400_is_not_retried(openai_server, make_model, sleeps, reply):
    openai_server.enqueue(reply)
    async with make_model() as model:
        with pytest.raises(ContextWindowExceeded) as caught:
            await model.complete(HELLO)
    assert caught.value.status == reply.status
    assert "context window" in str(caught.value)
    assert sleeps.calls == []
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize(
    ("status", "message", "why"),
    [
        (401, "Incorrect API key provided.", "check the base URL, model name and API key"),
        (403, "You are not allowed to sample from this model.", "check the base URL"),
        (404, "The model `agent-model` does not exist.", "check the base URL"),
        (400, "Invalid value for 'temperature'.", "rejected the request as invalid"),
        (422, "Unprocessable request.", "rejected the request as invalid"),
        (402, "Insufficient credits.", "the account's quota or credits are exhausted"),
        (409, "Conflict.", "waiting does not help this status"),
    ],
)
@pytest.mark.asyncio
async def test_other_client_errors_fail_at_once(
    openai_server, make_model, sleeps, status, message, why
):
    openai_server.enqueue(HttpError.openai(status, message))
    async with make_model() as model:
        with pytest.raises(EndpointError) as caught:
            await model.complete(HELLO)
    error = caught.value
    assert type(error) is EndpointError
    assert error.status == status
    assert f"HTTP {status} (not retried: " in str(error)
    assert why in str(error)
    assert message in str(error)
    assert "after 1 attempt(s)" in str(error)
    assert sleeps.calls == []
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize("status", [301, 302, 303])
@pytest.mark.asyncio
async def test_a_redirect_that_turns_the_post_into_a_get_is_named_in_the_error(
    openai_server, make_model, status
):
    """An ingress's 301 (http:// to its new address): the HTTP library follows it as a GET
    without the body, and the error was the new server's 405 under the base URL alone."""
    with LoopbackOpenAIServer() as elsewhere:
        moved = f"{elsewhere.base_url}/chat/completions"
        openai_server.enqueue(HttpError(status=status, headers={"Location": moved}))
        async with make_model() as model:
            with pytest.raises(EndpointError) as caught:
                await model.complete(HELLO)
        assert elsewhere.requests == ()  # its POST route never saw it: a GET came
    message = str(caught.value)
    assert caught.value.status == 405
    assert f"HTTP 405 from {moved}, where HTTP {status} redirected the request" in message
    assert "turns the POST into a GET without its body" in message
    assert "set the base URL to the address it redirects to" in message


@pytest.mark.asyncio
async def test_an_error_after_a_redirect_names_where_it_came_from(openai_server, make_model):
    with LoopbackOpenAIServer() as elsewhere:
        moved = f"{elsewhere.base_url}/chat/completions"
        openai_server.enqueue(HttpError(status=307, headers={"Location": moved}))
        elsewhere.enqueue(HttpError.openai(404, "The model does not exist."))
        async with make_model() as model:
            with pytest.raises(EndpointError) as caught:
                await model.complete(HELLO)
    message = str(caught.value)
    assert f"HTTP 404 from {moved}, where HTTP 307 redirected the request (not retried" in message
    assert "GET" not in message  # a 307 keeps the POST and its body


# -- the key stays secret -----------------------------------------------------------------------


def test_config_repr_and_json_hold_the_variable_name_only(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    config = EndpointConfig(model="m", base_url="http://127.0.0.1:9/v1", api_key_env=KEY_ENV)
    assert SECRET not in repr(config)
    assert SECRET not in json.dumps(codec.encode(config))
    assert KEY_ENV in repr(config)


@pytest.mark.asyncio
async def test_key_never_appears_in_model_repr_or_errors(openai_server, make_model):
    echoed = json.dumps({"error": {"message": f"Incorrect API key provided: {SECRET}."}})
    openai_server.enqueue(HttpError(status=401, body=echoed), HttpError(status=503, body=echoed))
    async with make_model(max_retries=0) as model:
        assert SECRET not in repr(model)
        for _ in range(2):
            with pytest.raises(EndpointError) as caught:
                await model.complete(HELLO)
            assert SECRET not in str(caught.value)
            assert SECRET not in caught.value.body
            assert "***" in str(caught.value)


@pytest.mark.asyncio
async def test_a_429_holds_back_the_other_conversations_on_the_client(openai_server, make_model):
    waits: list[float] = []
    release = asyncio.Event()

    async def blocking_sleep(seconds: float) -> None:
        waits.append(seconds)
        await release.wait()

    openai_server.enqueue(
        HttpError.rate_limited(retry_after="3"), Completion(content="a"), Completion(content="b")
    )
    async with make_model(clock=lambda: 100.0, sleep=blocking_sleep) as model:
        first = asyncio.ensure_future(model.complete(HELLO))
        while not waits:  # the first conversation got its 429 and waits 3 s
            await asyncio.sleep(0.01)
        second = asyncio.ensure_future(model.complete(HELLO))
        for _ in range(100):  # bounded: without the gate the second request never waits
            if len(waits) == 2 or len(openai_server.requests) > 1:
                break
            await asyncio.sleep(0.01)

        # the second conversation waits at the gate before sending anything
        assert waits == [3.0, 3.0]
        assert len(openai_server.requests) == 1
        release.set()
        turns = [await first, await second]

    assert {turn.content for turn in turns} == {"a", "b"}
    assert len(openai_server.requests) == 3
    # the wait at the gate is the second conversation's wait, as a retry's is the first's
    assert [(turn.attempts, turn.wait_seconds) for turn in turns] == [(2, 3.0), (1, 3.0)]


@pytest.mark.asyncio
async def test_connections_are_limited_per_client_as_configured(openai_server, make_model):
    openai_server.enqueue(*(Completion(content=f"ok {n}", latency=0.2) for n in range(8)))
    async with make_model(max_connections=3) as model:
        turns = await asyncio.gather(*(model.complete(HELLO) for _ in range(8)))
        pool = model._client._client._transport._pool
    assert sorted(turn.content for turn in turns) == [f"ok {n}" for n in range(8)]
    # eight requests at once, three connections: the others waited for a free one
    assert (pool.peak, pool.open) == (3, 0)


# -- issue 12: deadlines, fail-fast, wire shapes ---------------------------------------------


@pytest.mark.asyncio
async def test_a_slow_drip_reply_ends_at_the_total_deadline(openai_server, make_model):
    # Headers at once, then one byte every 0.2 s: a per-read timeout of 0.5 s never trips, and
    # the whole body would take about a minute. The deadline covers connect to last byte.
    openai_server.enqueue(SlowDrip(interval=0.2), SlowDrip(interval=0.2))
    async with make_model(timeout_seconds=0.5, max_retries=1) as model:
        with pytest.raises(EndpointError) as raised:
            await model.complete(HELLO)
    assert "no complete reply within the 0.5 s timeout" in str(raised.value)
    assert "after 2 attempt(s)" in str(raised.value)
    assert raised.value.attempts == 2


@pytest.mark.asyncio
async def test_a_timed_out_request_closes_its_connection(openai_server, make_model):
    openai_server.enqueue(Hang(seconds=30))
    async with make_model(timeout_seconds=0.3, max_retries=0) as model:
        with pytest.raises(EndpointError):
            await model.complete(HELLO)
        for _ in range(100):  # the server notices the closed connection asynchronously
            if openai_server.disconnects:
                break
            await asyncio.sleep(0.02)
    assert openai_server.disconnects == 1


@pytest.mark.asyncio
async def test_attempts_and_waits_are_reported_on_the_turn(openai_server, make_model):
    openai_server.enqueue(
        HttpError.rate_limited(retry_after="2"), HttpError.server_error(), Completion(content="ok")
    )
    async with make_model(backoff_base_seconds=0.5) as model:
        turn = await model.complete(HELLO)
    assert (turn.attempts, turn.wait_seconds) == (3, pytest.approx(2.0 + 1.0))


@pytest.mark.asyncio
async def test_tool_choice_auto_only_when_tools_are_offered(openai_server, make_model):
    openai_server.enqueue(Completion(content="a"), Completion(content="b"))
    async with make_model() as model:
        await model.complete(HELLO, tools=[LOOKUP_TOOL])
        await model.complete(HELLO)
    with_tools, without = (r.body for r in openai_server.requests)
    assert with_tools["tool_choice"] == "auto"
    assert "tool_choice" not in without


def test_an_assistant_tool_call_message_carries_empty_content_not_null():
    call = ToolCall(id="c1", name="calculate", arguments='{"expression": "1+1"}')
    wire = Message(role=Role.ASSISTANT, tool_calls=(call,)).to_openai()
    assert wire["content"] == ""
    assert wire["tool_calls"][0]["function"]["name"] == "calculate"


@pytest.mark.asyncio
async def test_llamacpp_dialect_accepts_our_history_and_sees_the_tools(make_model, monkeypatch):
    history = (
        Message(role=Role.USER, content="2+2?"),
        Message(
            role=Role.ASSISTANT,
            tool_calls=(ToolCall(id="c1", name="calculate", arguments='{"expression": "2+2"}'),),
        ),
        Message(role=Role.TOOL, tool_call_id="c1", name="calculate", content="4.0"),
    )
    with LoopbackOpenAIServer(replies=[Completion(content="4")], dialect="llamacpp") as server:
        async with make_model(base_url=server.base_url, max_retries=0) as model:
            turn = await model.complete(history, tools=[LOOKUP_TOOL])
        (request,) = server.requests
    assert turn.content == "4"
    assert request.tools_seen


@pytest.mark.asyncio
async def test_llamacpp_dialect_rejects_null_content_and_ignores_tools_without_choice():
    import aiohttp

    body = {
        "model": "m",
        "messages": [{"role": "assistant", "content": None, "tool_calls": []}],
        "tools": [LOOKUP_TOOL],
    }
    with LoopbackOpenAIServer(dialect="llamacpp") as server:
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{server.base_url}/chat/completions", json=body) as reply,
        ):
            status, text = reply.status, await reply.text()
        (request,) = server.requests
    assert status == 500
    assert "Input should be a valid string" in text
    assert not request.tools_seen


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(
            HttpError.openai(422, "validation failed: " + "x" * 600 + " THE CAUSE"), id="422"
        ),
        pytest.param(
            HttpError(status=500, body="1 validation error\nInput should be a valid string " * 20),
            id="llamacpp-500-validation",
        ),
    ],
)
@pytest.mark.asyncio
async def test_an_invalid_request_is_not_retried_and_keeps_its_whole_body(
    openai_server, make_model, reply
):
    openai_server.enqueue(reply, Completion(content="never"))
    async with make_model() as model:
        with pytest.raises(EndpointError) as raised:
            await model.complete(HELLO)
        assert not model.breaker.consecutive_failures  # it answered: the endpoint is up
    assert len(openai_server.requests) == 1
    assert "not retried: the server rejected the request as invalid" in str(raised.value)
    assert raised.value.full_body == reply.body
    assert len(raised.value.body) <= BODY_EXCERPT_CHARS


@pytest.mark.parametrize("retry_after", ["2", None])
@pytest.mark.asyncio
async def test_a_rate_limited_endpoint_is_busy_not_down(
    openai_server, make_model, sleeps, retry_after
):
    """A hosted API's per-minute limit answers 429 for a while: the breaker called it down
    after K of them (six 429s with `Retry-After: 2` in 12 s) and the scenarios after it failed
    without a request, though every attempt got an answer."""
    limited = HttpError.rate_limited(retry_after=retry_after)
    openai_server.enqueue(*[limited] * 6, Completion(content="served"), Completion(content="again"))
    async with make_model(max_retries=10, breaker_failures=2, breaker_window_seconds=0) as model:
        turn = await model.complete(HELLO)
        assert not model.breaker.is_open
        assert (await model.complete(HELLO)).content == "again"
    assert turn.content == "served"
    assert len(sleeps.calls) == 6
    assert len(openai_server.requests) == 8


@pytest.mark.asyncio
async def test_a_huge_retry_after_is_not_waited_and_counts_toward_the_breaker(
    openai_server, make_model, sleeps
):
    openai_server.enqueue(*[HttpError.rate_limited(retry_after="3600")] * 2)
    async with make_model(breaker_failures=2, breaker_window_seconds=0) as model:
        with pytest.raises(EndpointError) as first:
            await model.complete(HELLO)
        with pytest.raises(EndpointDown) as second:
            await model.complete(HELLO)
        with pytest.raises(EndpointDown):
            await model.complete(HELLO)
    assert sleeps.calls == []
    assert "asks to wait 3600 s, more than the 30 s backoff cap" in str(first.value)
    assert "is down since" in str(second.value)
    assert len(openai_server.requests) == 2


@pytest.mark.asyncio
async def test_the_breaker_fails_fast_after_k_failures_and_a_probe_closes_it(
    openai_server, make_model
):
    openai_server.enqueue(*[HttpError.server_error(503)] * 3)
    async with make_model(
        max_retries=2, breaker_failures=3, breaker_window_seconds=0, breaker_probe_seconds=3600
    ) as model:
        with pytest.raises(EndpointDown) as opened:
            await model.complete(HELLO)
        with pytest.raises(EndpointDown):
            await model.complete(HELLO)  # no request: the breaker is open
    assert len(openai_server.requests) == 3
    text = str(opened.value)
    assert re.search(r"is down since \d\d:\d\d:\d\d UTC \(3 consecutive failures: HTTP 503", text)
    assert "agent-model" in text

    openai_server.enqueue(HttpError.server_error(503), Completion(content="back"))
    async with make_model(
        max_retries=0, breaker_failures=1, breaker_window_seconds=0, breaker_probe_seconds=0
    ) as model:
        with pytest.raises(EndpointDown):
            await model.complete(HELLO)
        turn = await model.complete(HELLO)  # the probe goes out and succeeds
        assert not model.breaker.is_open
    assert turn.content == "back"


@pytest.mark.asyncio
async def test_a_url_password_is_neither_kept_nor_sent_as_basic_auth(openai_server, make_model):
    openai_server.enqueue(Completion(content="ok"))
    url = openai_server.base_url.replace("http://", "http://alice:CANARY-PW@")
    async with make_model(base_url=url) as model:
        await model.complete(HELLO)
        assert "CANARY-PW" not in repr(model) + json.dumps(codec.encode(model.config))
    (request,) = openai_server.requests
    assert request.header("Authorization") == f"Bearer {SECRET}"


@pytest.mark.asyncio
async def test_an_escaped_lone_surrogate_in_the_history_is_sent_as_u_fffd(
    openai_server, make_model
):
    openai_server.enqueue(Completion(content="ok"))
    history = (Message(role=Role.USER, content=json.loads('"order \\ud83d"')),)
    async with make_model() as model:
        await model.complete(history)
    assert openai_server.requests[0].body["messages"][0]["content"] == "order \ufffd"


@pytest.mark.asyncio
async def test_attempts_in_flight_ramp_up_from_the_initial_window(openai_server, make_model):
    """40 conversations at once: 16 attempts go out first, each connection the server accepts
    and each reply lets one more in."""
    # each reply takes long enough for the 40 to be sent before the first comes back, even on a
    # loaded machine (at 0.2 s a reply could free a connection that a late attempt reused)
    openai_server.enqueue(*[Completion(content="ok", latency=1.0)] * 40)
    async with make_model() as model:
        turns = await asyncio.gather(*(model.complete(HELLO) for _ in range(40)))
        assert [turn.content for turn in turns] == ["ok"] * 40
        # 40 connections accepted and 40 replies widened it
        assert model.ramp.window == DEFAULT_INITIAL_WINDOW + 40 + 40


def _connection_error_from(cause: BaseException) -> BaseException:
    """The SDK's connection error as it arrives: raised from the library's, from the OS's."""
    try:
        try:
            raise cause
        except BaseException as inner:
            raise openai.APIConnectionError(request=_REQUEST) from inner
    except openai.APIConnectionError as outer:
        return outer


_REQUEST = LIBRARY.Request("POST", "https://127.0.0.1:8443/v1/chat/completions")


def test_an_untrusted_certificate_is_not_retried_and_says_how_to_trust_it() -> None:
    """It was retried, counted toward the breaker, and never said SSL_CERT_FILE."""
    untrusted = ssl.SSLCertVerificationError(
        1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate"
    )
    failure = connection_failure(_connection_error_from(untrusted), where="model 'm'", attempts=1)
    assert failure.fatal is not None
    assert "CERTIFICATE_VERIFY_FAILED" in str(failure.fatal)
    assert "name the file of its CA with SSL_CERT_FILE (not retried)" in str(failure.fatal)
    refused = connection_failure(
        _connection_error_from(ConnectionRefusedError(111, "Connection refused")),
        where="model 'm'",
        attempts=1,
    )
    assert refused.fatal is None  # retried, as before
    assert refused.connection


@pytest.mark.parametrize(
    ("reported", "counted"),
    [
        pytest.param(1200, 1200, id="integer"),
        pytest.param(1200.0, 1200, id="integral-float"),
        pytest.param(1199.2, 1200, id="fraction-rounded-up"),
        pytest.param("1200", 1200, id="digits-as-text"),
        pytest.param(-5, 0, id="negative"),
        pytest.param("many", 0, id="words"),
        pytest.param(float("inf"), 0, id="infinite"),
        pytest.param(True, 0, id="boolean"),
    ],
)
@pytest.mark.asyncio
async def test_a_token_count_a_server_sends_as_a_float_or_text_is_counted(
    openai_server, make_model, reported, counted
):
    """A proxy that writes ``"prompt_tokens": 1200.0`` (or ``"1200"``) was counted 0 tokens:
    its requests cost nothing, and ``--tau2-max-cost`` never stopped the run."""
    raw = _raw_completion({"role": "assistant", "content": "Hello."})
    body = json.loads(raw.body)
    body["usage"] = {"prompt_tokens": reported, "completion_tokens": reported}
    openai_server.enqueue(RawBody(body=json.dumps(body).encode(), headers=raw.headers))
    async with make_model() as model:
        turn = await model.complete(HELLO)
    assert (turn.usage.prompt, turn.usage.completion) == (counted, counted)
