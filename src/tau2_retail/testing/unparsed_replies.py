"""Error replies of real servers saying the model's output could not be parsed, one per known
form of ``tau2_retail.models.unparsed`` (same order), in each server's own error format.

The loopback server answers with them in the tests: the client must recognise each, and a
run must score each as the agent's malformed output. Behind the LiteLLM proxy a server's
error arrives rewrapped: those replies are the proxy's bodies as it sent them. llama.cpp's
are as its ``llama-server`` sends them (compact JSON); the grammar's and the history's
byte for byte as a build of commit 0c1e570 (October 2026) answered a tiny model that wrote
them through its tool-call template.
``GENERIC_500`` is a server error that says nothing of the sort (it stays an infra error).
"""

from __future__ import annotations

import json
from typing import Final

from tau2_retail.testing.loopback_server import HttpError

__all__ = ["GENERIC_500", "UNPARSED_REPLIES"]


def _openai_style(status: int, message: str, error_type: str) -> HttpError:
    error = {"message": message, "type": error_type, "param": None, "code": status}
    return HttpError(status=status, body=json.dumps({"error": error}))


def _litellm(message: str, model_group: str) -> HttpError:
    """The 400 the LiteLLM proxy (1.108.7, an ``openai/`` model of its model_list) answers for
    a server's 400: its own body, the server's message inside, the error code gone."""
    error = {
        "message": f"litellm.BadRequestError: OpenAIException - {message}\n\nLiteLLM: model "
        f"group '{model_group}' failed with the error above. No fallback was attempted.",
        "type": "invalid_request_error",
        "param": None,
        "code": "400",
    }
    return HttpError(status=400, body=json.dumps({"error": error}, separators=(",", ":")))


def _llamacpp(message: str) -> HttpError:
    """llama-server's 500 (``format_error_response``, written without spaces)."""
    error = {"code": 500, "message": message, "type": "server_error"}
    return HttpError(status=500, body=json.dumps({"error": error}, separators=(",", ":")))


UNPARSED_REPLIES: Final[dict[str, HttpError]] = {
    "llama.cpp: output not in the expected format": _llamacpp(
        "The model produced output that does not match the expected peg-native format"
    ),
    "llama.cpp: input not parsed at a position": _llamacpp(
        'Failed to parse input at pos 37: <tool_call>{"name": "get_order_details", "argu'
    ),
    "llama.cpp: tool-call arguments in the history": HttpError(
        status=500,
        body=r'{"error":{"code":500,"message":"Failed to parse tool call arguments as JSON: '
        r"[json.exception.parse_error.101] parse error at line 1, column 2: syntax error while "
        r'parsing object key - unexpected end of input; expected string literal","type":'
        r'"server_error"}}',
    ),
    "llama.cpp: a token the tool-call grammar cannot accept": HttpError(
        status=500,
        body=r'{"error":{"code":500,"message":"got exception: Unexpected empty grammar stack '
        r'after accepting piece: <tool_call>\n{\"no (3307)","type":"server_error"}}',
    ),
    "vLLM: required tool call not a JSON list": _openai_style(
        400,
        "1 validation error for list[function-wrap[__log_extra_fields__()]]\n  Invalid JSON: "
        "EOF while parsing a list at line 1 column 9 [type=json_invalid, input_value='[{\"name\"'"
        ", input_type=str]",
        "BadRequestError",
    ),
    "vLLM: gpt-oss header": _openai_style(
        500,
        'unexpected tokens remaining in message header: Some("to=functions.get_order")',
        "InternalServerError",
    ),
    # transformers serve (5.25) with a Qwen2 model, byte for byte: its <tool_call> holds no JSON
    "transformers serve: tool call not JSON": HttpError(
        status=400,
        body=r"""{"detail":"json parser could not parse region as JSON.\nContent: '<|im_end|>'\n"""
        r"""Error: Expecting value: line 1 column 1 (char 0)"}""",
    ),
    # transformers serve answers the same with {"detail": ...} (see tests/plugins)
    "vLLM or transformers serve: tool-call arguments in the history": HttpError(
        status=400,
        body=json.dumps(
            {
                "object": "error",
                "message": "Expecting value: line 1 column 13 (char 12)",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        ),
    ),
    "Ollama: tool call not parsed": HttpError(
        status=500,
        body=json.dumps(
            {
                "error": {
                    "message": 'error parsing tool call: raw=\'{"order_id": "#W1\', '
                    "err=unexpected end of JSON input",
                    "type": "api_error",
                    "param": None,
                    "code": None,
                }
            }
        ),
    ),
    "Ollama: tool-call arguments in the history": _openai_style(
        400, "invalid tool call arguments", "invalid_request_error"
    ),
    "TGI: generated text not parsed": HttpError(
        status=422,
        body=json.dumps(
            {
                "error": "Tool error: Failed to parse generated text: expected value at line 1 "
                'column 1 "I will look up the order"',
                "error_type": "tool_error",
            }
        ),
    ),
    "Groq: function call failed": HttpError(
        status=400,
        body=json.dumps(
            {
                "error": {
                    "message": "Failed to call a function. Please adjust your prompt. See "
                    "'failed_generation' for more details.",
                    "type": "invalid_request_error",
                    "code": "tool_use_failed",
                    "failed_generation": '<function=get_order_details>{"order_id": "#W1"',
                }
            }
        ),
    ),
    "Groq: function call failed, behind the LiteLLM proxy": _litellm(
        "Failed to call a function. Please adjust your prompt. See 'failed_generation' for more "
        "details.",
        "llama-3.3-70b",
    ),
    "Groq: tool call validation failed, behind the LiteLLM proxy": _litellm(
        "tool call validation failed: attempted to call tool 'refund_order' which was not in "
        "request.tools",
        "llama-3.3-70b",
    ),
}

GENERIC_500: Final = HttpError.server_error()
