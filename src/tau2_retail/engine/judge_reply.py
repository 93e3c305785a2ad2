"""The judge's reply read into verdicts (spec: conversation_and_scoring.md §5).

Normalization rules, beyond the spec's wording, decided here:

- A reasoning block that opens the reply (``<think>...</think>``, as a reasoning model served
  without a reasoning parser sends it) is not the answer: the reply is read after its closing
  tag (a draft object in the thinking decided the verdicts before). An unclosed one is read as
  it is.
- The reply is read as strict JSON, else from the first fenced block tagged ``json`` or untagged,
  else from the first ``{`` at which a JSON object can be decoded; each stage accepts only a JSON
  object (a bare list or number falls through to the next stage). The last stage tries at most
  ``MAX_OBJECT_ATTEMPTS`` places where an object can start (``{`` then ``"`` or ``}``), so the
  work is linear in the reply, which is not read at all beyond ``MAX_REPLY_CHARS``. Nesting too
  deep for the decoder counts as "not JSON" at that stage.
- ``index`` must be a JSON integer: a string such as ``"2"`` or a float such as ``2.0`` is treated
  like an out-of-range index and dropped (the assertion then gets the missing-verdict reason
  unless another verdict names it properly).
- A verdict that is not an object is dropped; a ``nl_assertion_verdicts`` that is not a list means
  no verdicts at all.
- An object that gives no valid verdict for any assertion (no ``nl_assertion_verdicts`` list, an
  empty one, or only verdicts dropped above: ``{"score": 1.0, "reason": "All met."}``) did not
  answer what it was asked: unreadable, as prose is (``judge_scenario`` asks again once, then
  it is the judge's failure). It failed every assertion before: the agent was scored for the
  judge's format. An object that answers some assertions is the judge's answer: the spec's
  missing index fails.
- A verdict's ``reason`` is kept when it is a string, rendered as JSON when it is another value,
  and ``NO_REASON`` when it is missing or null. The overall ``reason`` is kept when it is a
  string, else empty.
- ``score`` must be a finite JSON number (a boolean is not one); it is clamped to [0, 1], and
  anything else counts as 0.0. An integer too large for a float (``1`` followed by 400 zeros)
  is clamped like any other: it ended the scenario with an ``OverflowError`` before.
- JSON with an integer of more than 4,300 digits (Python's limit for reading one) is unreadable
  where it stands: no object nested in it is read in its place (a verdict read as the whole
  judgement failed every assertion the judge had passed).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any, Final, TypeGuard

from tau2_retail.engine.judge_result import Verdict
from tau2_retail.models.text import valid_unicode_json

__all__ = [
    "MAX_OBJECT_ATTEMPTS",
    "MAX_REPLY_CHARS",
    "MISSING_VERDICT_REASON",
    "NO_REASON",
    "UnreadableJudgement",
    "normalize_judgement",
]

MISSING_VERDICT_REASON: Final = "Missing verdict; treated as failed."
"""The reason of an assertion the judge gave no (valid) verdict for."""

NO_REASON: Final = "No reason given."
"""The reason of a verdict whose ``reason`` is missing or null."""

MAX_REPLY_CHARS: Final = 100_000
"""A judge reply longer than this is not parsed (a judged failure): a real one is a few KB."""

MAX_OBJECT_ATTEMPTS: Final = 16
"""Places in a prose reply where a JSON object could start that are tried before giving up."""

_FENCE: Final = re.compile(r"```")
_FENCE_TAG: Final = re.compile(r"[A-Za-z0-9_+.-]*")
# Where a JSON object can start: "{" then a key's quote or the closing brace.
_OBJECT_START: Final = re.compile(r'\{\s*["}]')
_JSON_FENCE_TAGS: Final = frozenset({"", "json"})
_THINK_OPEN: Final = "<think>"
_THINK_CLOSE: Final = "</think>"


class UnreadableJudgement(ValueError):
    """The judge's reply holds no JSON object (``judge_scenario`` asks again, once)."""


def normalize_judgement(
    text: str, assertions: Sequence[str]
) -> tuple[float, str, tuple[Verdict, ...]]:
    """``(score, reason, verdicts)`` from the judge's reply, per spec §5 and the module docstring.

    The verdicts are exactly one per assertion, in order, indexed 1..n. Raises
    ``UnreadableJudgement`` (a ``ValueError``) when the reply holds no JSON object at all, or
    one that gives no valid verdict for any assertion.
    """
    data = _judgement_object(text)
    raw_verdicts = data.get("nl_assertion_verdicts")
    by_index: dict[int, dict[str, Any]] = {}
    if isinstance(raw_verdicts, list):
        for raw in raw_verdicts:
            if not isinstance(raw, dict):
                continue
            index = raw.get("index")
            if _is_int(index) and 1 <= index <= len(assertions):
                by_index[index] = raw  # a repeated index keeps the last
    if assertions and not by_index:
        raise UnreadableJudgement(
            f"no verdict for any of the {len(assertions)} assertion(s) in the reply: "
            f"{_excerpt(text)}"
        )
    verdicts = tuple(
        _verdict(n, assertion, by_index.get(n)) for n, assertion in enumerate(assertions, start=1)
    )
    reason = data.get("reason")
    return _score(data.get("score")), reason if isinstance(reason, str) else "", verdicts


