"""The one entry point for tool calls: ``(store, name, arguments) -> ToolResult``.

It never raises for anything a model can send: unknown tools, arguments that are not JSON,
missing, unexpected or mistyped arguments and every refusal of a tool become an ``Error: ...``
result. Our own bugs are not caught: they raise, so they cannot silently lower scores.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from tau2_retail.tools.normalize import normalize_order_id, normalize_user_id
from tau2_retail.tools.registry import TOOLS, ParamKind, ToolSpec
from tau2_retail.tools.store import Store
from tau2_retail.tools.tool_error import ToolError

__all__ = [
    "MAX_ARGUMENT_CHARS",
    "MAX_ARGUMENT_DEPTH",
    "MAX_LIST_ITEMS",
    "Action",
    "ToolResult",
    "dispatch",
    "dispatch_json",
    "parse_arguments",
]

_NORMALIZERS = {"order_id": normalize_order_id, "user_id": normalize_user_id}

MAX_ARGUMENT_CHARS = 20_000
"""A string argument longer than this is refused before any tool reads it (the longest value
in the data is a few hundred characters; a megabyte-long email would cost seconds of CPU)."""

MAX_LIST_ITEMS = 1_000
"""An array argument with more items than this is refused (an order holds a handful)."""

MAX_ARGUMENT_DEPTH = 300
"""Arguments nested deeper than this (arrays and objects) are refused as ``JSON nested too
deeply``, at the same depth under every Python. The JSON decoder's own limit moved with the
version: about 990 levels on 3.11 (fewer under a deeper stack), 1,498 on 3.12, 9,999 on 3.13,
so arguments nested 1,000 deep were refused on 3.11 and read on 3.12 and 3.13."""
_TOO_DEEP = "JSON nested too deeply"
# a JSON string (its closing quote may be missing: the text was cut short), or a bracket
_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# json.loads joins a valid surrogate pair into one code point: any surrogate left is lone.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# Python 3.13's json names a trailing comma at the comma ("Illegal trailing comma before end of
# object: line 1 column 8 (char 7)"); 3.11 and 3.12 say what they expected at the closing
# bracket. The agent reads this text, so it must not depend on the Python that runs the
# benchmark: the earlier text, which every run so far gave, is kept.
_TRAILING_COMMA_TEXTS = {
    "Illegal trailing comma before end of object": (
        "Expecting property name enclosed in double quotes"
    ),
    "Illegal trailing comma before end of array": "Expecting value",
}
_JSON_TYPE_NAMES = {
    dict: "object",
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Action:
    """A successful write (or transfer): upstream name and normalized arguments."""

    name: str
    arguments: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """What the agent sees (``content``), whether it is an error, and the recorded action."""

    content: str
    error: bool
    action: Action | None = None

    def to_json(self) -> dict[str, Any]:
        return {"content": self.content, "error": self.error}


def _error(message: str) -> ToolResult:
    return ToolResult(content=f"Error: {message}", error=True)


def _type_name(value: Any) -> str:
    return _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


def _validated(
    spec: ToolSpec, arguments: Mapping[str, Any], *, normalize_ids: bool
) -> dict[str, Any] | str:
    """Keyword arguments (ids normalized when asked), or the text of what is wrong with them."""
    expected = dict(spec.params)
    for name in arguments:
        if name not in expected:
            return f"{spec.name} got an unexpected argument '{name}'"
    values: dict[str, Any] = {}
    for name, kind in spec.params:
        if name not in arguments:
            return f"{spec.name} is missing the required argument '{name}'"
        value = arguments[name]
        if kind is ParamKind.STRING:
            if not isinstance(value, str):
                return f"{spec.name} argument '{name}' must be a string, not {_type_name(value)}"
            if len(value) > MAX_ARGUMENT_CHARS:
                return (
                    f"{spec.name} argument '{name}' is too long "
                    f"(at most {MAX_ARGUMENT_CHARS} characters)"
                )
            normalize = _NORMALIZERS.get(name) if normalize_ids else None
            values[name] = normalize(value) if normalize else value
        else:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                return f"{spec.name} argument '{name}' must be an array of strings"
            if len(value) > MAX_LIST_ITEMS or any(len(v) > MAX_ARGUMENT_CHARS for v in value):
                return (
                    f"{spec.name} argument '{name}' is too long (at most {MAX_LIST_ITEMS} "
                    f"items of at most {MAX_ARGUMENT_CHARS} characters)"
                )
            values[name] = list(value)
    return values


def dispatch(
    store: Store,
    name: str,
    arguments: Any,
    *,
    normalize_ids: bool = True,
    available: Collection[str] | None = None,
) -> ToolResult:
    """Run one tool call against ``store``.

    ``normalize_ids`` off: identifiers are looked up exactly as given (upstream's behaviour,
    the tau2 profile). ``available``: the tool names the agent was given (None: all); another
    name is answered like an unknown tool.
    """
    spec = TOOLS.get(name) if available is None or name in available else None
    if spec is None:
        return _error(f"Tool '{name}' not found.")
    if not isinstance(arguments, Mapping):
        return _error(f"{spec.name} arguments must be a JSON object, not {_type_name(arguments)}")
    values = _validated(spec, arguments, normalize_ids=normalize_ids)
    if isinstance(values, str):
        return _error(values)
    recorded = {
        key: list(value) if isinstance(value, list) else value for key, value in values.items()
    }
    try:
        content = spec.run(store, **values)
    except ToolError as refusal:
        return _error(str(refusal))
    action = Action(name=spec.name, arguments=recorded) if spec.records_action else None
    return ToolResult(content=content, error=False, action=action)


def _valid_unicode(value: Any) -> Any:
    """``value`` with each lone UTF-16 surrogate in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_valid_unicode(item) for item in value]
    if isinstance(value, dict):
        return {_valid_unicode(key): _valid_unicode(item) for key, item in value.items()}
    return value


