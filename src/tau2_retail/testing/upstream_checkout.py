"""A fake tau2-bench checkout for tests of ``data fetch --from`` and ``file://`` base URLs.

Made in a temporary folder from an existing data folder (never committed): each pinned file at
its upstream path, as a clone of the pinned commit holds it, plus a few files of upstream's
that the manifest does not pin (they must not be copied).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from tau2_retail.data.files import load_manifest

__all__ = ["RETAIL_FOLDER", "make_upstream_checkout"]

RETAIL_FOLDER: Final = "data/tau2/domains/retail"
"""Where a tau2-bench checkout keeps the retail domain's data files."""


def make_upstream_checkout(data_dir: Path, root: Path) -> Path:
    """Lay the manifest's files of ``data_dir`` out as a tau2-bench checkout at ``root``."""
    for entry in load_manifest().files:
        target = root / entry.upstream_path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((data_dir / entry.name).read_bytes())
    (root / "README.md").write_text("tau2-bench\n", encoding="utf-8")
    airline = root / "data/tau2/domains/airline"
    airline.mkdir(parents=True, exist_ok=True)
    (airline / "db.json").write_text("{}", encoding="utf-8")
    return root
