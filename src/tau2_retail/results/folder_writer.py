"""Scenario folders written by a helper process, off the event loop's thread.

With hundreds of conversations in flight in one process, each finished scenario's ten files
cost the loop's thread the file system's kernel time (0.02 ms a file on tmpfs, up to 1.2 ms on
this project's VM disk, where 912 endings then held the loop for 11 s after the last reply)
and the indented JSON encoding of its documents (pure Python; about 1 ms a scenario).
:class:`FolderWriter` gathers nothing: the caller makes the contents, plain values
(:func:`tau2_retail.results.artifacts.outcome_files`); a child process
(this module's :func:`main`, started with the run's interpreter) runs
:func:`tau2_retail.results.scenario_folder.put_scenario_files` on them, in order (encoding
and writing), and answers each folder once it is on disk.

What a run relies on holds: :meth:`FolderWriter.put` returns only when the folder is written
(a scenario's test reports after that, so a SIGKILL loses no reported scenario); the child
ignores Ctrl-C and ends when its input closes, after the folders it has received (a killed
run's last folders are still written, whole or not at all as before: ``metrics.json`` last);
a write the file system refuses raises :class:`ArtifactError` naming the path, as in this
process; a child that cannot start or dies is replaced by writing in this process, nothing
lost (``on_fallback`` says why).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import pickle
import signal
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from tau2_retail.errors import ArtifactError
from tau2_retail.results.scenario_folder import FileContent, ScenarioFiles, put_scenario_files

__all__ = ["FolderWriter", "main"]

_HEADER = struct.Struct("!I")
_IN_FLIGHT = 4
# the child imports the same package as this process, wherever it was imported from (links not
# resolved: a strict editable install's tree of links holds the whole package, its target not)
_PACKAGE_ROOT = str(Path(os.path.abspath(__file__)).parents[2])
_CHILD = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from tau2_retail.results.folder_writer import main; sys.exit(main())"
)

Request = tuple[int, str, tuple[tuple[str, FileContent], ...], tuple[str, ...]]


class _ChildGone(Exception):
    """The child stopped before it answered: the folder is written in this process."""


class FolderWriter:
    """Puts :class:`ScenarioFiles` on disk from a child process (see the module docstring)."""

    def __init__(
        self,
        process: asyncio.subprocess.Process | None,
        *,
        on_fallback: Callable[[str], None] = lambda reason: None,
    ) -> None:
        self._process = process
        self._on_fallback = on_fallback
        self._numbers = itertools.count()
        self._waiting: dict[int, asyncio.Future[str | None]] = {}
        self._reader: asyncio.Task[None] | None = None
        # folders sent and not yet answered: enough to keep the child busy, few enough that
        # hundreds of endings at once do not pile their bytes up in the pipe's buffer
        self._slots = asyncio.Semaphore(_IN_FLIGHT)
        if process is not None:
            self._reader = asyncio.get_running_loop().create_task(
                self._read_replies(), name="tau2 folder writer replies"
            )

    @classmethod
    async def start(
        cls, *, on_fallback: Callable[[str], None] = lambda reason: None
    ) -> FolderWriter:
        """A writer with its child started; one that writes in this process if the child
        cannot be started."""
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                _CHILD,
                _PACKAGE_ROOT,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
        except (OSError, NotImplementedError, RuntimeError) as error:
            on_fallback(_fallback_notice(f"it cannot start: {error}"))
            return cls(None)
        return cls(process, on_fallback=on_fallback)

    @property
    def in_child(self) -> bool:
        """Whether folders still go to the child process."""
        return self._process is not None

    async def put(self, folder: ScenarioFiles | Callable[[], ScenarioFiles]) -> Path:
        """Write ``folder``; return its directory once every file is on disk.

        ``folder`` may be a function that makes it: called once the child can take it, so
        that hundreds of scenarios ending at once do not all hold their files' bytes. A put
        is written even when its caller is cancelled meanwhile (the session stopping while
        finished scenarios wait for the writer: each keeps its record); the cancellation is
        raised once the folder is on disk.
        """
        written = asyncio.ensure_future(self._put(folder))
        cancelled: asyncio.CancelledError | None = None
        while not written.done():
            try:
                await asyncio.shield(written)
            except asyncio.CancelledError as error:
                cancelled = error  # the folder first; then the cancellation
        if cancelled is not None and written.exception() is None:
            raise cancelled
        return written.result()

    async def _put(self, folder: ScenarioFiles | Callable[[], ScenarioFiles]) -> Path:
        process = self._process
        if process is None or process.stdin is None:
            return put_scenario_files(_rendered(folder))
        async with self._slots:
            if process is not self._process:
                return put_scenario_files(_rendered(folder))  # the child went meanwhile
            return await self._send(process, _rendered(folder))

    async def _send(self, process: asyncio.subprocess.Process, folder: ScenarioFiles) -> Path:
        assert process.stdin is not None
        number = next(self._numbers)
        request: Request = (number, str(folder.directory), folder.files, folder.stale)
        try:
            data = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):
            # a value the pipe cannot carry (not one plain JSON gives): written here, where
            # a value that cannot be encoded either raises as it would without the child
            return put_scenario_files(folder)
        answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._waiting[number] = answer
        try:
            process.stdin.write(_HEADER.pack(len(data)) + data)
            await process.stdin.drain()
            error = await answer
        except (_ChildGone, OSError, RuntimeError):
            # gone before it answered: this process writes the folder (a half-written one
            # is rewritten whole: the temporary files and the stale record go first)
            self._gone("it stopped")
            return put_scenario_files(folder)
        finally:
            self._waiting.pop(number, None)
        if error is not None:
            raise ArtifactError(error)
        return folder.directory

    async def aclose(self) -> None:
        """Wait until the child has written every folder it received, then let it end."""
        process = self._process
        if process is not None and process.stdin is not None:
            process.stdin.close()
            await process.wait()
        if self._reader is not None:
            await self._reader

    async def _read_replies(self) -> None:
        process = self._process
        assert process is not None
        assert process.stdout is not None
        try:
            while True:
                header = await process.stdout.readexactly(_HEADER.size)
                (size,) = _HEADER.unpack(header)
                number, error = pickle.loads(await process.stdout.readexactly(size))
                answer = self._waiting.get(number)
                if answer is not None and not answer.done():
                    answer.set_result(error)
        except (asyncio.IncompleteReadError, OSError, pickle.UnpicklingError, ValueError):
            pass  # the child ended (or broke its side): those still waiting write here
        finally:
            for answer in self._waiting.values():
                if not answer.done():
                    answer.set_exception(_ChildGone())

    def _gone(self, reason: str) -> None:
        process, self._process = self._process, None
        if process is None:
            return  # said once
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                process.kill()
        self._on_fallback(_fallback_notice(reason))


def _rendered(folder: ScenarioFiles | Callable[[], ScenarioFiles]) -> ScenarioFiles:
    return folder if isinstance(folder, ScenarioFiles) else folder()


def _fallback_notice(reason: str) -> str:
    return (
        f"the artifact writer process is not used ({reason}): the scenario folders are "
        "written in the process that runs them"
    )


def _serve(requests: BinaryIO, replies: BinaryIO) -> None:
    """Answer each request until the input closes (the run ended, or was killed)."""
    while True:
        header = requests.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return
        (size,) = _HEADER.unpack(header)
        data = requests.read(size)
        if len(data) < size:
            return  # the sender died mid-request: nothing of it is written
        number, directory, files, stale = pickle.loads(data)
        error: str | None = None
        try:
            put_scenario_files(ScenarioFiles(directory=Path(directory), files=files, stale=stale))
        except ArtifactError as refused:
            error = str(refused)
        except Exception as failed:  # told to the run, which raises it
            error = f"cannot write {directory}: {type(failed).__name__}: {failed}"
        answer = pickle.dumps((number, error), protocol=pickle.HIGHEST_PROTOCOL)
        replies.write(_HEADER.pack(len(answer)) + answer)
        replies.flush()


def main() -> int:
    """The child: folders in on stdin, answers out on stdout (nothing else is printed there)."""
    # Ctrl-C reaches every process of the terminal's group, SIGTERM every process of a
    # service's (systemd, ``kill -TERM -PGID``): the run decides what stops, this child ends
    # when its input closes, after the folders it received
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    replies = sys.stdout.buffer
    sys.stdout = sys.stderr  # anything printed by mistake must not break the answers
    with contextlib.suppress(BrokenPipeError):  # the run is gone: nobody to answer
        _serve(sys.stdin.buffer, replies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
