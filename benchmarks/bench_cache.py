"""The response cache's cost and what it saves: per-completion overhead, and whole runs.

Run from the repository root (about two minutes on 2 cores)::

    TAU2_DATA_DIR=/path/to/data .venv/bin/python benchmarks/bench_cache.py [--tasks 20]

- In process: for a request the size of a late agent turn (a 40 KB history plus the 17 tool
  schemas), the time to compute its digest, store a reply and find it again
  (``perf_counter``, medians and p95 of ``--samples`` each), on a cache file holding
  ``--entries`` replies.
- Whole runs, each a real ``python -m pytest`` subprocess against the loopback endpoint playing
  agent, customer and judge with ``--latency`` seconds per reply: without the cache, with a cold
  cache, with the warm cache (the same run again) and in replay mode with the server stopped.
  Wall time, requests the server received, and the run's cost from ``summary.json``.

Prints tables and writes ``benchmarks/results/cache.json``. Timings are never asserted.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import _checkout  # noqa: F401  (this checkout's tau2_retail first)
from _measure import machine, percentile, write_json
from _tables import table

from tau2_retail.data.files import resolve_data_dir
from tau2_retail.data.tasks import load_tasks, load_user_guidelines
from tau2_retail.models.cache import CacheMode, ResponseCache, request_digest
from tau2_retail.models.messages import AssistantTurn, ToolCall, Usage
from tau2_retail.testing.bench import make_bench
from tau2_retail.testing.loopback_server import LoopbackOpenAIServer
from tau2_retail.testing.scripted_endpoint import ScriptedEndpoint
from tau2_retail.tools.schemas import tool_schemas

PRICES = {
    "bench-agent": {"input": 2.0, "output": 8.0},
    "bench-user": {"input": 0.4, "output": 1.6},
    "bench-judge": {"input": 2.0, "output": 8.0},
}


def _body(n: int) -> dict[str, Any]:
    history = [
        {"role": "user" if i % 2 else "assistant", "content": f"turn {n}-{i} " + "x" * 780}
        for i in range(50)
    ]
    return {
        "model": "bench-agent",
        "seed": 626729,
        "temperature": 0.0,
        "messages": history,
        "tools": [dict(schema) for schema in tool_schemas()],
        "tool_choice": "auto",
    }


def in_process(samples: int, entries: int, folder: Path) -> dict[str, Any]:
    cache = ResponseCache(folder / "overhead.sqlite", mode=CacheMode.READ_WRITE)
    turn = AssistantTurn(
        content="Your order #W2378156 has been exchanged. Anything else?",
        tool_calls=(ToolCall(id="c1", name="get_order_details", arguments='{"order_id": "x"}'),),
        usage=Usage(n_calls=1, prompt=10_000, completion=60),
    )
    bodies = [_body(n) for n in range(entries)]
    digest_s, store_s, hit_s = [], [], []
    digests = []
    for body in bodies:
        started = time.perf_counter()
        digest = request_digest(
            role="agent", model="bench-agent", host="http://127.0.0.1:1/v1", body=body, trial=0
        )
        digest_s.append(time.perf_counter() - started)
        digests.append(digest)
        started = time.perf_counter()
        cache.store(digest, role="agent", model="bench-agent", host="h", turn=turn)
        store_s.append(time.perf_counter() - started)
    for digest in digests[:samples]:
        started = time.perf_counter()
        assert cache.lookup(digest) is not None
        hit_s.append(time.perf_counter() - started)
    cache.close()
    size = sum(p.stat().st_size for p in folder.glob("overhead.sqlite*"))
    body_bytes = len(json.dumps(bodies[0]))

    def ms(values: list[float]) -> dict[str, float]:
        return {
            "median_ms": 1000 * statistics.median(values),
            "p95_ms": 1000 * percentile(values, 0.95),
        }

    return {
        "request_body_bytes": body_bytes,
        "entries": entries,
        "file_bytes": size,
        "digest": ms(digest_s),
        "store": ms(store_s),
        "hit": ms(hit_s),
    }


def runs(data_dir: Path, tasks: int, latency: float, folder: Path) -> list[dict[str, Any]]:
    loaded = load_tasks(data_dir)
    endpoint = ScriptedEndpoint(loaded, load_user_guidelines(data_dir))
    endpoint.server = LoopbackOpenAIServer(responder=endpoint, latency=latency)
    bench = make_bench(folder / "project", data_dir)
    cache = folder / "runs.sqlite"
    figures = []
    with endpoint.server:
        base = [
            *endpoint.args("agent", model="bench-agent"),
            *endpoint.args("user", model="bench-user"),
            *endpoint.args("judge", model="bench-judge"),
            f"--tau2-prices={json.dumps(PRICES)}",
            f"--tau2-tasks={','.join(str(n) for n in range(tasks))}",
            "-n",
            "0",
            "--tau2-concurrency=8",
            "-q",
        ]
        plan = [
            ("no cache", []),
            ("cold cache", [f"--tau2-cache={cache}"]),
            ("warm cache (same run again)", [f"--tau2-cache={cache}"]),
            ("replay, server stopped", [f"--tau2-cache={cache}", "--tau2-cache-mode=replay"]),
        ]
        for number, (name, extra) in enumerate(plan):
            if name.startswith("replay"):
                endpoint.server.stop()
            endpoint.reset()
            run = bench.run(*base, *extra, f"--tau2-run-id=r{number}")
            summary = bench.summary(f"r{number}")
            figures.append(
                {
                    "run": name,
                    "exit": run.ret,
                    "wall_s": run.duration,
                    "requests": len(endpoint.log),
                    "succeeded": summary["counts"]["succeeded"],
                    "cost_usd": summary["cost"]["total"],
                    "cache_hits": sum(
                        u.get("cache_hits", 0) for u in summary["token_usage"].values()
                    ),
                }
            )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args()
    data_dir = resolve_data_dir()
    folder = Path(tempfile.mkdtemp(prefix="tau2-bench-cache-"))
    try:
        overhead = in_process(args.samples, args.entries, folder)
        whole = runs(data_dir, args.tasks, args.latency, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(machine())
    print(
        f"\nPer completion, request body {overhead['request_body_bytes']:,} bytes, "
        f"file of {overhead['entries']} entries ({overhead['file_bytes'] / 1e6:.1f} MB):\n"
    )
    print(
        table(
            ["step", "median ms", "p95 ms"],
            [
                [step, overhead[step]["median_ms"], overhead[step]["p95_ms"]]
                for step in ("digest", "store", "hit")
            ],
        )
    )
    print(f"\n{args.tasks} scenarios, 3 roles at the loopback endpoint, {args.latency} s/reply:\n")
    print(
        table(
            ["run", "exit", "wall s", "requests", "cache hits", "succeeded", "cost USD"],
            [
                [
                    f["run"],
                    f["exit"],
                    f["wall_s"],
                    f["requests"],
                    f["cache_hits"],
                    f["succeeded"],
                    f"{f['cost_usd']:.4f}",
                ]
                for f in whole
            ],
        )
    )
    path = write_json("cache", {"machine": machine(), "overhead": overhead, "runs": whole})
    print(f"\nfigures: {path}")


if __name__ == "__main__":
    main()
