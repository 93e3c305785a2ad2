"""Server texts that mean "the model's output could not be parsed": one table, one place.

A server that parses tool calls itself (llama.cpp's ``llama-server``, vLLM, transformers serve,
Ollama, TGI, Groq) answers an error status when the model wrote a call it cannot read. That is
the model's malformed output, exactly as an unreadable tool call we parse ourselves is: the
client raises ``UnparsedModelOutput`` at once (not retried, not counted toward the circuit
breaker), the conversation scores it as the agent's failure (``agent_error``, the server's text
kept in ``endpoint_error.txt``), never as an outage. Any other error status stays what it was (a
plain 500 is retried, then an infra error).

Each form is a status and phrases that must all appear in the body (case-insensitive); the
phrases are the servers' own, as their sources and issue trackers show them:

- llama.cpp: ``The model produced output that does not match the expected <format> format``
  (HTTP 500, recent builds); ``Failed to parse input at pos <n>: <rest of the output>``
  (HTTP 500, earlier builds); ``Failed to parse tool call arguments as JSON`` (HTTP 500: the
  agent's own earlier arguments, not valid JSON, sent back to it in the history);
  ``got exception: Unexpected empty grammar stack after accepting piece: <the model's token>``
  (HTTP 500: the model wrote a token its tool-call grammar cannot accept, e.g. the tag and a
  wrong key in one token; the same seed writes it again, so asking again cannot help).
- vLLM: a 400 ``... validation error for list[...] Invalid JSON ...`` when ``tool_choice`` is
  ``required`` or names a tool and the output is no JSON list of calls (0.32 with the ``hermes``
  parser returns such output as text, HTTP 200); a 500 ``unexpected
  tokens remaining in message header`` from its parser of gpt-oss (harmony) output; a 400
  carrying Python's JSON error (``Expecting value: line 1 column 13 (char 12)``) when the
  agent's own earlier arguments, not valid JSON, come back in the history (releases up to
  about 0.11 parse them, 0.32 takes them; the request body itself is always valid JSON, so
  nothing else in it can fail that way).
- transformers serve (``transformers serve``, 5.25): HTTP 400 ``{"detail": "json parser could
  not parse region as JSON. ..."}`` when the model's ``<tool_call>`` holds no JSON (an empty or
  cut call; its parser reads the tag in every reply, also one to a request without tools); HTTP
  400 carrying Python's JSON error alone, as old vLLM's, for the agent's own invalid arguments in
  the history. A call that is JSON but no object with a ``name`` gets a bare HTTP 500 ``Internal
  Server Error``, which cannot be told from a crash: retried, then an infra error.
- Ollama: HTTP 500 ``error parsing tool call: raw='...', err=...``; HTTP 400 ``invalid tool
  call arguments`` (the agent's earlier arguments in the history, as above).
- TGI (text-generation-inference): HTTP 422 ``Tool error: Failed to parse generated text``.
- Groq (hosted): HTTP 400 with the error code ``tool_use_failed``, whatever its message says
  (``Failed to call a function. ... See 'failed_generation'``, ``tool call validation failed:
  parameters for tool ... did not match schema``, ``attempted to call tool ... which was not in
  request.tools``): the model's call, refused by the server's parser or the tool's schema.
  Behind the LiteLLM proxy (1.108) the code is gone: it answers its own 400 carrying the
  message only (``litellm.BadRequestError: OpenAIException - Failed to call a function. ...``),
  so Groq's messages are forms of their own.

SGLang and vLLM's other tool parsers (``auto`` tool choice) return an unparsed call as the
reply's text with HTTP 200: the agent then answered in text, as it wrote it.

Three forms speak of the agent's earlier arguments sent back in the history, not of the output
just generated (llama.cpp's ``Failed to parse tool call arguments as JSON``, Ollama's ``invalid
tool call arguments``, and Python's JSON error of old vLLM and transformers serve). They are the
model's output only when the request held such a call: one whose arguments are not a JSON
object. The same words in reply to a request whose history holds none cannot be about the
model (a proxy that could not read the request body answers ``Failed to decode JSON object:
Expecting value: line 1 column 1 (char 0)``): the reply is then what its status says, an infra
error of the role. The agent's first request was scored as its malformed output before.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from tau2_retail.models.messages import Message

__all__ = [
    "UNPARSED_OUTPUT_FORMS",
    "UnparsedOutputForm",
    "malformed_call_sent",
    "unparsed_output_server",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class UnparsedOutputForm:
    """One server's way of saying that the model's output could not be parsed."""

    server: str
    status: int
    #: lower-case phrases that must all appear in the error body
    phrases: tuple[str, ...]
    #: the phrases are about the agent's earlier arguments sent back in the history: the form
    #: is the model's output only when the request held a call whose arguments are no object
    history: bool = False


UNPARSED_OUTPUT_FORMS: Final = (
    UnparsedOutputForm(
        server="llama.cpp",
        status=500,
        phrases=("model produced output that does not match the expected",),
    ),
    UnparsedOutputForm(server="llama.cpp", status=500, phrases=("failed to parse input at pos",)),
    UnparsedOutputForm(
        server="llama.cpp",
        status=500,
        phrases=("failed to parse tool call arguments as json",),
        history=True,
    ),
    UnparsedOutputForm(
        server="llama.cpp",
        status=500,
        phrases=("unexpected empty grammar stack after accepting piece",),
    ),
    UnparsedOutputForm(
        server="vLLM", status=400, phrases=("validation error for list[", "invalid json")
    ),
    UnparsedOutputForm(
        server="vLLM", status=500, phrases=("unexpected tokens remaining in message header",)
    ),
    # before the next form: its body holds Python's JSON error too
    UnparsedOutputForm(
        server="transformers serve", status=400, phrases=("could not parse region as json",)
    ),
    UnparsedOutputForm(
        server="vLLM or transformers serve",
        status=400,
        phrases=(": line ", " column ", "(char "),
        history=True,
    ),
    UnparsedOutputForm(server="Ollama", status=500, phrases=("error parsing tool call",)),
    UnparsedOutputForm(
        server="Ollama", status=400, phrases=("invalid tool call arguments",), history=True
    ),
    UnparsedOutputForm(server="TGI", status=422, phrases=("failed to parse generated text",)),
    UnparsedOutputForm(server="Groq", status=400, phrases=("tool_use_failed",)),
    UnparsedOutputForm(
        server="Groq", status=400, phrases=("failed to call a function", "failed_generation")
    ),
    UnparsedOutputForm(server="Groq", status=400, phrases=("tool call validation failed",)),
)


def unparsed_output_server(
    status: int, body: str, *, sent: Sequence[Message] | None = None
) -> str | None:
    """The server whose known form ``status`` and ``body`` are (``llama.cpp``), or None.

    ``sent``: the messages of the request answered so; a form about the history's arguments
    is then the model's only when they hold a malformed call (:func:`malformed_call_sent`).
    None: the text alone decides.
    """
    lowered: str | None = None
    for form in UNPARSED_OUTPUT_FORMS:
        if form.status != status:
            continue
        if lowered is None:
            lowered = body.lower()
        if not all(phrase in lowered for phrase in form.phrases):
            continue
        if form.history and sent is not None and not malformed_call_sent(sent):
            continue
        return form.server
    return None


def malformed_call_sent(messages: Sequence[Message]) -> bool:
    """Whether ``messages`` hold a tool call whose arguments are not a JSON object: the only
    thing of the model's a server can fail to parse in the history."""
    return any(
        not _json_object(call.arguments) for message in messages for call in message.tool_calls
    )


def _json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
        return False
