"""The cost of reading and writing records (issue 20, item 3): prints tables, asserts nothing.

python benchmarks/bench_codec.py

1. Per record, best of 5 rounds of N: decode (JSON text to record), encode (record to JSON
   values) and encode + format (the artifact text), for two ``metrics.json`` (a typical
   scenario, and a long one of 34 turns with a judge and prices), ``summary.json`` and
   ``run_args.json`` of the run in ``tests/tau2_retail/results/data/stored_run``.
2. The first use of a record type (its ``TypeAdapter`` is built then, once per process).
3. Import time of ``tau2_retail.results.records`` (``python -X importtime``, best of 5).

The script also runs on a checkout from before the codec (it uses ``from_json``/``to_json``
when the records still have them), which gives the "before" column of the docs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.results.atomic import dumps_json
from tau2_retail.results.records import RunArgs, RunSummary

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "tests" / "tau2_retail" / "results" / "data" / "stored_run"
FILES = {
    "metrics.json (typical)": (ScenarioMetrics, RUN / "tau2_retail__1/trial-1/metrics.json"),
    "metrics.json (34 turns)": (ScenarioMetrics, RUN / "tau2_retail__3/trial-1/metrics.json"),
    "summary.json": (RunSummary, RUN / "summary.json"),
    "run_args.json": (RunArgs, RUN / "run_args.json"),
}
ROUNDS = 5
N = 500
OLD_API = hasattr(ScenarioMetrics, "from_json")


def _codec() -> tuple[Callable[[type, str], Any], Callable[[Any], Any]]:
    if OLD_API:
        return (lambda kind, text: kind.from_json(json.loads(text))), (lambda r: r.to_json())
    from tau2_retail import codec

    return (lambda kind, text: codec.decode(kind, text, "bench")), codec.encode


def _best_us(function: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for _ in range(N):
            function()
        best = min(best, (time.perf_counter() - started) / N)
    return best * 1e6


def _first_use_ms(kind: type, text: str) -> float:
    """Decode and encode once with no adapter built yet (the codec's one-time cost)."""
    decode, encode = _codec()
    if not OLD_API:
        from tau2_retail import codec

        codec._ADAPTERS.clear()  # the benchmark measures the cache's cold start
    started = time.perf_counter()
    encode(decode(kind, text))
    return (time.perf_counter() - started) * 1000


def _import_ms() -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        err = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import tau2_retail.results.records"],
            capture_output=True,
            text=True,
            check=True,
        ).stderr
        line = [x for x in err.splitlines() if x.endswith("| tau2_retail.results.records")][-1]
        cumulative = int(re.split(r"\s*\|\s*", line)[1])
        best = min(best, cumulative / 1000)
    return best


def main() -> None:
    decode, encode = _codec()
    print(f"API: {'to_json/from_json' if OLD_API else 'tau2_retail.codec'}\n")
    print("| record | bytes | decode (us) | encode (us) | encode + format (us) | first use (ms) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, (kind, path) in FILES.items():
        text = path.read_text(encoding="utf-8")
        first = _first_use_ms(kind, text)
        record = decode(kind, text)
        assert dumps_json(encode(record)) == text  # the bench measures a faithful round trip
        row = (
            _best_us(lambda kind=kind, text=text: decode(kind, text)),
            _best_us(lambda record=record: encode(record)),
            _best_us(lambda record=record: dumps_json(encode(record))),
        )
        cells = " | ".join(f"{value:.1f}" for value in row)
        print(f"| {name} | {len(text)} | {cells} | {first:.2f} |")
    print(f"\nimport tau2_retail.results.records: {_import_ms():.1f} ms (best of {ROUNDS})")


if __name__ == "__main__":
    main()