def _json_error_text(error: json.JSONDecodeError) -> json.JSONDecodeError:
    """``error`` as Python 3.11 and 3.12 word it (3.13 words a trailing comma its own way)."""
    expected = _TRAILING_COMMA_TEXTS.get(error.msg)
    if expected is None:
        return error
    rest = error.doc[error.pos + 1 :]
    closing = error.pos + 1 + len(rest) - len(rest.lstrip(" \t\n\r"))  # JSON's whitespace
    return json.JSONDecodeError(expected, error.doc, closing)


def _first_too_deep(text: str) -> int | None:
    """Where the first array or object deeper than ``MAX_ARGUMENT_DEPTH`` opens (brackets in
    strings do not count), or None: where a decoder with that limit would give up."""
    if text.count("[") + text.count("{") <= MAX_ARGUMENT_DEPTH:
        return None
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        token = match.group()
        if token == "[" or token == "{":
            depth += 1
            if depth > MAX_ARGUMENT_DEPTH:
                return match.start()
        elif token == "]" or token == "}":
            depth -= 1
    return None


def parse_arguments(text: str) -> Any:
    """Tool-call arguments from their JSON text; an empty string means ``{}``.

    Half of a surrogate pair spelled as an escape (``"\\ud83d"``) becomes U+FFFD: no UTF-8 text
    can hold it, so echoed in a result or stored in a record it would break the next request
    and every artifact. Raises ``ValueError`` for text that is not JSON
    (``json.JSONDecodeError``, worded as on Python 3.11 whatever the Python), nests deeper than
    ``MAX_ARGUMENT_DEPTH``, or holds an integer too long to convert.
    """
    if not text.strip():
        return {}
    too_deep = _first_too_deep(text)
    try:
        value = json.loads(text)
        if too_deep is None and _SURROGATE_ESCAPE.search(text):
            value = _valid_unicode(value)
    except json.JSONDecodeError as error:
        if too_deep is not None and too_deep < error.pos:
            raise ValueError(_TOO_DEEP) from None  # the limit comes first, as it reads
        raise _json_error_text(error) from None
    except RecursionError as error:
        raise ValueError(_TOO_DEEP) from error
    if too_deep is not None:
        raise ValueError(_TOO_DEEP)
    return value


def dispatch_json(
    store: Store,
    name: str,
    arguments_text: str,
    *,
    normalize_ids: bool = True,
    available: Collection[str] | None = None,
) -> ToolResult:
    """Like ``dispatch`` for arguments as the model sent them (JSON text)."""
    try:
        arguments = parse_arguments(arguments_text)
    except ValueError as error:
        return _error(f"Invalid JSON in the arguments of {name}: {error}")
    return dispatch(store, name, arguments, normalize_ids=normalize_ids, available=available)
