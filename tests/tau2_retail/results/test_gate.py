"""The CI gate as a pure function: threshold, baseline regression, infra errors and lost."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

from tau2_retail.results.gate import (
    GateVerdict,
    empty_selection_verdict,
    evaluate_gate,
    flipped_to_fail,
    pair_runs,
)
from tau2_retail.results.merge import GateSettings
from tau2_retail.results.records import (
    Counts,
    JudgeReplies,
    Mean,
    NlSignal,
    Rate,
    RunSummary,
    ScenarioRow,
    SignalRate,
)

GATE_OPTIONS = ("min_pass_rate", "max_infra_errors", "max_regression", "regression_alpha")


def gate(current: RunSummary, **options: Any) -> GateVerdict:
    """The verdict of ``evaluate_gate`` (no threshold and no infra error allowed by default)."""
    chosen = {name: options.pop(name) for name in GATE_OPTIONS if name in options}
    verdict = evaluate_gate(current, GateSettings(**chosen), **options)
    assert verdict is not None
    return verdict


def summary(statuses: Sequence[str], *, lost: int = 0, profile: str = "default") -> RunSummary:
    """A summary of scenarios ``tau2_retail__<i>`` with these statuses (PASS/FAIL/INFRA)."""
    rows = tuple(
        ScenarioRow(
            scenario_id=f"tau2_retail__{i}",
            task_id=str(i),
            trial=1,
            status=status,
            is_successful=status == "PASS",
            is_task_successful=status == "PASS",
            db_state_match=True,
            clean_exit=True,
            nl_assertion_pass_rate=None,
            nl_assertion_pass_count=None,
            nl_assertion_total=0,
            is_action_match=True,
            judge_score=None,
            tau2_reward=1.0,
            stop_reason="agent_exit",
            total_turns=2,
            duration_seconds=1.0,
        )
        for i, status in enumerate(statuses)
    )
    scored = [s for s in statuses if s != "INFRA"]
    passed = scored.count("PASS")
    rate = Rate(passed=passed, total=len(scored))
    return RunSummary(
        profile=profile, configuration=None, versions={}, trials=1,
        counts=Counts(
            expected=len(statuses) + lost, reported=len(statuses), scored=len(scored),
            succeeded=passed, failed=len(scored) - passed,
            infra_errors=statuses.count("INFRA"), lost=lost,
        ),
        success_rate=rate, task_success_rate=rate,
        db_state_match=SignalRate(rate=rate, gating=True),
        clean_exit=SignalRate(rate=rate, gating=True),
        nl_assertion=NlSignal(rate=None, reason="no judge configured"),
        action_match=SignalRate(rate=rate, gating=False),
        judge_score=Mean(mean=None, n=0), tau2_reward=Mean(mean=None, n=0), pass_hat_k=(),
        stop_reasons={}, token_usage={}, by_split={}, by_persona={}, infra_errors=(),
        lost=tuple(f"lost-{i}" for i in range(lost)), lost_reasons={},
        judge_replies=JudgeReplies(), flaky_tasks=(), scenarios=rows,
    )  # fmt: skip


def test_no_gate_without_a_threshold_or_a_baseline() -> None:
    assert evaluate_gate(summary(["PASS"]), GateSettings()) is None


def test_threshold_pass_and_fail() -> None:
    half = summary(["PASS", "FAIL"])
    verdict = gate(half, min_pass_rate=0.5)
    assert verdict.passed
    assert verdict.line == (
        "tau2 gate: profile default, success rate 50.00% [9.5, 90.5] (threshold 50.00%), "
        "infra errors 0 (max 0): PASS"
    )
    failed = gate(half, min_pass_rate=0.51)
    assert not failed.passed
    assert failed.line.endswith(": FAIL")


def test_lost_and_infra_errors_count_against_the_limit() -> None:
    verdict = gate(summary(["PASS", "INFRA"], lost=1), min_pass_rate=0.5, max_infra_errors=1)
    assert not verdict.passed
    assert "infra errors 2 (max 1)" in verdict.line


def test_no_scored_scenario_fails_the_threshold() -> None:
    verdict = gate(summary(["INFRA"]), min_pass_rate=0.0, max_infra_errors=5)
    assert not verdict.passed
    assert "success rate n/a" in verdict.line


def test_baseline_regression_lists_flips_and_both_rates() -> None:
    baseline = summary(["PASS", "PASS", "PASS", "FAIL"])
    current = summary(["PASS", "FAIL", "PASS", "PASS"])
    assert flipped_to_fail(current, baseline) == ("tau2_retail__1",)
    same = gate(current, baseline=baseline)
    assert same.passed  # 75% against 75%: no drop
    worse = summary(["PASS", "FAIL", "FAIL", "FAIL"])
    verdict = gate(worse, baseline=baseline, max_regression=0.25)
    assert not verdict.passed  # a drop of 50 points > 25
    assert verdict.flipped == ("tau2_retail__1", "tau2_retail__2")
    assert verdict.line == (
        "tau2 gate: profile default, success rate 25.00% [4.6, 69.9], baseline 75.00% (change "
        "-50.00%, max regression 25.00%), 2 flipped pass->fail, 0 fail->pass of 4 paired, "
        "p=0.25, infra errors 0 (max 0): FAIL"
    )
    tolerated = gate(worse, baseline=baseline, max_regression=0.5)
    assert tolerated.passed


def test_an_interrupted_session_is_not_gated() -> None:
    verdict = gate(summary(["PASS"]), min_pass_rate=0.5, session_problem="interrupted")
    assert not verdict.passed
    assert verdict.line == "tau2 gate: not applied (the session ended interrupted)"


def test_the_line_names_the_tau2_profile_and_its_measure() -> None:
    verdict = gate(summary(["PASS", "FAIL"], profile="tau2"), min_pass_rate=0.5)
    assert verdict.passed
    assert verdict.line == (
        "tau2 gate: profile tau2, success rate (upstream reward 1) 50.00% [9.5, 90.5] "
        "(threshold 50.00%), infra errors 0 (max 0): PASS"
    )


def test_a_baseline_of_another_profile_fails_the_gate() -> None:
    baseline = summary(["FAIL", "FAIL"], profile="tau2")
    verdict = gate(summary(["PASS", "PASS"]), baseline=baseline)
    assert not verdict.passed
    assert verdict.line == (
        "tau2 gate: profile default, baseline of profile tau2: their rates are not comparable; "
        "give a baseline run of the same profile: FAIL"
    )


def test_the_drop_is_measured_over_the_scenarios_scored_in_both_runs() -> None:
    """A run of 3 tasks that all regressed, against a baseline of 114 of which they were 3
    of its 11 passes: the gate compared the whole runs (9.65% -> 0%, within a 10-point
    regression) and passed; over the 3 pairs the rate fell from 100% to 0%."""
    baseline = summary(["PASS"] * 3 + ["FAIL"] * 28)  # 9.68%: the whole runs differ by less
    current = summary(["FAIL"] * 3)
    verdict = gate(current, baseline=baseline, max_regression=0.10)
    assert not verdict.passed
    assert verdict.baseline_rate == 1.0
    assert verdict.line == (
        "tau2 gate: profile default, success rate 0.00% [0.0, 56.1], baseline 100.00% on the 3 "
        "paired, this run 0.00% on them (change -100.00%, max regression 10.00%), 3 flipped "
        "pass->fail, 0 fail->pass of 3 paired, p=0.125, infra errors 0 (max 0): FAIL"
    )
    # an infra error either side leaves its pair out, and says so
    infra = gate(summary(["PASS", "INFRA"]), baseline=summary(["PASS", "PASS"]), max_infra_errors=1)
    assert infra.passed
    assert "baseline 100.00% on the 1 paired, this run 100.00% on them (change +0.00%" in infra.line


def test_an_equal_rate_reads_plus_zero() -> None:
    verdict = gate(summary(["PASS", "FAIL"]), baseline=summary(["PASS", "FAIL"]))
    assert "baseline 50.00% (change +0.00%, max regression 0.00%)" in verdict.line


# -- --tau2-regression-alpha ---------------------------------------------------------------------


def test_a_drop_that_is_not_significant_passes_with_alpha() -> None:
    # the oracle passes 6 tasks, noop 3 of them (the done-when figures of issue 19)
    baseline = summary(["PASS"] * 6)
    current = summary(["PASS", "FAIL", "PASS", "FAIL", "PASS", "FAIL"])
    verdict = gate(current, baseline=baseline, max_regression=0.0, regression_alpha=0.05)
    assert verdict.passed
    assert verdict.paired is not None
    assert verdict.paired.p_value == 0.125
    assert verdict.line == (
        "tau2 gate: profile default, success rate 50.00% [18.8, 81.2], baseline 100.00% "
        "(change -50.00%, max regression 0.00%), 3 flipped pass->fail, 0 fail->pass of 6 "
        "paired, p=0.125 (not significant at alpha 0.05), infra errors 0 (max 0): PASS"
    )
    # the same drop without alpha fails, as before
    plain = gate(current, baseline=baseline)
    assert not plain.passed
    # a looser alpha makes it significant
    loose = gate(current, baseline=baseline, regression_alpha=0.2)
    assert not loose.passed
    assert "p=0.125 (significant at alpha 0.2)" in loose.line


def test_a_significant_drop_within_max_regression_passes() -> None:
    baseline = summary(["PASS"] * 20)
    current = summary(["PASS"] * 14 + ["FAIL"] * 6)  # p = 2**-6: significant, a 30-point drop
    within = gate(current, baseline=baseline, max_regression=0.3, regression_alpha=0.05)
    assert within.passed
    beyond = gate(current, baseline=baseline, max_regression=0.25, regression_alpha=0.05)
    assert not beyond.passed
    assert "p=0.0156 (significant at alpha 0.05)" in beyond.line


def test_with_alpha_the_threshold_gates_on_the_upper_bound() -> None:
    # 1 of 4: the point estimate 25% is below 50%, the interval [4.6, 69.9] reaches above it
    current = summary(["PASS", "FAIL", "FAIL", "FAIL"])
    plain = gate(current, min_pass_rate=0.5)
    assert not plain.passed
    honest = gate(current, min_pass_rate=0.5, regression_alpha=0.05)
    assert honest.passed
    assert "(threshold 50.00% on the 95% interval's upper bound)" in honest.line
    # above 69.9%, the whole interval is below the threshold
    below = gate(current, min_pass_rate=0.7, regression_alpha=0.05)
    assert not below.passed


def test_pairs_are_matched_by_task_and_trial_and_skip_infra() -> None:
    baseline = summary(["PASS", "PASS", "INFRA", "FAIL"])
    current = summary(["FAIL", "PASS", "PASS", "PASS", "PASS"])  # the 5th has no partner
    paired = pair_runs(current, baseline)
    assert (paired.pairs, paired.both, paired.broken, paired.fixed, paired.neither) == (
        3,
        1,
        1,
        1,
        0,
    )
    assert paired.p_value == pytest.approx(0.75)


def test_with_alpha_a_run_without_scored_scenarios_still_fails_against_a_baseline() -> None:
    verdict = gate(
        summary(["INFRA"]), max_infra_errors=5, baseline=summary(["PASS"]), regression_alpha=0.05
    )
    assert not verdict.passed
    assert "0 fail->pass of 0 paired, p=1 (not significant at alpha 0.05)" in verdict.line


def test_a_baseline_that_shares_no_scenario_cannot_compare() -> None:
    baseline = summary(["PASS", "PASS"])
    # the run's scenarios are other tasks: rename them so none pairs with the baseline's
    current = dataclasses.replace(
        summary(["FAIL", "FAIL"]),
        scenarios=tuple(
            dataclasses.replace(row, scenario_id=f"tau2_retail__{9 + i}", task_id=str(9 + i))
            for i, row in enumerate(summary(["FAIL", "FAIL"]).scenarios)
        ),
    )
    for alpha in (None, 0.05):
        verdict = gate(current, baseline=baseline, max_regression=1.0, regression_alpha=alpha)
        assert not verdict.passed
        assert "cannot compare (the baseline shares no scored scenario" in verdict.line


def test_a_baseline_without_a_scored_scenario_cannot_compare() -> None:
    verdict = gate(summary(["FAIL"]), baseline=summary(["INFRA", "INFRA"]))
    assert not verdict.passed
    assert "baseline n/a" in verdict.line
    assert "cannot compare (the baseline has no scored scenario" in verdict.line


def test_problems_fail_the_gate_and_are_named() -> None:
    verdict = gate(summary(["PASS"]), min_pass_rate=0.5, problems=["1 scenario test(s) errored"])
    assert not verdict.passed
    assert verdict.line.endswith("1 scenario test(s) errored: FAIL")


def test_an_empty_selection_fails() -> None:
    verdict = empty_selection_verdict("the selection is empty: --tau2-shard 2/2")
    assert not verdict.passed
    assert verdict.line == (
        "tau2 gate: no scenario ran (the selection is empty: --tau2-shard 2/2); a gate with "
        "nothing to measure fails: FAIL"
    )
