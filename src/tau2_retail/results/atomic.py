"""Atomic file writes: a reader sees the old file or the new one, never half of one.

The text goes to a temporary file in the target's own folder (same file system, so the final
``os.replace`` is an atomic rename), is flushed and, when ``durable``, fsynced, then renamed over
the target. Any failure removes the temporary file; OS errors become :class:`ArtifactError`
naming the path. A run killed mid-write therefore leaves at most a stray ``.tmp-*`` file, never
a truncated artifact under its real name: the rename alone guarantees that, fsync or not.

fsync adds only durability against a power loss or a kernel crash, after which an unsynced file
may be missing or empty although its rename happened. It costs 0.5 to 20 ms per file depending
on the disk's load, so the per-scenario artifacts (ten small files per scenario, written by
``tau2_retail.results.artifacts``) are not fsynced (``durable=False``): after a power loss a
scenario whose ``metrics.json`` is missing, empty or unparseable counts as incomplete and
``--tau2-resume`` runs it again (an intact ``metrics.json`` beside a lost transcript is
possible). The run-level files (summaries, ``run_args.json``) keep the default, durable write.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from tau2_retail.errors import ArtifactError
from tau2_retail.models.text import valid_unicode
from tau2_retail.results.indented_json import indented_json

__all__ = [
    "TEMP_PREFIX",
    "atomic_file",
    "dumps_json",
    "finite_or_null",
    "utf8",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_text_atomic",
]

TEMP_PREFIX = ".tmp-"

# Artifacts are read by other users and CI uploaders; a temporary file's 0600 would hide them.
_FILE_MODE = 0o644


def dumps_json(value: Any) -> str:
    """The artifact JSON form: indent 1, keys in insertion order, UTF-8 kept, final newline.

    Strict JSON: Python would write ``NaN`` or ``Infinity``, which no JSON reader accepts.
    Non-finite numbers are refused or bounded where they enter (prices, token counts); one that
    still reaches a file is written as ``null`` rather than losing the whole artifact (and with
    ``metrics.json`` its scenario).
    """
    fast = indented_json(value)
    if fast is not None:
        return fast + "\n"
    try:
        text = json.dumps(value, indent=1, sort_keys=False, ensure_ascii=False, allow_nan=False)
    except ValueError as error:
        if "float" not in str(error):  # a circular reference: a bug of the caller
            raise
        text = json.dumps(
            finite_or_null(value), indent=1, sort_keys=False, ensure_ascii=False, allow_nan=False
        )
    return text + "\n"


def finite_or_null(value: Any) -> Any:
    """``value`` with every NaN or infinite float (in lists and dicts) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_or_null(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_null(item) for item in value]
    return value


def _discard(temp: str) -> None:
    # Best effort: the write already failed and that error is the one worth reporting.
    with contextlib.suppress(OSError):
        os.unlink(temp)


_SEQUENCE = itertools.count()
_NAME_TRIES = 4
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def _temp_name(path: Path) -> str:
    """A temporary name beside ``path`` that no live process uses: this process's id and a
    counter. Known before the file exists, so that a failure or an interrupt at any point
    after it removes the file by name."""
    return os.path.join(path.parent, f"{TEMP_PREFIX}{path.name}.{os.getpid()}-{next(_SEQUENCE)}")


def _open_new(name: str) -> int:
    """Create ``name`` for writing (mode 0600, it must not exist): a descriptor."""
    return os.open(name, _NEW_FILE, 0o600)


def _make_folder(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ArtifactError(f"cannot create the folder of {path}: {error}") from error


@contextlib.contextmanager
def atomic_file(path: Path, *, durable: bool = True) -> Iterator[IO[bytes]]:
    """A binary handle whose bytes replace ``path`` atomically when the block ends without an
    exception (for a file written piece by piece); creates parent folders.

    On an exception the temporary file is removed and ``path`` is left untouched.
    ``durable`` is as for :func:`write_text_atomic`; OS errors become :class:`ArtifactError`
    naming ``path``.
    """
    path = Path(path)
    temp = _temp_name(path)
    try:
        # the name is known before the file exists: an interrupt that lands at any point after
        # it was made still removes it (a run stopped by Ctrl-C leaves no ``.tmp-*`` behind)
        for _ in range(_NAME_TRIES):
            try:
                fd = _open_new(temp)
                break
            except FileExistsError:  # a dead process's leftover under this id: the next number
                temp = _temp_name(path)
            except FileNotFoundError:  # the folder is made only then: a scenario writes ten files
                _make_folder(path)
        else:
            fd = _open_new(temp)
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
            os.fchmod(handle.fileno(), _FILE_MODE)
        os.replace(temp, path)
    except OSError as error:
        _discard(temp)
        raise ArtifactError(f"cannot write {path}: {error}") from error
    except BaseException:
        # Interrupted (KeyboardInterrupt, a cancelled task) or the writer failed: clean up
        # and let it propagate.
        _discard(temp)
        raise


def utf8(text: str) -> bytes:
    """``text`` as a file's bytes: UTF-8, a lone surrogate (one that escaped the checks where
    endpoint text enters) as U+FFFD, so that the file is written rather than lost."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return valid_unicode(text).encode("utf-8")


def write_bytes_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` atomically, creating parent folders (as
    :func:`write_text_atomic`, for text already encoded)."""
    with atomic_file(path, durable=durable) as handle:
        handle.write(data)


def write_text_atomic(path: Path, text: str, *, durable: bool = True) -> None:
    """Write ``text`` (UTF-8, see :func:`utf8`) to ``path`` atomically, creating parent folders.

    ``durable=False`` skips the fsync (see the module docstring). Raises
    :class:`ArtifactError` naming ``path`` and the OS error when anything fails; the temporary
    file is removed and an existing ``path`` is left untouched.
    """
    write_bytes_atomic(path, utf8(text), durable=durable)


def write_json_atomic(path: Path, value: Any, *, durable: bool = True) -> None:
    """Write ``value`` as artifact JSON (see :func:`dumps_json`) to ``path`` atomically.

    ``durable`` is as for :func:`write_text_atomic`. The value is serialized before any file
    is created, so a value that is not JSON-able raises ``TypeError`` (a bug in the caller) and
    touches nothing.
    """
    write_text_atomic(path, dumps_json(value), durable=durable)
