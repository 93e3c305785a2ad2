"""Root conftest of the checkout: the pytest plugin itself is registered by the installed
distribution's ``pytest11`` entry point (``pip install -e .``), so its options exist whatever the
rootdir. ``pytester`` serves the suite's own plugin tests (tests/plugins); pytest accepts
``pytest_plugins`` only in this top-level conftest.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

_CHECKOUT = Path(__file__).resolve().parent
_BENCHMARK = _CHECKOUT / "tests_tau2_retail"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A bare ``pytest`` in the checkout collects the benchmark only, whichever config file
    pytest chose: a ``pytest.ini`` beside ``pyproject.toml`` hides its ``testpaths``, and
    ``pytest -k tau2_retail`` then also ran the suite's own tests (tests/tau2_retail/...)."""
    if config.args_source is not pytest.Config.ArgsSource.INVOCATION_DIR:
        return None  # paths given, or testpaths configured: collect what was asked for
    if config.invocation_params.dir.resolve() != _CHECKOUT:
        return None
    path = collection_path.resolve()
    if path.is_dir() and path.parent == _CHECKOUT and path != _BENCHMARK:
        return True
    return None
