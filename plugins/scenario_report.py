"""What a scenario's test tells the run: one record, one ``user_property``.

The process that ran a scenario (an xdist worker, or the only process) attaches one
:class:`ScenarioReport` to its test's report under :data:`REPORT_PROPERTY`, encoded by the one
codec (:mod:`tau2_retail.codec`); the run reads it back with :func:`report_of`. It is the only
thing a scenario's report carries to the run: the scenario, its trial, the verdict, where its
record is, the agent as it saw it and the lines its process asked to say once. What a worker
still has to say after its last test (a notice of the session's end) travels in xdist's
``workeroutput`` (``plugins.interop``).

A test is known as a scenario's by its parameter (:func:`scenario_of_item`), never by its name:
the run maps the node ids of what was collected to scenarios once, and reads the rest from the
reports.

For a reader of junit XML the test also shows ``tau2_outcome`` and ``tau2_artifacts``
(:func:`junit_properties`): written from the same record, read by nothing in the plugin.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Final

import pytest

from tau2_retail import codec
from tau2_retail.codec import Omitted
from tau2_retail.engine.scenario import Scenario
from tau2_retail.errors import ArtifactError
from tau2_retail.models.agent import AgentIdentity

__all__ = [
    "BUDGET_VERDICT",
    "INFRA_VERDICT",
    "INTERRUPTED_VERDICT",
    "PASS_VERDICT",
    "REPORT_PROPERTY",
    "ScenarioReport",
    "WorkerLeftovers",
    "attach_report",
    "is_benchmark_item",
    "junit_properties",
    "report_of",
    "scenario_ids_of_nodes",
    "scenario_of_item",
]

#: the ``user_properties`` name of a scenario's record
REPORT_PROPERTY: Final = "tau2_report"
PASS_VERDICT: Final = "PASS"
INFRA_VERDICT: Final = "INFRA"
#: a scenario the budget kept from starting or stopped unscored
BUDGET_VERDICT: Final = "NOT RUN (budget)"
#: the agent's code raised KeyboardInterrupt: the run stops as for Ctrl-C
INTERRUPTED_VERDICT: Final = "INTERRUPTED"


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioReport:
    """One scenario's test as the run learns of it."""

    scenario_id: str
    #: 1-based, as the artifacts count trials
    trial: int
    #: ``PASS``, ``FAIL: <reason>``, ``INFRA``, ``NOT RUN (budget)`` or ``INTERRUPTED``
    verdict: str
    #: the scenario's folder, relative to the run folder (None: no record was written)
    artifacts: Annotated[str | None, Omitted] = None
    #: the agent given as code, as this scenario saw it
    agent: Annotated[AgentIdentity | None, Omitted] = None
    #: lines this process asked to say once, new since its previous report
    notices: Annotated[tuple[str, ...], Omitted] = ()
    #: where the agent's KeyboardInterrupt was raised (verdict ``INTERRUPTED``)
    interrupt: Annotated[str | None, Omitted] = None

    @property
    def failed(self) -> bool:
        return self.verdict.startswith("FAIL")


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerLeftovers:
    """What a process still tells the run at its end (an xdist worker: in ``workeroutput``)."""

    #: lines it asked to say once after its last report
    notices: tuple[str, ...] = ()
    #: a test of the benchmark was collected there (before any deselection)
    benchmark_collected: bool = False


def attach_report(item: pytest.Item, report: ScenarioReport) -> None:
    """Attach ``report`` to ``item``'s test report (and its display properties for junit)."""
    text = json.dumps(codec.encode(report), separators=(",", ":"))
    item.user_properties.append((REPORT_PROPERTY, text))
    item.user_properties.extend(junit_properties(report))


def junit_properties(report: ScenarioReport) -> list[tuple[str, str]]:
    """``tau2_artifacts`` and ``tau2_outcome``, as junit XML shows them (docs/ci.md)."""
    shown = [] if report.artifacts is None else [("tau2_artifacts", report.artifacts)]
    if report.verdict != INTERRUPTED_VERDICT:
        shown.append(("tau2_outcome", report.verdict))
    return shown


def report_of(properties: Iterable[tuple[str, object]]) -> ScenarioReport | None:
    """The scenario's record among a test report's ``user_properties``, None if it has none
    (a test that is not a scenario's, or one that ended before its scenario did)."""
    for name, value in properties:
        if name == REPORT_PROPERTY:
            text = value if isinstance(value, str) else str(value)
            try:
                return codec.decode(ScenarioReport, text, f"the {REPORT_PROPERTY} property")
            except ArtifactError as error:  # a plugin of ours on each side: our bug
                raise AssertionError(str(error)) from None
    return None


def scenario_of_item(item: pytest.Item) -> Scenario | None:
    """The scenario an item runs (its ``tau2_scenario`` parameter), None for any other test."""
    callspec = getattr(item, "callspec", None)
    scenario = callspec.params.get("tau2_scenario") if callspec is not None else None
    return scenario if isinstance(scenario, Scenario) else None


def is_benchmark_item(item: pytest.Item) -> bool:
    """A test of the benchmark (a scenario's, or the benchmark's empty parameter set)."""
    return "tau2_scenario" in getattr(item, "fixturenames", ())


def scenario_ids_of_nodes(node_ids: Iterable[str], known: Mapping[str, str]) -> dict[str, str]:
    """For node ids without their items (those xdist's controller receives): each node id of
    a scenario test with its scenario id. ``known`` maps each parameter id the plugin gave a
    scenario test (``[<id>]``, its last part) to the scenario; other tests are left out."""
    found: dict[str, str] = {}
    for node_id in node_ids:
        _, bracket, last = node_id.rpartition("[")
        scenario = known.get(bracket + last) if bracket else None
        if scenario is not None:
            found[node_id] = scenario
    return found
