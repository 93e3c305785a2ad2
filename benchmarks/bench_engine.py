"""Engine micro-benchmarks: import + data load, per-task gold replay, all 114 replays.

Run: ``TAU2_DATA_DIR=... python benchmarks/bench_engine.py [--json OUT]``. Prints a table and
the targets of issue #2; writes the figures as JSON when asked. Timings, never assertions.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
import _checkout  # noqa: E402, F401  (this checkout's tau2_retail, or a clear stop)

IMPORT_AND_LOAD = """
import time
start = time.perf_counter()
from tau2_retail.data.files import resolve_data_dir
from tau2_retail.data.seed import load_seed
from tau2_retail.data.tasks import load_tasks, load_policy, load_user_guidelines
data_dir = resolve_data_dir()
load_seed(data_dir); load_tasks(data_dir); load_policy(data_dir); load_user_guidelines(data_dir)
print(time.perf_counter() - start)
"""


def import_and_load_seconds(repeats: int) -> float:
    """Median wall time of a fresh interpreter importing the engine and loading all data."""
    times = []
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, "-c", IMPORT_AND_LOAD],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        times.append(float(out.stdout.strip()))
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    from tau2_retail.data.files import resolve_data_dir
    from tau2_retail.data.gold import compute_gold
    from tau2_retail.data.seed import load_seed
    from tau2_retail.data.tasks import load_tasks
    from tau2_retail.tools.store import Store

    data_dir = resolve_data_dir()
    seed = load_seed(data_dir)
    tasks = load_tasks(data_dir)
    _ = seed.hash  # the hash index is built once per process; not part of a task's cost

    per_task: list[float] = []
    for task in tasks.values():
        start = time.perf_counter()
        gold = compute_gold(task, seed)  # seed a store, replay the gold actions
        gold.store.matches(Store(seed))  # compare with another store (record digests)
        _ = gold.db_hash  # the full canonical hash of the expected state
        per_task.append(time.perf_counter() - start)

    all_runs = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        golds = [compute_gold(task, seed) for task in tasks.values()]
        for gold in golds:
            _ = gold.db_hash
        all_runs.append(time.perf_counter() - start)

    figures = {
        "per_task_median_ms": statistics.median(per_task) * 1000,
        "per_task_max_ms": max(per_task) * 1000,
        "all_114_replays_s": statistics.median(all_runs),
        "import_and_load_s": import_and_load_seconds(args.repeats),
    }
    targets = {
        "per_task_median_ms": 2.0,
        "per_task_max_ms": None,
        "all_114_replays_s": 0.25,
        "import_and_load_s": 0.5,
    }
    print(f"{'measure':<24} {'value':>10} {'target':>10}  met")
    for name, value in figures.items():
        target = targets[name]
        met = "-" if target is None else ("yes" if value <= target else "NO")
        shown_target = "-" if target is None else f"{target:g}"
        print(f"{name:<24} {value:>10.3f} {shown_target:>10}  {met}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
