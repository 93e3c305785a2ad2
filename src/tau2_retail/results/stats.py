"""The statistics of a run: intervals, pass^k, paired comparisons (standard library only).

Every figure is pure and deterministic (the bootstrap draws from a fixed seed), so two runs of
the same scenarios, or a merged run and the single run it equals, print the same numbers.
``docs/statistics.md`` explains the methods with a worked example; the tests check each one
against scipy and published values.

- :func:`wilson_interval`: the 95% Wilson score interval of ``k`` successes in ``n``
  independent trials (Wilson 1927; Newcombe 1998, method 3)::

      centre = (p + z²/2n) / (1 + z²/n)
      half   = z / (1 + z²/n) * sqrt(p(1-p)/n + z²/4n²)          p = k/n, z = 1.959964

- :func:`clustered_interval`: a rate whose units come in clusters (the trials of one task, the
  NL assertions of one task's scenarios) is not ``n`` independent trials. When every cluster
  holds one unit it is the Wilson interval; otherwise the percentile interval of a bootstrap
  over clusters (``BOOTSTRAP_DRAWS`` resamples of the tasks with replacement, seed
  ``BOOTSTRAP_SEED``, rate = Σ successes / Σ units of the drawn tasks). When every unit
  passed (or every unit failed) the bootstrap cannot vary; the interval is then Wilson's with
  the number of clusters as ``n`` (perfectly agreeing trials carry one task's information).
- :func:`pass_hat_k`: tau2's unbiased estimator of pass^k, the chance that ``k`` fresh trials
  of a task all succeed, averaged over tasks: ``mean_t C(c_t, k) / C(n_t, k)`` (``c_t``
  successes of ``n_t`` trials), with the same bootstrap interval over tasks.
- :func:`mcnemar_regression_p`: the one-sided exact McNemar test of a regression. Of the
  paired scenarios whose outcome changed, ``broken`` went pass->fail and ``fixed`` fail->pass;
  without a real change each flip is a fair coin, so ``p = P(X >= broken)`` for
  ``X ~ Binomial(broken + fixed, 1/2)`` (1 when nothing flipped).
- :func:`paired_difference`: the difference of two paired rates (current - baseline =
  ``(fixed - broken) / n``) with Newcombe's hybrid score interval for paired data (Newcombe
  1998, "Improved confidence intervals for the difference between binomial proportions based
  on paired data", method 10): Wilson intervals ``(l1, u1)`` and ``(l2, u2)`` of the two
  rates, ``phi`` the correlation of the 2x2 table (0 when a margin is empty), then::

      low  = d - sqrt((p1-l1)² - 2 phi (p1-l1)(u2-p2) + (u2-p2)²)
      high = d + sqrt((u1-p1)² - 2 phi (u1-p1)(p2-l2) + (p2-l2)²)
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from statistics import NormalDist

__all__ = [
    "BOOTSTRAP_DRAWS",
    "BOOTSTRAP_SEED",
    "CONFIDENCE",
    "TASK_BOOTSTRAP",
    "TASK_WILSON",
    "WILSON",
    "Interval",
    "PairedComparison",
    "clustered_interval",
    "fixed",
    "mcnemar_regression_p",
    "paired_comparison",
    "paired_difference",
    "pass_hat_k",
    "wilson_interval",
]

CONFIDENCE = 0.95
#: resamples of the tasks; 2000 keeps the percentile bounds' Monte Carlo error under ~0.5 points
BOOTSTRAP_DRAWS = 2000
BOOTSTRAP_SEED = 20240601

_Z = NormalDist().inv_cdf(1 - (1 - CONFIDENCE) / 2)

WILSON = "wilson"
TASK_BOOTSTRAP = "task-bootstrap"
TASK_WILSON = "wilson-tasks"


def fixed(value: float, digits: int) -> str:
    """``value`` with ``digits`` decimals, a tie rounded away from zero, as JavaScript's
    ``toFixed`` does: the report page and the text summaries then print the same digits
    (Python's own formatting rounds an exact tie such as 81.25 to even, 81.2)."""
    exact = Decimal(value).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return f"{exact:.{digits}f}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Interval:
    """A 95% confidence interval and the method that gave it (``wilson``, ``task-bootstrap``,
    ``wilson-tasks``: Wilson over tasks when the bootstrap cannot vary; ``newcombe-paired``)."""

    low: float
    high: float
    method: str

    def percent_text(self) -> str:
        """``[53.1, 70.6]``: the bounds in percent, one decimal."""
        return f"[{fixed(100 * self.low, 1)}, {fixed(100 * self.high, 1)}]"


def wilson_interval(successes: int, n: int) -> Interval | None:
    """The 95% Wilson score interval of ``successes`` out of ``n`` (None when ``n`` is 0)."""
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes}/{n}")
    if n == 0:
        return None
    low, high = _wilson(successes, n)
    return Interval(low=low, high=high, method=WILSON)


