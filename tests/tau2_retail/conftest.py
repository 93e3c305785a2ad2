"""Fixtures for the tests of ``tau2_retail``: the verified data folder and copies of it, and a
loopback OpenAI-compatible server per test."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tau2_retail.data.files import load_manifest
from tau2_retail.testing.loopback_server import LoopbackOpenAIServer


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
