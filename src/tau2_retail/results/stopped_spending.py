"""What the scenarios stopped unscored had spent: a ledger in the run folder.

A scenario stopped without its outcome has no record, so the run's ``Cost (USD)`` line, the
records' total, leaves out what it had spent: one the budget stopped (its next request did not
fit ``--tau2-max-cost``), or one cut short in flight (its conversation cancelled, also one
started ahead of its test). With prices, the process that ran it appends one line to
``.stopped-spending`` in the run folder as it stops, ``<scenario> <USD> <cause>``: a single
``write`` of a short line to a file opened with ``O_APPEND`` is atomic, so the processes of a
session need no lock. It is the one channel of these amounts: it still works under xdist after
a Ctrl-C, when the controller no longer reads its workers' reports, and for a scenario stopped
ahead of its test that ``-x`` or a Ctrl-C then kept from running (its test reports nothing).

The cause (:class:`StopCause`) is what stopped it, as the process that ran it knew: the budget;
Ctrl-C, SIGTERM or an agent's ``KeyboardInterrupt``; ``-x`` / ``--maxfail`` stopping the session
at a failure; its test ending first (pytest-timeout's signal method); the session ending before
its test ran. The summary says which of them stopped the scenarios it counts.

The run adds the lines up into ``summary.json`` (:func:`stopped_spending`): the budget's into
``not_run_cost``, the others into ``interrupted_cost`` and ``interrupted_by``, once its
processes are done, then removes the file (:func:`clear_stopped_spending`) as soon as
``summary.json`` is written, before ``all_summary.txt`` (a later failure must not leave lines
the summary already holds for the next summary to count again):
an invocation that ended without its summary (a third Ctrl-C, SIGKILL) leaves its lines to
whatever writes the run's summary next, which counts them: its ``--tau2-resume``, or
``summarize`` (each adds them to the earlier summary's amounts and removes the file). ``merge``
adds a shard's lines to its summary's amounts and leaves the shard's folder as it is.
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
    "STOPPED_SPENDING_FILE",
    "StopCause",
    "StoppedSpending",
    "clear_stopped_spending",
    "record_stopped_spending",
    "stopped_spending",
]

STOPPED_SPENDING_FILE: Final = ".stopped-spending"


class StopCause(StrEnum):
    """What stopped a scenario unscored (those in flight: in the order the summary names them)."""

    #: its next request did not fit ``--tau2-max-cost``
    BUDGET = "budget"
    #: Ctrl-C, SIGTERM, or an agent's ``KeyboardInterrupt``
    INTERRUPT = "interrupt"
    #: ``-x`` / ``--maxfail``: the session stopped at a failing test
    MAXFAIL = "maxfail"
    #: its test ended while it ran (pytest-timeout's signal method failed the test)
    TIMEOUT = "timeout"
    #: the session ended before its test ran (``--sw`` stopped it, another plugin...)
    SESSION_END = "session_end"


@dataclass(frozen=True, slots=True, kw_only=True)
class StoppedSpending:
    """What scenarios stopped unscored had spent (USD): those the budget stopped (a summary's
    ``not_run_cost``), and those stopped in flight (``interrupted_cost``) with what stopped
    them (``interrupted_by``, each cause once, in declaration order)."""

    budget: float = 0.0
    interrupted: float = 0.0
    interrupted_by: tuple[StopCause, ...] = ()

    @classmethod
    def of(
        cls, *, budget: float = 0.0, interrupted: float = 0.0, by: Iterable[StopCause] = ()
    ) -> StoppedSpending:
        """These amounts, the causes each named once, in order (never the budget)."""
        given = set(by) - {StopCause.BUDGET}
        causes = tuple(cause for cause in StopCause if cause in given)
        return cls(budget=budget, interrupted=interrupted, interrupted_by=causes)

    def plus(self, other: StoppedSpending) -> StoppedSpending:
        """This and ``other`` together."""
        return self.of(
            budget=self.budget + other.budget,
            interrupted=self.interrupted + other.interrupted,
            by=(*self.interrupted_by, *other.interrupted_by),
        )


def record_stopped_spending(run_dir: Path, scenario: str, spent: float, cause: StopCause) -> None:
    """Append that ``scenario`` (its id) stopped unscored, by ``cause``, having spent
    ``spent`` USD."""
    fd = os.open(run_dir / STOPPED_SPENDING_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{scenario} {spent!r} {cause.value}\n".encode())
    finally:
        os.close(fd)


def stopped_spending(run_dir: Path) -> StoppedSpending:
    """What the ledger's lines add up to (nothing without a ledger); a line that is not one of
    :func:`record_stopped_spending` counts nothing. ``ArtifactError``: unreadable."""
    path = run_dir / STOPPED_SPENDING_FILE
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return StoppedSpending()
    except OSError as error:
        raise ArtifactError(f"cannot read {path}: {error}") from error
    budget = interrupted = 0.0
    causes: set[StopCause] = set()
    for line in text.splitlines():
        parts = line.split(" ")
        try:
            amount = float(parts[1])
            cause = StopCause(parts[2])
        except (IndexError, ValueError):
            continue
        if len(parts) != 3 or not math.isfinite(amount) or amount <= 0:
            continue
        if cause is StopCause.BUDGET:
            budget += amount
        else:
            interrupted += amount
            causes.add(cause)
    return StoppedSpending.of(budget=budget, interrupted=interrupted, by=causes)


def clear_stopped_spending(run_dir: Path) -> None:
    """Remove the ledger: its lines are in the summary now. ``ArtifactError``: it stays."""
    path = run_dir / STOPPED_SPENDING_FILE
    try:
        path.unlink(missing_ok=True)
    except OSError as error:
        raise ArtifactError(
            f"cannot remove {path} (its amounts are in summary.json now; remove it before a "
            f"resume, which would count them again): {error}"
        ) from error
