"""114 conversations starting at once against a healthy server with a small listen backlog.

Run from the repository root (about a minute per round)::

    TAU2_DATA_DIR=/path/to/data .venv/bin/python benchmarks/bench_burst.py [--rounds 3]
    # the suite of another checkout (e.g. before a change), same server and driver:
    ... benchmarks/bench_burst.py --suite-pythonpath /path/to/other/checkout

``--suite-pythonpath`` serves a checkout whose root holds the package (from before the ``src/``
layout); a later checkout is importable only installed (its mapped ``tools/``, ``plugins/``,
``fixtures/``), so the script stops when the path does not give the runs its ``tau2_retail``:
run that checkout's own copy of this script with an environment it is installed in instead.

The server is the scripted endpoint of the reliability tests (agent and customer, gold
actions: every scenario succeeds when nothing fails) on a loopback server whose listen backlog
is ``--backlog`` (default 5), in this process. Each round runs ``pytest -n 0
--tau2-concurrency 114`` over the 114 scenarios with default retries and breaker, and with
``--tau2-breaker-window-seconds=0`` (the breaker's old rule: K consecutive failures, however
brief). The table gives per run the wall time, the scenarios scored, the infra errors, and the
retries the suite made (``requests.<role>.retries`` summed over ``metrics.json``). The burst's
failures depend on the machine's timing, so the rounds differ; timings are never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tau2_retail.data.files import resolve_data_dir
from tau2_retail.data.tasks import load_tasks, load_user_guidelines
from tau2_retail.testing.bench import make_bench
from tau2_retail.testing.loopback_server import LoopbackOpenAIServer
from tau2_retail.testing.scripted_endpoint import ScriptedEndpoint

VARIANTS = {
    "defaults": (),
    "window 0 (count only)": ("--tau2-breaker-window-seconds=0",),
}


def check_suite_pythonpath(path: str) -> None:
    """Stop unless ``PYTHONPATH=path`` makes the runs import ``tau2_retail`` (with its tools)
    from under ``path``: else they would silently run this environment's copy."""
    found = subprocess.run(
        [sys.executable, "-c", "import tau2_retail.tools as t; print(t.__file__)"],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        check=False,
    )
    where = found.stdout.strip() if found.returncode == 0 else ""
    if not where or not Path(where).resolve().is_relative_to(Path(path).resolve()):
        said = where or (found.stderr.strip().splitlines() or ["nowhere"])[-1]
        sys.exit(
            f"--suite-pythonpath {path}: the runs would not import tau2_retail.tools from "
            f"there ({said}); see --help"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backlog", type=int, default=5)
    parser.add_argument(
        "--suite-pythonpath",
        default="",
        help="PYTHONPATH of the runs: a checkout from before the src/ layout (its root holds "
        "the package); a later checkout: run its own copy of this script, installed",
    )
    args = parser.parse_args()
    if args.suite_pythonpath:
        check_suite_pythonpath(args.suite_pythonpath)
    data_dir = resolve_data_dir()
    tasks = load_tasks(data_dir)
    variants = VARIANTS if not args.suite_pythonpath else {"defaults": ()}
    print(f"listen backlog {args.backlog}, 114 scenarios, -n 0 --tau2-concurrency 114")
    print("| round | breaker | wall (s) | scored | infra errors | retries |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for round_ in range(1, args.rounds + 1):
        for name, extra in variants.items():
            endpoint = ScriptedEndpoint(tasks, load_user_guidelines(data_dir))
            endpoint.server = LoopbackOpenAIServer(responder=endpoint, backlog=args.backlog)
            with tempfile.TemporaryDirectory() as tmp, endpoint.server:
                bench = make_bench(Path(tmp) / "project", data_dir)
                if args.suite_pythonpath:
                    bench.env["PYTHONPATH"] = args.suite_pythonpath
                started = time.perf_counter()
                bench.run(
                    "-n", "0", "--tau2-concurrency=114", "--tau2-run-id=burst",
                    *endpoint.args("agent"), *endpoint.args("user"), *extra,
                )  # fmt: skip
                wall = time.perf_counter() - started
                counts = bench.summary("burst")["counts"]
                retries = 0
                for path in bench.run_dir("burst").glob("*/metrics.json"):
                    metrics = json.loads(path.read_text(encoding="utf-8"))
                    retries += sum(r.get("retries", 0) for r in metrics["requests"].values())
            print(
                f"| {round_} | {name} | {wall:.1f} | {counts['scored']} | "
                f"{counts['infra_errors']} | {retries} |"
            )
            sys.stdout.flush()


if __name__ == "__main__":
    main()
