"""The manifest, the data folder, digest checks, and the fetch against a loopback HTTP server."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tau2_retail.cli.main import main
from tau2_retail.data import files as datafiles
from tau2_retail.data.fetch import fetch
from tau2_retail.data.files import (
    DATA_DIR_ENV,
    CheckStatus,
    load_manifest,
    read_verified,
    resolve_data_dir,
    verified_path,
    verify_folder,
)
from tau2_retail.errors import ConfigError, DataError, DigestMismatch
from tau2_retail.testing.upstream_checkout import RETAIL_FOLDER, make_upstream_checkout

NAMES = [
    "db.json",
    "tasks.json",
    "policy.md",
    "split_tasks.json",
    "tasks_voice.json",
    "user_simulator/simulation_guidelines.md",
    "LICENSE",
    "upstream/src/tau2/agent/llm_agent.py",
    "upstream/src/tau2/domains/retail/tools.py",
    "upstream/src/tau2/environment/tool.py",
    "upstream/src/tau2/user/user_simulator.py",
    "upstream/src/tau2/data_model/tasks.py",
    "upstream/src/tau2/evaluator/evaluator_nl_assertions.py",
    "upstream/src/tau2/orchestrator/orchestrator.py",
]


PINNED_COMMIT = load_manifest().commit

# sha256 of the manifest's listing "<sha256>  <name>\n" (data, then the pinned sources)
_COMBINED = hashlib.sha256(
    "".join(f"{entry.sha256}  {entry.name}\n" for entry in load_manifest().files).encode()
).hexdigest()


def _files_in(folder: Path) -> list[str]:
    """Every file under ``folder`` (temp files included), as sorted relative names."""
    return sorted(
        path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()
    )


def _flip_byte(path: Path, offset: int = 10) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


# --- the manifest -------------------------------------------------------------------------------


def test_manifest_pins_the_data_and_sources_of_one_commit() -> None:
    manifest = load_manifest()
    assert manifest.repository == "sierra-research/tau2-bench"
    assert len(manifest.commit) == 40
    assert [entry.name for entry in manifest.files] == NAMES
    assert manifest.file("LICENSE").upstream_path == "LICENSE"
    assert (
        manifest.file("user_simulator/simulation_guidelines.md").upstream_path
        == "data/tau2/user_simulator/simulation_guidelines.md"
    )


def test_manifest_urls_point_at_the_pinned_commit_or_the_given_base() -> None:
    manifest = load_manifest()
    entry = manifest.file("tasks.json")
    assert manifest.url(entry) == (
        f"https://raw.githubusercontent.com/sierra-research/tau2-bench/{manifest.commit}/"
        "data/tau2/domains/retail/tasks.json"
    )
    assert (
        manifest.url(entry, base_url="http://127.0.0.1:9/mirror/")
        == "http://127.0.0.1:9/mirror/data/tau2/domains/retail/tasks.json"
    )


def test_manifest_matches_the_data(data_dir: Path) -> None:
    checks = verify_folder(data_dir)
    assert [check.name for check in checks] == NAMES
    assert {check.status for check in checks} == {CheckStatus.OK}


# --- resolving the data folder ------------------------------------------------------------------


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the default cache at an empty folder and clear $TAU2_DATA_DIR."""
    cache = tmp_path / "cache"
    monkeypatch.setattr(datafiles, "default_cache_dir", lambda: cache)
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    return cache


ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("xdg", ["absolute", "unset", "relative"])
def test_the_default_cache_is_the_users_cache_even_in_a_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, xdg: str
) -> None:
    """Issue 31, item 1: in a checkout the cache was ``fixtures/cache``, which the project's
    own checks (mypy through the ``tau2_retail/fixtures`` link) then read as code."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    if xdg == "absolute":
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    elif xdg == "relative":  # the XDG specification: a relative path is ignored
        monkeypatch.setenv("XDG_CACHE_HOME", "xdg")
    else:
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    cache = datafiles.default_cache_dir()

    assert (ROOT / "pyproject.toml").is_file()  # this test runs in a checkout
    expected = tmp_path / ("xdg" if xdg == "absolute" else "home/.cache") / "tau2_retail"
    assert cache == expected
    assert not cache.is_relative_to(ROOT)


def test_fetch_fills_the_folder_named_by_the_environment_without_downloading(
    data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The README's first command where ``TAU2_DATA_DIR`` already holds the verified files (a
    CI job with no network): ``data fetch`` checks them and downloads nothing."""
    monkeypatch.setenv(DATA_DIR_ENV, str(data_dir))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("data fetch tried the network")

    monkeypatch.setattr("urllib.request.urlopen", no_network)

    assert main(["data", "fetch"]) == 0
    out, _ = capsys.readouterr()
    assert (
        out == f"{data_dir} (from ${DATA_DIR_ENV}): 0 written, 14 already present, all verified\n"
    )
    assert not (tmp_path / "xdg").exists()


