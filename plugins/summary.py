"""The controller's end of a run: run files, the terminal section, and the CI gate."""

from __future__ import annotations

import platform
import sys
from importlib import metadata

import pytest

from tau2_retail.errors import ArtifactError
from tau2_retail.plugins.run import Tau2Run, argv_redacted
from tau2_retail.report.page import ReportError, write_report
from tau2_retail.results.artifacts import load_run_metrics
from tau2_retail.results.summary import headline_lines, write_run_args, write_run_summary

__all__ = ["finish_run", "terminal_lines"]

_INTERRUPTED_OR_BROKEN = (
    pytest.ExitCode.INTERRUPTED,
    pytest.ExitCode.INTERNAL_ERROR,
    pytest.ExitCode.USAGE_ERROR,
)


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for package in ("pytest", "pytest-xdist", "openai"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


def finish_run(run: Tau2Run, session: pytest.Session) -> None:
    """Merge what finished (reports, plus artifacts on resume), write the run files, gate."""
    metrics = dict(run.metrics)
    if run.settings["resume"]:
        try:
            on_disk = load_run_metrics(run.run_dir)
        except ArtifactError as error:
            run.gate_line = f"tau2: cannot read earlier artifacts: {error}"
            on_disk = []
        for record in on_disk:
            metrics.setdefault(record["scenario_id"], record)
    lost = sorted(run.seen - metrics.keys())
    expected = sorted(metrics.keys() | run.seen)
    configuration = run.public_configuration
    try:
        write_run_args(
            run.run_dir,
            {
                "argv": argv_redacted(),
                "configuration": configuration,
                "trials": run.settings["trials"],
                "expected": expected,
            },
        )
        run.summary = write_run_summary(
            run.run_dir,
            [metrics[key] for key in sorted(metrics)],
            expected=expected,
            trials=run.settings["trials"],
            configuration=configuration,
            versions=_versions(),
            lost=lost,
        )
    except ArtifactError as error:
        run.gate_line = f"tau2: could not write the run summary: {error}"
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        return
    try:
        write_report(run.run_dir)
    except ReportError as error:  # the summary is written; the page is a convenience
        print(f"\ntau2: report.html not written: {error}", file=sys.stderr)
    _gate(run, session)


def _gate(run: Tau2Run, session: pytest.Session) -> None:
    threshold = run.settings["min_pass_rate"]
    if threshold is None or run.summary is None:
        return
    if session.exitstatus in _INTERRUPTED_OR_BROKEN:
        run.gate_line = f"tau2 gate: not applied (the session ended with {session.exitstatus!r})"
        return
    rate = run.summary["success_rate"]["rate"]
    infra = run.summary["counts"]["infra_errors"]
    lost = run.summary["counts"]["lost"]
    max_infra = run.settings["max_infra_errors"]
    rate_ok = rate is not None and rate >= threshold
    infra_ok = infra + lost <= max_infra
    verdict = "PASS" if rate_ok and infra_ok else "FAIL"
    shown_rate = "n/a" if rate is None else f"{rate:.2%}"
    profile = run.summary.get("profile", "default")
    measure = "success rate (upstream reward 1)" if profile == "tau2" else "success rate"
    run.gate_line = (
        f"tau2 gate: profile {profile}, {measure} {shown_rate} (threshold {threshold:.2%}), "
        f"infra errors {infra + lost} (max {max_infra}): {verdict}"
    )
    session.exitstatus = pytest.ExitCode.OK if verdict == "PASS" else pytest.ExitCode.TESTS_FAILED


def terminal_lines(run: Tau2Run) -> list[str]:
    summary = run.summary
    assert summary is not None  # only called after finish_run wrote it
    counts = summary["counts"]
    lines = [f"run directory: {run.run_dir}"]
    lines.extend(headline_lines(summary))
    if counts["infra_errors"] or counts["lost"]:
        lines.append(
            f"infra errors: {counts['infra_errors']}, lost scenarios: {counts['lost']} "
            "(excluded from the rates; see all_summary.txt)"
        )
    if run.gate_line:
        lines.append(run.gate_line)
    return lines
