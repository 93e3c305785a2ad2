"""A resource the tests need is missing: skipped with the reason on a developer's machine,
failed in CI (``CI=true``), where a run must not pass by silently skipping tests."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

__all__ = ["unavailable"]


def unavailable(reason: str, *, in_ci: str) -> NoReturn:
    """Skip the test with ``reason``; under ``CI=true`` fail it, adding ``in_ci`` (what CI
    provides, so that the failure says what is wrong with the job)."""
    if os.environ.get("CI") == "true":
        pytest.fail(
            f"{reason}; CI=true, so these tests may not be skipped ({in_ci})", pytrace=False
        )
    pytest.skip(reason)