@pytest.mark.usefixtures("empty_cache")
def test_explicit_folder_wins_over_the_environment(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "elsewhere"))
    assert resolve_data_dir(data_dir) == data_dir
    assert resolve_data_dir(str(data_dir)) == data_dir


@pytest.mark.usefixtures("empty_cache")
def test_environment_wins_over_the_cache(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(data_dir))
    assert resolve_data_dir() == data_dir
    assert resolve_data_dir(None) == data_dir


def test_cache_is_the_last_resort(copied_data_dir: Path, empty_cache: Path) -> None:
    copied_data_dir.rename(empty_cache)
    assert resolve_data_dir() == empty_cache


def test_missing_folder_names_the_folder_and_the_fix(empty_cache: Path) -> None:
    with pytest.raises(DataError) as excinfo:
        resolve_data_dir()
    message = str(excinfo.value)
    assert str(empty_cache) in message
    assert "does not exist" in message
    assert "python -m tau2_retail data fetch" in message
    assert DATA_DIR_ENV in message
    assert "--tau2-data-dir" in message


def test_missing_file_names_the_file_and_the_fix(copied_data_dir: Path) -> None:
    (copied_data_dir / "policy.md").unlink()
    with pytest.raises(DataError, match=r"lacks policy\.md") as excinfo:
        resolve_data_dir(copied_data_dir)
    assert "python -m tau2_retail data fetch" in str(excinfo.value)
    with pytest.raises(DataError, match=r"policy\.md: data file not found"):
        read_verified(copied_data_dir, "policy.md")
    with pytest.raises(DataError, match=r"policy\.md: data file not found"):
        verified_path(copied_data_dir, "policy.md")


# --- digest verification ------------------------------------------------------------------------


def test_changed_byte_raises_digest_mismatch_naming_file_and_digests(copied_data_dir: Path) -> None:
    path = copied_data_dir / "tasks.json"
    _flip_byte(path)
    expected = load_manifest().file("tasks.json").sha256
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    for check in (read_verified, verified_path):
        with pytest.raises(DigestMismatch) as excinfo:
            check(copied_data_dir, "tasks.json")
        error = excinfo.value
        assert (error.path, error.expected, error.actual) == (str(path), expected, actual)
        message = str(error)
        assert str(path) in message
        assert expected in message
        assert actual in message
        assert "python -m tau2_retail data fetch" in message


def test_read_verified_returns_the_file_bytes(data_dir: Path) -> None:
    data = read_verified(data_dir, "split_tasks.json")
    assert data == (data_dir / "split_tasks.json").read_bytes()
    assert verified_path(data_dir, "split_tasks.json") == data_dir / "split_tasks.json"


