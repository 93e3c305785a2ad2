"""The request body: the bytes the ``openai`` client's ``create`` sends, encoded from caches."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tau2_retail.models.messages import Message, Role, ToolCall
from tau2_retail.models.request_body import BodyEncoder, dumps
from tau2_retail.models.sdk_transport import POST_TAKES_CONTENT, RawPost
from tau2_retail.models.wire import encode_messages
from tau2_retail.testing.loopback_model import loopback_model
from tau2_retail.testing.loopback_server import Completion, LoopbackOpenAIServer

TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_order_details",
        "description": 'Détails d\'une commande, ünïcode and "quotes".',
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
    },
}
HISTORY = (
    Message(role=Role.SYSTEM, content="You are a retail agent. Policy: ½ refunds ✓"),
    Message(role=Role.USER, content="Hi! my order #W123 \ud83d never came 😀"),
    Message(
        role=Role.ASSISTANT,
        content=None,
        tool_calls=(
            ToolCall(id="call_1", name="get_order_details", arguments='{"order_id": "#W123"}'),
        ),
        finish_reason="tool_calls",
    ),
    Message(role=Role.TOOL, tool_call_id="call_1", name="get_order_details", content='{"a": 1}'),
    Message(role=Role.ASSISTANT, content="It is on its way.\n\tTabs, \\ back\x00slash"),
)

CONFIGS = {
    "bare": {},
    "sampling": {"temperature": 0.0, "top_p": 0.5, "seed": 7, "max_tokens": 256},
    "extra body": {
        "temperature": 1.0,
        "extra_body": {"reasoning_effort": "low", "tool_choice": "required", "temperature": 0.2},
    },
}


@pytest.mark.asyncio
@pytest.mark.parametrize("tools", [None, (TOOL,)], ids=["no tools", "tools"])
@pytest.mark.parametrize("fields", CONFIGS.values(), ids=CONFIGS.keys())
async def test_the_body_is_byte_for_byte_what_the_sdks_create_sends(
    openai_server: LoopbackOpenAIServer, fields: dict[str, Any], tools: Any
) -> None:
    openai_server.enqueue(Completion(content="ok"), Completion(content="ok"))
    async with loopback_model(openai_server, **fields) as model:
        await model.complete(HISTORY, tools=tools)
        # what the SDK's typed call sends for the same arguments (this package's old path)
        typed = model._request(HISTORY, tools=tools, seed=None)
        await model._client.chat.completions.create(**typed)
    ours, sdk = openai_server.requests
    assert ours.raw_body == sdk.raw_body
    # the same URL and the same headers (authorization, the SDK's x-stainless-*, lengths)
    assert ours.path == sdk.path
    prepared = model.prepare(HISTORY, tools=tools).content
    if POST_TAKES_CONTENT:
        assert ours.headers == sdk.headers
        assert prepared == sdk.raw_body
    else:
        # an SDK without raw request bodies (openai 1.x): its typed call is ours, its reply
        # read as a stream (which it marks); our own encoding is the same JSON
        marked = {**ours.headers}
        assert marked.pop("x-stainless-raw-response") == "stream"
        assert marked == sdk.headers
        assert json.loads(prepared) == json.loads(sdk.raw_body)
    assert ours.header("content-type") == sdk.header("content-type") == "application/json"
    assert ours.header("accept-encoding") == sdk.header("accept-encoding")


@pytest.mark.asyncio
async def test_each_request_carries_its_own_body_through_the_copied_options(
    openai_server: LoopbackOpenAIServer,
) -> None:
    histories = [HISTORY[:n] for n in (2, 5, 3)]
    openai_server.enqueue(*(Completion(content="ok") for _ in histories))
    async with loopback_model(openai_server) as model:
        for history in histories:
            await model.complete(history)
        expected = [model.prepare(history).content for history in histories]
    sent = [request.raw_body for request in openai_server.requests]
    if POST_TAKES_CONTENT:
        assert sent == expected
    else:  # the SDK's typed call encodes the same JSON (its own key order)
        assert [json.loads(body) for body in sent] == [json.loads(body) for body in expected]
    assert all(r.path == "/v1/chat/completions" for r in openai_server.requests)


@pytest.mark.parametrize(
    "base_url",
    [
        "http://127.0.0.1:8000/v1",
        "http://127.0.0.1:8000/v1/",
        "http://127.0.0.1:8000",
        "http://localhost:8000/openai/deployments/x/?api-version=1",
    ],
)
def test_the_whole_url_is_the_one_the_sdk_makes_of_the_path(base_url: str) -> None:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="k")
    assert RawPost(client).url == str(client._prepare_url("/chat/completions"))


def test_cached_encodings_equal_fresh_ones_across_generations() -> None:
    encoder = BodyEncoder(generation_bytes=200)  # a few messages per generation
    grown: list[Message] = []
    for message in HISTORY * 3:
        grown.append(message)
        # rebuilt each time, as the customer simulator's view is: equal values, new objects
        view = [Message(role=m.role, content=m.content, tool_calls=m.tool_calls) for m in grown]
        expected = dumps(encode_messages(view)).encode()
        assert encoder.messages_json(view) == expected
        assert encoder.messages_json(grown) == dumps(encode_messages(grown)).encode()
    assert sum(len(text) for text in encoder._current.values()) <= 200 + max(
        len(dumps(encode_messages([m])).encode()) for m in HISTORY
    )
    # the identity index holds only the current generation's messages (bounded with it)
    assert encoder._by_id
    assert all(encoder._current[m] is text for m, text in encoder._by_id.values())


def test_a_tool_tuple_is_encoded_once_and_a_changed_list_is_encoded_again() -> None:
    encoder = BodyEncoder()
    tools = (TOOL,)
    first = encoder.tools_json(tools)
    assert json.loads(first) == [TOOL]
    assert encoder.tools_json(tools) is first
    listed: list[dict[str, Any]] = [TOOL]
    assert json.loads(encoder.tools_json(listed)) == [TOOL]
    listed.append(TOOL)
    assert json.loads(encoder.tools_json(listed)) == [TOOL, TOOL]
