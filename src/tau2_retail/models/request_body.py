"""The JSON body of a chat-completion request, encoded once per message instead of per request.

A conversation's history grows by a message or two per turn, and every request carries all of
it: re-encoding the whole list each time (``to_openai`` per message, then ``json.dumps`` of up
to 50 KB) was about a tenth of the harness's CPU per completion with hundreds of conversations
in flight. :class:`BodyEncoder` keeps each message's JSON text (by value: the customer
simulator's view builds fresh but equal messages each turn) and each tool tuple's (by identity:
a profile's tools are one tuple), and joins them.

The bytes are exactly those the ``openai`` client's ``chat.completions.create`` sends for the
same arguments (the history and the tools in ``extra_body``, as this package sent them
before): ``json.dumps`` with ``ensure_ascii=False``, ``separators=(",", ":")``,
``allow_nan=False``; the keys in the SDK's order (``model``, ``messages``, ``max_tokens``,
``seed``, ``temperature``, ``top_p``), then the extra body's (``tools``, ``tool_choice``, then
the configured extra body, whose keys override). JSON's encoding of an object is the
concatenation of its members' encodings, so joining cached parts gives the same bytes
(``tests/tau2_retail/models/test_request_body.py`` pins them against the SDK).

Memory stays bounded: the messages' encodings live in two generations of at most
:data:`GENERATION_BYTES` bytes each; a text used again is moved to the current one, and
when that is full the older is dropped (a conversation's messages are used again at its next
turn, so those of finished conversations go).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tau2_retail.models.config import EndpointConfig
from tau2_retail.models.messages import Message
from tau2_retail.models.wire import encode_messages

__all__ = ["GENERATION_BYTES", "BodyEncoder", "PreparedRequest", "dumps", "request_head"]

GENERATION_BYTES: Final = 32 * 1024 * 1024
"""Bytes of message JSON per generation (two are kept): 32 MiB covers the live histories of
912 conversations in flight (``--tau2-trials 8``). Measured against the benchmark's scripted
server: with 16 MiB the cache missed 6.2 messages per request at 912 in flight (1.75 at 114),
re-encoding live messages; with 32 MiB 1.6, as at 114, at the same peak RSS (298 MB)."""

_MAX_TOOL_LISTS: Final = 256
# Placeholders for the two values encoded from the caches (never sent: replaced while joining).
_MESSAGES: Final = object()
_TOOLS: Final = object()


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedRequest:
    """One request as ``OpenAIChatModel.prepare`` made it: its arguments and its body bytes."""

    messages: Sequence[Message]
    tools: Sequence[Mapping[str, Any]] | None
    seed: int | None
    content: bytes


def request_head(config: EndpointConfig, seed: int | None) -> dict[str, Any]:
    """Model and sampling parameters, in the order the SDK's ``create`` sends them (``seed``
    None: the configured one)."""
    seed = config.seed if seed is None else seed
    head: dict[str, Any] = {"model": config.model}
    optional = {
        "max_tokens": config.max_tokens,
        "seed": seed,
        "temperature": config.temperature,
        "top_p": config.top_p,
    }
    head.update((key, value) for key, value in optional.items() if value is not None)
    return head


_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps(value: Any) -> str:
    """JSON as the ``openai`` client encodes a request body (before UTF-8): what
    ``json.dumps`` with these options gives, through one encoder (``json.dumps`` makes a new
    one per call for any option but the defaults)."""
    return _ENCODER.encode(value)


@functools.lru_cache(maxsize=256)
def _member_name(key: str) -> bytes:
    """A body member's name and colon, encoded once per name."""
    return dumps(key).encode() + b":"


class BodyEncoder:
    """Encodes request bodies, remembering each message's and each tool list's JSON text."""

    def __init__(self, *, generation_bytes: int = GENERATION_BYTES) -> None:
        self._limit = generation_bytes
        self._current: dict[Message, bytes] = {}
        self._previous: dict[Message, bytes] = {}
        # the current generation's messages by identity (a history's messages are the same
        # objects at its next turn: no hashing of their fields), each kept alive by its entry
        self._by_id: dict[int, tuple[Message, bytes]] = {}
        self._current_bytes = 0
        # id -> (the list itself, kept so that its id is not reused while cached; its JSON)
        self._tools: dict[int, tuple[object, bytes]] = {}

    def body(
        self,
        *,
        head: Mapping[str, Any],
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        extra: Mapping[str, Any],
    ) -> bytes:
        """The body: ``head`` (model and sampling parameters, in the SDK's order), the
        messages, the tools (with ``tool_choice: auto``) and ``extra``, whose keys override."""
        merged: dict[str, Any] = {"model": head["model"], "messages": _MESSAGES}
        merged.update((key, value) for key, value in head.items() if key != "model")
        if tools:
            merged["tools"] = _TOOLS
            merged["tool_choice"] = "auto"
        merged.update(extra)
        # one join over the cached parts: each message's bytes are copied once
        out: list[bytes] = []
        for key, value in merged.items():
            out.append(b"," if out else b"{")
            out.append(_member_name(key))
            if value is _MESSAGES:
                self._append_messages(out, messages)
            elif value is _TOOLS:
                assert tools is not None
                out.append(self.tools_json(tools))
            else:
                out.append(dumps(value).encode())
        out.append(b"}")
        return b"".join(out)

    def messages_json(self, messages: Sequence[Message]) -> bytes:
        """The JSON array of the messages' wire forms (UTF-8)."""
        out: list[bytes] = []
        self._append_messages(out, messages)
        return b"".join(out)

    def _append_messages(self, out: list[bytes], messages: Sequence[Message]) -> None:
        out.append(b"[")
        for index, message in enumerate(messages):
            if index:
                out.append(b",")
            out.append(self._message_json(message))
        out.append(b"]")

    def tools_json(self, tools: Sequence[Mapping[str, Any]]) -> bytes:
        """The JSON array of the tool schemas: encoded once per tuple (a profile's tools are
        one tuple, never changed), every time for a list (its caller may change it)."""
        cached = self._tools.get(id(tools))
        if cached is not None and cached[0] is tools:
            return cached[1]
        text = dumps([dict(tool) for tool in tools]).encode()
        if not isinstance(tools, tuple):
            return text
        if len(self._tools) >= _MAX_TOOL_LISTS:
            self._tools.clear()
        self._tools[id(tools)] = (tools, text)
        return text

    def _message_json(self, message: Message) -> bytes:
        known = self._by_id.get(id(message))
        if known is not None and known[0] is message:
            return known[1]
        text = self._current.get(message)
        if text is None:
            text = self._previous.pop(message, None)
            if text is None:
                text = dumps(encode_messages((message,))[0]).encode()
            if self._current_bytes + len(text) > self._limit:
                self._previous = self._current
                self._current = {}
                self._by_id = {}
                self._current_bytes = 0
            self._current[message] = text
            self._current_bytes += len(text)
        self._by_id[id(message)] = (message, text)
        return text
