"""The statistics module against independent references: scipy, published values, brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats
from scipy.special import comb

from tau2_retail.results.stats import (
    clustered_interval,
    fixed,
    mcnemar_regression_p,
    paired_comparison,
    paired_difference,
    pass_hat_k,
    wilson_interval,
)


def scipy_wilson(k: int, n: int) -> tuple[float, float]:
    ci = scipy_stats.binomtest(k, n).proportion_ci(method="wilson")
    return float(ci.low), float(ci.high)


# -- Wilson ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        # Newcombe (1998), "Two-sided confidence intervals for the single proportion",
        # Statistics in Medicine 17:857-872, Table II, method 3 (score, no continuity correction)
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_matches_published_values(k: int, n: int, low: float, high: float) -> None:
    interval = wilson_interval(k, n)
    assert interval is not None
    assert (round(interval.low, 4), round(interval.high, 4)) == (low, high)


def test_wilson_of_the_noop_floor_and_the_issue_example() -> None:
    # noop matches 11 of the 114 tasks; the issue's example is 71/114 shown as [53.1, 70.6]
    floor = wilson_interval(11, 114)
    assert floor is not None
    assert (floor.low, floor.high) == pytest.approx(scipy_wilson(11, 114), abs=1e-12)
    example = wilson_interval(71, 114)
    assert example is not None
    assert example.percent_text() == "[53.1, 70.6]"


@given(st.integers(1, 2000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
@settings(max_examples=300, deadline=None)
def test_wilson_equals_scipy_and_contains_the_rate(kn: tuple[int, int]) -> None:
    k, n = kn
    interval = wilson_interval(k, n)
    assert interval is not None
    assert (interval.low, interval.high) == pytest.approx(scipy_wilson(k, n), abs=1e-9)
    assert 0.0 <= interval.low <= k / n <= interval.high <= 1.0
    mirrored = wilson_interval(n - k, n)  # the interval of the failures mirrors it
    assert mirrored is not None
    assert (mirrored.low, mirrored.high) == pytest.approx((1 - interval.high, 1 - interval.low))


def test_wilson_rejects_impossible_counts_and_has_no_interval_for_nothing() -> None:
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(3, 2)


# -- McNemar -----------------------------------------------------------------------------------


def test_mcnemar_done_when_figures() -> None:
    # noop against the oracle: 3 of 6 tasks flip pass->fail, none the other way
    assert mcnemar_regression_p(broken=3, fixed=0) == 0.125
    # all 114 tasks: the 103 the noop agent cannot do flip
    assert mcnemar_regression_p(broken=103, fixed=0) == 2.0**-103
    assert mcnemar_regression_p(broken=0, fixed=0) == 1.0


@given(st.integers(0, 300), st.integers(0, 300))
@settings(max_examples=300, deadline=None)
def test_mcnemar_equals_scipy_exact_binomial_test(broken: int, fixed: int) -> None:
    p = mcnemar_regression_p(broken=broken, fixed=fixed)
    if broken + fixed == 0:
        assert p == 1.0
        return
    reference = scipy_stats.binomtest(broken, broken + fixed, 0.5, alternative="greater").pvalue
    assert p == pytest.approx(reference, rel=1e-9, abs=1e-300)
    # symmetry: P(X >= b) + P(X >= c) = 1 + P(X = b) for X ~ Binomial(b + c, 1/2)
    other = mcnemar_regression_p(broken=fixed, fixed=broken)
    pmf = scipy_stats.binom.pmf(broken, broken + fixed, 0.5)
    assert p + other == pytest.approx(1 + pmf, rel=1e-9)
    # one more pass->fail flip never makes the regression less significant
    assert mcnemar_regression_p(broken=broken + 1, fixed=fixed) <= p


# -- paired difference -------------------------------------------------------------------------


def newcombe_reference(both: int, broken: int, fixed: int, neither: int) -> tuple[float, float]:
    """Newcombe's method 10 from scipy's Wilson intervals and numpy's correlation."""
    n = both + broken + fixed + neither
    current, baseline = both + fixed, both + broken
    p1, p2 = current / n, baseline / n
    (l1, u1), (l2, u2) = scipy_wilson(current, n), scipy_wilson(baseline, n)
    before = [1] * both + [1] * broken + [0] * fixed + [0] * neither
    now = [1] * both + [0] * broken + [1] * fixed + [0] * neither
    if len(set(before)) < 2 or len(set(now)) < 2:
        phi = 0.0
    else:
        phi = float(np.corrcoef(now, before)[0, 1])
    d = p1 - p2
    low = d - math.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0))
    high = d + math.sqrt(max((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2, 0))
    return max(low, -1.0), min(high, 1.0)


cells = st.integers(0, 60)


@given(cells, cells, cells, cells)
@settings(max_examples=300, deadline=None)
def test_paired_difference_equals_the_reference_and_contains_the_difference(
    both: int, broken: int, fixed: int, neither: int
) -> None:
    result = paired_difference(both=both, broken=broken, fixed=fixed, neither=neither)
    if both + broken + fixed + neither == 0:
        assert result is None
        return
    assert result is not None
    d, interval = result
    n = both + broken + fixed + neither
    assert d == pytest.approx((fixed - broken) / n)
    # abs 1e-7: where the square root's argument is ~0 (perfectly correlated pairs), the
    # last-bit differences of the two Wilson computations grow to ~1e-8 through the root
    assert (interval.low, interval.high) == pytest.approx(
        newcombe_reference(both, broken, fixed, neither), abs=1e-7
    )
    assert -1.0 <= interval.low <= d <= interval.high <= 1.0
    # swapping the runs negates the difference and mirrors the interval
    swapped = paired_difference(both=both, broken=fixed, fixed=broken, neither=neither)
    assert swapped is not None
    assert swapped[0] == pytest.approx(-d)
    assert (swapped[1].low, swapped[1].high) == pytest.approx((-interval.high, -interval.low))


def test_paired_comparison_counts_the_table() -> None:
    pairs = [(True, False)] * 3 + [(False, False)] * 3
    result = paired_comparison(pairs)
    assert (result.both, result.broken, result.fixed, result.neither) == (0, 3, 0, 3)
    assert result.p_value == 0.125
    assert result.difference == -0.5
    assert result.drop == 0.5
    assert result.interval is not None
    assert result.interval.low < -0.5 < result.interval.high


# -- pass^k ------------------------------------------------------------------------------------


def brute_force_pass_hat_k(flags: list[bool], k: int) -> float:
    """The share of the k-subsets of the trials in which every trial passed."""
    subsets = list(itertools.combinations(flags, k))
    return sum(all(subset) for subset in subsets) / len(subsets)


task_trials = st.lists(st.lists(st.booleans(), min_size=1, max_size=6), min_size=1, max_size=12)


@given(task_trials, st.integers(1, 6))
@settings(max_examples=200, deadline=None)
def test_pass_hat_k_is_the_unbiased_estimator(tasks: list[list[bool]], k: int) -> None:
    value, interval = pass_hat_k([(sum(flags), len(flags)) for flags in tasks], k)
    kept = [flags for flags in tasks if len(flags) >= k]
    if not kept:
        assert (value, interval) == (None, None)
        return
    terms = [brute_force_pass_hat_k(flags, k) for flags in kept]
    assert value == pytest.approx(sum(terms) / len(terms))
    assert [comb(sum(f), k) / comb(len(f), k) for f in kept] == pytest.approx(terms)
    assert interval is not None
    assert 0.0 <= interval.low <= value <= interval.high <= 1.0


def test_pass_hat_k_interval_is_the_bootstrap_over_tasks() -> None:
    # 40 tasks of 4 trials, 0..4 passes each: compare with scipy's percentile bootstrap
    outcomes = [(i % 5, 4) for i in range(40)]
    terms = np.array([comb(c, 2) / comb(n, 2) for c, n in outcomes])
    value, interval = pass_hat_k(outcomes, 2)
    assert value == pytest.approx(terms.mean())
    assert interval is not None
    assert interval.method == "task-bootstrap"
    reference = scipy_stats.bootstrap(
        (terms,), np.mean, method="percentile", n_resamples=20000, rng=np.random.default_rng(1)
    ).confidence_interval
    assert interval.low == pytest.approx(reference.low, abs=0.02)
    assert interval.high == pytest.approx(reference.high, abs=0.02)


def test_pass_hat_k_with_one_trial_is_wilson_over_tasks() -> None:
    value, interval = pass_hat_k([(1, 1)] * 11 + [(0, 1)] * 103, 1)
    assert value == pytest.approx(11 / 114)
    assert interval is not None
    assert interval.method == "wilson"
    assert (interval.low, interval.high) == pytest.approx(scipy_wilson(11, 114))


# -- clustered rates ---------------------------------------------------------------------------


def test_clustered_interval_is_the_bootstrap_of_the_ratio_over_tasks() -> None:
    clusters = [(i % 4, 3) for i in range(60)]
    interval = clustered_interval(clusters)
    assert interval is not None
    assert interval.method == "task-bootstrap"
    passed = np.array([k for k, _ in clusters], dtype=float)
    units = np.array([n for _, n in clusters], dtype=float)
    reference = scipy_stats.bootstrap(
        (passed, units),
        lambda k, n: k.sum() / n.sum(),
        paired=True,
        vectorized=False,
        method="percentile",
        n_resamples=5000,
        rng=np.random.default_rng(1),
    ).confidence_interval
    assert interval.low == pytest.approx(reference.low, abs=0.02)
    assert interval.high == pytest.approx(reference.high, abs=0.02)
    # trials of a task are correlated here: the interval is wider than Wilson's over trials
    naive = wilson_interval(int(passed.sum()), int(units.sum()))
    assert naive is not None
    assert interval.high - interval.low > naive.high - naive.low


def test_clustered_interval_of_single_units_is_wilson() -> None:
    interval = clustered_interval([(1, 1)] * 11 + [(0, 1)] * 103)
    assert interval is not None
    assert interval.method == "wilson"
    assert (interval.low, interval.high) == pytest.approx(scipy_wilson(11, 114))


def test_clustered_interval_when_every_trial_agrees_counts_tasks() -> None:
    # every trial passed: the bootstrap cannot vary; Wilson's over the 20 tasks instead
    interval = clustered_interval([(3, 3)] * 20)
    assert interval is not None
    assert interval.method == "wilson-tasks"
    assert (interval.low, interval.high) == pytest.approx(scipy_wilson(20, 20))


def test_clustered_interval_is_deterministic() -> None:
    clusters = [(i % 3, 2) for i in range(30)]
    assert clustered_interval(clusters) == clustered_interval(list(clusters))


@given(st.lists(st.integers(1, 5).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n)))))
@settings(max_examples=100, deadline=None)
def test_clustered_interval_contains_the_rate(clusters: list[tuple[int, int]]) -> None:
    interval = clustered_interval(clusters)
    total = sum(n for _, n in clusters)
    if total == 0:
        assert interval is None
        return
    assert interval is not None
    rate = sum(k for k, _ in clusters) / total
    assert 0.0 <= interval.low <= rate <= interval.high <= 1.0


@pytest.mark.parametrize(
    ("value", "digits", "shown"),
    [
        (81.25, 1, "81.3"),  # an exact binary tie: away from zero, as JavaScript's toFixed
        (-81.25, 1, "-81.3"),
        (81.249, 1, "81.2"),
        (0.1, 4, "0.1000"),
        (100.0, 1, "100.0"),
    ],
)
def test_fixed_rounds_ties_like_the_report_page(value: float, digits: int, shown: str) -> None:
    assert fixed(value, digits) == shown
