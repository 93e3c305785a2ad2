"""Fixtures shared by the unit tests of the package's modules.

For the upstream results.json's tests (``tau2_format``, the ``export``/``import`` commands):
tau2-profile runs written in-process against a scripted loopback endpoint. ``mixed_run``: eight
tasks in two trials with every kind of outcome: reward 1 (0, 2, 24 with an NL assertion met,
33 whose basis is DB alone), a database that differs (5: the agent only says it is done), an
NL assertion the judge fails (19, its second one), an ending upstream does not evaluate (3:
the agent only talks until max_steps, 20 here) and an infra error (10: the agent's endpoint
answers 500, no retries).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tau2_retail.engine.harness import DataBundle
from tau2_retail.models.openai_client import OpenAIChatModel
from tau2_retail.tau2_format.export import export_run
from tau2_retail.testing.loopback_server import Completion
from tau2_retail.testing.scripted_endpoint import (
    CHAT,
    REPORT,
    SERVER_ERROR,
    ScriptedEndpoint,
    always,
)
from tau2_retail.testing.tau2_runs import tau2_bundle, tau2_endpoint, write_tau2_run


@pytest.fixture
def closed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the endpoint models closed during the test, in order."""
    names: list[str] = []
    original = OpenAIChatModel.close

    async def spy(self: OpenAIChatModel) -> None:
        names.append(self.name)
        await original(self)

    monkeypatch.setattr(OpenAIChatModel, "close", spy)
    return names


MIXED_TASKS = ("0", "2", "3", "5", "10", "19", "24", "33")
MIXED_MAX_STEPS = 20
MIXED_TRIALS = 2


@pytest.fixture(scope="session")
def export_bundle(data_dir: Path) -> DataBundle:
    return tau2_bundle(data_dir)


@pytest.fixture(scope="session")
def export_endpoint(export_bundle: DataBundle) -> Iterator[ScriptedEndpoint]:
    scripted = tau2_endpoint(export_bundle)
    scripted.agent["3"] = CHAT
    scripted.agent["5"] = Completion(content=REPORT)
    scripted.judge_fails["19"] = {2}
    scripted.faults["10"] = always(SERVER_ERROR)
    with scripted.server:
        yield scripted


@pytest.fixture(scope="session")
def mixed_run(
    tmp_path_factory: pytest.TempPathFactory,
    export_bundle: DataBundle,
    export_endpoint: ScriptedEndpoint,
) -> Path:
    run_dir = tmp_path_factory.mktemp("runs") / "mixed"
    write_tau2_run(
        run_dir,
        export_bundle,
        export_endpoint,
        task_ids=MIXED_TASKS,
        trials=MIXED_TRIALS,
        max_steps=MIXED_MAX_STEPS,
        prices={
            "scripted-agent": {"input": 2.0, "output": 8.0},
            "scripted-user": {"input": 1.0, "output": 1.0},
        },
    )
    return run_dir


@pytest.fixture(scope="session")
def exported(mixed_run: Path, data_dir: Path) -> Path:
    path = mixed_run.parent / "mixed.json"
    export_run(mixed_run, path, data_dir=data_dir)
    return path


@pytest.fixture(scope="session")
def document(exported: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(exported.read_bytes())
    return loaded


@pytest.fixture(scope="session")
def upstream_example(data_dir: Path) -> Path:
    """A results.json upstream wrote itself (tasks 0, 5 and 24, two trials), kept beside the
    data (never committed)."""
    path = data_dir / "upstream_results_example.json"
    if not path.is_file():
        pytest.skip("upstream_results_example.json is not in the data folder")
    return path
