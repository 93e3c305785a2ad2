"""A Ctrl-C while the session already stops: a notice, then a quit at once.

Pytest answers the first ``KeyboardInterrupt`` by reporting it and tearing the session down,
where the run writes its summaries; a second ``KeyboardInterrupt`` inside that work printed
Python's traceback and left them unwritten. :class:`RepeatedInterrupt` (registered with the
other plugins' adapters by :func:`tau2_retail.plugins.interop.register_interop`) takes SIGINT
from then on.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Generator
from types import FrameType
from typing import Any, Final

import pytest

__all__ = [
    "FORCED_QUIT_NOTICE",
    "FORCED_QUIT_STATUS",
    "REPEATED_INTERRUPT_NOTICE",
    "RepeatedInterrupt",
]

REPEATED_INTERRUPT_NOTICE: Final = (
    "\ntau2: Ctrl-C: already stopping; the finished scenarios are being summarized "
    "(Ctrl-C once more quits at once, without the summaries; the run folder stays resumable)\n"
)
FORCED_QUIT_NOTICE: Final = (
    "\ntau2: Ctrl-C again: quitting without the summaries (the run folder stays resumable; "
    "`python -m tau2_retail summarize RUN_DIR` writes them)\n"
)
FORCED_QUIT_STATUS: Final = 130
"""The exit status of a forced quit, a shell's for a process Ctrl-C ended (128 + SIGINT)."""


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
    the next ends the process at once with :data:`FORCED_QUIT_STATUS` (what is written is
    written atomically, and a run whose process is gone resumes: its lock names a dead
    process), so a stop that hangs can still be left without ``kill``. :meth:`restore` puts the
    handler before back when the session's configuration ends.
    """

    def __init__(
        self,
        exit_now: Callable[[int], object] = os._exit,
        active: Callable[[], bool] = lambda: True,
        *,
        speaks: bool = True,
    ) -> None:
        self._previous: Any = None
        self._installed = False
        self._presses = 0
        self._exit_now = exit_now
        self._active = active
        # An xdist worker is not the process the user pressed Ctrl-C at: the SIGINT it gets
        # while it stops is execnet's own (a worker whose execution outlives the controller's
        # shutdown by 5 s interrupts itself), and a notice from it repeated the controller's
        # once a worker, under load, in the terminal.
        self._speaks = speaks

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

    def _pressed(self, signum: int, frame: FrameType | None) -> None:
        self._presses += 1
        if self._presses > 2:
            return
        if self._speaks:
            notice = REPEATED_INTERRUPT_NOTICE if self._presses == 1 else FORCED_QUIT_NOTICE
            # os.write, not sys.stderr: the handler may run in the middle of a write to a
            # stream, and a buffered stream refuses a reentrant call
            with contextlib.suppress(OSError):
                os.write(2, notice.encode())
        if self._presses == 2:
            for stream in (sys.stdout, sys.stderr):  # what pytest printed before the quit
                with contextlib.suppress(Exception):
                    stream.flush()
            self._exit_now(FORCED_QUIT_STATUS)

    def restore(self) -> None:
        """Put back the SIGINT handler that was there before the session began stopping."""
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False
