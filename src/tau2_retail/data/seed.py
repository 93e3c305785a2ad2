"""The seed database of a data folder: verified, parsed once per process, shared read-only."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from tau2_retail.data.files import read_verified
from tau2_retail.errors import DataError
from tau2_retail.tools.database import SeedDatabase

__all__ = ["load_seed"]


@functools.cache
def _load(data_dir: Path) -> SeedDatabase:
    raw = read_verified(data_dir, "db.json")
    try:
        return SeedDatabase.from_json(raw)
    except ValueError as error:
        digest = hashlib.sha256(raw).hexdigest()
        raise DataError(
            f"{data_dir / 'db.json'} (sha256 {digest}) is not a retail database: {error}. "
            "Fetch the pinned file again: python -m tau2_retail data fetch"
        ) from error


def load_seed(data_dir: Path) -> SeedDatabase:
    """The seed database of ``data_dir`` (digest verified; the same object on every call)."""
    return _load(data_dir.resolve())
