"""The loopback OpenAI-compatible server, seen from plain HTTP clients and the openai client."""

from __future__ import annotations

import email.message
import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import openai
import pytest

from tau2_retail.testing import loopback_server as faults
from tau2_retail.testing.loopback_server import (
    CHAT_COMPLETIONS_PATH,
    Completion,
    LoopbackOpenAIServer,
    ReplyToolCall,
)
from tau2_retail.testing.timeouts import scaled_timeout


class Answer:
    """Status, headers and body of one raw HTTP exchange."""

    def __init__(self, status: int, headers: email.message.Message[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)


def post(
    server: LoopbackOpenAIServer,
    body: Any = None,
    *,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 5.0,
) -> Answer:
    data = raw if raw is not None else json.dumps(body or {"model": "m", "messages": []}).encode()
    request = urllib.request.Request(
        server.base_url + "/chat/completions",
        data=data,
        headers={"Content-Type": "application/json", **(headers or {})},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return Answer(response.status, response.headers, response.read())
    except urllib.error.HTTPError as error:
        with error:
            return Answer(error.code, error.headers, error.read())


def chat(content: str = "hello", model: str = "m") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": content}]}


# -- lifecycle ----------------------------------------------------------------------------------


def test_binds_loopback_on_a_free_port():
    server = LoopbackOpenAIServer()
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.base_url
    with server:
        assert server.port > 0
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        with LoopbackOpenAIServer() as other:
            assert other.port != server.port
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.port
    server.stop()  # idempotent


def test_cannot_start_twice(openai_server):
    with pytest.raises(RuntimeError, match="already started"):
        openai_server.start()


def test_stop_ends_a_hanging_request_promptly():
    server = LoopbackOpenAIServer(replies=[faults.Hang(seconds=60)]).start()
    outcome: list[object] = []

    def client() -> None:
        try:
            outcome.append(post(server, chat(), timeout=30).status)
        except (ConnectionError, http.client.HTTPException) as error:
            outcome.append(error)

    thread = threading.Thread(target=client)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.requests, "the client never reached the server"
    started = time.monotonic()
    server.stop()
    thread.join(timeout=10)
    assert time.monotonic() - started < scaled_timeout(30)  # a hang guard
    assert not thread.is_alive()
    assert outcome  # answered (503) or disconnected, but not left hanging


# -- completions --------------------------------------------------------------------------------


def test_text_completion_shape_and_default_usage(openai_server):
    openai_server.enqueue(Completion(content="x" * 20))
    answer = post(openai_server, chat("y" * 100, model="agent-model"))
    assert answer.status == 200
    assert answer.headers["Content-Type"].startswith("application/json")
    data = answer.json()
    assert data["object"] == "chat.completion"
    assert data["model"] == "agent-model"
    assert data["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "x" * 20},
            "finish_reason": "stop",
        }
    ]
    assert data["usage"] == {"prompt_tokens": 25, "completion_tokens": 6, "total_tokens": 31}


def test_tool_calls_carry_raw_arguments_and_ids(openai_server):
    openai_server.enqueue(
        Completion(
            tool_calls=(
                ReplyToolCall(name="get_order_details", arguments='{"order_id": "#W1"'),
                ReplyToolCall(name="calculate", arguments="", id="call_fixed"),
                ReplyToolCall(name="list_all_product_types", omit_id=True),
            ),
            prompt_tokens=3,
            completion_tokens=4,
        )
    )
    data = post(openai_server, chat()).json()
    choice = data["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    calls = choice["message"]["tool_calls"]
    assert [c["function"] for c in calls] == [
        {"name": "get_order_details", "arguments": '{"order_id": "#W1"'},
        {"name": "calculate", "arguments": ""},
        {"name": "list_all_product_types", "arguments": "{}"},
    ]
    assert calls[0]["id"].startswith("call_loopback_")
    assert calls[1]["id"] == "call_fixed"
    assert "id" not in calls[2]
    assert all(c["type"] == "function" for c in calls)
    assert data["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}


def test_usage_can_be_left_out_and_finish_reason_set(openai_server):
    openai_server.enqueue(Completion(content="cut", include_usage=False, finish_reason="length"))
    data = post(openai_server, chat()).json()
    assert "usage" not in data
    assert data["choices"][0]["finish_reason"] == "length"


# -- faults -------------------------------------------------------------------------------------


def test_http_error_with_headers(openai_server):
    openai_server.enqueue(faults.HttpError.rate_limited(retry_after="2"))
    answer = post(openai_server, chat())
    assert answer.status == 429
    assert answer.headers["Retry-After"] == "2"
    assert answer.json()["error"]["code"] == "rate_limit_exceeded"


def test_context_length_error_in_openai_format(openai_server):
    openai_server.enqueue(faults.HttpError.context_length_exceeded())
    answer = post(openai_server, chat())
    assert answer.status == 400
    error = answer.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert error["type"] == "invalid_request_error"
    assert "maximum context length" in error["message"]


def test_raw_http_error_body(openai_server):
    openai_server.enqueue(
        faults.HttpError(status=502, body="Bad gateway", content_type="text/plain")
    )
    answer = post(openai_server, chat())
    assert (answer.status, answer.body) == (502, b"Bad gateway")


def test_invalid_json_and_no_choices(openai_server):
    openai_server.enqueue(faults.InvalidJson(body="{oops"), faults.NoChoices())
    first = post(openai_server, chat())
    assert (first.status, first.body) == (200, b"{oops")
    second = post(openai_server, chat())
    assert second.status == 200
    assert second.json()["choices"] == []


def test_drop_closes_the_connection_without_a_response(openai_server):
    openai_server.enqueue(faults.Drop(), Completion(content="after"))
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        post(openai_server, chat())
    assert post(openai_server, chat()).json()["choices"][0]["message"]["content"] == "after"


def test_hang_outlasts_a_client_timeout(openai_server):
    openai_server.enqueue(faults.Hang(), Completion(content="next"))
    with pytest.raises(TimeoutError):
        post(openai_server, chat(), timeout=0.2)
    assert post(openai_server, chat()).status == 200


def test_latency_delays_the_answer():
    with LoopbackOpenAIServer(
        latency=0.05, replies=[Completion(content="a", latency=0.05)]
    ) as server:
        started = time.monotonic()
        post(server, chat())
        assert time.monotonic() - started >= 0.1


# -- script, responder, recording ---------------------------------------------------------------


def test_exhausted_script_answers_500_loudly(openai_server):
    openai_server.enqueue(Completion(content="only one"))
    assert post(openai_server, chat()).status == 200
    answer = post(openai_server, chat())
    assert answer.status == 500
    assert "script ran out at request 2" in answer.json()["error"]["message"]
    assert openai_server.pending == 0


def test_script_first_then_responder():
    seen: list[Any] = []

    def responder(body: Any) -> Completion:
        seen.append(body)
        return Completion(content=f"echo {body['messages'][-1]['content']}")

    with LoopbackOpenAIServer(replies=[Completion(content="scripted")], responder=responder) as s:
        assert s.pending == 1
        first = post(s, chat("one")).json()["choices"][0]["message"]["content"]
        second = post(s, chat("two")).json()["choices"][0]["message"]["content"]
    assert (first, second) == ("scripted", "echo two")
    assert seen == [chat("two")]


def test_records_bodies_and_lower_cased_headers(openai_server):
    openai_server.enqueue(Completion(content="a"))
    post(openai_server, chat("hi"), headers={"Authorization": "Bearer k", "X-Trace": "1"})
    (request,) = openai_server.requests
    assert request.method == "POST"
    assert request.path == CHAT_COMPLETIONS_PATH
    assert request.body == chat("hi")
    assert request.headers["authorization"] == "Bearer k"
    assert request.header("X-TRACE") == "1"
    assert request.header("x-missing") is None


def test_a_body_that_is_not_json_is_recorded_and_rejected(openai_server):
    answer = post(openai_server, raw=b"not json")
    assert answer.status == 400
    assert openai_server.requests[0].body is None
    assert openai_server.pending == 0


def test_enqueue_from_another_thread(openai_server):
    thread = threading.Thread(target=openai_server.enqueue, args=(Completion(content="t"),))
    thread.start()
    thread.join()
    assert post(openai_server, chat()).json()["choices"][0]["message"]["content"] == "t"


@pytest.mark.asyncio
async def test_serves_the_async_openai_client(openai_server):
    openai_server.enqueue(
        Completion(content="hi", tool_calls=(ReplyToolCall(name="f", arguments='{"a": 1}'),))
    )
    async with openai.AsyncOpenAI(
        base_url=openai_server.base_url, api_key="k", max_retries=0
    ) as client:
        completion = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hello"}]
        )
    message = completion.choices[0].message
    assert message.content == "hi"
    assert message.tool_calls is not None
    call = message.tool_calls[0]
    assert call.type == "function"
    assert call.function.arguments == '{"a": 1}'
    assert completion.usage is not None


def test_serves_the_sync_openai_client(openai_server):
    openai_server.enqueue(Completion(content="sync", prompt_tokens=1, completion_tokens=2))
    with openai.OpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0) as client:
        completion = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hello"}]
        )
    assert completion.choices[0].message.content == "sync"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (1, 2)
