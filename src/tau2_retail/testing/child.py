"""A Python child process that signals when it is ready, for tests that kill it mid-work."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

__all__ = ["READY", "ready_child"]

READY = "ready"
"""The line the child prints (and flushes) once it holds what the test needs."""


@contextmanager
def ready_child(
    script: str, *args: str, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    """``python -c SCRIPT ARGS``, yielded once it printed ``READY``; killed and reaped on exit.

    Its stdin is a pipe that stays open, so a child may block on ``sys.stdin.read()``.
    """
    child = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None  # a pipe: Popen(stdout=PIPE) above
        # a real check, not an assert: under python -O a test would go on with a child that
        # never got ready (and its first line unread)
        line = child.stdout.readline()
        if line != f"{READY}\n":
            ended = " (its output ended: it exited or closed stdout)" if not line else ""
            raise RuntimeError(
                f"the child never said {READY!r}: its first line was {line!r}{ended}; "
                f"script: {script!r}"
            )
        yield child
    finally:
        child.kill()
        child.wait()
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                stream.close()
