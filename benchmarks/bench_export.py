"""The export to upstream's results.json (issue 26): time and memory; prints tables, asserts
nothing.

python benchmarks/bench_export.py [--trials 1,4]

For each number of trials, a tau2-profile run of all 114 tasks is written in-process (the
harness against a scripted loopback endpoint playing agent, user and judge: the gold calls,
every assertion met), then:

1. ``export_run`` to a file: wall time (best of 3), the file's size, and the peak of the
   memory Python allocated during one export (``tracemalloc``; the per-process caches of the
   data warmed first). A streaming export's peak does not grow with the simulations: the
   largest piece is the embedded tasks (about 1 MB of text).
2. Reading the file back as a run (``upstream_summary``, the baseline of ``report --against``
   and ``--tau2-baseline``): wall time, best of 3.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from tau2_retail.data.files import resolve_data_dir
from tau2_retail.engine.harness import DataBundle
from tau2_retail.tau2_format.export import export_run
from tau2_retail.tau2_format.upstream_run import upstream_summary
from tau2_retail.testing.scripted_endpoint import ScriptedEndpoint
from tau2_retail.testing.tau2_runs import tau2_bundle, tau2_endpoint, write_tau2_run

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import load_average, machine, machine_line
from _tables import table, verdict

ROUNDS = 3
LIMIT_SECONDS = 2.0


def _best(function: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - started)
    return best


def _peak_mb(run_dir: Path, output: Path) -> float:
    export_run(run_dir, output)  # the data caches (tasks, policy, manifest) warmed
    tracemalloc.start()
    try:
        export_run(run_dir, output)
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def _row(
    scratch: Path, trials: int, bundle: DataBundle, endpoint: ScriptedEndpoint, data_dir: Path
) -> list[object]:
    run_dir = scratch / f"run-{trials}"
    started = time.perf_counter()
    write_tau2_run(run_dir, bundle, endpoint, task_ids=tuple(bundle.tasks), trials=trials)
    written = time.perf_counter() - started
    output = scratch / f"results-{trials}.json"
    seconds = _best(lambda: export_run(run_dir, output))
    peak = _peak_mb(run_dir, output)
    simulations = len(json.loads(output.read_bytes())["simulations"])
    read_back = _best(lambda: upstream_summary(output, data_dir=data_dir))
    return [
        simulations,
        f"{written:.1f}",
        f"{seconds:.3f}",
        verdict(seconds, LIMIT_SECONDS),
        f"{output.stat().st_size / 1e6:.1f}",
        f"{peak:.1f}",
        f"{read_back:.3f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", default="1,4", help="comma-separated, e.g. 1,4")
    args = parser.parse_args()
    data_dir = resolve_data_dir()
    figures = {"machine": machine()}
    bundle = tau2_bundle(data_dir)
    endpoint = tau2_endpoint(bundle)
    rows = []
    with tempfile.TemporaryDirectory() as scratch, endpoint.server:
        for trials in (int(t) for t in args.trials.split(",")):
            rows.append(_row(Path(scratch), trials, bundle, endpoint, data_dir))
    figures["load_average_at_end"] = load_average()
    print(machine_line(figures))
    print(
        table(
            [
                "simulations",
                "run written (s)",
                "export (s)",
                f"< {LIMIT_SECONDS:g} s",
                "file (MB)",
                "export peak (MB)",
                "read back (s)",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
