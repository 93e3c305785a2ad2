"""Fixtures shared by the unit tests of the package's modules."""

from __future__ import annotations

import pytest

from tau2_retail.models.openai_client import OpenAIChatModel


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