def test_an_unchanged_file_is_verified_once_a_changed_one_again(copied_data_dir: Path) -> None:
    path = copied_data_dir / "policy.md"
    assert verified_path(copied_data_dir, "policy.md") == path
    before = path.stat()
    # Same size, same mtime: the process has already verified this file state and trusts it.
    _flip_byte(path)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert verified_path(copied_data_dir, "policy.md") == path
    assert read_verified(copied_data_dir, "policy.md") == path.read_bytes()
    # A new mtime is a new file state: it is hashed again and the change is caught.
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    with pytest.raises(DigestMismatch):
        verified_path(copied_data_dir, "policy.md")
    with pytest.raises(DigestMismatch):
        read_verified(copied_data_dir, "policy.md")


def test_verify_folder_reports_missing_and_mismatched_files(copied_data_dir: Path) -> None:
    (copied_data_dir / "LICENSE").unlink()
    _flip_byte(copied_data_dir / "policy.md")
    checks = {check.name: check for check in verify_folder(copied_data_dir)}
    assert checks["LICENSE"].status is CheckStatus.MISSING
    assert checks["LICENSE"].actual is None
    assert checks["policy.md"].status is CheckStatus.MISMATCH
    assert (
        checks["policy.md"].actual
        == hashlib.sha256((copied_data_dir / "policy.md").read_bytes()).hexdigest()
    )
    assert checks["policy.md"].expected == load_manifest().file("policy.md").sha256
    assert checks["db.json"].status is CheckStatus.OK


def test_verify_folder_of_a_missing_folder_reports_every_file_missing(tmp_path: Path) -> None:
    checks = verify_folder(tmp_path / "nowhere")
    assert {check.status for check in checks} == {CheckStatus.MISSING}


# --- fetch against a loopback HTTP server -------------------------------------------------------


