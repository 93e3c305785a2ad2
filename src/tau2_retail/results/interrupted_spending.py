"""What the scenarios stopped in flight unscored had spent: a ledger in the run folder.

A scenario cut short in flight (its conversation cancelled, also one started ahead of its test)
has no record, so the run's ``Cost (USD)`` line, the records' total, leaves out what it had
spent. With prices, the process that ran it appends one line to ``.interrupted-spending`` in
the run folder as it stops, ``<scenario> <USD> <cause>``: a single ``write`` of a short line to
a file opened with ``O_APPEND`` is atomic, so the processes of a session need no lock. This is
the channel that still works under xdist after a Ctrl-C, when the controller no longer reads
its workers' reports.

The cause (:class:`StopCause`) is what stopped it, as the process that ran it knew: Ctrl-C,
SIGTERM or an agent's ``KeyboardInterrupt``; ``-x`` / ``--maxfail`` stopping the session at a
failure; its test ending first (pytest-timeout's signal method); the session ending before its
test ran. The summary says which of them stopped the scenarios it counts.

The run adds the lines up into ``summary.json``'s ``interrupted_cost`` (and ``interrupted_by``)
once its processes are done (:func:`interrupted_spending`), then removes the file
(:func:`clear_interrupted_spending`) as soon as ``summary.json`` is written, before
``all_summary.txt`` (a later failure must not leave lines the summary already holds for the
next summary to count again):
an invocation that ended without its summary (a third Ctrl-C, SIGKILL) leaves its lines to
whatever writes the run's summary next, which counts them: its ``--tau2-resume``, or
``summarize`` (each adds them to the earlier summary's amount and removes the file). ``merge``
adds a shard's lines to its summary's amount and leaves the shard's folder as it is.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

from tau2_retail.errors import ArtifactError

__all__ = [
    "INTERRUPTED_SPENDING_FILE",
    "InterruptedSpending",
    "StopCause",
    "clear_interrupted_spending",
    "interrupted_spending",
    "record_interrupted_spending",
]

INTERRUPTED_SPENDING_FILE: Final = ".interrupted-spending"


class StopCause(StrEnum):
    """What stopped a scenario in flight, unscored (declared in the order the summary names
    them)."""

    #: Ctrl-C, SIGTERM, or an agent's ``KeyboardInterrupt``
    INTERRUPT = "interrupt"
    #: ``-x`` / ``--maxfail``: the session stopped at a failing test
    MAXFAIL = "maxfail"
    #: its test ended while it ran (pytest-timeout's signal method failed the test)
    TIMEOUT = "timeout"
    #: the session ended before its test ran (``--sw`` stopped it, another plugin...)
    SESSION_END = "session_end"


@dataclass(frozen=True, slots=True, kw_only=True)
class InterruptedSpending:
    """What stopped scenarios had spent (USD), and what stopped them (in declaration order)."""

    cost: float = 0.0
    causes: tuple[StopCause, ...] = ()

    @classmethod
    def of(cls, cost: float, causes: Iterable[StopCause]) -> InterruptedSpending:
        """``cost`` spent by scenarios that ``causes`` stopped (each named once, in order)."""
        given = set(causes)
        return cls(cost=cost, causes=tuple(cause for cause in StopCause if cause in given))

    def plus(self, other: InterruptedSpending) -> InterruptedSpending:
        """This and ``other`` together."""
        return self.of(self.cost + other.cost, (*self.causes, *other.causes))


def record_interrupted_spending(
    run_dir: Path, scenario: str, spent: float, cause: StopCause
) -> None:
    """Append that ``scenario`` (its id) stopped unscored, by ``cause``, having spent
    ``spent`` USD."""
    fd = os.open(run_dir / INTERRUPTED_SPENDING_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{scenario} {spent!r} {cause.value}\n".encode())
    finally:
        os.close(fd)


def interrupted_spending(run_dir: Path) -> InterruptedSpending:
    """What the ledger's lines add up to, and their causes (nothing without a ledger); a line
    that is not one of :func:`record_interrupted_spending` counts nothing. ``ArtifactError``:
    unreadable."""
    path = run_dir / INTERRUPTED_SPENDING_FILE
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return InterruptedSpending()
    except OSError as error:
        raise ArtifactError(f"cannot read {path}: {error}") from error
    total = 0.0
    causes: set[StopCause] = set()
    for line in text.splitlines():
        parts = line.split(" ")
        try:
            amount = float(parts[1])
            cause = StopCause(parts[2])
        except (IndexError, ValueError):
            continue
        if len(parts) == 3 and math.isfinite(amount) and amount > 0:
            total += amount
            causes.add(cause)
    return InterruptedSpending.of(total, causes)


def clear_interrupted_spending(run_dir: Path) -> None:
    """Remove the ledger: its lines are in the summary now. ``ArtifactError``: it stays."""
    path = run_dir / INTERRUPTED_SPENDING_FILE
    try:
        path.unlink(missing_ok=True)
    except OSError as error:
        raise ArtifactError(
            f"cannot remove {path} (its amounts are in summary.json now; remove it before a "
            f"resume, which would count them again): {error}"
        ) from error
