"""The cost of the run statistics and the Monte Carlo error of the bootstrap (issue 19): prints
tables, asserts nothing.

python benchmarks/bench_statistics.py

1. Time of one clustered interval and of pass^k for k = 1..trials over 114 tasks (what a
   summary with trials > 1 computes about a dozen times: overall, task, four signals, NL,
   splits, personas).
2. How much the bootstrap's bounds move with the seed: the interval of the same data under 30
   other seeds (``BOOTSTRAP_DRAWS`` resamples each); the spread is the Monte Carlo error that
   the fixed seed hides.
"""

from __future__ import annotations

import random
import statistics
import time

from tau2_retail.results import stats

TASKS = 114


def _outcomes(trials: int, seed: int = 7) -> list[tuple[int, int]]:
    """114 tasks whose chance of success varies by task (a realistic clustered run)."""
    rng = random.Random(seed)
    out = []
    for _ in range(TASKS):
        chance = rng.choice((0.0, 0.2, 0.5, 0.8, 1.0))
        out.append((sum(rng.random() < chance for _ in range(trials)), trials))
    return out


def _best_ms(function: object, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        stats._draws.cache_clear()
        started = time.perf_counter()
        function()  # type: ignore[operator]
        best = min(best, time.perf_counter() - started)
    return best * 1000


def main() -> None:
    print("| trials | clustered interval (ms) | pass^1..k (ms) | 12 rates + pass^k (ms) |")
    print("| ---: | ---: | ---: | ---: |")
    for trials in (2, 3, 5):
        data = _outcomes(trials)
        one = _best_ms(lambda data=data: stats.clustered_interval(data))
        pass_k = _best_ms(
            lambda data=data, trials=trials: [
                stats.pass_hat_k(data, k) for k in range(1, trials + 1)
            ]
        )
        summary = _best_ms(
            lambda data=data, trials=trials: (
                [stats.clustered_interval(data) for _ in range(12)],
                [stats.pass_hat_k(data, k) for k in range(1, trials + 1)],
            )
        )
        print(f"| {trials} | {one:.1f} | {pass_k:.1f} | {summary:.1f} |")

    print()
    print("| trials | rate | bound | fixed seed | min .. max over 30 seeds | stdev (points) |")
    print("| ---: | ---: | --- | ---: | ---: | ---: |")
    original = stats.BOOTSTRAP_SEED
    for trials in (3,):
        data = _outcomes(trials)
        rate = sum(k for k, _ in data) / sum(n for _, n in data)
        fixed = stats.clustered_interval(data)
        lows, highs = [], []
        for seed in range(30):
            stats.BOOTSTRAP_SEED = 1000 + seed
            stats._draws.cache_clear()
            interval = stats.clustered_interval(data)
            assert interval is not None
            lows.append(100 * interval.low)
            highs.append(100 * interval.high)
        stats.BOOTSTRAP_SEED = original
        stats._draws.cache_clear()
        assert fixed is not None
        for name, values, at in (("low", lows, fixed.low), ("high", highs, fixed.high)):
            print(
                f"| {trials} | {100 * rate:.2f}% | {name} | {100 * at:.2f} | "
                f"{min(values):.2f} .. {max(values):.2f} | {statistics.stdev(values):.2f} |"
            )


if __name__ == "__main__":
    main()
