"""The run folder's lock: one holder at a time, named to the others, gone with its process."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from tau2_retail.errors import ArtifactError, RunInUse
from tau2_retail.results.lock import LOCK_FILE, LockHolder, RunLock
from tau2_retail.testing.child import ready_child

_HOLD = """
import sys
from pathlib import Path
from tau2_retail.results.lock import RunLock
lock = RunLock.acquire(Path(sys.argv[1]))
print("ready", flush=True)
sys.stdin.read()
"""


def test_a_second_holder_is_refused_with_the_first_ones_pid_and_host(tmp_path: Path) -> None:
    lock = RunLock.acquire(tmp_path)
    try:
        described = json.loads((tmp_path / LOCK_FILE).read_text())
        assert (described["pid"], described["host"]) == (os.getpid(), socket.gethostname())
        with pytest.raises(RunInUse) as refused:
            RunLock.acquire(tmp_path)  # another open file description: refused as well
        assert refused.value.holder.startswith(
            f"pid {os.getpid()} on host {socket.gethostname()} (started "
        )
        assert str(refused.value) == f"{tmp_path} is in use by {refused.value.holder}"
    finally:
        lock.release()
    again = RunLock.acquire(tmp_path)  # released: free again, the file stays
    again.release()
    again.release()  # idempotent
    assert (tmp_path / LOCK_FILE).is_file()


def test_the_os_releases_the_lock_of_a_killed_process(tmp_path: Path) -> None:
    with (
        ready_child(_HOLD, str(tmp_path)) as holder,
        pytest.raises(RunInUse, match=f"pid {holder.pid} on host"),
    ):
        RunLock.acquire(tmp_path)
    # the lock file still names the dead process: the file is no lock, the flock was
    RunLock.acquire(tmp_path).release()


def test_a_run_folder_that_cannot_hold_a_lock_file_is_an_artifact_error(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="cannot open the run lock"):
        RunLock.acquire(tmp_path / "missing")


@pytest.mark.parametrize(
    ("text", "described"),
    [
        ('{"pid": 12, "host": "ci-7", "started": "T"}', "pid 12 on host ci-7 (started T)"),
        ('{"pid": 12}', "pid 12 on host unknown"),
        ("", "another process (its lock file names none)"),
        ('{"pid": true}', "another process (its lock file names none)"),
        ("[1]", "another process (its lock file names none)"),
    ],
)
def test_the_holder_is_described_from_whatever_the_file_holds(text: str, described: str) -> None:
    assert LockHolder.parse(text).describe() == described


def test_hold_reads_beside_readers_never_beside_a_run_and_writes_nothing(tmp_path: Path) -> None:
    assert RunLock.hold(tmp_path, shared=True) is None  # no lock file: no live run
    assert not (tmp_path / LOCK_FILE).exists()
    RunLock.acquire(tmp_path).release()
    described = (tmp_path / LOCK_FILE).read_text()
    with RunLock.hold(tmp_path, shared=True) as first, RunLock.hold(tmp_path, shared=True):
        assert first is not None
        with pytest.raises(RunInUse):
            RunLock.acquire(tmp_path)  # a run cannot take a folder being read
        with pytest.raises(RunInUse):
            RunLock.hold(tmp_path, shared=False)
    assert (tmp_path / LOCK_FILE).read_text() == described  # never written
    with ready_child(_HOLD, str(tmp_path)) as holder:
        for shared in (True, False):
            with pytest.raises(RunInUse, match=f"pid {holder.pid} on host"):
                RunLock.hold(tmp_path, shared=shared)


def test_a_reader_holding_the_lock_is_not_named_by_the_last_runs_ended_pid(
    tmp_path: Path,
) -> None:
    """``merge`` or ``summarize`` holds the folder without writing the lock file, which still
    names the last run: the refusal named that ended pid as "a live run"."""
    with ready_child(_HOLD, str(tmp_path)):
        pass  # a run that ended: its pid stays in the file
    ended = LockHolder.parse((tmp_path / LOCK_FILE).read_text())
    assert ended.pid is not None
    with RunLock.hold(tmp_path, shared=True), pytest.raises(RunInUse) as refused:
        RunLock.hold(tmp_path, shared=False)
    assert refused.value.holder == (
        "another process (a command reading the folder, such as merge or summarize; the lock "
        f"file names the last run, pid {ended.pid} on host {socket.gethostname()}, which has "
        "ended)"
    )
