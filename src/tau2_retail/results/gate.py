"""The CI gate: a pure function from a run's summary (and a baseline's) to a verdict.

The gate applies when ``--tau2-min-pass-rate`` or ``--tau2-baseline`` is given. It fails when
the success rate is below the threshold, when it dropped by more than ``max_regression``
against the baseline run, when the baseline ran another profile (its rate is not comparable),
or when infra errors plus lost scenarios exceed ``max_infra_errors``. Lost and infra-error
scenarios are never dropped silently: they count against ``max_infra_errors``. The line names
the profile (in the tau2 profile the success rate is the share with upstream reward 1).

Against a baseline the scenarios are paired by task and trial (those scored in both runs) and
the line gives the flips both ways and the one-sided exact McNemar p-value of a regression
(:mod:`tau2_retail.results.stats`). With ``regression_alpha`` (``--tau2-regression-alpha``)
the gate tells a regression from noise: a drop beyond ``max_regression`` fails only when it is
also significant (``p <= alpha``), and the threshold fails only when the whole 95% interval of
the success rate lies below it (its upper bound < threshold). Without it, both compare the
point estimates, as before.

A gate that cannot compare fails and says why; it never passes by default: a baseline with no
scored scenario (all infra errors or lost), or one that shares no scored scenario with the run
(:func:`baseline_problem`), fails the gate whatever the rates. ``problems`` are facts a caller
found that leave the run unmeasured (a scenario whose test errored, a shard missing from a
merge): each is named in the line and fails the gate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tau2_retail.engine.profiles import policy_for
from tau2_retail.results.records import RunSummary
from tau2_retail.results.stats import PairedComparison, paired_comparison

__all__ = [
    "GateOptions",
    "GateVerdict",
    "baseline_problem",
    "empty_selection_verdict",
    "evaluate_gate",
    "flipped_to_fail",
    "pair_runs",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class GateVerdict:
    """The gate's decision and the one line that says why (the last tau2 line of a run)."""

    passed: bool
    line: str
    rate: float | None
    baseline_rate: float | None = None
    flipped: tuple[str, ...] = ()
    #: the paired comparison with the baseline (None without one)
    paired: PairedComparison | None = None

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


def pair_runs(summary: RunSummary, baseline: RunSummary) -> PairedComparison:
    """The scenarios scored (PASS or FAIL) in both runs, paired by task and trial."""
    before = {
        (row.task_id, row.trial): row.status == "PASS"
        for row in baseline.scenarios
        if row.status in ("PASS", "FAIL")
    }
    return paired_comparison(
        [
            (before[(row.task_id, row.trial)], row.status == "PASS")
            for row in summary.scenarios
            if row.status in ("PASS", "FAIL") and (row.task_id, row.trial) in before
        ]
    )


def baseline_problem(baseline: RunSummary, paired: PairedComparison) -> str | None:
    """Why the run cannot be compared with ``baseline`` (None when it can): the baseline
    scored nothing, or no scenario was scored in both runs."""
    if baseline.success_rate.rate is None:
        return (
            "cannot compare (the baseline has no scored scenario, all infra errors or lost: "
            "give a baseline run that scored its scenarios)"
        )
    if paired.pairs == 0:
        return (
            "cannot compare (the baseline shares no scored scenario with this run: give a "
            "baseline of the same tasks and trials)"
        )
    return None


def empty_selection_verdict(why: str) -> GateVerdict:
    """The verdict of a gate asked for on a session that selected no scenario: it has nothing
    to measure, so it fails and says why."""
    return GateVerdict(
        passed=False,
        line=f"tau2 gate: no scenario ran ({why}); a gate with nothing to measure fails: FAIL",
        rate=None,
    )


def p_text(p: float) -> str:
    """``p=0.125``, ``p=9.86e-32``: three significant digits."""
    return f"p={p:.3g}"


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2%}"


class GateOptions(Protocol):
    """The gate's options (``--tau2-min-pass-rate`` and the like), as a run's settings and a
    merged run's recorded settings both hold them."""

    @property
    def min_pass_rate(self) -> float | None: ...

    @property
    def max_infra_errors(self) -> int: ...

    @property
    def max_regression(self) -> float | None: ...

    @property
    def regression_alpha(self) -> float | None: ...


