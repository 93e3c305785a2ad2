"""Signals of one scenario (spec: conversation_and_scoring.md §4).

DB_STATE_MATCH, CLEAN_EXIT and NL_ASSERTION gate success; ACTION_MATCH is computed and
reported as excluded; the judge's score is informational. ``tau2_reward`` follows upstream's
rules so results stay comparable with published tau2 numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tau2_retail.engine.ending import StopReason
from tau2_retail.tools.dispatch import Action
from tau2_retail.tools.record_shapes import Record, order_view
from tau2_retail.tools.store import Store

__all__ = [
    "Signal",
    "SignalState",
    "action_match",
    "db_difference",
    "describe_db_difference",
    "success",
    "tau2_reward",
]

NUMBER_TOLERANCE = 1e-6


class Signal(StrEnum):
    DB_STATE_MATCH = "DB_STATE_MATCH"
    CLEAN_EXIT = "CLEAN_EXIT"
    NL_ASSERTION = "NL_ASSERTION"
    ACTION_MATCH = "ACTION_MATCH"


class SignalState(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    NOT_APPLICABLE = "not_applicable"
    EXCLUDED = "excluded"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=0, abs_tol=NUMBER_TOLERANCE)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def action_match(reference: Sequence[Action], recorded: Sequence[Action]) -> bool:
    """Each reference action is matched by a distinct recorded one (order-free, extras allowed).

    Same name and same arguments, numbers within a small tolerance.
    """
    unused = list(recorded)
    for wanted in reference:
        for index, candidate in enumerate(unused):
            if candidate.name == wanted.name and _same(candidate.arguments, wanted.arguments):
                del unused[index]
                break
        else:
            return False
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class Success:
    """The gating verdicts and how each signal counted."""

    breakdown: dict[str, list[str]]
    is_successful: bool
    is_task_successful: bool


def success(
    *, db_match: bool, clean_exit: bool | None, nl_passed: bool | None, actions_matched: bool
) -> Success:
    """Strict AND of the applicable gating signals; None means not applicable (``clean_exit``
    is None in the tau2 profile, where the agent has no way to end the conversation)."""
    states = {
        Signal.DB_STATE_MATCH: SignalState.PASSED if db_match else SignalState.FAILED,
        Signal.CLEAN_EXIT: (
            SignalState.NOT_APPLICABLE
            if clean_exit is None
            else SignalState.PASSED
            if clean_exit
            else SignalState.FAILED
        ),
        Signal.NL_ASSERTION: (
            SignalState.NOT_APPLICABLE
            if nl_passed is None
            else SignalState.PASSED
            if nl_passed
            else SignalState.FAILED
        ),
        Signal.ACTION_MATCH: SignalState.EXCLUDED,
    }
    breakdown: dict[str, list[str]] = {state.value: [] for state in SignalState}
    for signal, state in states.items():
        breakdown[state.value].append(signal.value)
    task_ok = db_match and nl_passed is not False
    return Success(
        breakdown=breakdown,
        is_successful=task_ok and clean_exit is not False,
        is_task_successful=task_ok,
    )


def tau2_reward(*, stop_reason: StopReason, db_match: bool, nl_passed: bool | None) -> float:
    """Upstream's reward: 0 unless the run ended by the agent or the user; then DB x NL.

    The NL factor is 1 when the task has no assertions or all are met; when no judge ran it
    is left out (``nl_passed`` None).
    """
    if stop_reason not in (StopReason.AGENT_EXIT, StopReason.USER_STOP):
        return 0.0
    reward = 1.0 if db_match else 0.0
    if nl_passed is False:
        reward = 0.0
    return reward


def _shown(table: str, record: Record | None) -> Record | None:
    if record is None or table != "orders":
        return record
    return order_view(record)


def db_difference(actual: Store, expected: Store) -> dict[str, dict[str, dict[str, Any]]]:
    """``{table: {key: {"actual": record, "expected": record}}}`` for every differing record."""
    difference: dict[str, dict[str, dict[str, Any]]] = {}
    for table, key in actual.differing_keys(expected):
        difference.setdefault(table, {})[key] = {
            "actual": _shown(table, actual.get(table, key)),
            "expected": _shown(table, expected.get(table, key)),
        }
    return difference


def _leaf_differences(path: str, actual: Any, expected: Any, out: list[str]) -> None:
    if isinstance(actual, dict) and isinstance(expected, dict):
        for key in sorted(actual.keys() | expected.keys()):
            _leaf_differences(f"{path}.{key}", actual.get(key), expected.get(key), out)
    elif isinstance(actual, list) and isinstance(expected, list) and len(actual) == len(expected):
        for index, (a, e) in enumerate(zip(actual, expected, strict=True)):
            _leaf_differences(f"{path}[{index}]", a, e, out)
    elif not _same(actual, expected):
        out.append(f"{path}: actual {actual!r}, expected {expected!r}")


def describe_db_difference(
    difference: dict[str, dict[str, dict[str, Any]]], *, max_lines: int = 20
) -> str:
    """A compact, readable list of the differing fields, for assertion messages."""
    lines: list[str] = []
    for table, records in difference.items():
        for key, pair in records.items():
            _leaf_differences(f"{table}[{key!r}]", pair["actual"], pair["expected"], lines)
    if len(lines) > max_lines:
        hidden = len(lines) - max_lines
        lines = [*lines[:max_lines], f"... and {hidden} more differing fields (see db_diff.json)"]
    return "\n".join(lines)
