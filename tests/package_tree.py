"""The installed package's modules, found in the checkout as the wheel maps them.

``tau2_retail`` is built from four real folders (``pyproject.toml``'s ``package-dir``):
``src/tau2_retail`` and the checkout's top-level ``tools/``, ``plugins/`` and ``fixtures/``, which
install as ``tau2_retail.tools``, ``.plugins`` and ``.fixtures``. The architecture's guards read
the modules through this mapping, so a folder the mapping adds is guarded and none is missed.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parent.parent
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
    "setuptools"
]
PACKAGE = "tau2_retail"


def mapped_folders() -> dict[str, Path]:
    """Each mapped package (``tau2_retail``, ``tau2_retail.tools``, ...) and its folder."""
    return {name: ROOT / folder for name, folder in SETUPTOOLS["package-dir"].items()}


def package_sources() -> Iterator[tuple[PurePosixPath, Path]]:
    """Every ``.py`` module of ``tau2_retail``: its path inside the installed package (e.g.
    ``tools/dispatch.py``) and its file in the checkout, in the installed path's order."""
    found: dict[PurePosixPath, Path] = {}
    for name, folder in mapped_folders().items():
        assert folder.is_dir(), f"pyproject.toml maps {name} to {folder}, which is no folder"
        inside = PurePosixPath(*name.split(".")[1:])
        for path in folder.rglob("*.py"):
            found[inside / PurePosixPath(*path.relative_to(folder).parts)] = path
    yield from sorted(found.items())
