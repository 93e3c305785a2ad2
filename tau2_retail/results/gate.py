"""The CI gate: a run's exit status from its summary, the same for a run and for merged shards.

With a threshold (``--tau2-min-pass-rate``) the run passes when its success rate reaches it
and its infra errors plus lost scenarios stay within ``--tau2-max-infra-errors``. Without one,
pytest's own rule stands for a run (any failed test fails it); for merged shards the equivalent
is: every scored scenario succeeded and no infra error or lost scenario.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["GateVerdict", "gate_verdict"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GateVerdict:
    """Whether the run passes, and the one line that says why."""

    passed: bool
    line: str


def gate_verdict(
    summary: Mapping[str, Any], *, min_pass_rate: float | None, max_infra_errors: int
) -> GateVerdict:
    counts = summary["counts"]
    rate = summary["success_rate"]["rate"]
    infra = counts["infra_errors"] + counts["lost"]
    if min_pass_rate is None:
        passed = counts["failed"] == 0 and infra == 0
        return GateVerdict(
            passed=passed,
            line=(
                f"tau2 gate: no threshold: {counts['failed']} failed, {infra} infra errors "
                f"or lost: {'PASS' if passed else 'FAIL'}"
            ),
        )
    rate_ok = rate is not None and rate >= min_pass_rate
    passed = rate_ok and infra <= max_infra_errors
    shown_rate = "n/a" if rate is None else f"{rate:.2%}"
    return GateVerdict(
        passed=passed,
        line=(
            f"tau2 gate: success rate {shown_rate} (threshold {min_pass_rate:.2%}), "
            f"infra errors {infra} (max {max_infra_errors}): {'PASS' if passed else 'FAIL'}"
        ),
    )
