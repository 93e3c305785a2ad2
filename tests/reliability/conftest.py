"""Fixtures of the reliability tests: the benchmark run by pytest in a subprocess, and a
loopback OpenAI-compatible endpoint that plays a scripted agent (and customer, and judge) with
faults injected per task.

Every benchmark run here is a real ``python -m pytest`` process with a timeout: xdist workers,
signals, crashes and asyncio loops behave as in production, and a hang fails the test instead
of stalling CI. The endpoint is :class:`tau2_retail.testing.loopback_server.LoopbackOpenAIServer` (a
real aiohttp server on 127.0.0.1) in a thread of the test process.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tau2_retail.data.tasks import Task, load_user_guidelines
from tau2_retail.testing.bench import Bench, make_bench
from tau2_retail.testing.scripted_endpoint import ScriptedEndpoint

# The probe is test-side (the project's conftest, not the product): it tells the SIGKILL test
# which process runs which scenario.
_CONFTEST = """\
import os
from pathlib import Path


def pytest_runtest_setup(item):
    folder = os.environ.get("RELIABILITY_PID_DIR")
    if folder:
        Path(folder, item.name).write_text(str(os.getpid()))
"""


@pytest.fixture
def bench(tmp_path: Path, data_dir: Path) -> Bench:
    """A benchmark project in ``tmp_path/project``; its runs write to ``tmp_path/project/runs``,
    report every outcome (``-rA``) and write a junit XML each."""
    return make_bench(
        tmp_path / "project", data_dir, conftest=_CONFTEST, options=["-rA"], junit=True
    )


@pytest.fixture
def endpoint(tasks: Mapping[str, Task], data_dir: Path) -> Iterator[ScriptedEndpoint]:
    """A started loopback server answering as :class:`ScriptedEndpoint` (gold-acting agent)."""
    scripted = ScriptedEndpoint(tasks, load_user_guidelines(data_dir))
    with scripted.server:
        yield scripted