def _wilson(successes: int, n: int) -> tuple[float, float]:
    """Wilson's bounds for ``0 <= successes <= n``, ``n >= 1``."""
    p = successes / n
    z2 = _Z * _Z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = _Z / denominator * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # the exact bounds at k = 0 and k = n are 0 and 1; rounding must not move them
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def _percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted values, linear between order statistics (numpy's default)."""
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


@functools.lru_cache(maxsize=8)
def _draws(count: int) -> tuple[tuple[int, ...], ...]:
    """The bootstrap's resamples of ``count`` clusters: the same for every rate of a run."""
    rng = random.Random(BOOTSTRAP_SEED)
    tasks = range(count)
    return tuple(tuple(rng.choices(tasks, k=count)) for _ in range(BOOTSTRAP_DRAWS))


def _bootstrap(values: Sequence[tuple[float, int]], *, ratio: bool) -> tuple[float, float]:
    """Percentile bounds of a bootstrap over clusters.

    ``values``: per cluster ``(x, n)``. ``ratio``: the statistic is ``Σx / Σn`` of the drawn
    clusters; else the mean of ``x`` over the drawn clusters.
    """
    xs = [x for x, _ in values]
    ns = [n for _, n in values]
    draws = []
    for picked in _draws(len(values)):
        total = math.fsum(map(xs.__getitem__, picked))
        draws.append(total / sum(map(ns.__getitem__, picked)) if ratio else total / len(picked))
    draws.sort()
    alpha = 1 - CONFIDENCE
    return _percentile(draws, alpha / 2), _percentile(draws, 1 - alpha / 2)


def clustered_interval(clusters: Sequence[tuple[int, int]]) -> Interval | None:
    """The 95% interval of ``Σ successes / Σ units`` over clusters ``(successes, units)``.

    Wilson's when every cluster has one unit (independent units); else the bootstrap over
    clusters (see the module docstring). Clusters without units are ignored; None when no
    unit is left.
    """
    kept = [(k, n) for k, n in clusters if n > 0]
    if any(not 0 <= k <= n for k, n in kept):
        raise ValueError("each cluster needs 0 <= successes <= units")
    passed = sum(k for k, _ in kept)
    total = sum(n for _, n in kept)
    if total == 0:
        return None
    if all(n == 1 for _, n in kept):
        return wilson_interval(passed, total)
    if passed in (0, total):
        low, high = _wilson(len(kept) if passed else 0, len(kept))
        return Interval(low=low, high=high, method=TASK_WILSON)
    low, high = _bootstrap([(float(k), n) for k, n in kept], ratio=True)
    rate = passed / total
    return Interval(low=min(low, rate), high=max(high, rate), method=TASK_BOOTSTRAP)


def pass_hat_k(outcomes: Sequence[tuple[int, int]], k: int) -> tuple[float | None, Interval | None]:
    """tau2's pass^k over tasks ``(successes, trials)`` and its 95% interval.

    Tasks with fewer than ``k`` trials are skipped; ``(None, None)`` when none is left. The
    interval is Wilson's over tasks when every task's term is 0 or 1 and they all agree (the
    bootstrap cannot vary) or when each task has one trial; else the bootstrap over tasks.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    kept = [(c, n) for c, n in outcomes if n >= k]
    if not kept:
        return None, None
    terms = [math.comb(c, k) / math.comb(n, k) for c, n in kept]
    value = math.fsum(terms) / len(terms)
    single = all(n == 1 for _, n in kept)
    if single or (len(set(terms)) == 1 and terms[0] in (0.0, 1.0)):
        ones = sum(1 for term in terms if term == 1.0)
        low, high = _wilson(ones, len(terms))
        return value, Interval(low=low, high=high, method=WILSON if single else TASK_WILSON)
    low, high = _bootstrap([(term, 1) for term in terms], ratio=False)
    return value, Interval(low=min(low, value), high=max(high, value), method=TASK_BOOTSTRAP)


def mcnemar_regression_p(*, broken: int, fixed: int) -> float:
    """One-sided exact McNemar p-value of a regression: ``P(X >= broken)``,
    ``X ~ Binomial(broken + fixed, 1/2)``; 1.0 when nothing flipped."""
    if broken < 0 or fixed < 0:
        raise ValueError(f"flip counts must be >= 0, got {broken} and {fixed}")
    flips = broken + fixed
    tail = sum(math.comb(flips, i) for i in range(broken, flips + 1))
    return float(Fraction(tail, 2**flips))


def paired_difference(
    *, both: int, broken: int, fixed: int, neither: int
) -> tuple[float, Interval] | None:
    """``current - baseline`` of paired rates and Newcombe's 95% interval (method 10).

    The 2x2 table of the pairs: ``both`` passed in both runs, ``broken`` passed in the baseline
    only, ``fixed`` in the current run only, ``neither`` in none. None when there is no pair.
    """
    n = both + broken + fixed + neither
    if min(both, broken, fixed, neither) < 0:
        raise ValueError("table cells must be >= 0")
    if n == 0:
        return None
    current, baseline = both + fixed, both + broken
    p1, p2 = current / n, baseline / n
    (l1, u1), (l2, u2) = _wilson(current, n), _wilson(baseline, n)
    margins = (both + broken) * (fixed + neither) * (both + fixed) * (broken + neither)
    phi = (both * neither - broken * fixed) / math.sqrt(margins) if margins else 0.0
    d = p1 - p2
    below = (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2
    above = (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2
    low = max(-1.0, d - math.sqrt(max(below, 0.0)))
    high = min(1.0, d + math.sqrt(max(above, 0.0)))
    return d, Interval(low=low, high=high, method="newcombe-paired")


@dataclass(frozen=True, slots=True, kw_only=True)
class PairedComparison:
    """Two runs' scenarios paired by task and trial (scored in both): the 2x2 table, the
    one-sided exact McNemar p-value of a regression and the difference with its interval."""

    pairs: int
    both: int
    broken: int
    fixed: int
    neither: int
    p_value: float
    difference: float | None
    interval: Interval | None

    @property
    def drop(self) -> float:
        """baseline - current over the pairs (positive: a regression)."""
        return -(self.difference or 0.0)


def paired_comparison(outcomes: Sequence[tuple[bool, bool]]) -> PairedComparison:
    """The comparison of pairs ``(baseline passed, current passed)``."""
    both = sum(1 for before, now in outcomes if before and now)
    broken = sum(1 for before, now in outcomes if before and not now)
    fixed = sum(1 for before, now in outcomes if now and not before)
    neither = len(outcomes) - both - broken - fixed
    difference = paired_difference(both=both, broken=broken, fixed=fixed, neither=neither)
    return PairedComparison(
        pairs=len(outcomes),
        both=both,
        broken=broken,
        fixed=fixed,
        neither=neither,
        p_value=mcnemar_regression_p(broken=broken, fixed=fixed),
        difference=difference[0] if difference else None,
        interval=difference[1] if difference else None,
    )
