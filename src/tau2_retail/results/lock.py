"""The run folder's lock: one live process owns a run folder.

The controller of a run (or its only process) holds ``run.lock`` in the run folder with an
exclusive ``fcntl.flock`` for the run's whole life. A second process that tries to take it (a
second run with the same run id, a resume of a run that is still going) fails at once and learns
who holds it: the file names the holder's pid, host and start time.

Why an OS advisory lock and not "the file exists": the kernel releases a ``flock`` when its
process ends, however it ends (SIGKILL, a crash, a power loss), so a crashed run never leaves a
stale lock behind and nobody has to delete one by hand. The file itself stays (it is never
removed: removing it would let one process lock the unlinked file while another creates and
locks a new one). Its text is only a description; the lock is the truth. The descriptor is not
inherited by child processes (Python opens files non-inheritable), so xdist workers never hold
the controller's lock after it died.

A ``flock`` is held per open file description: the same process opening the file twice (an
in-process pytest run inside a test) conflicts with itself, so :meth:`RunLock.release` must be
called when the run ends (the plugin does it in ``pytest_unconfigure``). POSIX only.

Commands that work on a finished run folder take its lock without waiting and without writing
the lock file (:meth:`RunLock.hold`): ``merge`` shared while it reads its shards (a shard may sit
on a read-only mount), ``summarize`` exclusive while it rewrites the summaries. Either stops
with :class:`RunInUse` naming the live run that holds it; a run trying to take the folder
meanwhile is refused. A folder without ``run.lock`` has no live run of this suite.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tau2_retail.errors import ArtifactError, RunInUse

__all__ = ["LOCK_FILE", "LockHolder", "RunLock"]

LOCK_FILE = "run.lock"


@dataclass(frozen=True, slots=True, kw_only=True)
class LockHolder:
    """Who holds a run folder's lock, as its lock file says (None where it does not say)."""

    pid: int | None
    host: str | None
    started: str | None

    def describe(self) -> str:
        """``pid 1234 on host ci-7 (started 2026-12-01T15:00:00+00:00)``; a pid of this host
        that has ended is not named as the holder: a command reading the folder (``merge``,
        ``summarize``) holds the lock without writing the file, which still names the last
        run."""
        if self.pid is None:
            return "another process (its lock file names none)"
        text = f"pid {self.pid} on host {self.host or 'unknown'}"
        if self.host == socket.gethostname() and not _alive(self.pid):
            return (
                f"another process (a command reading the folder, such as merge or summarize; "
                f"the lock file names the last run, {text}, which has ended)"
            )
        return f"{text} (started {self.started})" if self.started else text

    @classmethod
    def parse(cls, text: str) -> LockHolder:
        try:
            raw = json.loads(text)
        except ValueError:
            raw = None
        if not isinstance(raw, dict):
            return cls(pid=None, host=None, started=None)
        pid = raw.get("pid")
        host = raw.get("host")
        started = raw.get("started")
        return cls(
            pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
            host=host if isinstance(host, str) else None,
            started=started if isinstance(started, str) else None,
        )


class RunLock:
    """The held lock of one run folder; :meth:`acquire` takes it, :meth:`release` gives it up."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, run_dir: Path) -> RunLock:
        """Take the lock of ``run_dir`` (which must exist) without waiting.

        Raises :class:`RunInUse` naming the live holder when another process holds it, and
        :class:`ArtifactError` when the lock file cannot be opened or written.
        """
        path = Path(run_dir) / LOCK_FILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise ArtifactError(f"cannot open the run lock {path}: {error}") from error
        _lock_or_close(fd, path, fcntl.LOCK_EX)
        lock = cls(path, fd)
        try:
            lock._describe()
        except OSError as error:
            lock.release()
            raise ArtifactError(f"cannot write the run lock {path}: {error}") from error
        return lock

    def _describe(self) -> None:
        assert self._fd is not None
        text = json.dumps(
            {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "started": datetime.now(UTC).isoformat(timespec="seconds"),
            }
        )
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, (text + "\n").encode("utf-8"), 0)

    @classmethod
    def hold(cls, run_dir: Path, *, shared: bool) -> RunLock | None:
        """Hold ``run_dir``'s lock (``shared`` to read it, else exclusive) without writing the
        lock file, or raise :class:`RunInUse` naming the live run that holds it. None when the
        folder has no lock file (or it cannot be opened): no run of this suite is live there."""
        path = Path(run_dir) / LOCK_FILE
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        _lock_or_close(fd, path, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        return cls(path, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def release(self) -> None:
        """Give the lock up (idempotent). The file stays: see the module docstring."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)  # closing the only descriptor releases the flock


def _lock_or_close(fd: int, path: Path, operation: int) -> None:
    """``flock`` ``fd`` without waiting; on failure close it and raise :class:`RunInUse` naming
    the holder (or :class:`ArtifactError`)."""
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _read_holder(fd)
        os.close(fd)
        who = holder.describe()
        raise RunInUse(f"{path.parent} is in use by {who}", holder=who) from None
    except OSError as error:
        os.close(fd)
        raise ArtifactError(f"cannot lock {path}: {error}") from error


def _alive(pid: int) -> bool:
    """Whether process ``pid`` of this host exists (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _read_holder(fd: int) -> LockHolder:
    try:
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
    except OSError:
        text = ""
    return LockHolder.parse(text)
