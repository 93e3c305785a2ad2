"""Where the harness's CPU goes with many conversations in flight: a sampled profile by stage.

Run from the repository root (py-spy is in the ``profile`` dependency group)::

    TAU2_DATA_DIR=/path/to/data .venv/bin/python benchmarks/profile_concurrency.py --run c456

It runs one row of ``bench_concurrency.py`` (the same server, 1 s per completion, and the same
pytest command) under ``py-spy record`` (100 samples a second of the pytest process, Python
stacks), with the probe of ``_measure.py`` for the CPU the process spent between its first and
last scenario test. Each sample is put in one stage by its stack: the owner (``OWNERS``, by
file) of its innermost frame that has one, among the frames run by the event loop's current
callback (a JSON encoding belongs to its caller; socket sends are the kernel's); samples of start-up
(imports, collection) and of the end (summaries, report) are counted apart. A stage's CPU per
completion = its share of the remaining samples x the probe's harness CPU per completion. On a
loaded machine py-spy also samples a process waiting for a core: the shares stay meaningful (the
waiting is spread over what runs), the wall time does not. Prints the table; writes
``benchmarks/results/profile-<run>.json``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _measure import ROOT, load_average, run_suite, write_json
from _scripted_server import ServerProcess
from _tables import parse_with_data, table
from bench_concurrency import RUNS, _pytest_args

START_UP = "start-up: imports, plugins, collection (once per process)"
FINISH = "end of the run: summaries, report (once per process)"
Frame = tuple[str, str]  # function, path (site-packages and the checkout stripped)
# The folders pyproject.toml's package-dir maps into the package. An installed or strict
# editable copy runs them as tau2_retail/tools/...; a plain editable install runs the checkout's
# own files (py-spy shows tools/dispatch.py, relative to the checkout on sys.path, or the whole
# path): both are named as the package's, so that OWNERS sees one path whatever the install.
_MAPPED = re.compile(rf"^(?:{re.escape(str(ROOT))}/)?(tools|plugins|fixtures)/")


def _frame(text: str) -> Frame:
    match = re.match(r"(.*) \((.*?):\d+\)", text)
    if match is None:
        return text, ""
    path = _MAPPED.sub(r"tau2_retail/\1/", match.group(2))
    path = re.sub(r".*site-packages/", "", path)
    path = re.sub(r".*/lib/python3\.\d+/", "", path)
    path = re.sub(r".*?/(tau2_retail|tests_tau2_retail|benchmarks)/", r"\1/", path)
    return match.group(1), path


def _has(frames: Sequence[Frame], *parts: str) -> bool:
    return any(part in path for _, path in frames for part in parts)


def _functions(frames: Sequence[Frame], *names: str) -> bool:
    """Whether a frame runs one of ``names`` (a method matches by its own name too)."""
    return any(function in names or function.rpartition(".")[2] in names for function, _ in frames)


# The owner of a frame by its file (or function), tried from the innermost frame outwards: the
# first frame with an owner decides (a JSON encoding belongs to whoever called it).
OWNERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("artifacts (JSON, files, folders)", ("tau2_retail/results/",)),
    ("our transport (pool, HTTP/1.1)", ("models/pool.py", "models/http1.py")),
    ("our reply reader (bounded read, JSON, checks)", ("models/bounded.py",)),
    ("httpx/httpcore (the openai client's HTTP library)", ("httpx", "httpcore", "h11/", "anyio/")),
    ("openai: request building, response wrapping", ("openai/", "sniffio/")),
    ("our request body (cached message JSON)", ("models/request_body.py", "models/messages.py")),
    ("tools, scoring, hashing", ("tau2_retail/tools/", "engine/scoring", "data/gold")),
    (
        "our client (retries, breaker, ramp, backoff)",
        ("openai_client.py", "attempt_failure.py", "sdk_transport.py", "ramp.py", "breaker.py"),
    ),
    ("scheduler", ("plugins/scheduler.py",)),
    ("logging", ("logging/",)),
    ("conversation engine", ("tau2_retail/engine/", "tau2_retail/models/")),
    ("pytest (fixtures, in the loop)", ("_pytest/", "pytest_asyncio", "pluggy/")),
    ("our plugin (in the loop)", ("tau2_retail/plugins/",)),
)
_READER_FUNCTIONS = ("OpenAIChatModel._parse", "read_completion", "read_message")
_SHARED = ("models/text.py", "tau2_retail/codec.py")


def _owner(frame: Frame) -> str | None:
    function, path = frame
    if path.endswith(_SHARED):
        return None  # helpers of several stages: their caller decides
    if function in _READER_FUNCTIONS:
        return "our reply reader (bounded read, JSON, checks)"
    if path.endswith("models/wire.py"):
        return "our request body (cached message JSON)"
    for stage, parts in OWNERS:
        if any(part in path for part in parts):
            return stage
    return None


def classify(stack: Sequence[str]) -> str | None:
    """The stage of one sampled stack (None: an idle thread py-spy still sampled)."""
    frames = [_frame(text) for text in stack]
    if frames[-1] == ("_worker", "concurrent/futures/thread.py"):
        return None  # the executor's idle thread, waiting on its queue
    if frames[-1][0] == "ThreadedChildWatcher._do_waitpid":
        return None  # asyncio's thread waiting for the folder writer process to end
    if _functions(frames, "_find_and_load", "pytest_collection", "pytest_configure"):
        return START_UP
    if _functions(
        frames,
        "pytest_sessionfinish",
        "pytest_terminal_summary",
        "pytest_unconfigure",
        "_ensure_unconfigure",  # pytest's cleanups too: its final gc.collect()
    ):
        return FINISH
    loop = [i for i, (function, _) in enumerate(frames) if function == "Handle._run"]
    if not loop:
        if _functions(frames, "BaseEventLoop._run_once"):
            return "event loop (select, timers)"
        if _has(frames, "_pytest/", "pluggy/"):
            return "pytest (per test: protocol, reports, terminal)"
        return "other"
    task = frames[loop[-1] + 1 :] or frames
    function, path = task[-1]
    if path.endswith("selector_events.py") and any(
        word in function for word in ("write", "send", "read", "recv")
    ):
        return "socket send, receive (kernel)"
    for frame in reversed(task):
        stage = _owner(frame)
        if stage is not None:
            return stage
    return "asyncio (tasks, futures, callbacks)"


def stages(raw: Path) -> Counter[str]:
    """Samples per stage of a py-spy ``raw`` (collapsed stacks) file."""
    counts: Counter[str] = Counter()
    for line in raw.read_text(encoding="utf-8").splitlines():
        stack, _, count = line.rpartition(" ")
        stage = classify(stack.split(";"))
        if stage is not None:
            counts[stage] += int(count)
    return counts


def profile(
    label: str, *, latency: float, rate: int, work: Path, raw: Path | None
) -> dict[str, Any]:
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    raw = raw or work / "profile.txt"
    server = ServerProcess(latency)
    try:
        load_before = load_average()
        run = run_suite(
            [*_pytest_args(label, RUNS[label], server, work / "runs"), "-k", "tau2_retail"],
            probe_dir=work / "probe",
            preimport_openai=True,
            prefix=[spy, "record", "-r", str(rate), "-f", "raw", "-o", str(raw), "--"],
        )
        stats = server.command("stats")
    finally:
        server.close()
    completions = sum(stats["requests"].values())
    process = next(p for p in run.processes if "last_test" in p["cpu_marks"])
    cpu = process["cpu_marks"]["last_test"] - process["cpu_marks"]["first_test"]
    counts = stages(raw)
    once = counts[START_UP] + counts[FINISH]
    per_completion = sum(counts.values()) - once
    ms = cpu / completions * 1000
    return {
        "run": label,
        "completions": completions,
        "harness_cpu_ms_per_completion": ms,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "result": next(
            (line for line in reversed(run.output.splitlines()) if " in " in line),
            run.last_line(),
        ),
        "samples": dict(counts),
        "stages": {
            stage: {"share": n / per_completion, "ms_per_completion": n / per_completion * ms}
            for stage, n in counts.most_common()
            if stage not in (START_UP, FINISH)
        },
        "once_per_process_share_of_samples": once / sum(counts.values()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--run", default="c456", choices=[k for k, v in RUNS.items() if not v["workers"]]
    )
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--rate", type=int, default=100, help="samples per second")
    parser.add_argument("--raw", type=Path, help="keep py-spy's collapsed stacks in this file")
    args = parse_with_data(parser)
    work = Path(tempfile.mkdtemp(prefix="tau2-profile-"))
    try:
        figures = profile(args.run, latency=args.latency, rate=args.rate, work=work, raw=args.raw)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"{figures['run']}: {figures['result']}; {figures['completions']} completions, harness "
        f"CPU {figures['harness_cpu_ms_per_completion']:.2f} ms per completion; load average "
        f"{figures['load_average_before'][0]:.1f} before, {figures['load_average_after'][0]:.1f} "
        f"after; start-up and end: {figures['once_per_process_share_of_samples']:.0%} of the "
        "samples (left out below)\n"
    )
    rows = [
        [stage, f"{value['share']:.1%}", f"{value['ms_per_completion']:.3f}"]
        for stage, value in figures["stages"].items()
    ]
    print(table(["stage", "share of the per-completion samples", "ms per completion"], rows))
    path = write_json(f"profile-{args.run}", figures)
    print(f"\nwritten: {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
