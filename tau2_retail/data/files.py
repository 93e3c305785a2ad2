"""The pinned upstream data: the manifest, the data folder, digest checks and the fetch.

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
import tempfile
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path, PurePosixPath
from typing import IO, TypeGuard

from tau2_retail.errors import ConfigError, DataError, DigestMismatch

__all__ = [
    "DATA_DIR_ENV",
    "CheckStatus",
    "FileCheck",
    "Manifest",
    "ManifestFile",
    "chosen_data_dir",
    "combined_digest",
    "default_cache_dir",
    "fetch",
    "format_checks",
    "load_manifest",
    "locate_sources",
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
_CHUNK = 1 << 20
# Upstream files are a few MB; a cap keeps a misbehaving server from filling the disk.
_MAX_BYTES = 64 << 20
_TIMEOUT_SECONDS = 30.0

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
    # the ``fixtures/`` folder of a checkout, installed as the package data ``tau2_retail.fixtures``
    return Path(__file__).resolve().parent.parent / "fixtures"


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


def _digest_of(path: Path) -> str:
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
        actual = _digest_of(path)
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
            if key[1] > _MAX_BYTES:
                # far beyond any pinned file: refuse before reading (a 20 GB file would end in
                # a bare MemoryError)
                raise DataError(
                    f"{path}: {key[1]} bytes, more than any pinned data file (at most "
                    f"{_MAX_BYTES} bytes); it is not the pinned file: re-fetch it with "
                    "`python -m tau2_retail data fetch` (or --from FOLDER)"
                )
            # hashed while it is read, in chunks
            digest = hashlib.sha256()
            chunks: list[bytes] = []
            while chunk := handle.read(_CHUNK):
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
            actual: str | None = _digest_of(folder / entry.name)
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


def _source_roots(folder: Path, manifest: Manifest) -> list[Path]:
    """Where the upstream paths of the manifest may start, for a ``--from`` folder: the folder
    itself (a tau2-bench checkout's root), and the checkout's root when the folder is one of
    the checkout's own folders (``data/tau2/domains/retail``, ``data/tau2``, ``src``, ...)."""
    roots = [folder]
    parts = folder.parts
    for entry in manifest.files:
        directories = PurePosixPath(entry.upstream_path).parts[:-1]
        for depth in range(1, len(directories) + 1):
            if len(parts) > depth and tuple(parts[-depth:]) == directories[:depth]:
                root = Path(*parts[:-depth])
                if root not in roots:
                    roots.append(root)
    return roots


def _candidates(folder: Path, entry: ManifestFile, roots: Sequence[Path]) -> list[Path]:
    paths = [folder / entry.name]  # a data folder (the cache, $TAU2_DATA_DIR): local names
    for root in roots:
        path = root / entry.upstream_path
        if path not in paths:
            paths.append(path)
    return paths


def locate_sources(folder: Path, entries: Sequence[ManifestFile]) -> dict[str, Path]:
    """Where each of ``entries`` is in ``folder``: a data folder laid out like the cache (local
    names), a tau2-bench checkout's root (upstream paths), or one of its folders such as
    ``data/tau2/domains/retail`` (then the guidelines, licence and sources are found in the
    checkout around it). Digests are not checked here.

    Raises :class:`DataError` naming every file not found and the paths tried.
    """
    if not folder.is_dir():
        raise DataError(
            f"--from {folder}: not a folder; give a tau2-bench checkout (its root or its "
            "data/tau2/domains/retail folder) or a data folder such as $TAU2_DATA_DIR"
        )
    roots = _source_roots(folder, load_manifest())
    found: dict[str, Path] = {}
    missing: list[str] = []
    for entry in entries:
        paths = _candidates(folder, entry, roots)
        path = next((path for path in paths if path.is_file()), None)
        if path is None:
            tried = ", ".join(str(path) for path in paths)
            missing.append(f"{entry.name} (looked for {tried})")
        else:
            found[entry.name] = path
    if missing:
        raise DataError(
            f"--from {folder}: not found: {'; '.join(missing)}. Give a tau2-bench checkout "
            "(its root, or its data/tau2/domains/retail folder inside the checkout: the user "
            "simulator guidelines, LICENSE and src/ are read from around it) or a data folder "
            "such as $TAU2_DATA_DIR; nothing was written"
        )
    return found


def _file_url_path(url: str) -> Path:
    """The local folder of a ``file://`` base URL (absolute; host empty or ``localhost``)."""
    import urllib.request

    parts = urllib.parse.urlsplit(url)
    path = Path(urllib.request.url2pathname(parts.path))
    if parts.netloc not in ("", "localhost") or not path.is_absolute():
        raise ConfigError(
            f"fetch: --base-url {url!r}: a file:// URL must name an absolute folder "
            "(file:///path/to/tau2-bench); for a relative folder use --from DIR"
        )
    return path


@contextmanager
def _atomic_target(target: Path) -> Iterator[IO[bytes]]:
    """A temp file beside ``target`` that replaces it on success and vanishes on any failure."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        # Interrupts included: a half-written file must never stay behind.
        temp.unlink(missing_ok=True)
        raise


def _copy_stream(source: IO[bytes], sink: IO[bytes], *, origin: str) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    while chunk := source.read(_CHUNK):
        size += len(chunk)
        if size > _MAX_BYTES:
            raise DataError(f"{origin}: more than {_MAX_BYTES} bytes; not a pinned file")
        digest.update(chunk)
        sink.write(chunk)
    return size, digest.hexdigest()


def _download(url: str, sink: IO[bytes], *, name: str, timeout: float) -> tuple[int, str]:
    # Imported here: http.client and urllib.request pull in email and ssl (tens of ms), which
    # every process that only reads the data would otherwise pay for.
    import http.client
    import urllib.error
    import urllib.request

    retry = "retry `python -m tau2_retail data fetch`, or copy with --from FOLDER"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            announced = response.headers.get("Content-Length")
            size, digest = _copy_stream(response, sink, origin=url)
    except urllib.error.HTTPError as error:
        with error:
            raise DataError(
                f"{name}: download from {url} failed: HTTP {error.code} {error.reason}; {retry}"
            ) from error
    except urllib.error.URLError as error:
        raise DataError(f"{name}: cannot reach {url} ({error.reason}); {retry}") from error
    except (http.client.HTTPException, OSError) as error:
        raise DataError(f"{name}: download from {url} broke off ({error!r}); {retry}") from error
    if announced is not None and announced.isdigit() and int(announced) != size:
        raise DataError(
            f"{name}: download from {url} truncated: {size} of {announced} bytes; {retry}"
        )
    return size, digest


def fetch(
    dest: Path,
    *,
    source_dir: Path | None = None,
    base_url: str | None = None,
    progress: Callable[[str], None] | None = None,
    timeout: float = _TIMEOUT_SECONDS,
) -> list[Path]:
    """Fill ``dest`` with the manifest's files; return the paths written.

    A file already in ``dest`` with the pinned digest is skipped. Others are downloaded from
    the pinned commit (or ``base_url + "/" + upstream_path``; ``base_url`` may be ``http://``,
    ``https://`` or ``file://`` naming a tau2-bench checkout or mirror), or copied from
    ``source_dir`` (a tau2-bench checkout's root, its ``data/tau2/domains/retail`` folder, or
    a data folder: see :func:`locate_sources`, which finds every file before anything is
    written). Each file is checked against its sha256 before it becomes visible and is
    written atomically. Raises :class:`DataError` (naming the file and the URL or source) or
    :class:`DigestMismatch` (naming the file, its source and both digests); files finished
    before the failure stay, nothing partial does.
    """
    if source_dir is not None and base_url is not None:
        raise ConfigError("fetch: give either a source folder (--from) or --base-url, not both")
    base_folder = None
    if base_url is not None:
        scheme = urllib.parse.urlsplit(base_url).scheme
        if scheme == "file":
            base_folder = _file_url_path(base_url)
        elif scheme not in ("http", "https"):
            raise ConfigError(
                f"fetch: --base-url {base_url!r} must be an http://, https:// or file:// URL"
            )
    report = progress if progress is not None else (lambda _message: None)
    manifest = load_manifest()
    wanted = []
    for entry in manifest.files:
        try:
            if _digest_of(dest / entry.name) == entry.sha256:
                report(f"{entry.name}: present, sha256 ok, skipped")
                continue
        except FileNotFoundError:
            pass
        wanted.append(entry)
    # a folder already complete needs no source (a restored CI cache, an unmounted --from)
    sources = locate_sources(source_dir, wanted) if source_dir is not None and wanted else {}
    written = []
    for entry in wanted:
        target = dest / entry.name
        source = sources.get(entry.name)
        origin = str(source) if source is not None else manifest.url(entry, base_url=base_url)
        report(f"{entry.name}: fetching from {origin}")
        with _atomic_target(target) as sink:
            if source is not None:
                with source.open("rb") as stream:
                    size, actual = _copy_stream(stream, sink, origin=origin)
            elif base_folder is not None:
                size, actual = _copy_file_url(
                    base_folder / entry.upstream_path, sink, name=entry.name, url=origin
                )
            else:
                size, actual = _download(origin, sink, name=entry.name, timeout=timeout)
            if actual != entry.sha256:
                raise DigestMismatch(
                    path=f"{entry.name} (from {origin})",
                    expected=entry.sha256,
                    actual=actual,
                    fix=(
                        "The source does not hold the pinned version (tau2-bench commit "
                        f"{manifest.commit[:7]}); nothing was written to {target}. Fetch from "
                        "the pinned commit (no --base-url/--from), or check the commit out "
                        f"in the source checkout (`git checkout {manifest.commit[:7]}`)."
                    ),
                )
        report(f"{entry.name}: {size} bytes, sha256 ok")
        written.append(target)
    return written


def _copy_file_url(path: Path, sink: IO[bytes], *, name: str, url: str) -> tuple[int, str]:
    try:
        with path.open("rb") as stream:
            return _copy_stream(stream, sink, origin=url)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as error:
        raise DataError(
            f"{name}: {url} not found ({path}); a file:// --base-url names a tau2-bench "
            "checkout's root (each file at its upstream path); for its data/tau2/domains/retail "
            "folder use --from DIR"
        ) from error


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
