"""``scaled_timeout``: subprocess limits follow ``TAU2_TEST_TIMEOUT_SCALE``."""

from __future__ import annotations

import pytest

from tau2_retail.testing.timeouts import TIMEOUT_SCALE_ENV, scaled_timeout


def test_the_default_scale_is_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIMEOUT_SCALE_ENV, raising=False)
    assert scaled_timeout(150) == 150


def test_the_variable_multiplies_every_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIMEOUT_SCALE_ENV, "2.5")
    assert scaled_timeout(240) == 600


@pytest.mark.parametrize("raw", ["0", "-1", "fast", "nan", "inf"])
def test_a_bad_scale_names_the_variable(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv(TIMEOUT_SCALE_ENV, raw)
    with pytest.raises(ValueError, match=f"{TIMEOUT_SCALE_ENV}='{raw}': expected a number > 0"):
        scaled_timeout(1)
