"""The run's verdict: the CI gate applied to the run summary, and the exit status it decides.

:func:`run_verdict` reads the baseline (``--tau2-baseline``), applies
:func:`tau2_retail.results.gate.evaluate_gate` and decides the session's exit status when it
failed only in scenarios; :func:`suite_properties` gives the rates and the gate as junit
``<testsuite>`` properties.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tau2_retail.errors import ArtifactError, DataError
from tau2_retail.plugins.options import Tau2Settings
from tau2_retail.results.gate import GateVerdict, evaluate_gate
from tau2_retail.results.records import RunSummary
from tau2_retail.tau2_format.upstream_run import read_baseline

__all__ = ["RunVerdict", "run_verdict", "suite_properties"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunVerdict:
    """The gate's verdict (None without a gate), the exit status the run decides (None: the
    session's own), and the problems met on the way (an unusable baseline)."""

    gate: GateVerdict | None = None
    exit_status: pytest.ExitCode | None = None
    problems: tuple[str, ...] = ()


def _baseline(settings: Tau2Settings) -> tuple[RunSummary | None, list[str]]:
    problems: list[str] = []
    baseline: RunSummary | None = None
    try:
        baseline = read_baseline(
            Path(settings.baseline),
            data_dir=Path(settings.data_dir) if settings.data_dir else None,
        )
    except (ArtifactError, DataError) as error:
        problems.append(f"tau2: baseline unusable: {error}")
    if baseline is None and not problems:
        problems.append(f"tau2: baseline {settings.baseline} has no summary.json")
    return baseline, problems


def run_verdict(
    summary: RunSummary,
    settings: Tau2Settings,
    *,
    session_problem: str | None,
    errored_problem: str | None,
    others_failed: list[str],
) -> RunVerdict:
    """The gate applied to ``summary``: ``session_problem`` says how the session broke (it
    fails the gate), ``errored_problem`` names the scenario tests that errored, and
    ``others_failed`` the failed tests that are not scenarios (the status stays failed)."""
    baseline: RunSummary | None = None
    problems: list[str] = []
    if settings.baseline:
        baseline, problems = _baseline(settings)
        if baseline is None:
            return RunVerdict(exit_status=pytest.ExitCode.TESTS_FAILED, problems=tuple(problems))
    gate = evaluate_gate(
        summary,
        settings,
        baseline=baseline,
        session_problem=session_problem,
        problems=[errored_problem] if errored_problem else [],
    )
    if gate is not None and others_failed:
        problems.append(
            f"tau2: {len(others_failed)} test(s) outside the benchmark failed "
            f"(first: {others_failed[0]}); the exit status stays failed whatever the "
            "gate says"
        )
    broken = session_problem is not None or bool(others_failed)
    status = None if broken else _exit_status(summary, gate, resumed=bool(settings.resume))
    return RunVerdict(gate=gate, exit_status=status, problems=tuple(problems))


def _exit_status(
    summary: RunSummary, gate: GateVerdict | None, *, resumed: bool
) -> pytest.ExitCode | None:
    """The exit status of the whole run when the session failed only in scenarios.

    With a gate, its verdict. Without one, a resumed run's status is the one an
    uninterrupted run would have: a failure, infra error or lost scenario recorded by an
    earlier session still fails it (and a run with nothing left to do is not "no tests").
    """
    if summary.counts.not_run:
        return pytest.ExitCode.TESTS_FAILED  # the budget stopped the run: not complete
    if gate is not None:
        passed = gate.passed
    elif resumed:
        counts = summary.counts
        passed = counts.failed + counts.infra_errors + counts.lost == 0
    else:
        return None
    return pytest.ExitCode.OK if passed else pytest.ExitCode.TESTS_FAILED


def suite_properties(
    run_id: str, summary: RunSummary, gate: GateVerdict | None
) -> dict[str, object]:
    """The rates and the gate as junit ``<testsuite>`` properties (with --junitxml)."""
    properties: dict[str, object] = {
        "tau2_run_id": run_id,
        "tau2_success_rate": summary.success_rate.rate,
        "tau2_scored": summary.counts.scored,
        "tau2_succeeded": summary.counts.succeeded,
        "tau2_infra_errors": summary.counts.infra_errors,
        "tau2_lost": summary.counts.lost,
    }
    for entry in summary.pass_hat_k:
        properties[f"tau2_pass_hat_{entry.k}"] = entry.value
    if gate is not None:
        properties["tau2_gate"] = gate.verdict
        properties["tau2_gate_line"] = gate.line
        if gate.paired is not None:
            properties["tau2_gate_p_value"] = gate.paired.p_value
    return properties