class _FileServer(ThreadingHTTPServer):
    """Serves the pinned files under ``/mirror/<upstream path>``, with injectable faults."""

    daemon_threads = True

    def __init__(self, routes: dict[str, bytes]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.routes = routes
        self.truncated: set[str] = set()
        self.requests: list[str] = []

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/mirror"


class _Handler(BaseHTTPRequestHandler):
    server: _FileServer

    def do_GET(self) -> None:
        self.server.requests.append(self.path)
        upstream_path = self.path.removeprefix("/mirror/")
        body = self.server.routes.get(upstream_path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if upstream_path in self.server.truncated:
            # Announce the full length, send half, hang up.
            self.wfile.write(body[: len(body) // 2])
            self.close_connection = True
            return
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Keep the test output clean."""


@pytest.fixture
def file_server(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[_FileServer]:
    # A proxy from the environment would intercept loopback requests.
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    routes = {
        entry.upstream_path: (data_dir / entry.name).read_bytes() for entry in load_manifest().files
    }
    server = _FileServer(routes)
    # A short poll interval keeps shutdown() fast in teardown.
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _upstream(name: str) -> str:
    return load_manifest().file(name).upstream_path


def test_fetch_downloads_verifies_and_then_skips(file_server: _FileServer, tmp_path: Path) -> None:
    dest = tmp_path / "cache"
    messages: list[str] = []
    written = fetch(dest, base_url=file_server.base_url, progress=messages.append)
    assert written == [dest / name for name in NAMES]
    assert _files_in(dest) == sorted(NAMES)
    assert {check.status for check in verify_folder(dest)} == {CheckStatus.OK}
    assert len(file_server.requests) == len(NAMES)
    size = (dest / "db.json").stat().st_size
    assert f"db.json: {size} bytes, sha256 ok" in messages

    messages.clear()
    assert fetch(dest, base_url=file_server.base_url, progress=messages.append) == []
    assert len(file_server.requests) == len(NAMES)
    assert "tasks.json: present, sha256 ok, skipped" in messages


def test_fetch_replaces_only_the_file_that_differs(
    file_server: _FileServer, tmp_path: Path
) -> None:
    dest = tmp_path / "cache"
    fetch(dest, base_url=file_server.base_url)
    _flip_byte(dest / "policy.md")
    assert fetch(dest, base_url=file_server.base_url) == [dest / "policy.md"]
    assert {check.status for check in verify_folder(dest)} == {CheckStatus.OK}


def test_fetch_of_a_wrong_byte_raises_and_leaves_nothing(
    file_server: _FileServer, tmp_path: Path
) -> None:
    upstream = _upstream("tasks.json")
    body = bytearray(file_server.routes[upstream])
    body[100] ^= 0x01
    file_server.routes[upstream] = bytes(body)
    dest = tmp_path / "cache"
    with pytest.raises(DigestMismatch) as excinfo:
        fetch(dest, base_url=file_server.base_url)
    message = str(excinfo.value)
    assert f"{file_server.base_url}/{upstream}" in message
    assert "tasks.json" in message
    assert excinfo.value.actual == hashlib.sha256(body).hexdigest()
    # The file before it in the manifest is complete and verified; tasks.json left no trace.
    assert _files_in(dest) == ["db.json"]


def test_fetch_of_a_truncated_body_raises_and_leaves_nothing(
    file_server: _FileServer, tmp_path: Path
) -> None:
    upstream = _upstream("tasks_voice.json")
    file_server.truncated.add(upstream)
    dest = tmp_path / "cache"
    with pytest.raises(DataError, match=r"truncated|broke off") as excinfo:
        fetch(dest, base_url=file_server.base_url)
    assert f"{file_server.base_url}/{upstream}" in str(excinfo.value)
    assert "tasks_voice.json" not in _files_in(dest)
    assert _files_in(dest) == sorted(["db.json", "tasks.json", "policy.md", "split_tasks.json"])


def test_fetch_of_a_missing_file_names_the_url(file_server: _FileServer, tmp_path: Path) -> None:
    upstream = _upstream("policy.md")
    del file_server.routes[upstream]
    dest = tmp_path / "cache"
    with pytest.raises(DataError, match="HTTP 404") as excinfo:
        fetch(dest, base_url=file_server.base_url)
    assert f"{file_server.base_url}/{upstream}" in str(excinfo.value)
    assert "policy.md" not in _files_in(dest)


def test_fetch_from_an_unreachable_server_raises_data_error(tmp_path: Path) -> None:
    # Bind a port, then close it: nothing listens there any more.
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    host, port = server.server_address[:2]
    server.server_close()
    with pytest.raises(DataError, match=r"db\.json: cannot reach http://127\.0\.0\.1"):
        fetch(tmp_path / "cache", base_url=f"http://{host!s}:{port}", timeout=5)
    assert _files_in(tmp_path / "cache") == []


def test_fetch_copies_from_a_local_folder(data_dir: Path, tmp_path: Path) -> None:
    dest = tmp_path / "cache"
    assert fetch(dest, source_dir=data_dir) == [dest / name for name in NAMES]
    assert {check.status for check in verify_folder(dest)} == {CheckStatus.OK}
    assert fetch(dest, source_dir=data_dir) == []


def test_fetch_from_a_folder_with_a_changed_file_writes_nothing_for_it(
    copied_data_dir: Path, tmp_path: Path
) -> None:
    _flip_byte(copied_data_dir / "db.json")
    dest = tmp_path / "cache"
    with pytest.raises(DigestMismatch, match=r"db\.json"):
        fetch(dest, source_dir=copied_data_dir)
    assert _files_in(dest) == []


def test_fetch_from_a_folder_without_a_file_names_it(copied_data_dir: Path, tmp_path: Path) -> None:
    (copied_data_dir / "LICENSE").unlink()
    with pytest.raises(DataError, match=r"not found: LICENSE \(looked for .*/LICENSE"):
        fetch(tmp_path / "cache", source_dir=copied_data_dir)
    assert not (tmp_path / "cache").exists()  # every file is found before any is written


def test_fetch_rejects_conflicting_or_odd_sources(data_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not both"):
        fetch(tmp_path, source_dir=data_dir, base_url="http://127.0.0.1:9")
    with pytest.raises(ConfigError, match=r"http://, https:// or file://"):
        fetch(tmp_path, base_url=f"ftp://127.0.0.1{data_dir}")
    with pytest.raises(ConfigError, match="absolute folder"):
        fetch(tmp_path, base_url="file://./tau2-bench")
    assert _files_in(tmp_path) == []


# --- a tau2-bench checkout (issue 18, item 4) ---------------------------------------------------


RETAIL = RETAIL_FOLDER


@pytest.mark.parametrize("where", ["", RETAIL], ids=["root", "retail-folder"])
def test_fetch_from_a_tau2_bench_checkout(data_dir: Path, tmp_path: Path, where: str) -> None:
    checkout = make_upstream_checkout(data_dir, tmp_path / "tau2-bench")
    dest = tmp_path / "cache"
    messages: list[str] = []
    written = fetch(dest, source_dir=checkout / where, progress=messages.append)
    assert written == [dest / name for name in NAMES]
    assert {check.status for check in verify_folder(dest)} == {CheckStatus.OK}
    # the guidelines, licence and sources come from where upstream keeps them
    for name in ("user_simulator/simulation_guidelines.md", "LICENSE", NAMES[-1]):
        assert f"{name}: fetching from {checkout / _upstream(name)}" in messages
    assert _files_in(dest) == sorted(NAMES)  # nothing else of the checkout


def test_fetch_from_a_checkout_at_another_commit_names_file_and_digests(
    data_dir: Path, tmp_path: Path
) -> None:
    checkout = make_upstream_checkout(data_dir, tmp_path / "tau2-bench")
    changed = checkout / _upstream("user_simulator/simulation_guidelines.md")
    changed.write_text(changed.read_text() + "\nA newer guideline.\n")
    actual = hashlib.sha256(changed.read_bytes()).hexdigest()
    expected = load_manifest().file("user_simulator/simulation_guidelines.md").sha256
    dest = tmp_path / "cache"
    with pytest.raises(DigestMismatch) as raised:
        fetch(dest, source_dir=checkout / RETAIL)
    message = str(raised.value)
    assert f"user_simulator/simulation_guidelines.md (from {changed})" in message
    assert expected in message
    assert actual in message
    assert "git checkout a2c0247" in message
    assert not (dest / "user_simulator/simulation_guidelines.md").exists()  # nothing for it
    assert not temp_files_in(dest)


def test_a_lone_retail_folder_names_every_file_it_lacks(data_dir: Path, tmp_path: Path) -> None:
    # the retail folder copied out of its checkout: the guidelines, licence and sources are not
    # around it; every missing file is named with the paths tried, and nothing is written
    lone = tmp_path / "retail"
    checkout = make_upstream_checkout(data_dir, tmp_path / "tau2-bench")
    (checkout / RETAIL).rename(lone)
    dest = tmp_path / "cache"
    with pytest.raises(DataError) as raised:
        fetch(dest, source_dir=lone)
    message = str(raised.value)
    for name in NAMES[5:]:
        assert f"{name} (looked for {lone / name}" in message
        assert str(lone / _upstream(name)) in message
    assert "db.json" not in message
    assert "nothing was written" in message
    assert not dest.exists()


def test_fetch_from_a_folder_that_does_not_exist(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not a folder"):
        fetch(tmp_path / "cache", source_dir=tmp_path / "nowhere")


def test_fetch_from_a_file_url_of_a_checkout(data_dir: Path, tmp_path: Path) -> None:
    checkout = make_upstream_checkout(
        data_dir, tmp_path / "tau2 bench"
    )  # a space: the URL quotes it
    dest = tmp_path / "cache"
    messages: list[str] = []
    written = fetch(dest, base_url=checkout.as_uri(), progress=messages.append)
    assert written == [dest / name for name in NAMES]
    assert {check.status for check in verify_folder(dest)} == {CheckStatus.OK}
    assert f"db.json: fetching from {checkout.as_uri()}/{_upstream('db.json')}" in messages

    _flip_byte(checkout / _upstream("policy.md"))
    (dest / "policy.md").unlink()
    with pytest.raises(DigestMismatch, match=r"policy\.md \(from file://"):
        fetch(dest, base_url=checkout.as_uri())
    assert not (dest / "policy.md").exists()


def test_a_file_url_of_the_retail_folder_says_to_use_from(data_dir: Path, tmp_path: Path) -> None:
    checkout = make_upstream_checkout(data_dir, tmp_path / "tau2-bench")
    with pytest.raises(DataError, match=r"db\.json: file://.* not found .*use --from DIR"):
        fetch(tmp_path / "cache", base_url=(checkout / RETAIL).as_uri())


def temp_files_in(folder: Path) -> list[str]:
    return [name for name in _files_in(folder) if name.endswith(".part")] if folder.exists() else []


# --- the command line ---------------------------------------------------------------------------


def test_cli_fetch_then_verify(
    file_server: _FileServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "cache"
    assert main(["data", "fetch", "--dest", str(dest), "--base-url", file_server.base_url]) == 0
    out, err = capsys.readouterr()
    assert "14 written, 0 already present" in out
    assert f"db.json: {(dest / 'db.json').stat().st_size} bytes, sha256 ok" in err

    assert main(["data", "verify", str(dest)]) == 0
    out, _ = capsys.readouterr()
    assert "all 14 files match the manifest" in out
    # the commit to install tau2-bench at (docs/leaderboard.md sends the reader here for it)
    assert f"pinned upstream: sierra-research/tau2-bench at commit {PINNED_COMMIT}\n" in out
    assert out.count(" ok ") == 14
    assert f"sha256 of the data and the pinned sources: {_COMBINED}\n" in out
    assert out.endswith(
        "tau2 profile: derived from the pinned sources (16 tools, 114 user prompts)\n"
    )


def test_cli_fetch_from_a_folder(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "cache"
    assert main(["data", "fetch", "--from", str(data_dir), "--dest", str(dest)]) == 0
    assert main(["data", "fetch", "--from", str(data_dir), "--dest", str(dest)]) == 0
    out, err = capsys.readouterr()
    assert "0 written, 14 already present" in out
    assert "skipped" in err


def test_cli_verify_reports_problems_with_exit_code_1(
    copied_data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _flip_byte(copied_data_dir / "tasks.json")
    (copied_data_dir / "LICENSE").unlink()
    assert main(["data", "verify", str(copied_data_dir)]) == 1
    out, _ = capsys.readouterr()
    actual = hashlib.sha256((copied_data_dir / "tasks.json").read_bytes()).hexdigest()
    assert f"got {actual}" in out
    assert "LICENSE" in out
    assert "missing" in out
    assert "2 of 14 files missing or different" in out
    assert f"at commit {PINNED_COMMIT}\n" in out  # named whatever the folder holds
    assert "python -m tau2_retail data fetch" in out


def test_cli_verify_defaults_to_the_resolved_folder(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(data_dir))
    assert main(["data", "verify"]) == 0
    out, _ = capsys.readouterr()
    assert out.startswith(f"{data_dir}\n")
    assert f"sha256 of the data and the pinned sources: {_COMBINED}\n" in out


def test_cli_verify_of_an_altered_source_names_file_digests_and_fix(
    copied_data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "upstream/src/tau2/user/user_simulator.py"
    _flip_byte(copied_data_dir / name, offset=100)
    assert main(["data", "verify", str(copied_data_dir)]) == 1
    out, _ = capsys.readouterr()
    actual = hashlib.sha256((copied_data_dir / name).read_bytes()).hexdigest()
    (line,) = [line for line in out.splitlines() if line.startswith(name)]
    assert line.split() == [
        name,
        "mismatch",
        "expected",
        f"{load_manifest().file(name).sha256},",
        "got",
        actual,
    ]
    assert "1 of 14 files missing or different" in out
    assert "python -m tau2_retail data fetch" in out
    assert "sha256 of the data" not in out


def test_cli_verify_of_a_changed_pin_names_the_construct_not_found(
    copied_data_dir: Path,
    pin_current_content: Callable[[Path, str], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name = "upstream/src/tau2/agent/llm_agent.py"
    path = copied_data_dir / name
    path.write_bytes(path.read_bytes().replace(b"class LLMAgent(", b"class TextAgent(", 1))
    pin_current_content(copied_data_dir, name)
    assert main(["data", "verify", str(copied_data_dir)]) == 1
    out, _ = capsys.readouterr()
    assert f"tau2 profile: {name}: class LLMAgent not found" in out
    assert "Traceback" not in out


def test_cli_fetch_error_exits_2_naming_the_url(
    file_server: _FileServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upstream = _upstream("db.json")
    del file_server.routes[upstream]
    code = main(["data", "fetch", "--dest", str(tmp_path), "--base-url", file_server.base_url])
    assert code == 2
    _, err = capsys.readouterr()
    assert f"error: db.json: download from {file_server.base_url}/{upstream} failed" in err


# -- issue 12, item 8 ---------------------------------------------------------------------------


def test_a_data_folder_that_is_a_file_is_reported_as_such(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "data"
    not_a_folder.write_text("oops")
    with pytest.raises(DataError, match="is a file, not a folder"):
        datafiles.resolve_data_dir(not_a_folder)


def test_a_huge_db_json_is_refused_before_it_is_read(copied_data_dir: Path) -> None:
    db = copied_data_dir / "db.json"
    with db.open("r+b") as handle:
        handle.truncate(20 << 30)  # a sparse 20 GB file: reading it whole would exhaust memory
    with pytest.raises(DataError, match="more than any pinned data file"):
        datafiles.read_verified(copied_data_dir, "db.json")


def test_the_help_examples_work_on_a_checkout(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each example of ``data fetch --help`` that copies from a checkout, run as written with
    the checkout's place replaced (``--dest`` added where the example fills the cache)."""
    checkout = make_upstream_checkout(data_dir, tmp_path / "src" / "tau2-bench")
    with pytest.raises(SystemExit):
        main(["data", "fetch", "--help"])
    help_text = capsys.readouterr().out
    examples = [
        line.strip().removeprefix("python -m tau2_retail ").split()
        for line in help_text.splitlines()
        if line.startswith("  python -m tau2_retail data fetch --")
    ]
    assert len(examples) == 3, help_text
    for number, words in enumerate(examples):
        args = [
            word.replace("~/src/tau2-bench", str(checkout))
            .replace("/srv/tau2-bench", checkout.as_posix())
            .replace("./tau2-data", str(tmp_path / "dest-given"))
            for word in words
        ]
        if "--dest" not in args:
            args += ["--dest", str(tmp_path / f"dest-{number}")]
        assert main(args) == 0, args
        out, _ = capsys.readouterr()
        assert "14 written, 0 already present, all verified" in out, args
    assert {check.status for check in verify_folder(tmp_path / "dest-given")} == {CheckStatus.OK}


def test_cli_fetch_from_a_checkout_at_another_commit_exits_2(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkout = make_upstream_checkout(data_dir, tmp_path / "tau2-bench")
    _flip_byte(checkout / _upstream("tasks.json"))
    code = main(["data", "fetch", "--from", str(checkout), "--dest", str(tmp_path / "cache")])
    assert code == 2
    _, err = capsys.readouterr()
    assert f"tasks.json (from {checkout / _upstream('tasks.json')})" in err
    assert load_manifest().file("tasks.json").sha256 in err


def test_a_filled_folder_is_fetched_again_without_any_request(
    data_dir: Path, tmp_path: Path
) -> None:
    # what an offline CI relies on (docs/data.md): a restored cache makes `data fetch` a no-op
    dest = tmp_path / "cache"
    fetch(dest, source_dir=data_dir)
    messages: list[str] = []
    assert fetch(dest, base_url="http://127.0.0.1:9", progress=messages.append, timeout=1) == []
    assert fetch(dest, source_dir=tmp_path / "nowhere") == []
    assert messages == [f"{name}: present, sha256 ok, skipped" for name in NAMES]
