"""Huge texts are cut in the artifacts beside the transcript; normal ones are untouched."""

from __future__ import annotations

from tau2_retail.results.long_text import LONG_TEXT_CHARS, cut_long_text, cut_long_texts


def test_a_text_up_to_the_limit_is_unchanged_and_a_longer_one_is_cut_with_a_marker():
    assert cut_long_text("x" * LONG_TEXT_CHARS) == "x" * LONG_TEXT_CHARS
    cut = cut_long_text("é" * 5_242_880)
    assert cut == "é" * LONG_TEXT_CHARS + (
        "…[truncated: 5242880 characters, full text in transcript.json]"
    )


def test_every_string_of_a_json_value_is_cut_and_nothing_else_changes():
    huge = "y" * (LONG_TEXT_CHARS + 1)
    value = {"turns": [{"text": huge, "n": 3, "ok": None}], "id": "tau2_retail__1"}
    assert cut_long_texts(value) == {
        "turns": [{"text": cut_long_text(huge), "n": 3, "ok": None}],
        "id": "tau2_retail__1",
    }
    assert cut_long_texts({"a": ["b", 1.5, True]}) == {"a": ["b", 1.5, True]}
