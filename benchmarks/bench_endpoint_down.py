"""Wall time of the 114-scenario run with one endpoint down (issue 12, item 6).

Run from the repository root (a few minutes)::

    TAU2_DATA_DIR=/path/to/data .venv/bin/python benchmarks/bench_endpoint_down.py

For each role (agent, user, judge) and fault (connection refused, hung, HTTP 503, 429 with
``Retry-After: 3600``), ``pytest tests_tau2_retail -n 2`` runs all 114 scenarios with that role
at a loopback endpoint that always answers with the fault; the other roles are the built-in
models (no judge unless the judge is the role under test). Defaults everywhere (4 retries,
backoff from 1 s, breaker after 5 failed attempts, probe every 30 s) except the request
timeout, ``--tau2-<role>-timeout=5`` (with the default 120 s a hung endpoint costs each worker
5 x 120 s + 15 s of backoff before its breaker opens). "start-up" is the offline run of the
same command (built-in models, no endpoint): the time the suite needs anyway. Prints a table;
timings are never asserted.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any

from tau2_retail.testing.loopback_server import Hang, HttpError, LoopbackOpenAIServer, Reply

ROLES = ("agent", "user", "judge")
TIMEOUT = 5
FAULTS: dict[str, Callable[[], Reply] | None] = {
    "refused": None,
    "hung": lambda: Hang(),
    "HTTP 503": lambda: HttpError.server_error(503),
    "429, Retry-After: 3600": lambda: HttpError.rate_limited(retry_after="3600"),
}


def _closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _run(args: list[str]) -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as output:
        command = [
            sys.executable, "-m", "pytest", "tests_tau2_retail", "-q", "-n", "2",
            "-p", "no:cacheprovider", f"--tau2-output-dir={output}", *args,
        ]  # fmt: skip
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-200:]
    return wall, last


def main() -> None:
    baseline, summary = _run([])
    print(f"start-up (offline run of the same command): {baseline:.1f} s ({summary})\n")
    print("| endpoint down | fault | wall (s) | beyond start-up (s) | pytest says |")
    print("| --- | --- | ---: | ---: | --- |")
    for role in ROLES:
        for name, make in FAULTS.items():
            server = None
            if make is None:
                url = _closed_port_url()
            else:
                fault = make()

                def responder(body: Mapping[str, Any], fault: Reply = fault) -> Reply:
                    return fault

                server = LoopbackOpenAIServer(responder=responder).start()
                url = server.base_url
            try:
                wall, said = _run(
                    [
                        f"--tau2-{role}-model=down-{role}",
                        f"--tau2-{role}-base-url={url}",
                        f"--tau2-{role}-timeout={TIMEOUT}",
                        # an endpoint agent needs the scripted customer accepted explicitly
                        *(["--tau2-user-model=builtin:customer"] if role == "agent" else []),
                    ]
                )
            finally:
                if server is not None:
                    server.stop()
            print(f"| {role} | {name} | {wall:.1f} | {wall - baseline:.1f} | {said} |", flush=True)


if __name__ == "__main__":
    main()
