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


def valid_unicode_json(value: Any) -> Any:
    """A JSON value with each lone surrogate in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return valid_unicode(value)
    if isinstance(value, list):
        return [valid_unicode_json(item) for item in value]
    if isinstance(value, dict):
        return {valid_unicode(key): valid_unicode_json(item) for key, item in value.items()}
    return value


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
