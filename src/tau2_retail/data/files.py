"""The pinned upstream data: the manifest, the data folder and digest checks (the fetch that
fills a folder is :mod:`tau2_retail.data.fetch`).

The upstream files are never committed. ``fixtures/manifest.json`` names the pinned commit of
tau2-bench and the sha256 of each file; the data folder is found in this order: an explicit
folder (``--tau2-data-dir`` / ``--data-dir``), the ``TAU2_DATA_DIR`` environment variable, the
default cache (``$XDG_CACHE_HOME/tau2_retail``, else ``~/.cache/tau2_retail``; the same for a
checkout and an installed copy, never inside the project).
Every read goes through :func:`verified_path` or :func:`read_verified`, which check the sha256
once per process per file state.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path, PurePosixPath
from typing import IO, TypeGuard

import tau2_retail.fixtures as fixtures_package
from tau2_retail.errors import DataError, DigestMismatch

__all__ = [
    "DATA_DIR_ENV",
    "MAX_FILE_BYTES",
    "READ_CHUNK",
    "CheckStatus",
    "FileCheck",
    "Manifest",
    "ManifestFile",
    "chosen_data_dir",
    "combined_digest",
    "default_cache_dir",
    "digest_of",
    "format_checks",
    "load_manifest",
    "manifest_path",
    "read_verified",
    "resolve_data_dir",
    "verified_path",
    "verify_folder",
]

DATA_DIR_ENV = "TAU2_DATA_DIR"
"""The environment variable naming the data folder."""

_FETCH_HINT = "run `python -m tau2_retail data fetch`"
_LOCATE_HINT = f"set {DATA_DIR_ENV} or pass --tau2-data-dir (pytest) / --data-dir (CLI)"
READ_CHUNK = 1 << 20
"""How many bytes a read or copy of a data file takes at a time."""
MAX_FILE_BYTES = 64 << 20
"""Upstream files are a few MB; a cap keeps a misbehaving server from filling the disk."""

# Digest of each file state seen in this process, keyed by (resolved path, size, mtime_ns):
# an unchanged file is hashed once, a changed one again.
_digests: dict[tuple[str, int, int], str] = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestFile:
    """One pinned file: its local name (relative, ``/``-separated), upstream path and sha256."""

    name: str
    upstream_path: str
    sha256: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    """The pinned upstream commit and its files, as read from ``fixtures/manifest.json``."""

    repository: str
    commit: str
    url_template: str
    files: tuple[ManifestFile, ...]

    def file(self, name: str) -> ManifestFile:
        """The entry for a local file name; ``KeyError`` for a name not in the manifest."""
        for entry in self.files:
            if entry.name == name:
                return entry
        raise KeyError(f"{name!r} is not a file of the manifest")

    def url(self, entry: ManifestFile, *, base_url: str | None = None) -> str:
        """The download address of a file: the pinned template, or ``base_url/upstream_path``."""
        if base_url is not None:
            return f"{base_url.rstrip('/')}/{entry.upstream_path}"
        return self.url_template.format(
            repository=self.repository, commit=self.commit, path=entry.upstream_path
        )


class CheckStatus(StrEnum):
    """The state of one file of a data folder."""

    OK = "ok"
    MISSING = "missing"
    MISMATCH = "mismatch"


@dataclass(frozen=True, slots=True, kw_only=True)
class FileCheck:
    """The result of checking one manifest file in a folder (``actual`` is None when missing)."""

    name: str
    status: CheckStatus
    expected: str
    actual: str | None


def _fixtures_dir() -> Path:
    # the checkout's ``fixtures/``, installed as the package ``tau2_retail.fixtures`` (its folder
    # is mapped: in an editable install it is not beside this package's other folders)
    return Path(fixtures_package.__file__).parent


def manifest_path() -> Path:
    """The path of ``fixtures/manifest.json`` (shipped inside the installed package)."""
    return _fixtures_dir() / "manifest.json"


def default_cache_dir() -> Path:
    """The default data folder: ``$XDG_CACHE_HOME/tau2_retail``, else ``~/.cache/tau2_retail``.

    The same for a checkout and an installed copy, and never inside the project: data a command
    downloads (upstream's Python sources among it) must not land where the project's own checks
    (mypy, ruff, the wheel build) read code. A relative ``XDG_CACHE_HOME`` is ignored, as the
    XDG specification asks.
    """
    cache_home = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(cache_home) if os.path.isabs(cache_home) else Path.home() / ".cache"
    return base / "tau2_retail"


def _is_hex(text: object, length: int) -> TypeGuard[str]:
    return (
        isinstance(text, str)
        and len(text) == length
        and all(char in "0123456789abcdef" for char in text)
    )


def _is_safe_name(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return bool(parts) and not PurePosixPath(name).is_absolute() and ".." not in parts


def _parse_manifest(raw: object, source: str) -> Manifest:
    def bad(what: str) -> DataError:
        return DataError(f"{source}: {what}; restore the file from git")

    if not isinstance(raw, dict):
        raise bad("expected a JSON object")
    strings = {}
    for key in ("repository", "commit", "url_template"):
        value = raw.get(key)
        if not isinstance(value, str) or not value:
            raise bad(f"{key!r} must be a non-empty string")
        strings[key] = value
    if not _is_hex(strings["commit"], 40):
        raise bad("'commit' must be 40 lowercase hex digits")
    if "{path}" not in strings["url_template"]:
        raise bad("'url_template' must contain {path}")
    files = raw.get("files")
    if not isinstance(files, dict) or not files:
        raise bad("'files' must be a non-empty object")
    entries = []
    for name, spec in files.items():
        if not _is_safe_name(name):
            raise bad(f"file name {name!r} must be a relative path inside the data folder")
        if not isinstance(spec, dict):
            raise bad(f"files[{name!r}] must be an object")
        upstream_path = spec.get("upstream_path")
        if not isinstance(upstream_path, str) or not upstream_path:
            raise bad(f"files[{name!r}].upstream_path must be a non-empty string")
        digest = spec.get("sha256")
        if not _is_hex(digest, 64):
            raise bad(f"files[{name!r}].sha256 must be 64 lowercase hex digits")
        entries.append(ManifestFile(name=name, upstream_path=upstream_path, sha256=digest))
    return Manifest(
        repository=strings["repository"],
        commit=strings["commit"],
        url_template=strings["url_template"],
        files=tuple(entries),
    )


@cache
def load_manifest() -> Manifest:
    """Read and validate ``fixtures/manifest.json`` (once per process)."""
    path = manifest_path()
    try:
        raw = json.loads(path.read_bytes())
    except FileNotFoundError as error:
        raise DataError(f"{path}: manifest not found; restore it from git") from error
    except (OSError, ValueError) as error:
        raise DataError(f"{path}: cannot read the manifest ({error})") from error
    return _parse_manifest(raw, str(path))


def _candidate_dir(explicit: str | os.PathLike[str] | None) -> tuple[Path, str]:
    """The data folder to use and where that choice came from (for messages)."""
    if explicit is not None and os.fspath(explicit):
        return Path(explicit).expanduser().absolute(), "given by --tau2-data-dir/--data-dir"
    from_env = os.environ.get(DATA_DIR_ENV)
    if from_env:
        return Path(from_env).expanduser().absolute(), f"from ${DATA_DIR_ENV}"
    return default_cache_dir(), "the default cache"


def resolve_data_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The data folder: ``explicit``, else ``$TAU2_DATA_DIR``, else the default cache.

    Raises :class:`DataError` naming the folder and the fix when it or one of the manifest's
    files is missing. Digests are not checked here but on each read.
    """
    folder, origin = _candidate_dir(explicit)
    if folder.exists() and not folder.is_dir():
        raise DataError(
            f"data folder {folder} ({origin}) is a file, not a folder; {_LOCATE_HINT} to point "
            "at the folder holding the files"
        )
    if not folder.is_dir():
        raise DataError(
            f"data folder {folder} ({origin}) does not exist; {_FETCH_HINT} to fill the "
            f"cache, or {_LOCATE_HINT} to point at a folder holding the files"
        )
    missing = [entry.name for entry in load_manifest().files if not (folder / entry.name).is_file()]
    if missing:
        raise DataError(
            f"data folder {folder} ({origin}) lacks {', '.join(missing)}; {_FETCH_HINT} "
            f"(or --from FOLDER to copy), or {_LOCATE_HINT}"
        )
    return folder


def _missing_file(path: Path) -> DataError:
    return DataError(
        f"{path}: data file not found; {_FETCH_HINT} (or --from FOLDER to copy), or {_LOCATE_HINT}"
    )


def _mismatch(path: Path, *, expected: str, actual: str) -> DigestMismatch:
    return DigestMismatch(
        path=str(path),
        expected=expected,
        actual=actual,
        fix=(
            "The file differs from the pinned upstream commit; re-fetch it with "
            "`python -m tau2_retail data fetch` (or --from FOLDER)."
        ),
    )


def _state_key(path: Path, handle: IO[bytes]) -> tuple[str, int, int]:
    stat = os.fstat(handle.fileno())
    return (str(path.resolve()), stat.st_size, stat.st_mtime_ns)


def digest_of(path: Path) -> str:
    """The sha256 of a file, hashed at most once per file state; FileNotFoundError if absent."""
    with path.open("rb") as handle:
        key = _state_key(path, handle)
        digest = _digests.get(key)
        if digest is None:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
            _digests[key] = digest
    return digest


def verified_path(data_dir: Path, name: str) -> Path:
    """The path of manifest file ``name`` in ``data_dir``, after checking its sha256.

    The check runs once per process for an unchanged file (same path, size and mtime).
    Raises :class:`DataError` when the file is missing, :class:`DigestMismatch` when it differs.
    """
    expected = load_manifest().file(name).sha256
    path = data_dir / name
    try:
        actual = digest_of(path)
    except FileNotFoundError as error:
        raise _missing_file(path) from error
    if actual != expected:
        raise _mismatch(path, expected=expected, actual=actual)
    return path


def read_verified(data_dir: Path, name: str) -> bytes:
    """The bytes of manifest file ``name`` in ``data_dir``, read once and checked.

    A file state already verified in this process is not hashed again.
    """
    expected = load_manifest().file(name).sha256
    path = data_dir / name
    try:
        with path.open("rb") as handle:
            key = _state_key(path, handle)
            if key[1] > MAX_FILE_BYTES:
                # far beyond any pinned file: refuse before reading (a 20 GB file would end in
                # a bare MemoryError)
                raise DataError(
                    f"{path}: {key[1]} bytes, more than any pinned data file (at most "
                    f"{MAX_FILE_BYTES} bytes); it is not the pinned file: re-fetch it with "
                    "`python -m tau2_retail data fetch` (or --from FOLDER)"
                )
            # hashed while it is read, in chunks
            digest = hashlib.sha256()
            chunks: list[bytes] = []
            while chunk := handle.read(READ_CHUNK):
                digest.update(chunk)
                chunks.append(chunk)
            data = b"".join(chunks)
    except FileNotFoundError as error:
        raise _missing_file(path) from error
    actual = _digests.get(key)
    if actual is None:
        actual = digest.hexdigest()
        _digests[key] = actual
    if actual != expected:
        raise _mismatch(path, expected=expected, actual=actual)
    return data


def verify_folder(folder: Path) -> list[FileCheck]:
    """Check every manifest file in ``folder`` (a missing folder reports every file missing)."""
    checks = []
    for entry in load_manifest().files:
        try:
            actual: str | None = digest_of(folder / entry.name)
        except (FileNotFoundError, NotADirectoryError):
            actual = None
        if actual is None:
            status = CheckStatus.MISSING
        elif actual == entry.sha256:
            status = CheckStatus.OK
        else:
            status = CheckStatus.MISMATCH
        checks.append(
            FileCheck(name=entry.name, status=status, expected=entry.sha256, actual=actual)
        )
    return checks


def combined_digest(checks: list[FileCheck]) -> str:
    """One sha256 over every file of the manifest (data and pinned sources): the digest of the
    ``sha256sum``-style listing ``<sha256>  <name>\n`` in manifest order. Two folders with the
    same combined digest hold the same pinned files."""
    listing = "".join(f"{check.actual}  {check.name}\n" for check in checks)
    return hashlib.sha256(listing.encode("utf-8")).hexdigest()


def format_checks(folder: Path, checks: Sequence[FileCheck]) -> str:
    """The verification of ``folder`` as a table: file, status, sha256 (or expected/got)."""
    width = max(len("file"), *(len(check.name) for check in checks))
    lines = [f"{folder}", f"{'file':<{width}}  {'status':<8}  sha256"]
    for check in checks:
        if check.status is CheckStatus.MISMATCH:
            detail = f"expected {check.expected}, got {check.actual}"
        else:
            detail = check.expected
        lines.append(f"{check.name:<{width}}  {check.status.value:<8}  {detail}")
    return "\n".join(lines)


def chosen_data_dir(explicit: str | os.PathLike[str] | None = None) -> tuple[Path, str]:
    """The folder data loading would use (``explicit``, else ``$TAU2_DATA_DIR``, else the
    default cache), unchecked, and where that choice came from: what ``data fetch`` fills and
    ``data verify`` checks when given no folder."""
    return _candidate_dir(explicit)
