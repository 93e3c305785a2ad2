"""Guards on the architecture: one folder per concept, imports pointing down the layers.

The order is DESIGN.md's, refined inside ``tau2_retail``: each layer may import itself and the
layers below it, never above. No file is exempt by name.
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tau2_retail"

# bottom to top; a layer may import the layers listed before it (and itself)
LAYERS = (
    "errors",
    "tools",
    "data",
    "models",
    "engine",
    "results",
    "report",
    "settings",
    "cli",
    "plugins",
)
# helpers for tests and benchmarks: they may use every layer, and no layer may use them
TESTING = "testing"
# the top-level modules of the package and where they sit: ``__init__`` is the public surface
# (it re-exports the agent contract of ``models`` and ``errors``), so it sits on top
TOP_MODULES = {"__init__": "plugins", "__main__": "cli"}
# data only (the pinned manifest): no code to import
DATA_FOLDERS = {"fixtures"}


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _layer_of(relative: Path) -> str:
    first = relative.parts[0]
    if first.endswith(".py"):
        stem = first[:-3]
        return TOP_MODULES.get(stem, stem)
    return first


def _sources() -> list[Path]:
    """Every module of the package, following the symlinked folders (``tools``, ``plugins``,
    ``fixtures`` link to the checkout's top-level folders; ``Path.rglob`` does not enter
    them before Python 3.13, which left two layers unguarded)."""
    found = []
    for folder, dirs, files in os.walk(PACKAGE, followlinks=True):
        dirs[:] = [name for name in dirs if name != "__pycache__"]
        found += [Path(folder, name) for name in files if name.endswith(".py")]
    return sorted(found)


def test_the_guard_sees_every_layer() -> None:
    seen = {_layer_of(path.relative_to(PACKAGE)) for path in _sources()}
    assert {*LAYERS, TESTING} <= seen
    assert any(path.relative_to(PACKAGE).parts[0] == "plugins" for path in _sources())


def test_every_folder_is_a_known_layer() -> None:
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == {*LAYERS[1:], TESTING, *DATA_FOLDERS}
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert modules == {"errors", *TOP_MODULES}


@pytest.mark.parametrize("layer", [*LAYERS, TESTING])
def test_imports_point_down_the_layers(layer: str) -> None:
    # each layer may import itself; testing may import every layer
    allowed = {*LAYERS, TESTING} if layer == TESTING else set(LAYERS[: LAYERS.index(layer) + 1])
    wrong = []
    for path in _sources():
        relative = path.relative_to(PACKAGE)
        if _layer_of(relative) != layer:
            continue
        for name in _imported_modules(path):
            parts = name.split(".")
            if parts[0] != "tau2_retail" or len(parts) < 2:
                continue
            if parts[1] not in allowed and TOP_MODULES.get(parts[1]) not in allowed:
                wrong.append(f"tau2_retail/{relative} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_tools_uses_the_standard_library_only() -> None:
    foreign = []
    for path in sorted((PACKAGE / "tools").rglob("*.py")):
        for name in _imported_modules(path):
            top = name.split(".")[0]
            if name.startswith("tau2_retail.tools") or top == "__future__":
                continue
            if top not in sys.stdlib_module_names:
                foreign.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not foreign, "\n".join(foreign)


def test_the_runtime_never_imports_test_only_packages() -> None:
    """aiohttp is a test dependency: only ``tau2_retail.testing`` may use it."""
    offenders = [
        str(path.relative_to(ROOT))
        for path in _sources()
        if _layer_of(path.relative_to(PACKAGE)) != TESTING
        and any(n.split(".")[0] == "aiohttp" for n in _imported_modules(path))
    ]
    assert not offenders
