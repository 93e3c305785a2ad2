"""The benchmark's own needs do not depend on which config file pytest chose in the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]


def test_a_pytest_ini_beside_pyproject_still_collects_only_the_scenarios(tmp_path: Path) -> None:
    """pytest then ignores pyproject.toml's [tool.pytest] (testpaths included); ``-k
    tau2_retail`` selected the suite's own tests/tau2_retail/... as well (653 instead of 114)."""
    ini = tmp_path / "pytest.ini"
    ini.write_text(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\ntau2_trials = 1\n",
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(ini), "--rootdir", str(CHECKOUT),
         "--co", "-q", "-k", "tau2_retail", "-p", "no:cacheprovider"],
        cwd=CHECKOUT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    collected = [line for line in done.stdout.splitlines() if "::" in line]
    assert len(collected) == 114
    assert all(line.startswith("tests_tau2_retail/") for line in collected)


def test_the_readme_command_runs_under_python_optimize(tmp_path: Path, data_dir: Path) -> None:
    """``PYTHONOPTIMIZE=2``: pytest warns that asserts are stripped (and, without docstrings,
    that pytester was imported before rewriting); ``filterwarnings = ["error"]`` made those
    notices a traceback at start-up."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env |= {"PYTHONOPTIMIZE": "2", "TAU2_DATA_DIR": str(data_dir)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-k", "tau2_retail", "-n", "0", "-p", "no:cacheprovider",
         "--tau2-tasks=0", f"--tau2-output-dir={tmp_path}"],
        cwd=CHECKOUT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "Overall success rate: 100.00% (1/1 scenarios)" in done.stdout
    assert "PytestConfigWarning: assertions not in test modules" in done.stdout