def _verdict(index: int, assertion: str, raw: dict[str, Any] | None) -> Verdict:
    if raw is None:
        return Verdict(
            index=index, assertion=assertion, passed=False, reason=MISSING_VERDICT_REASON
        )
    reason = raw.get("reason")
    if reason is None:
        reason = NO_REASON
    elif not isinstance(reason, str):
        reason = json.dumps(reason, ensure_ascii=False)
    # Only JSON true passes: "true", 1 or "yes" are not a verdict the judge committed to.
    return Verdict(
        index=index, assertion=assertion, passed=raw.get("passed") is True, reason=reason
    )


def _score(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    if isinstance(value, int):
        return float(min(max(value, 0), 1))  # float() of a 400-digit integer overflows
    if not math.isfinite(value):
        return 0.0
    return min(max(value, 0.0), 1.0)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _judgement_object(text: str) -> dict[str, Any]:
    """The JSON object of the reply: strict JSON, else the first JSON fence, else the first one."""
    if not text.strip():
        raise UnreadableJudgement("the reply is empty")
    if len(text) > MAX_REPLY_CHARS:
        raise UnreadableJudgement(
            f"the reply has {len(text):,} characters, more than the {MAX_REPLY_CHARS:,} read"
        )
    text = _after_reasoning(text)
    if not text.strip():
        raise UnreadableJudgement("the reply holds only a reasoning block")
    data = _json_object(text)
    if data is not None:
        return data
    fenced = _first_json_fence(text)
    if fenced is not None:
        data = _json_object(fenced)
        if data is not None:
            return data
    found = _first_object(text)
    if found is None:
        raise UnreadableJudgement(f"no JSON object in the reply: {_excerpt(text)}")
    return found


def _after_reasoning(text: str) -> str:
    """``text`` after the reasoning block that opens it (``<think>...</think>``), if any."""
    if not text.lstrip().startswith(_THINK_OPEN):
        return text
    _, closed, answer = text.partition(_THINK_CLOSE)
    return answer if closed else text


def _first_json_fence(text: str) -> str | None:
    """The body of the first fenced block tagged ``json`` or untagged; fences pair in order."""
    marks = [match.end() for match in _FENCE.finditer(text)]
    for opening, closing in zip(marks[::2], marks[1::2], strict=False):
        tag_match = _FENCE_TAG.match(text, opening)
        assert tag_match is not None  # the pattern matches the empty string
        if tag_match.group().lower() in _JSON_FENCE_TAGS:
            return text[tag_match.end() : closing - 3]
    return None


def _json_object(text: str) -> dict[str, Any] | None:
    """``text`` as a JSON object, or None (not JSON, nested too deeply, or not an object).

    Raises ``UnreadableJudgement`` for JSON with an integer this reader refuses.
    """
    try:
        # NaN and Infinity are accepted here: a non-finite score is clamped (spec §5)
        data = valid_unicode_json(json.loads(text))
    except (json.JSONDecodeError, RecursionError):
        return None
    except ValueError as error:
        raise _refused(error, text) from None
    return data if isinstance(data, dict) else None


def _refused(error: ValueError, text: str) -> UnreadableJudgement:
    """The reply holds JSON that this reader refuses: an integer of more than 4,300 digits
    (``json`` raises a plain ``ValueError`` for it, not a ``JSONDecodeError``)."""
    return UnreadableJudgement(f"JSON that cannot be read ({error}): {_excerpt(text)}")


def _first_object(text: str) -> dict[str, Any] | None:
    """The JSON object decoded at the first candidate ``{`` where one decodes.

    A candidate is a ``{`` followed by a key's opening quote or by ``}`` (any other ``{``
    cannot start an object). At most ``MAX_OBJECT_ATTEMPTS`` candidates are tried, so a
    reply of 100,000 braces costs as much as a short one (each failed attempt costs the C
    decoder a scan proportional to the reply, never more).
    """
    decoder = json.JSONDecoder()
    for attempt, match in enumerate(_OBJECT_START.finditer(text)):
        if attempt == MAX_OBJECT_ATTEMPTS:
            return None
        try:
            data, _ = decoder.raw_decode(text, match.start())
            if isinstance(data, dict):
                # nesting deep enough for the decoder can still be too deep for this walk
                return valid_unicode_json(data)  # type: ignore[no-any-return]
        except (json.JSONDecodeError, RecursionError):
            continue
        except ValueError as error:
            raise _refused(error, text) from None
    return None


def _excerpt(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
