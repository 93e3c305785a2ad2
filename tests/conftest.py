"""Fixtures shared by every test of the suite: the verified data folder, its tasks and gold
book, a writable copy of the folder, and a loopback OpenAI-compatible server. Defined here once; the
helpers behind them (bench, scripted endpoint, run readers) live in ``tau2_retail.testing``.

Subprocess-heavy tests (a benchmark project run by ``python -m pytest``, or pytester) carry the
``tau2_subprocess`` marker, set below from the fixtures they use: ``pytest tests -m "not
tau2_subprocess"`` runs the fast tier alone.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from hypothesis import settings

from tau2_retail.data.files import load_manifest, resolve_data_dir
from tau2_retail.data.gold import GoldBook
from tau2_retail.data.seed import load_seed
from tau2_retail.data.tasks import Task, load_tasks
from tau2_retail.engine.profiles import Profile, ProfileName, load_profile
from tau2_retail.errors import DataError
from tau2_retail.testing.loopback_server import LoopbackOpenAIServer
from tau2_retail.testing.unavailable import unavailable

ROOT = Path(__file__).resolve().parent.parent

SUBPROCESS_FIXTURES = frozenset({"bench", "pytester", "wheel", "installed"})
"""A test using one of these runs pytest in a project of its own."""
SUBPROCESS_MODULES = frozenset({"test_packaging.py"})
"""Modules whose every test builds or runs the distribution in a subprocess."""

# No deadline per example: a timing assertion, which a loaded machine (two workers beside a
# CI job) failed at random; speed is shown by benchmarks/, never asserted in tests.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")


#: a test id that xdist's controller takes for a scenario's (it sees node ids only, and knows a
#: scenario test by its parameter id): the suite's own tests must not use one, or a run of
#: `pytest tests -n 2` counts them as scenarios that never reported
SCENARIO_SHAPED_ID = re.compile(r"\[tau2_retail__\d+(?:-trial\d+)?\]$")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    marker = pytest.mark.tau2_subprocess
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if SCENARIO_SHAPED_ID.search(item.nodeid) and "tau2_scenario" not in fixtures:
            raise pytest.UsageError(
                f"{item.nodeid}: a test id of the shape of a scenario's is taken for a scenario "
                "under xdist; give this parameter other ids (pytest.mark.parametrize(ids=...))"
            )
        if fixtures & SUBPROCESS_FIXTURES or item.path.name in SUBPROCESS_MODULES:
            item.add_marker(marker)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real data folder, found as a run finds it: ``$TAU2_DATA_DIR``, else the data cache
    that ``python -m tau2_retail data fetch`` fills. Without it the test is skipped, saying
    how to get the data (failed under ``CI=true``)."""
    try:
        return resolve_data_dir()
    except DataError as error:
        unavailable(
            f"these tests need the upstream data files: {error}",
            in_ci=".ci/run sets TAU2_DATA_DIR",
        )


@pytest.fixture(scope="session")
def tasks(data_dir: Path) -> Mapping[str, Task]:
    """The 114 tasks, by id."""
    return load_tasks(data_dir)


@pytest.fixture(scope="session")
def book(data_dir: Path, tasks: Mapping[str, Task]) -> GoldBook:
    """The gold results of the tasks, each replayed once per test process."""
    return GoldBook(seed=load_seed(data_dir), tasks=tasks)


@pytest.fixture(scope="session")
def default_profile(data_dir: Path) -> Profile:
    """Our profile: the policy with our notes, our tools, our user prompt and judge."""
    return load_profile(ProfileName.DEFAULT, data_dir)


@pytest.fixture
def copied_data_dir(data_dir: Path, tmp_path: Path) -> Path:
    """A writable copy of the data folder, for tests that change or remove files."""
    copy = tmp_path / "data"
    for entry in load_manifest().files:
        target = copy / entry.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data_dir / entry.name, target)
    return copy


@pytest.fixture
def openai_server() -> Iterator[LoopbackOpenAIServer]:
    """A started ``LoopbackOpenAIServer`` with an empty script; stopped at teardown."""
    with LoopbackOpenAIServer() as server:
        yield server


def _pip(*args: str) -> None:
    """``python -m pip ARGS`` quietly; a failure fails the test with pip's output."""
    subprocess.run(
        [sys.executable, "-m", "pip", *args, "-q"], check=True, capture_output=True, timeout=300
    )


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built once per run from this checkout.

    xdist workers share one build (under the run's common temp folder, behind a file lock):
    two builds of one source tree at once collide in its ``build/`` folder.
    """
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out = shared / "tau2-wheel"
    with (shared / "tau2-wheel.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not list(out.glob("*.whl")):
            _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT))
    (built,) = out.glob("*.whl")
    return built


@pytest.fixture(scope="session")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel unpacked into a folder of its own (dependencies come from this environment):
    put it first on ``PYTHONPATH`` and its modules and entry point win over this checkout's."""
    target = tmp_path_factory.mktemp("site")
    _pip("install", "--no-deps", "--target", str(target), str(wheel))
    return target


@pytest.fixture
def local_time_far_from_utc() -> Iterator[None]:
    """This process's local time 3 h 30 behind UTC (St John's in winter), as a POSIX ``TZ``
    (no time zone database needed): a local time taken for UTC shows."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "NST+03:30"
    time.tzset()
    yield
    if before is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = before
    time.tzset()
