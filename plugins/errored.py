"""Scenario tests that errored: a scenario whose test errored is never a success.

A scenario runs in its test's set-up (``tau2_outcome``) and its record is written there; what
follows can still break the test: a fixture that cannot be found (``subtests`` under a pytest
older than 9), a user's fixture or plugin raising in set-up or teardown, a test that fails
although its scenario passed. pytest then reports an error, while the record says PASS. Such a
scenario counts as lost (excluded from the rates, named with the error), its ``metrics.json``
is set aside so that ``summarize`` and ``--tau2-resume`` agree (resume runs it again), and the
CI gate fails on it whatever ``--tau2-max-infra-errors`` allows.

Expected failures are not errors: a scenario that failed (its outcome ``FAIL: ...``) fails in
its test's call, and an infra error (``INFRA``) is raised in its set-up.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tau2_retail.errors import ArtifactError
from tau2_retail.models.text import printable
from tau2_retail.plugins.scenario_report import INFRA_VERDICT, ScenarioReport
from tau2_retail.results.artifacts import folder_of_scenario_id, set_aside_metrics
from tau2_retail.results.summary import scenario_order

__all__ = ["ErroredScenarios", "errored_reason"]

_MAX_CHARS = 300
_PHASES = {"setup": "set-up", "call": "call", "teardown": "teardown"}
# the line xdist puts first in a worker's report as the controller renders it, before the error
_WORKER_HEADER = re.compile(r"\[gw\d+\] ")
# an OSError's cause; the path it names often follows it, so a cut at the end would lose it
_ERRNO = re.compile(r"\[Errno \d+\] [^:'\"]*[^:'\" ]")
_CUT = " … "
_KEPT_TAIL_CHARS = 80


def _first_error_line(report: pytest.TestReport) -> str:
    lines = [
        stripped
        for line in report.longreprtext.splitlines()
        if (stripped := line.strip()) and not _WORKER_HEADER.match(stripped)
    ]
    marked = [line[1:].strip() for line in lines if line.startswith("E ")]
    text = (marked or lines or ["no detail"])[0]
    return _shortened(printable(text))


def _shortened(text: str) -> str:
    """``text`` in at most ``_MAX_CHARS``: a long one keeps its start (the exception's type)
    and its cause (an ``[Errno N] ...``, else its end), and loses the middle (a long path)."""
    if len(text) <= _MAX_CHARS:
        return text
    cause = _ERRNO.search(text)
    tail = cause.group() if cause is not None else _last_words(text, _KEPT_TAIL_CHARS)
    head = text[: _MAX_CHARS - len(_CUT) - len(tail)]
    if cause is not None and cause.end() <= len(head):
        return text[:_MAX_CHARS]  # the cause is in what a plain cut keeps
    return f"{head}{_CUT}{tail}"


def _last_words(text: str, chars: int) -> str:
    """About the last ``chars`` of ``text``, from a word's start (a path it names stays whole)."""
    start = len(text) - chars
    space = text.rfind(" ", len(text) - 2 * chars, start)
    return text[space + 1 :] if space >= 0 else text[start:]


def errored_reason(report: pytest.TestReport, record: ScenarioReport | None) -> str | None:
    """Why this report of a scenario's test means its record cannot count, or None.

    ``record`` is the scenario's report (None when its test ended before its scenario did)."""
    if not report.failed or report.when not in _PHASES:
        return None  # xdist's report of a crashed worker ("???") is a lost scenario already
    if record is not None and report.when == "setup" and record.verdict == INFRA_VERDICT:
        return None
    if record is not None and report.when == "call" and record.failed:
        return None
    return f"its test errored ({_PHASES[report.when]}: {_first_error_line(report)})"


class ErroredScenarios:
    """The scenarios of this session whose test errored, with why, and where their records
    are (relative to the run folder)."""

    def __init__(self) -> None:
        self.reasons: dict[str, str] = {}
        self._folders: dict[str, str] = {}

    def observe(
        self, scenario: str, report: pytest.TestReport, record: ScenarioReport | None
    ) -> None:
        if record is not None and record.artifacts is not None:
            self._folders[scenario] = record.artifacts
        reason = errored_reason(report, record)
        if reason is not None:
            self.reasons.setdefault(scenario, reason)

    def set_aside(self, run_dir: Path) -> list[str]:
        """Set the records of the errored scenarios aside; returns the problems met (a record
        that could not be moved still does not count in this session's summary)."""
        problems = []
        for scenario, reason in self.reasons.items():
            # a scenario whose test ended before its outcome (a user's fixture failing in set-up,
            # a signal from outside) may still have finished and written its record
            known = self._folders.get(scenario)
            folder = run_dir / known if known else folder_of_scenario_id(run_dir, scenario)
            try:
                set_aside_metrics(folder, reason)
            except ArtifactError as error:
                problems.append(f"tau2: {error}")
        return problems

    def gate_problem(self) -> str | None:
        """The gate's words for them (None when no scenario test errored)."""
        if not self.reasons:
            return None
        # the first in task order, not in arrival order: workers finish in any order
        first = min(self.reasons, key=scenario_order)
        return (
            f"{len(self.reasons)} scenario test(s) errored (first: {first}: {self.reasons[first]})"
        )
