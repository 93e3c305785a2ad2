"""Guards on the architecture: code runs from the checkout and imports point down the layers."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tools", "tau2_retail", "plugins")
# what each layer may import from the project (DESIGN.md: imports point down only)
ALLOWED = {"tools": {"tools"}, "tau2_retail": {"tools", "tau2_retail"}, "plugins": set(PACKAGES)}


@pytest.mark.parametrize("package", PACKAGES)
def test_packages_resolve_inside_the_repository(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__file__ is not None
    assert Path(module.__file__).resolve().is_relative_to(ROOT), module.__file__


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_point_down_the_layers(package: str) -> None:
    wrong = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for name in _imported_modules(path):
            top = name.split(".")[0]
            if top in PACKAGES and top not in ALLOWED[package]:
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_tools_uses_the_standard_library_only() -> None:
    foreign = []
    for path in sorted((ROOT / "tools").rglob("*.py")):
        for name in _imported_modules(path):
            top = name.split(".")[0]
            if top != "tools" and top not in sys.stdlib_module_names and top != "__future__":
                foreign.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not foreign, "\n".join(foreign)


def test_the_runtime_never_imports_test_only_packages() -> None:
    """aiohttp is a test dependency: only the loopback server (for tests) may use it."""
    offenders = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name == "loopback_server.py":
                continue
            if any(n.split(".")[0] == "aiohttp" for n in _imported_modules(path)):
                offenders.append(str(path.relative_to(ROOT)))
    assert not offenders
