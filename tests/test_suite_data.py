"""The suite's own tests find the upstream data as a run does (issue 31, item 2): in
``$TAU2_DATA_DIR``, else in the data cache that ``python -m tau2_retail data fetch`` fills.
Without it they are skipped, naming that command and the variable (failed under ``CI=true``).

The tool tests once read only ``$TAU2_DATA_DIR`` and skipped 301 tests right after ``data
fetch`` had filled the cache, with a hint naming a folder of this project's own machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tau2_retail.data.files import DATA_DIR_ENV
from tau2_retail.testing.timeouts import scaled_timeout

ROOT = Path(__file__).resolve().parent.parent
# a tool test (the seed database) and a data test (the tasks), each from its own conftest
TESTS = [
    "tests/tools/test_reads.py::test_reads_record_no_action",
    "tests/tau2_retail/data/test_tasks.py::test_there_are_114_tasks_ordered_by_integer_id",
]


def _run_tests(tmp_path: Path, *, xdg: Path, ci: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TAU2_", "CI"))}
    env.update(XDG_CACHE_HOME=str(xdg), HOME=str(tmp_path / "home"))
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", *TESTS, "-p", "no:cacheprovider", "-n", "0", "-rs"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled_timeout(300),
        check=False,
    )


@pytest.mark.tau2_subprocess
def test_the_tests_read_the_cache_that_data_fetch_filled(data_dir: Path, tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"
    fetched = subprocess.run(
        [sys.executable, "-m", "tau2_retail", "data", "fetch", "--from", str(data_dir)],
        env={
            **{k: v for k, v in os.environ.items() if k != DATA_DIR_ENV},
            "XDG_CACHE_HOME": str(xdg),
        },
        capture_output=True,
        text=True,
        timeout=scaled_timeout(120),
        check=False,
    )
    assert fetched.returncode == 0, fetched.stderr
    assert (xdg / "tau2_retail" / "db.json").is_file()

    result = _run_tests(tmp_path, xdg=xdg)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "skipped" not in result.stdout.splitlines()[-1]


@pytest.mark.tau2_subprocess
def test_without_the_data_the_tests_say_how_to_get_it(tmp_path: Path) -> None:
    result = _run_tests(tmp_path, xdg=tmp_path / "empty")

    assert result.returncode == 0, result.stdout + result.stderr
    skips = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skips) == 2, result.stdout
    for line in skips:
        assert "python -m tau2_retail data fetch" in line
        assert DATA_DIR_ENV in line
        assert str(tmp_path / "empty" / "tau2_retail") in line  # the folder the user has
        assert "shared" not in line

    in_ci = _run_tests(tmp_path, xdg=tmp_path / "empty", ci=True)

    assert in_ci.returncode == pytest.ExitCode.TESTS_FAILED, in_ci.stdout
    assert "CI=true, so these tests may not be skipped" in in_ci.stdout
