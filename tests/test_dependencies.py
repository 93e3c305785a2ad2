"""A user's benchmark run needs only the runtime dependencies; test-only packages stay in the
``test`` dependency group (their pytest plugins would otherwise load in every pytest process)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from tests.package_tree import mapped_folders

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = {"openai", "pydantic", "pytest", "pytest-xdist", "pytest-asyncio"}
TEST_ONLY = {"hypothesis", "syrupy", "aiohttp", "scipy"}
# What the installed distribution ships (tau2_retail.testing is a helper for tests and
# benchmarks: it may import test-only packages).
SHIPPED = (*mapped_folders().values(), ROOT / "tests_tau2_retail")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9_.-]+", requirement)
    assert match is not None
    return match.group(0).lower()


def test_runtime_dependencies_are_what_a_benchmark_run_needs():
    assert {_name(r) for r in _pyproject()["project"]["dependencies"]} == RUNTIME


def test_test_only_packages_are_in_the_test_group():
    group = {_name(r) for r in _pyproject()["dependency-groups"]["test"] if isinstance(r, str)}
    assert group >= TEST_ONLY


def test_shipped_modules_do_not_import_test_only_packages():
    offenders = []
    assert all(folder.is_dir() for folder in SHIPPED), SHIPPED
    for folder in SHIPPED:
        for path in sorted(folder.rglob("*.py")):
            if "testing" in path.relative_to(ROOT).parts:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names = [node.module]
                for name in names:
                    if name.split(".")[0] in TEST_ONLY:
                        offenders.append(f"{path.relative_to(ROOT)}: {name}")
    assert offenders == []
