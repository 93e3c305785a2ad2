"""Text that came from an endpoint: always writable, strict JSON, and safe to print.

- :func:`valid_unicode` / :func:`valid_unicode_json`: each lone UTF-16 surrogate (JSON can
  spell half a pair, ``"\\ud83d"``, e.g. an emoji cut by a token limit) becomes U+FFFD. No UTF-8
  text can hold one: it would break the next request body, the xdist report and every artifact
  it reaches. Applied once where endpoint text enters (the reply, the judge's JSON inside it).
- :func:`finite_or_none`: a number that may go on (NaN and infinities are not JSON: they are
  refused or clamped where they enter; artifacts are written with ``allow_nan=False``).
- :func:`printable`: a line for the terminal, with control characters (ANSI escapes, carriage
  returns, newlines, bidirectional overrides) shown as escapes instead of acting on the
  terminal. Artifacts keep the text as sent; only what is printed is escaped.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

__all__ = [
    "MAX_JSON_DEPTH",
    "finite_or_none",
    "printable",
    "printable_lines",
    "valid_unicode",
    "valid_unicode_json",
]

# json.loads joins a valid surrogate pair into one code point: any surrogate left is lone.
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")
# C0 and C1 controls, DEL, and the bidirectional embeddings, overrides and isolates (a reason
# could otherwise reverse what the terminal shows after it).
_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def valid_unicode(text: str) -> str:
    """``text`` with each lone UTF-16 surrogate replaced by U+FFFD."""
    if text.isascii():  # no surrogate: a scan in C, far quicker than the pattern's
        return text
    return _LONE_SURROGATE.sub("\ufffd", text)


MAX_JSON_DEPTH: Final = 300
"""The deepest nesting of arrays and objects ``valid_unicode_json`` walks. Python's recursion
limit used to draw that line, at a depth that moved with the Python version (about 497 levels
on 3.11, fewer under a deeper stack; 995 on 3.12 and 3.13, whose comprehensions take no frame):
a judge's reply nested 600 deep was no JSON object on 3.11 and was read on 3.13."""


def valid_unicode_json(value: Any) -> Any:
    """A JSON value with each lone surrogate in its strings (keys too) replaced by U+FFFD.

    Raises ``RecursionError`` for a value nested deeper than ``MAX_JSON_DEPTH``, as for one
    deeper than the JSON decoder goes.
    """
    return _valid_unicode_json(value, depth=0)


def _valid_unicode_json(value: Any, *, depth: int) -> Any:
    if isinstance(value, str):
        return valid_unicode(value)
    if not isinstance(value, list | dict):
        return value
    if depth == MAX_JSON_DEPTH:
        raise RecursionError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, list):
        return [_valid_unicode_json(item, depth=depth + 1) for item in value]
    return {
        valid_unicode(key): _valid_unicode_json(item, depth=depth + 1)
        for key, item in value.items()
    }


def finite_or_none(value: float) -> float | None:
    """``value`` when it is a finite number, else None (NaN and infinities never go on)."""
    return value if math.isfinite(value) else None


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """One terminal line: every control character (newlines too) shown as an escape."""
    return _CONTROL.sub(_escape, valid_unicode(text))


def printable_lines(text: str) -> str:
    """Several terminal lines: the newlines kept, every other control character escaped."""
    return "\n".join(printable(line) for line in text.split("\n"))
