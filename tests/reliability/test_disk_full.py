"""A full disk (issue 12, item 8): ENOSPC injected into every atomic write of a real run.

Each scenario whose artifacts cannot be written is an error with one line naming the file and
the cause (no traceback); the run summary is attempted, and its failure is named in a tau2
section of the terminal. A disk already full at start-up stops the run before any scenario
(``run_args.json`` cannot be written: the run folder would not be described).
"""

from __future__ import annotations

from tau2_retail.testing.bench import error_lines
from tests.reliability.conftest import Bench

# Appended to the project's conftest: from now on no file can be created in any folder whose
# path contains "runs" (the output dir), as on a full disk.
_FULL_DISK = """

import errno as _errno
import os as _os

import tau2_retail.results.atomic as _atomic

_real_open_new = _atomic._open_new


_described = []


def _open_new(name):
    if "runs" in name:
        # FULL_FROM_START: no write at all; else the disk fills once the run is described
        first = _os.path.basename(name).startswith(".tmp-run_args.json") and not _described
        if FULL_FROM_START or not first:
            raise OSError(_errno.ENOSPC, "No space left on device")
        _described.append(True)
    return _real_open_new(name)


_atomic._open_new = _open_new
"""


def test_a_full_disk_gives_one_line_per_failed_write_and_names_the_summary_failure(
    bench: Bench,
) -> None:
    conftest = bench.path / "conftest.py"
    conftest.write_text(conftest.read_text() + "\nFULL_FROM_START = False\n" + _FULL_DISK)
    run = bench.run("-n", "0", "--tau2-run-id=full", "--tau2-tasks=0,1")
    assert run.outcomes() == {"tau2_retail__0": "error", "tau2_retail__1": "error"}, run.output
    lines = [line for line in run.stdout.splitlines() if "No space left on device" in line]
    assert any(line.startswith("ArtifactError: cannot write ") for line in lines), run.output
    assert "Traceback" not in run.output
    assert "def tau2_outcome" not in run.stdout  # no fixture source in the report
    section = run.stdout.split("tau2 retail", 1)[-1]
    assert "tau2: could not write the run summary: cannot write " in section
    assert "[Errno 28] No space left on device" in section
    assert run.returncode != 0


def test_a_disk_full_at_start_up_stops_the_run_before_any_scenario(bench: Bench) -> None:
    conftest = bench.path / "conftest.py"
    conftest.write_text(conftest.read_text() + "\nFULL_FROM_START = True\n" + _FULL_DISK)
    run = bench.run("-n", "0", "--tau2-run-id=full", "--tau2-tasks=0,1")
    assert run.returncode == 4, run.output
    lines = error_lines(run.stderr)
    assert len(lines) == 1, run.output
    assert lines[0].startswith(
        "ERROR: --tau2-run-id full: the run folder cannot be described before the scenarios "
        "start: cannot write "
    )
    assert lines[0].endswith("run_args.json: [Errno 28] No space left on device")
    assert run.outcomes() == {}
    assert "Traceback" not in run.output
