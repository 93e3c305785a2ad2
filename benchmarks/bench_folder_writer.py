"""What a burst of finished scenarios costs the event loop's thread: their folders written in
the run's process, or by the helper process (``tau2_retail.results.folder_writer``).

Run from the repository root (about a minute)::

    TAU2_DATA_DIR=/path/to/data .venv/bin/python benchmarks/bench_folder_writer.py [--bursts 5]

The 114 scenarios run once offline (built-in oracle agent, scripted customer); their outcomes
are then written as one burst of 114 folders, as when many conversations in flight end
together, ``--bursts`` times each way, alternating, each burst into new folders under
``TMPDIR``:

- in process: each folder gathered, encoded and written, one after the other, as with
  ``--tau2-concurrency 1``;
- helper: all 114 ``FolderWriter.put`` at once on an event loop (gathering the contents, plain
  values, happens in this process; encoding the JSON documents and creating the files in the
  helper's), as the scheduler does with ``--tau2-concurrency`` above 1.

Per burst: the CPU of this process's thread (the event loop's: what the conversations in flight
wait for), the burst's wall, and the helper's CPU (its rusage once it ended). Beside them the
file system's speed, measured before each burst (``_measure.file_ms``: a file created, written
and renamed), which on this project's VM moved from 0.02 to 1.2 ms within minutes. Prints a
table and writes ``benchmarks/results/folder_writer.json``. Timings are never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _checkout  # noqa: F401  (this checkout's tau2_retail first)
from _measure import ROOT, file_ms, load_average, machine, machine_line, median, write_json
from _tables import parse_with_data, table
from bench_offline import _harness_inputs, oracle_outcome, rendered_folder


async def _outcomes(inputs: dict[str, Any]) -> list[Any]:
    return [await oracle_outcome(inputs, task) for task in inputs["tasks"].values()]


def in_process(inputs: dict[str, Any], outcomes: list[Any], folder: Path) -> dict[str, float]:
    from tau2_retail.results.scenario_folder import put_scenario_files

    wall, cpu = time.perf_counter(), time.thread_time()
    for outcome in outcomes:
        put_scenario_files(rendered_folder(inputs, folder, outcome))
    return {
        "loop_thread_cpu_ms_per_folder": (time.thread_time() - cpu) / len(outcomes) * 1000,
        "burst_wall_s": time.perf_counter() - wall,
        "helper_cpu_s": 0.0,
    }


def helper(inputs: dict[str, Any], outcomes: list[Any], folder: Path) -> dict[str, float]:
    from tau2_retail.results.folder_writer import FolderWriter

    async def burst() -> dict[str, float]:
        writer = await FolderWriter.start()
        await asyncio.sleep(0.5)  # the helper's start-up (once per run) is not the burst's
        assert writer.in_child, "the helper process did not start"
        wall, cpu = time.perf_counter(), time.thread_time()
        await asyncio.gather(
            *(
                writer.put(functools.partial(rendered_folder, inputs, folder, outcome))
                for outcome in outcomes
            )
        )
        figures = {
            "loop_thread_cpu_ms_per_folder": (time.thread_time() - cpu) / len(outcomes) * 1000,
            "burst_wall_s": time.perf_counter() - wall,
        }
        await writer.aclose()
        return figures

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    figures = asyncio.run(burst())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    figures["helper_cpu_s"] = (after.ru_utime + after.ru_stime) - (
        children.ru_utime + children.ru_stime
    )
    return figures


def report(rows: list[dict[str, Any]]) -> None:
    """The table of the bursts, then each mode's medians."""
    headers = [
        "mode",
        "burst",
        "a file ms (before)",
        "loop thread CPU ms / folder",
        "burst wall s (114 folders)",
        "helper CPU s",
    ]
    keys = ("file_ms", "loop_thread_cpu_ms_per_folder", "burst_wall_s", "helper_cpu_s")
    digits = (3, 2, 3, 3)
    body = [
        [r["mode"], r["burst"], *(round(r[k], d) for k, d in zip(keys, digits, strict=True))]
        for r in rows
    ]
    print("\n" + table(headers, body))
    for mode in ("in process", "helper"):
        mine = [r for r in rows if r["mode"] == mode]
        print(
            f"{mode}: loop thread CPU per folder median "
            f"{median(r['loop_thread_cpu_ms_per_folder'] for r in mine):.2f} ms, burst wall "
            f"median {median(r['burst_wall_s'] for r in mine):.3f} s"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bursts", type=int, default=5)
    args = parse_with_data(parser)
    inputs = _harness_inputs()
    outcomes = asyncio.run(_outcomes(inputs))
    work = Path(tempfile.mkdtemp(prefix="tau2-bench-folder-writer-"))
    print(f"the bursts write under {work}", flush=True)
    rows: list[dict[str, Any]] = []
    try:
        for number in range(args.bursts):
            for mode, write in (("in process", in_process), ("helper", helper)):
                files = file_ms(work / "probe-files")
                figures = write(inputs, outcomes, work / f"{mode.replace(' ', '-')}-{number}")
                rows.append({"mode": mode, "burst": number + 1, "file_ms": files, **figures})
                print(f"  {mode} {number + 1}: {figures}, a file {files:.2f} ms", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    figures_all = {
        "machine": machine(),
        "folders_per_burst": len(outcomes),
        "work_dir": str(work),
        "bursts": rows,
        "load_average_at_end": load_average(),
    }
    print(machine_line(figures_all))
    report(rows)
    print(f"\nwritten: {write_json('folder_writer', figures_all).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
