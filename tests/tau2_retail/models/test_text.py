"""Endpoint text made writable, strict and printable (issue 21, items 3 and 5)."""

from __future__ import annotations

import json
import math

import pytest

from tau2_retail.models.text import (
    MAX_JSON_DEPTH,
    finite_or_none,
    printable,
    printable_lines,
    valid_unicode,
    valid_unicode_json,
)


def test_lone_surrogates_become_replacement_characters_and_pairs_stay() -> None:
    assert valid_unicode("a\ud83db\udc00") == "a\ufffdb\ufffd"
    assert valid_unicode("\U0001f600") == "\U0001f600"
    value = valid_unicode_json({"k\ud83d": ["x\udc00", 1, None, {"n": "\ud83d"}]})
    assert value == {"k\ufffd": ["x\ufffd", 1, None, {"n": "\ufffd"}]}
    json.dumps(value, ensure_ascii=False).encode("utf-8")  # writable


def _nested(depth: int) -> object:
    value: object = "\ud83d"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def test_the_walk_goes_as_deep_as_its_limit_under_every_python() -> None:
    """Python's recursion limit drew the line before: 497 levels on 3.11, 995 on 3.13."""
    assert valid_unicode_json(_nested(MAX_JSON_DEPTH)) == json.loads(
        json.dumps(_nested(MAX_JSON_DEPTH)).replace("\\ud83d", "\\ufffd")
    )
    with pytest.raises(RecursionError, match=f"deeper than {MAX_JSON_DEPTH} levels"):
        valid_unicode_json(_nested(MAX_JSON_DEPTH + 1))


def test_finite_or_none() -> None:
    assert finite_or_none(1.5) == 1.5
    assert finite_or_none(math.nan) is None
    assert finite_or_none(-math.inf) is None


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        ("one\ntwo\r\tthree", "one\\ntwo\\r\\tthree"),
        ("bell\x07 del\x7f c1\x9b", "bell\\x07 del\\x7f c1\\x9b"),
        ("\u202eesrever \u2066iso\u2069", "\\u202eesrever \\u2066iso\\u2069"),
        ("caf\u00e9 \U0001f600 \ud83d", "caf\u00e9 \U0001f600 \ufffd"),
    ],
)
def test_printable_escapes_what_would_act_on_a_terminal(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_printable_lines_keeps_the_line_structure() -> None:
    assert printable_lines("reason\n\x1b[2Jfailure") == "reason\n\\x1b[2Jfailure"
