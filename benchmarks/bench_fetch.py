"""``data fetch`` from where people have the data (issue 18, item 4): prints a table.

Run: ``TAU2_DATA_DIR=... python benchmarks/bench_fetch.py``. A fake tau2-bench checkout is laid
out in a temporary folder from the data folder; each source fills an empty folder (14 files,
every sha256 checked), best of 5; the last row re-fetches a complete folder (what a CI job with
a restored cache pays: each file hashed, no source opened). Timings, never assertions.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import _checkout  # noqa: F401  (this checkout's tau2_retail, or a clear stop)

from tau2_retail.data import files
from tau2_retail.data.fetch import fetch
from tau2_retail.data.files import resolve_data_dir
from tau2_retail.testing.upstream_checkout import (
    RETAIL_FOLDER,
    make_upstream_checkout,
)

REPEATS = 5


def best_of(run: Callable[[Path], object], scratch: Path, *, fresh: bool = True) -> float:
    best = float("inf")
    for attempt in range(REPEATS):
        dest = scratch / f"dest-{attempt}"
        if not fresh:
            dest = scratch / "complete"
        files._digests.clear()  # as in a fresh process: every file is hashed
        started = time.perf_counter()
        run(dest)
        best = min(best, time.perf_counter() - started)
        if fresh:
            shutil.rmtree(dest)
    return best


def main() -> None:
    data_dir = resolve_data_dir()
    with tempfile.TemporaryDirectory() as temp:
        scratch = Path(temp)
        checkout = make_upstream_checkout(data_dir, scratch / "tau2-bench")
        size = sum(path.stat().st_size for path in checkout.rglob("*") if path.is_file())
        fetch(scratch / "complete", source_dir=data_dir)
        sources: dict[str, tuple[Callable[[Path], object], bool]] = {
            "--from DATA_DIR (cache layout)": (lambda d: fetch(d, source_dir=data_dir), True),
            "--from CHECKOUT (root)": (lambda d: fetch(d, source_dir=checkout), True),
            f"--from CHECKOUT/{RETAIL_FOLDER}": (
                lambda d: fetch(d, source_dir=checkout / RETAIL_FOLDER),
                True,
            ),
            "--base-url file://CHECKOUT": (lambda d: fetch(d, base_url=checkout.as_uri()), True),
            "complete folder again (hashed, nothing read from the source)": (
                lambda d: fetch(d, source_dir=checkout),
                False,
            ),
        }
        print(f"checkout: {size / 1e6:.1f} MB; best of {REPEATS}")
        print("| source | fetch of 14 files (ms) |\n| --- | ---: |")
        for name, (run, fresh) in sources.items():
            print(f"| {name} | {best_of(run, scratch, fresh=fresh) * 1000:.1f} |")


if __name__ == "__main__":
    main()
