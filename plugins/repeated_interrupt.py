"""Stop signals in a session with scenarios: SIGTERM as Ctrl-C, and a Ctrl-C while the
session already stops is a notice, then a quit at once.

Pytest answers the first ``KeyboardInterrupt`` by reporting it and tearing the session down,
where the run writes its summaries; a second ``KeyboardInterrupt`` inside that work printed
Python's traceback and left them unwritten. SIGTERM (``timeout``, a CI job's time limit,
``docker stop``, Kubernetes) killed the run at once: no summary, no report, no JUnit file.
:class:`RepeatedInterrupt` (registered with the other plugins' adapters by
:func:`tau2_retail.plugins.interop.register_interop`) makes SIGTERM stop the run as Ctrl-C
does, and takes both signals once the session stops.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Generator
from types import FrameType
from typing import Any, Final

import pytest

__all__ = [
    "FORCED_QUIT_NOTICE",
    "FORCED_QUIT_STATUS",
    "REPEATED_INTERRUPT_NOTICE",
    "TERMINATED_NOTICE",
    "RepeatedInterrupt",
    "forced_quit_status",
]

_REPEATED: Final = (
    "\ntau2: {signal}: already stopping; the finished scenarios are being summarized "
    "({signal} once more quits at once, without the summaries; the run folder stays "
    "resumable)\n"
)
_FORCED_QUIT: Final = (
    "\ntau2: {signal} again: quitting without the summaries (the run folder stays resumable; "
    "`python -m tau2_retail summarize RUN_DIR` writes them)\n"
)
REPEATED_INTERRUPT_NOTICE: Final = _REPEATED.format(signal="Ctrl-C")
FORCED_QUIT_NOTICE: Final = _FORCED_QUIT.format(signal="Ctrl-C")
TERMINATED_NOTICE: Final = (
    "\ntau2: SIGTERM: stopping as Ctrl-C does (the finished scenarios are summarized; the run "
    "folder stays resumable)\n"
)


SAME_SIGTERM_SECONDS: Final = 1.0
"""A SIGTERM this soon after the last one is the same one: GNU ``timeout`` sends its signal to
the run, then to the run's whole process group, so the run gets it twice at once."""


def forced_quit_status(signum: int) -> int:
    """The exit status of a quit forced by ``signum``: a shell's for a process that signal
    ended (128 + the signal: 130 for Ctrl-C, 143 for SIGTERM)."""
    return 128 + signum


FORCED_QUIT_STATUS: Final = forced_quit_status(signal.SIGINT)


def _named(signum: int) -> str:
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


