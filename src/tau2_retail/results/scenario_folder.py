"""A scenario's artifact folder as its files' contents, and putting it on disk.

:mod:`tau2_retail.results.artifacts` gathers a finished scenario into :class:`ScenarioFiles`
(every file's content, ``metrics.json`` last, and the names an earlier attempt may have left);
:func:`put_scenario_files` does the rest: encode each content (a JSON document in the artifact
form, text as UTF-8), refuse symbolic links, remove the stale files, write each file atomically
(no fsync: :mod:`tau2_retail.results.atomic` says why). The two halves are apart so that the
second can run in another process (:mod:`tau2_retail.results.folder_writer`): with hundreds of
conversations in flight, the indented JSON encoding (the standard library's is pure Python with
an indent) and creating ten files are CPU and kernel time that should not stop the event loop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tau2_retail.errors import ArtifactError
from tau2_retail.results import atomic
from tau2_retail.results.long_text import cut_long_texts

__all__ = ["FileContent", "JsonDocument", "ScenarioFiles", "file_bytes", "put_scenario_files"]


@dataclass(frozen=True, slots=True)
class JsonDocument:
    """A JSON value to be written in the artifact form (:func:`atomic.dumps_json`); with
    ``cut``, every string longer than the limit is cut first
    (:func:`~tau2_retail.results.long_text.cut_long_texts`)."""

    value: Any
    cut: bool = False


FileContent = bytes | str | JsonDocument
"""A file's content: its bytes, a text (written as UTF-8) or a JSON document."""


def file_bytes(content: FileContent) -> bytes:
    """The bytes a file of ``content`` holds."""
    if isinstance(content, bytes):
        return content
    if isinstance(content, str):
        return atomic.utf8(content)
    value = cut_long_texts(content.value) if content.cut else content.value
    return atomic.utf8(atomic.dumps_json(value))


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioFiles:
    """One scenario's folder as it is to be written.

    ``files``: (path relative to ``directory``, content), written in this order (the record
    that marks the scenario complete last); ``stale``: relative paths to remove first (an
    earlier attempt's record, files this attempt does not write). Plain values throughout, so
    that it pickles cheaply to the writer process.
    """

    directory: Path
    files: tuple[tuple[str, FileContent], ...]
    stale: tuple[str, ...]


def put_scenario_files(folder: ScenarioFiles) -> Path:
    """Write ``folder`` to disk; return its directory. :class:`ArtifactError` naming the path
    when a link is in the way or the file system refuses."""
    directory = folder.directory
    contents = [(name, file_bytes(content)) for name, content in folder.files]
    _refuse_symlinks(directory)
    _remove_stale(directory, folder)
    for name, data in contents:
        atomic.write_bytes_atomic(directory / name, data, durable=False)
    return directory


def _refuse_symlinks(directory: Path) -> None:
    """Neither a scenario folder (or the scenario folder of a trial) nor anything under it may
    be a symbolic link: the writes would follow it outside the run directory."""
    folders = [directory]
    if directory.name.startswith("trial-"):
        folders.append(directory.parent)
    links = [folder for folder in folders if folder.is_symlink()]
    if not links and directory.is_dir():
        # anywhere under it too: a linked scenario_config/ would be followed by the writes
        for root, dirs, files in os.walk(directory):
            links += [Path(root, name) for name in (*dirs, *files) if Path(root, name).is_symlink()]
    for link in links[:1]:
        raise ArtifactError(
            f"{link} is a symbolic link (to {os.readlink(link)}): refusing to write a "
            "scenario's artifacts outside the run directory; remove the link"
        )


def _remove_stale(directory: Path, folder: ScenarioFiles) -> None:
    """Remove the stale files, and the temporary files of an attempt killed mid-write (in each
    folder this one writes to; only one process writes a scenario folder)."""
    stale_files = [directory / name for name in folder.stale]
    for written_to in sorted({(directory / name).parent for name, _ in folder.files}):
        stale_files += written_to.glob(f"{atomic.TEMP_PREFIX}*")
    for stale in stale_files:
        try:
            stale.unlink(missing_ok=True)
        except OSError as error:
            raise ArtifactError(f"cannot remove {stale}: {error}") from error
