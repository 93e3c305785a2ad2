"""The installed benchmark's node ids do not depend on where its environment sits.

``--pyargs tests_tau2_retail`` collects the package from site-packages, and pytest names each
collected file by its path from the rootdir: with the virtual environment inside the repository
(``.venv/``) every node id, failure line and junit class name started with
``.venv/lib/python3.11/site-packages/``; with it elsewhere they started with
``test_scenarios.py``. Collected at the top of the session (``--pyargs``, or a folder outside
the rootdir), the package and its module are named by their import path in both cases:
``tests_tau2_retail/test_scenarios.py::test_tau2_retail[...]``, junit class
``tests_tau2_retail.test_scenarios``, as in this project's checkout.
"""

from __future__ import annotations

from pathlib import Path

import pytest

__all__ = ["BENCHMARK_PACKAGE", "installed_benchmark", "installed_benchmark_module"]

BENCHMARK_PACKAGE = "tests_tau2_retail"


def _is_benchmark_package(path: Path) -> bool:
    return path.name == BENCHMARK_PACKAGE and (path / "__init__.py").is_file()


def installed_benchmark(path: Path, parent: pytest.Collector) -> pytest.Package | None:
    """The benchmark package, named ``tests_tau2_retail``, when ``path`` is that package
    collected as a top-level argument (``--pyargs``); else None (collected as usual)."""
    if parent is not parent.session or not _is_benchmark_package(path):
        return None
    return pytest.Package.from_parent(parent, path=path, nodeid=BENCHMARK_PACKAGE)


def installed_benchmark_module(module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    """A module of the package :func:`installed_benchmark` named, named below it; else None."""
    if parent.nodeid != BENCHMARK_PACKAGE or not _is_benchmark_package(parent.path):
        return None
    nodeid = f"{BENCHMARK_PACKAGE}/{module_path.name}"
    return pytest.Module.from_parent(parent, path=module_path, nodeid=nodeid)
