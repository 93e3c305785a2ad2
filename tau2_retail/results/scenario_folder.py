"""A scenario's artifact folder as bytes, and putting it on disk.

:mod:`tau2_retail.results.artifacts` renders a finished scenario into :class:`ScenarioFiles`
(every file's bytes, ``metrics.json`` last, and the names an earlier attempt may have left);
:func:`put_scenario_files` does the file system's part: refuse symbolic links, remove the
stale files, write each file atomically (no fsync: :mod:`tau2_retail.results.atomic` says why).
The two halves are apart so that the second can run in another process
(:mod:`tau2_retail.results.folder_writer`): with hundreds of conversations in flight, creating
ten files is kernel time that should not stop the event loop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tau2_retail.errors import ArtifactError
from tau2_retail.results import atomic

__all__ = ["ScenarioFiles", "put_scenario_files"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioFiles:
    """One scenario's folder as it is to be written.

    ``files``: (path relative to ``directory``, bytes), written in this order (the record that
    marks the scenario complete last); ``stale``: relative paths to remove first (an earlier
    attempt's record, files this attempt does not write).
    """

    directory: Path
    files: tuple[tuple[str, bytes], ...]
    stale: tuple[str, ...]


def put_scenario_files(folder: ScenarioFiles) -> Path:
    """Write ``folder`` to disk; return its directory. :class:`ArtifactError` naming the path
    when a link is in the way or the file system refuses."""
    directory = folder.directory
    _refuse_symlinks(directory)
    _remove_stale(directory, folder)
    for name, data in folder.files:
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
