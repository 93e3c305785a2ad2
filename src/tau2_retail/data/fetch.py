"""Filling a data folder with the pinned upstream files: ``python -m tau2_retail data fetch``.

Each file comes from the pinned commit over HTTPS, from a mirror (``--base-url``, ``http://``,
``https://`` or ``file://``) or from a local folder (``--from``: a tau2-bench checkout or a data
folder); it is checked against the manifest's sha256 before it becomes visible, and written
atomically. The manifest and the digests are :mod:`tau2_retail.data.files`.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import IO

from tau2_retail.data import files
from tau2_retail.data.files import MAX_FILE_BYTES, READ_CHUNK, Manifest, ManifestFile, digest_of
from tau2_retail.errors import ConfigError, DataError, DigestMismatch

__all__ = ["fetch", "locate_sources"]

_TIMEOUT_SECONDS = 30.0


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
    roots = _source_roots(folder, files.load_manifest())
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
    while chunk := source.read(READ_CHUNK):
        size += len(chunk)
        if size > MAX_FILE_BYTES:
            raise DataError(f"{origin}: more than {MAX_FILE_BYTES} bytes; not a pinned file")
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
    base_folder = _base_folder(base_url)
    report = progress if progress is not None else (lambda _message: None)
    manifest = files.load_manifest()
    wanted = _not_yet_present(manifest, dest, report)
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
                raise _not_pinned(manifest, entry, origin=origin, actual=actual, target=target)
        report(f"{entry.name}: {size} bytes, sha256 ok")
        written.append(target)
    return written


def _base_folder(base_url: str | None) -> Path | None:
    """The local folder of a ``file://`` ``base_url``; ``None`` for none or ``http(s)://``."""
    if base_url is None:
        return None
    scheme = urllib.parse.urlsplit(base_url).scheme
    if scheme == "file":
        return _file_url_path(base_url)
    if scheme not in ("http", "https"):
        raise ConfigError(
            f"fetch: --base-url {base_url!r} must be an http://, https:// or file:// URL"
        )
    return None


def _not_yet_present(
    manifest: Manifest, dest: Path, report: Callable[[str], None]
) -> list[ManifestFile]:
    """The manifest's files that ``dest`` lacks or holds at another digest."""
    wanted = []
    for entry in manifest.files:
        try:
            if digest_of(dest / entry.name) == entry.sha256:
                report(f"{entry.name}: present, sha256 ok, skipped")
                continue
        except FileNotFoundError:
            pass
        wanted.append(entry)
    return wanted


def _not_pinned(
    manifest: Manifest, entry: ManifestFile, *, origin: str, actual: str, target: Path
) -> DigestMismatch:
    return DigestMismatch(
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