def evaluate_gate(
    summary: RunSummary,
    options: GateOptions,
    *,
    baseline: RunSummary | None = None,
    session_problem: str | None = None,
    problems: Sequence[str] = (),
) -> GateVerdict | None:
    """The verdict, or None when no gate was asked for (no threshold and no baseline).

    ``options.regression_alpha`` (0 < A < 1, or None): see the module docstring; an unset
    ``max_regression`` is 0. ``session_problem`` (e.g. "interrupted") means the run did not
    finish: the gate is not applied and the verdict is a failure that says so. ``problems``:
    see the module docstring.
    """
    min_pass_rate, alpha = options.min_pass_rate, options.regression_alpha
    if min_pass_rate is None and baseline is None:
        return None
    rate = summary.success_rate.rate
    refused = _not_applied(summary, baseline, session_problem)
    if refused is not None:
        return GateVerdict(passed=False, line=refused, rate=rate)
    parts: list[str] = [f"profile {summary.profile}"]
    if summary.configuration is not None and summary.configuration.agent.code:
        parts.insert(0, f"agent {summary.configuration.agent.model}")
    ok, shown = _threshold(summary, min_pass_rate, alpha)
    parts.append(shown)
    comparison = None
    if baseline is not None:
        comparison = _against_baseline(summary, baseline, options.max_regression or 0.0, alpha)
        ok = ok and comparison.ok
        parts.extend(comparison.parts)
    infra = summary.counts.infra_errors + summary.counts.lost
    ok = ok and infra <= options.max_infra_errors
    parts.append(f"infra errors {infra} (max {options.max_infra_errors})")
    if summary.counts.not_run:
        ok = False  # a run the budget stopped is not complete, whatever its rate
        parts.append(f"{summary.counts.not_run} not run (budget)")
    if problems:
        ok = False
        parts.extend(problems)
    return GateVerdict(
        passed=ok,
        line=f"tau2 gate: {', '.join(parts)}: {'PASS' if ok else 'FAIL'}",
        rate=rate,
        baseline_rate=comparison.baseline_rate if comparison else None,
        flipped=comparison.flipped if comparison else (),
        paired=comparison.paired if comparison else None,
    )


def _not_applied(
    summary: RunSummary, baseline: RunSummary | None, session_problem: str | None
) -> str | None:
    """The line of a gate that cannot judge the run (None: it can)."""
    if session_problem is not None:
        return f"tau2 gate: not applied (the session ended {session_problem})"
    if baseline is not None and baseline.profile != summary.profile:
        return (
            f"tau2 gate: profile {summary.profile}, baseline of profile {baseline.profile}: "
            "their rates are not comparable; give a baseline run of the same profile: FAIL"
        )
    return None


def _threshold(
    summary: RunSummary, min_pass_rate: float | None, regression_alpha: float | None
) -> tuple[bool, str]:
    """Whether the success rate meets ``min_pass_rate`` (when given), and the words for it."""
    rate = summary.success_rate.rate
    shown = f"{policy_for(summary.profile).success_measure} {_percent(rate)}"
    interval = summary.success_rate.ci95
    if interval is not None:
        shown += f" {interval.percent_text()}"
    if min_pass_rate is None:
        return True, shown
    if regression_alpha is None:
        return (
            rate is not None and rate >= min_pass_rate,
            shown + f" (threshold {min_pass_rate:.2%})",
        )
    # below the threshold only when the whole interval is: noise cannot fail the gate
    return (
        interval is not None and interval.high >= min_pass_rate,
        shown + f" (threshold {min_pass_rate:.2%} on the 95% interval's upper bound)",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Comparison:
    """The run against its baseline: whether it passes, the words, and the figures."""

    ok: bool
    parts: tuple[str, ...]
    baseline_rate: float | None
    flipped: tuple[str, ...]
    paired: PairedComparison


def _against_baseline(
    summary: RunSummary,
    baseline: RunSummary,
    max_regression: float,
    regression_alpha: float | None,
) -> _Comparison:
    rate = summary.success_rate.rate
    paired = pair_runs(summary, baseline)
    # over the scenarios scored in both runs: a run of 3 tasks against a baseline of 114 (or
    # with an infra error either side) compared the whole runs' rates, and a run whose every
    # pair regressed could pass
    baseline_rate = (
        (paired.both + paired.broken) / paired.pairs if paired.pairs else baseline.success_rate.rate
    )
    drop = paired.drop + 0.0  # + 0.0: an equal rate reads +0.00%, not -0.00%
    too_large = rate is None or drop > max_regression + 1e-12
    paired_text = (
        f"{paired.broken} flipped pass->fail, {paired.fixed} fail->pass of {paired.pairs} "
        "paired, "
        f"{p_text(paired.p_value)}"
    )
    if regression_alpha is not None:
        significant = paired.p_value <= regression_alpha
        ok = rate is not None and not (too_large and significant)
        judged = "significant" if significant else "not significant"
        paired_text += f" ({judged} at alpha {regression_alpha:g})"
    else:
        ok = not too_large
    change = f"change {0.0 - drop:+.2%}"
    over = ""
    if not paired.pairs:
        change = "none of its scenarios scored in this run too"
    elif not paired.pairs == summary.counts.scored == baseline.counts.scored:
        now = (paired.both + paired.fixed) / paired.pairs
        over = f" on the {paired.pairs} paired, this run {_percent(now)} on them"
    parts = [
        f"baseline {_percent(baseline_rate)}{over} ({change}, "
        f"max regression {max_regression:.2%}), {paired_text}"
    ]
    cannot = baseline_problem(baseline, paired)
    if cannot is not None:
        ok = False
        parts.append(cannot)
    return _Comparison(
        ok=ok,
        parts=tuple(parts),
        baseline_rate=baseline_rate,
        flipped=tuple(flipped_to_fail(summary, baseline)),
        paired=paired,
    )
