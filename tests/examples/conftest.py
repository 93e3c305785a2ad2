"""The example agents run as a user runs them: a project with the benchmark module, the agent
given by import string or by a ``tau2_agent`` fixture, its model the loopback server playing
each task's gold script over HTTP (``OPENAI_BASE_URL`` points the ``openai`` client at it)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tau2_retail.data.tasks import Task, load_user_guidelines
from tau2_retail.testing.bench import Bench
from tau2_retail.testing.scripted_endpoint import ScriptedEndpoint
from tests.plugins.conftest import bench

__all__ = ["bench", "example_bench"]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def gold_endpoint(tasks: Mapping[str, Task], data_dir: Path) -> Iterator[ScriptedEndpoint]:
    scripted = ScriptedEndpoint(tasks, load_user_guidelines(data_dir))
    with scripted.server:
        yield scripted


@pytest.fixture
def example_bench(
    bench: Bench, gold_endpoint: ScriptedEndpoint, monkeypatch: pytest.MonkeyPatch
) -> Bench:
    shutil.copytree(EXAMPLES, bench.path / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("OPENAI_BASE_URL", gold_endpoint.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    return bench
