"""Shared fixtures of the suite's own tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tau2_retail.data.files import resolve_data_dir
from tau2_retail.errors import DataError


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real data folder ($TAU2_DATA_DIR or fixtures/cache); fails the test if absent."""
    try:
        return resolve_data_dir()
    except DataError as error:
        pytest.fail(f"these tests need the upstream data: {error}", pytrace=False)