class RepeatedInterrupt:
    """Ctrl-C while the session is already stopping is a notice, not an interruption of the
    stopping; the next press quits at once.

    Pytest answers the first ``KeyboardInterrupt`` by reporting it, writing its summary and
    tearing the session down (where the run writes its own summary). Three quick presses in a
    terminal raised ``KeyboardInterrupt`` again inside that work: Python's traceback on the
    terminal, the run summary not written (the closing line then said "interrupted before any
    scenario finished"), and exit 1 or death by SIGINT instead of exit 2; so did one press
    while a run that had finished wrote its summaries and report. From pytest's
    ``pytest_keyboard_interrupt``, and from the start of ``pytest_sessionfinish`` (in the main
    thread: the only one signals reach) of a session with scenarios (``active``; the team's own
    tests keep pytest's Ctrl-C), a press writes one notice and is otherwise ignored;
    the next ends the process at once with :func:`forced_quit_status` (what is written is
    written atomically, and a run whose process is gone resumes: its lock names a dead
    process), so a stop that hangs can still be left without ``kill``.

    SIGTERM, from the session's start where nothing else handles it, is Ctrl-C: a notice, then
    the SIGINT handler of the moment (Python's, or asyncio's while a loop runs) as if the
    signal were SIGINT, so the run stops as Ctrl-C stops it (exit 2, the summaries of what
    finished, the resume command) instead of dying with none of them; once the session stops,
    it counts as a press. Under xdist each worker does the same, so a SIGTERM to the whole
    process group (systemd, ``kill -TERM -PGID``) is a Ctrl-C in a terminal. A session without
    scenarios dies by SIGTERM as before. :meth:`restore` puts the handlers before back when
    the session's configuration ends.
    """

    def __init__(
        self,
        exit_now: Callable[[int], object] = os._exit,
        active: Callable[[], bool] = lambda: True,
        *,
        speaks: bool = True,
    ) -> None:
        self._previous: Any = None
        self._previous_term: Any = None
        self._pid = 0
        self._last_term = float("-inf")
        self._installed = False
        self._presses = 0
        self._exit_now = exit_now
        self._active = active
        # An xdist worker is not the process the user pressed Ctrl-C at: the SIGINT it gets
        # while it stops is execnet's own (a worker whose execution outlives the controller's
        # shutdown by 5 s interrupts itself), and a notice from it repeated the controller's
        # once a worker, under load, in the terminal.
        self._speaks = speaks
        # the terminal's stderr, kept at the session's start (pytest captures nothing then):
        # during a test of a run without workers pytest captures file descriptor 2 itself, and
        # a notice written there went into that capture and was lost with it
        self._stderr: int | None = None

    def pytest_sessionstart(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        if self._speaks and self._stderr is None:
            with contextlib.suppress(OSError):  # no stderr at all: the notices go nowhere
                self._stderr = os.dup(2)
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # a handler of others stays
            self._previous_term = signal.signal(signal.SIGTERM, self._terminated)
            self._pid = os.getpid()

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        self._install()

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self) -> Generator[None, object, object]:
        self._install()
        return (yield)

    def _install(self) -> None:
        if self._installed or threading.current_thread() is not threading.main_thread():
            return
        if not self._active():  # a session of the team's own tests: pytest's Ctrl-C as it is
            return
        self._previous = signal.getsignal(signal.SIGINT)
        signal.signal(signal.SIGINT, self._pressed)
        self._installed = True

    def _terminated(self, signum: int, frame: FrameType | None) -> None:
        # a session of the team's own tests, or a child forked by code under test (that
        # multiprocessing's terminate() ends): death by SIGTERM, as ever
        if not self._active() or os.getpid() != self._pid:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.raise_signal(signal.SIGTERM)
            return
        now = time.monotonic()
        if now - self._last_term < SAME_SIGTERM_SECONDS:
            return
        self._last_term = now
        if self._installed:
            self._pressed(signum, frame)
            return
        self._say(TERMINATED_NOTICE)
        interrupt = signal.getsignal(signal.SIGINT)
        if not callable(interrupt):  # SIGINT ignored (a background job of a script) or default
            raise KeyboardInterrupt
        interrupt(signal.SIGINT, frame)

    def _pressed(self, signum: int, frame: FrameType | None) -> None:
        self._presses += 1
        if self._presses > 2:
            return
        notice = _REPEATED if self._presses == 1 else _FORCED_QUIT
        self._say(notice.format(signal=_named(signum)))
        if self._presses == 2:
            for stream in (sys.stdout, sys.stderr):  # what pytest printed before the quit
                with contextlib.suppress(Exception):
                    stream.flush()
            self._exit_now(forced_quit_status(signum))

    def _say(self, notice: str) -> None:
        if self._speaks:
            # os.write, not sys.stderr: the handler may run in the middle of a write to a
            # stream, and a buffered stream refuses a reentrant call
            with contextlib.suppress(OSError):
                os.write(2 if self._stderr is None else self._stderr, notice.encode())

    def restore(self) -> None:
        """Put back the handlers that were there before the session began (SIGTERM) and
        before it began stopping (SIGINT); let go of the kept stderr."""
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False
        if signal.getsignal(signal.SIGTERM) == self._terminated:
            signal.signal(signal.SIGTERM, self._previous_term)
        if self._stderr is not None:
            with contextlib.suppress(OSError):
                os.close(self._stderr)
            self._stderr = None
