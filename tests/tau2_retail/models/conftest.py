"""Fixtures for the model tests: a loopback OpenAI-compatible server per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tau2_retail.loopback_server import LoopbackOpenAIServer


@pytest.fixture
def openai_server() -> Iterator[LoopbackOpenAIServer]:
    """A started ``LoopbackOpenAIServer`` with an empty script; stopped at teardown."""
    with LoopbackOpenAIServer() as server:
        yield server
