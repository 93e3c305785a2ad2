"""Fixtures of the data tests."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from tau2_retail.data import files as datafiles


@pytest.fixture
def pin_current_content(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path, str], None]:
    """Pin a file at its current content in ``folder``: the manifest of a changed commit."""

    def pin(folder: Path, name: str) -> None:
        manifest = datafiles.load_manifest()
        digest = hashlib.sha256((folder / name).read_bytes()).hexdigest()
        pinned = replace(
            manifest,
            files=tuple(
                replace(entry, sha256=digest) if entry.name == name else entry
                for entry in manifest.files
            ),
        )
        monkeypatch.setattr(datafiles, "load_manifest", lambda: pinned)

    return pin
