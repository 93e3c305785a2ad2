"""Server texts meaning "the model's output could not be parsed": each known form, answered by
the real loopback server, raises ``UnparsedModelOutput`` at once; a plain 500 is retried and
stays an outage."""

from __future__ import annotations

import json

import pytest

from tau2_retail.errors import EndpointError, UnparsedModelOutput
from tau2_retail.models.messages import Message, Role
from tau2_retail.models.unparsed import UNPARSED_OUTPUT_FORMS, unparsed_output_server
from tau2_retail.testing.loopback_model import RecordedSleeps, loopback_model
from tau2_retail.testing.loopback_server import Completion, LoopbackOpenAIServer
from tau2_retail.testing.unparsed_replies import GENERIC_500, UNPARSED_REPLIES

HELLO = (Message(role=Role.USER, content="Where is my order?"),)


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
            await model.complete(HELLO)
        error = raised.value
        assert error.server == form.partition(":")[0]
        assert error.status == reply.status
        assert error.full_body == reply.body  # the server's whole text, for the artifacts
        assert "the server could not parse the model's output" in str(error)
        assert error.attempts == 1
        assert sleeps.calls == []  # not retried
        assert model.breaker.consecutive_failures == 0  # it answered: it is up
    assert len(openai_server.requests) == 1


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
