"""One full copy of a huge text per scenario: ``transcript.json`` keeps it, the others cut it.

A reply can be large and still allowed (up to ``--tau2-max-reply-bytes``, 8 MiB by default).
Stored whole in every artifact that shows it (``transcript.json``, ``metrics.json``,
``conversation_log.txt``, ``all_metrics.json``, ``report.html``), a 5 MB reply cost 26 MB on
disk for one scenario. The transcript stays the one full copy; the other artifacts keep the
first :data:`LONG_TEXT_CHARS` characters of any longer text and a marker saying where the rest
is. Texts of normal size are written byte for byte as before. What a model sees (the history,
the judge's prompt) is not touched: only what is written beside the transcript.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["LONG_TEXT_CHARS", "cut_long_text", "cut_long_texts"]

LONG_TEXT_CHARS: Final = 64 * 1024
"""Texts longer than this are cut in the artifacts other than the transcript (a completion of
a few thousand tokens is about 10,000 characters)."""


def cut_long_text(text: str) -> str:
    """``text`` unchanged up to :data:`LONG_TEXT_CHARS`, else its start and a marker."""
    if len(text) <= LONG_TEXT_CHARS:
        return text
    return (
        f"{text[:LONG_TEXT_CHARS]}…[truncated: {len(text)} characters, "
        "full text in transcript.json]"
    )


def cut_long_texts(value: Any) -> Any:
    """A JSON value with every string in it passed through :func:`cut_long_text`."""
    if isinstance(value, str):
        return cut_long_text(value)
    if isinstance(value, dict):
        return {key: cut_long_texts(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [cut_long_texts(item) for item in value]
    return value
