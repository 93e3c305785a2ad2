"""What a request in flight has cost so far, for the conversation that cuts it at its deadline.

A scenario's wall-clock limit cancels the request in flight; the client's own count of its
attempts dies with it. The conversation opens a :class:`RequestProgress` around each request
(:func:`tracking`, a context variable: each asyncio task sees its own), the client updates it as
it goes (:func:`current`), and the conversation records the cut request with it: in
``requests`` as failed, with the attempts and the waits it had made. A request that had
already failed an attempt was retrying a failing endpoint when it was cut: that is the
endpoint's fault, an infra error of its role, not the time the model took.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["RequestProgress", "current", "tracking"]


@dataclass(slots=True)
class RequestProgress:
    """Attempts sent and seconds waited between them, so far, for one request."""

    attempts: int = 0
    wait_seconds: float = 0.0
    #: attempts that failed (a request that had one was retrying when it was cut), the last's
    #: why, and where they went (``model 'm' at URL``)
    failed_attempts: int = 0
    last_failure: str = ""
    endpoint: str = ""
    #: that attempt's timeout, when it got no complete reply within it
    failure_timeout: float | None = None


_CURRENT: ContextVar[RequestProgress | None] = ContextVar("tau2_request_progress", default=None)


@contextlib.contextmanager
def tracking() -> Iterator[RequestProgress]:
    """A fresh progress record for the request made inside the block."""
    progress = RequestProgress()
    token = _CURRENT.set(progress)
    try:
        yield progress
    finally:
        _CURRENT.reset(token)


def current() -> RequestProgress | None:
    """The progress record of the request being made, if its caller tracks one."""
    return _CURRENT.get()
