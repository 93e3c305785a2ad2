"""The CI gate: a pure function from a run's summary (and a baseline's) to a verdict.

The gate applies when ``--tau2-min-pass-rate`` or ``--tau2-baseline`` is given. It fails when
the success rate is below the threshold, when it dropped by more than ``max_regression``
against the baseline run, when the baseline ran another profile (its rate is not comparable),
or when infra errors plus lost scenarios exceed ``max_infra_errors``. Lost and infra-error
scenarios are never dropped silently: they count against ``max_infra_errors``. The line names
the profile (in the tau2 profile the success rate is the share with upstream reward 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tau2_retail.engine.profiles import ProfileName
from tau2_retail.results.records import RunSummary

__all__ = ["GateVerdict", "evaluate_gate", "flipped_to_fail"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GateVerdict:
    """The gate's decision and the one line that says why (the last tau2 line of a run)."""

    passed: bool
    line: str
    rate: float | None
    baseline_rate: float | None = None
    flipped: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        return "PASS" if self.passed else "FAIL"


def flipped_to_fail(summary: RunSummary, baseline: RunSummary) -> tuple[str, ...]:
    """Scenario ids that passed in ``baseline`` and did not pass (FAIL) in ``summary``."""
    before = {row.scenario_id: row.status for row in baseline.scenarios}
    return tuple(
        row.scenario_id
        for row in summary.scenarios
        if before.get(row.scenario_id) == "PASS" and row.status == "FAIL"
    )


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2%}"


def evaluate_gate(
    summary: RunSummary,
    *,
    min_pass_rate: float | None,
    max_infra_errors: int,
    baseline: RunSummary | None = None,
    max_regression: float = 0.0,
    session_problem: str | None = None,
) -> GateVerdict | None:
    """The verdict, or None when no gate was asked for (no threshold and no baseline).

    ``session_problem`` (e.g. "interrupted") means the run did not finish: the gate is not
    applied and the verdict is a failure that says so.
    """
    if min_pass_rate is None and baseline is None:
        return None
    rate = summary.success_rate.rate
    if session_problem is not None:
        return GateVerdict(
            passed=False,
            line=f"tau2 gate: not applied (the session ended {session_problem})",
            rate=rate,
        )
    parts: list[str] = [f"profile {summary.profile}"]
    if summary.configuration is not None and summary.configuration.agent.code:
        parts.insert(0, f"agent {summary.configuration.agent.model}")
    ok = True
    tau2 = summary.profile == ProfileName.TAU2
    measure = "success rate (upstream reward 1)" if tau2 else "success rate"
    shown = f"{measure} {_percent(rate)}"
    if min_pass_rate is not None:
        ok = ok and rate is not None and rate >= min_pass_rate
        shown += f" (threshold {min_pass_rate:.2%})"
    parts.append(shown)
    baseline_rate = None
    flipped: Sequence[str] = ()
    if baseline is not None and baseline.profile != summary.profile:
        return GateVerdict(
            passed=False,
            line=(
                f"tau2 gate: profile {summary.profile}, baseline of profile {baseline.profile}: "
                "their rates are not comparable; give a baseline run of the same profile: FAIL"
            ),
            rate=rate,
        )
    if baseline is not None:
        baseline_rate = baseline.success_rate.rate
        flipped = flipped_to_fail(summary, baseline)
        drop = (baseline_rate or 0.0) - (rate or 0.0)
        ok = ok and rate is not None and drop <= max_regression + 1e-12
        parts.append(
            f"baseline {_percent(baseline_rate)} (change {-drop:+.2%}, "
            f"max regression {max_regression:.2%}), {len(flipped)} flipped pass->fail"
        )
    infra = summary.counts.infra_errors + summary.counts.lost
    ok = ok and infra <= max_infra_errors
    parts.append(f"infra errors {infra} (max {max_infra_errors})")
    verdict = "PASS" if ok else "FAIL"
    return GateVerdict(
        passed=ok,
        line=f"tau2 gate: {', '.join(parts)}: {verdict}",
        rate=rate,
        baseline_rate=baseline_rate,
        flipped=tuple(flipped),
    )
