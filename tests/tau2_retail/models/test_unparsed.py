"""Server texts meaning "the model's output could not be parsed": each known form, answered by
the real loopback server, raises ``UnparsedModelOutput`` at once; a plain 500 is retried and
stays an outage."""

from __future__ import annotations

import json

import pytest

from tau2_retail.errors import EndpointError, UnparsedModelOutput
from tau2_retail.models.messages import Message, Role, ToolCall
from tau2_retail.models.unparsed import (
    UNPARSED_OUTPUT_FORMS,
    malformed_call_sent,
    unparsed_output_server,
)
from tau2_retail.testing.loopback_model import RecordedSleeps, loopback_model
from tau2_retail.testing.loopback_server import Completion, HttpError, LoopbackOpenAIServer
from tau2_retail.testing.unparsed_replies import GENERIC_500, UNPARSED_REPLIES

HELLO = (Message(role=Role.USER, content="Where is my order?"),)
#: the forms about the agent's earlier arguments sent back in the history
HISTORY_FORMS = [
    name for name, form in zip(UNPARSED_REPLIES, UNPARSED_OUTPUT_FORMS, strict=True) if form.history
]


def _after_a_call(arguments: str) -> tuple[Message, ...]:
    """A history in which the agent called a tool with ``arguments``, and got its result."""
    call = ToolCall(id="call_1", name="get_order_details", arguments=arguments)
    return (
        *HELLO,
        Message(role=Role.ASSISTANT, content="", tool_calls=(call,)),
        Message(role=Role.TOOL, content="Error: ...", tool_call_id="call_1", name=call.name),
    )


#: the agent's own malformed call (cut short), sent back in the history
AFTER_A_MALFORMED_CALL = _after_a_call('{"order_id": ')


def test_every_form_of_the_table_has_a_reply_of_its_server() -> None:
    assert len(UNPARSED_REPLIES) == len(UNPARSED_OUTPUT_FORMS)
    servers = [
        unparsed_output_server(reply.status, reply.body) for reply in UNPARSED_REPLIES.values()
    ]
    assert servers == [form.server for form in UNPARSED_OUTPUT_FORMS]


@pytest.mark.parametrize("form", list(UNPARSED_REPLIES))
@pytest.mark.asyncio
async def test_a_parse_failure_of_the_server_is_the_models_output_not_an_outage(
    openai_server: LoopbackOpenAIServer, form: str
) -> None:
    reply = UNPARSED_REPLIES[form]
    openai_server.enqueue(reply, Completion(content="never asked"))
    sleeps = RecordedSleeps()
    async with loopback_model(openai_server, max_retries=3, sleep=sleeps) as model:
        with pytest.raises(UnparsedModelOutput) as raised:
            await model.complete(AFTER_A_MALFORMED_CALL if form in HISTORY_FORMS else HELLO)
        error = raised.value
        assert error.server == form.partition(":")[0]
        assert error.status == reply.status
        assert error.full_body == reply.body  # the server's whole text, for the artifacts
        assert "the server could not parse the model's output" in str(error)
        assert error.attempts == 1
        assert sleeps.calls == []  # not retried
        assert model.breaker.consecutive_failures == 0  # it answered: it is up
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize("form", HISTORY_FORMS)
@pytest.mark.asyncio
async def test_words_about_the_historys_arguments_are_not_the_models_without_such_a_call(
    openai_server: LoopbackOpenAIServer, form: str
) -> None:
    """Such a reply to a request whose history holds no malformed call (the agent's first
    request) cannot be about the model: it was the agent's ``agent_error`` before. Now it is what
    its status says: a 400 rejects the request (not retried), a 500 is retried."""
    reply = UNPARSED_REPLIES[form]
    openai_server.enqueue(reply, reply)
    async with loopback_model(openai_server, max_retries=1) as model:
        with pytest.raises(EndpointError) as raised:
            await model.complete(HELLO)
    assert not isinstance(raised.value, UnparsedModelOutput)
    assert raised.value.status == reply.status
    assert raised.value.attempts == (2 if reply.status == 500 else 1)


@pytest.mark.asyncio
async def test_a_proxy_that_could_not_read_the_request_is_no_fault_of_the_model(
    openai_server: LoopbackOpenAIServer,
) -> None:
    """A Flask-style proxy's 400 for a body it could not read carries Python's JSON error, the
    words old vLLM answers for the agent's invalid arguments in the history; the history holds
    only well-formed calls, so it is the request's, not the model's."""
    proxy = HttpError.openai(
        400,
        "400 Bad Request: Failed to decode JSON object: Expecting value: line 1 column 1 (char 0)",
    )
    openai_server.enqueue(proxy)
    async with loopback_model(openai_server, max_retries=3) as model:
        with pytest.raises(EndpointError) as raised:
            await model.complete(_after_a_call('{"order_id": "#W2378156"}'))
    assert not isinstance(raised.value, UnparsedModelOutput)
    assert "rejected the request as invalid" in str(raised.value)
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize(
    ("arguments", "malformed"),
    [
        ('{"order_id": "#W1"}', False),
        ("{}", False),
        ('{"order_id": ', True),
        ("[1, 2]", True),  # JSON, but no object: Ollama cannot read it as arguments
        ('"#W1"', True),
        ("[" * 100_000, True),  # deeper than the parser goes
    ],
)
def test_a_malformed_call_is_one_whose_arguments_are_no_json_object(
    arguments: str, malformed: bool
) -> None:
    assert malformed_call_sent(_after_a_call(arguments)) is malformed
    assert malformed_call_sent(HELLO) is False


@pytest.mark.asyncio
async def test_a_plain_500_is_retried_and_stays_an_outage(
    openai_server: LoopbackOpenAIServer,
) -> None:
    openai_server.enqueue(GENERIC_500, GENERIC_500)
    async with loopback_model(openai_server, max_retries=1) as model:
        with pytest.raises(EndpointError) as raised:
            await model.complete(HELLO)
    assert type(raised.value) is EndpointError
    assert raised.value.attempts == 2


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (502, "The model produced output that does not match the expected peg-native format"),
        (400, "1 validation error for CreateChatCompletionRequest: messages: Field required"),
        (500, "error parsing the request body"),
        # llama-server's other exceptions while generating stay its own failures
        (500, '{"error":{"code":500,"message":"got exception: std::bad_alloc"}}'),
        (422, "Input validation error: `inputs` must have less than 4096 tokens"),
    ],
)
def test_other_errors_are_not_parse_failures(status: int, body: str) -> None:
    assert unparsed_output_server(status, body) is None


@pytest.mark.parametrize(
    "message",
    [
        "Failed to call a function. Please adjust your prompt. See 'failed_generation' for "
        "more details.",
        "tool call validation failed: parameters for tool get_order_details did not match "
        "schema: errors: [missing properties: 'order_id']",
        "tool call validation failed: attempted to call tool 'refund_order' which was not in "
        "request.tools",
    ],
)
def test_every_wording_of_groqs_tool_use_failed_is_the_models_output(message: str) -> None:
    error = {"message": message, "type": "invalid_request_error", "code": "tool_use_failed"}
    assert unparsed_output_server(400, json.dumps({"error": error})) == "Groq"


def test_groqs_other_invalid_requests_stay_the_requests() -> None:
    error = {"message": "model `x` does not exist", "type": "invalid_request_error"}
    assert unparsed_output_server(400, json.dumps({"error": error})) is None
    assert unparsed_output_server(404, json.dumps({"error": error})) is None
