"""The ledger: what the run learned of its scenarios, from collection to the last report.

:class:`RunLedger` takes in what the processes tell the run, all as plain values: the scenario
of each test collected (by node id), each test's report and its scenario's record
(:class:`~tau2_retail.plugins.scenario_report.ScenarioReport`), each xdist worker's end and its
leftovers. At the end it turns the run folder into records: the whole ``metrics.json`` of every
scenario, and why each other expected scenario has none (lost, not run, crashed worker).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.models.agent import AgentIdentity
from tau2_retail.models.text import printable
from tau2_retail.plugins.empty_selection import EmptySelection
from tau2_retail.plugins.errored import ErroredScenarios
from tau2_retail.plugins.scenario_report import (
    BUDGET_VERDICT,
    WorkerLeftovers,
    report_of,
    scenario_ids_of_nodes,
)
from tau2_retail.results.artifacts import load_run_metrics

__all__ = ["NOT_RUN", "NOT_RUN_INTERRUPTED", "RunLedger", "RunRecords"]

#: why an expected scenario has no record when this session never started it
NOT_RUN = "not run (the session ended before it started)"
#: why an expected scenario has no record when Ctrl-C stopped the session before it started
NOT_RUN_INTERRUPTED = "not run (interrupted)"

_MAX_REASON_CHARS = 300
#: why a scenario whose test reported has no record (unless it was skipped)
_NO_RECORD = "no metrics.json (interrupted, or its process was lost)"

RunRecords = tuple[dict[str, ScenarioMetrics], dict[str, str]]
"""The whole records by scenario, and why each other scenario of the run has none."""


def _skip_reason(report: pytest.TestReport) -> str:
    """The reason a skipped test gave (``skip(reason=...)``), as pytest shows it with ``-rs``
    without its ``Skipped: `` prefix; one printable line."""
    longrepr = report.longrepr
    xfail = getattr(report, "wasxfail", None)  # xfail(run=False): "[NOTRUN] <reason>"
    if isinstance(xfail, str):
        text = f"xfail {xfail}".strip()
    # a skip's longrepr is (path, line, message), also after xdist carried it
    elif isinstance(longrepr, tuple | list):
        text = str(longrepr[2])
    else:
        text = report.longreprtext
    text = text.strip().removeprefix("Skipped:").strip()
    return printable(text.splitlines()[0] if text else "no reason given")[:_MAX_REASON_CHARS]


class RunLedger:
    """What the run knows of its scenarios; see the module docstring."""

    def __init__(self, known: Callable[[], Sequence[str]]) -> None:
        #: the scenario ids the processes may parametrize (for node ids without their items)
        self._known_ids = known
        self._known: dict[str, str] | None = None
        #: the scenario of each scenario test collected (by node id)
        self.scenario_nodes: dict[str, str] = {}
        #: the scenarios whose tests reported
        self.seen: set[str] = set()
        #: the agent as its scenarios saw it (a fixture's agent: name and version, once seen)
        self.agent_identity: AgentIdentity | None = None
        #: failed tests and collectors of the session that are not tau2 scenarios (a user's own)
        self.others_failed: list[str] = []
        #: scenarios the budget kept from starting
        self.budget_skipped: set[str] = set()
        #: lines the processes asked to say once, in order
        self.notices: dict[str, None] = {}
        #: whether the benchmark was collected (a gate on an empty selection fails)
        self.empty = EmptySelection()
        #: scenarios whose test was skipped before its scenario ran (a user's ``skip`` marker
        #: or ``pytest.skip`` in their own fixture), with the skip's reason: lost, not run
        self.skipped: dict[str, str] = {}
        #: scenarios whose test errored: never a success (see ``plugins.errored``)
        self.errored = ErroredScenarios()
        #: the workers that ended abnormally (crashed, or interrupted), and each worker's
        #: collected scenarios (under ``--dist each`` its share)
        self.workers_down: list[str] = []
        self.worker_scenarios: dict[str, frozenset[str]] = {}

    # -- collection -----------------------------------------------------------------------------

    def collected(self, found: Mapping[str, str]) -> list[str]:
        """This process collected ``found`` (node id: scenario id); returns the scenarios."""
        self.scenario_nodes.update(found)
        return list(found.values())

    def worker_collected(self, node_id: str, ids: Sequence[str]) -> list[str]:
        """A worker collected ``ids`` (node ids); returns the scenarios among them."""
        scenarios = self.collected(scenario_ids_of_nodes(ids, self._known_nodes()))
        self.worker_scenarios[node_id] = frozenset(scenarios)
        return scenarios

    def _known_nodes(self) -> dict[str, str]:
        if self._known is None:
            self._known = {f"[{scenario}]": scenario for scenario in self._known_ids()}
        return self._known

    # -- reports --------------------------------------------------------------------------------

    def observe(self, report: pytest.TestReport) -> str | None:
        """Take in a test's report; returns where the agent interrupted the run, if it did."""
        record = report_of(report.user_properties)
        scenario = record.scenario_id if record else self.scenario_nodes.get(report.nodeid)
        if record is not None:
            self._take_notices(record.notices)
            if record.verdict == BUDGET_VERDICT:
                self.budget_skipped.add(record.scenario_id)
            if self.agent_identity is None and record.agent is not None:
                # a fixture's agent is known only once a scenario had it: its name and version
                # then reach the summary, the report and the gate line (from a worker too)
                self.agent_identity = record.agent
        if scenario is not None:
            self.seen.add(scenario)
            self.errored.observe(scenario, report, record)
            # the plugin's own skips (budget, the agent's interrupt) come with the record
            if record is None and report.skipped:
                self.skipped.setdefault(scenario, f"skipped: {_skip_reason(report)}")
        elif report.failed:
            self.others_failed.append(report.nodeid)
        # at the test's teardown: a scenario that ran before its agent interrupted the run
        # (close() raised KeyboardInterrupt) reports its verdict first
        return record.interrupt if record and report.when == "teardown" else None

    def _take_notices(self, lines: Sequence[str]) -> None:
        for line in lines:
            self.notices.setdefault(line, None)

    def collector_failed(self, node_id: str) -> None:
        self.others_failed.append(node_id or "collection")

    def worker_down(
        self, node_id: str, error: object | None, leftovers: WorkerLeftovers | None
    ) -> None:
        if error is not None:
            self.workers_down.append(node_id)
        if leftovers is not None:
            self.take_leftovers(leftovers)

    def take_leftovers(self, leftovers: WorkerLeftovers) -> None:
        """What a process still had to say at its end."""
        self._take_notices(leftovers.notices)
        self.empty.collected(leftovers.benchmark_collected)

    # -- the end --------------------------------------------------------------------------------

    def crashed_shares(self, *, interrupted: bool) -> dict[str, str]:
        """Each scenario a crashed worker held, with the worker (none after Ctrl-C: there every
        worker stops). Those without a record were not run because it crashed and no worker
        took them over (xdist's ``--max-worker-restart`` reached)."""
        if interrupted:
            return {}
        return {
            scenario: node_id
            for node_id in reversed(self.workers_down)
            for scenario in self.worker_scenarios.get(node_id, ())
        }

    def records(self, run_dir: Path, expected: Sequence[str], *, interrupted: bool) -> RunRecords:
        """The whole records in the run folder (this session's, and on resume the earlier
        ones), and why each other scenario of the run has none.

        The folder is the truth, as for resume and ``summarize``: a scenario whose record was
        written is complete even when Ctrl-C cut its test short or its report never reached
        this process; one without a whole record is lost, with the reason (the records of the
        scenarios whose test errored are set aside before: ``errored.set_aside``).
        """
        on_disk = load_run_metrics(run_dir)
        records = {m.scenario_id: m for m in on_disk.records}
        reasons = dict(on_disk.incomplete)
        for scenario, reason in self.errored.reasons.items():  # lost, whatever its record
            records.pop(scenario, None)
            reasons[scenario] = reason
        for scenario in self.seen - records.keys() - self.budget_skipped:
            reasons.setdefault(scenario, self.skipped.get(scenario, _NO_RECORD))
        # selected but never started: lost, unless the budget kept them from starting
        crashed = self.crashed_shares(interrupted=interrupted)
        for scenario in set(expected) - records.keys() - self.budget_skipped:
            worker = crashed.get(scenario)
            reasons.setdefault(
                scenario,
                (NOT_RUN_INTERRUPTED if interrupted else NOT_RUN)
                if worker is None
                else f"not run: its worker {worker} crashed and no worker took it over",
            )
        return records, reasons
