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

The ledger is only ever appended to. ``summary.json`` adds its lines up, the budget's into
``not_run_cost`` (their scenarios, without a record, listed as not run (budget) even when no
test reported them), the others into ``interrupted_cost`` and ``interrupted_by``, and records
how far it has counted: ``stopped_spending_counted``, the byte offset of the end of the last
complete line it read. Each summary (the run's, a resume's, ``summarize``) starts from the
earlier ``summary.json``'s amounts and offset and adds the complete lines past that offset
(:func:`with_ledger`), and writes the new offset in the same atomic write of ``summary.json``:
killed before it, the old offset stands and the next summary counts those lines; after, they
are behind the offset and counted once. A line appended after a summary read the ledger (a
worker stopped late) is past its offset, so the next summary counts it. A ledger shorter than
the offset (removed or replaced by hand) is a new one, counted from its start.
An invocation that ended without its summary (a third Ctrl-C, SIGKILL) leaves its lines to
whatever writes the run's summary next: its ``--tau2-resume``, or ``summarize`` (the
conversations still in flight when it quit at once wrote none: what they spent is not known).
``merge`` adds the lines past a shard's offset to its summary's amounts the same way and
leaves the shard's folder as it is.
"""

from __future__ import annotations

import dataclasses
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
    "record_stopped_spending",
    "with_ledger",
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
    #: the scenarios the budget stopped (ids, sorted): a summary lists those without a record
    #: as not run (budget), also when ``-x`` or a Ctrl-C kept their tests from reporting
    budget_stopped: tuple[str, ...] = ()
    #: how much of the run folder's ledger (bytes from its start) these amounts include: a
    #: summary's ``stopped_spending_counted`` (:func:`with_ledger`)
    counted: int = 0

    @classmethod
    def of(
        cls,
        *,
        budget: float = 0.0,
        interrupted: float = 0.0,
        by: Iterable[StopCause] = (),
        budget_stopped: Iterable[str] = (),
        counted: int = 0,
    ) -> StoppedSpending:
        """These amounts, the causes each named once, in order (never the budget)."""
        given = set(by) - {StopCause.BUDGET}
        causes = tuple(cause for cause in StopCause if cause in given)
        return cls(
            budget=budget,
            interrupted=interrupted,
            interrupted_by=causes,
            budget_stopped=tuple(sorted(set(budget_stopped))),
            counted=counted,
        )

    def plus(self, other: StoppedSpending) -> StoppedSpending:
        """This and ``other`` together, as counting no ledger (``counted`` 0: e.g. the shards of
        a merge, whose ledgers are not the merged run's)."""
        return self.of(
            budget=self.budget + other.budget,
            interrupted=self.interrupted + other.interrupted,
            by=(*self.interrupted_by, *other.interrupted_by),
            budget_stopped=(*self.budget_stopped, *other.budget_stopped),
        )


def record_stopped_spending(run_dir: Path, scenario: str, spent: float, cause: StopCause) -> None:
    """Append that ``scenario`` (its id) stopped unscored, by ``cause``, having spent
    ``spent`` USD."""
    fd = os.open(run_dir / STOPPED_SPENDING_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{scenario} {spent!r} {cause.value}\n".encode())
    finally:
        os.close(fd)


def with_ledger(run_dir: Path, earlier: StoppedSpending) -> StoppedSpending:
    """``earlier`` (a summary's amounts, which include ``run_dir``'s ledger up to
    ``earlier.counted``) with the complete lines of the ledger past that offset; ``counted``
    is then the end of the last of them (a line still being written is left to the next
    summary). A ledger shorter than ``earlier.counted`` (removed or replaced by hand) is a new
    one, counted from its start. The ledger is read only; ``ArtifactError``: unreadable."""
    path = run_dir / STOPPED_SPENDING_FILE
    try:
        with path.open("rb") as ledger:
            start = earlier.counted if earlier.counted <= os.fstat(ledger.fileno()).st_size else 0
            ledger.seek(start)
            text = ledger.read()
    except FileNotFoundError:
        return dataclasses.replace(earlier, counted=0)  # nothing was stopped
    except OSError as error:
        raise ArtifactError(f"cannot read {path}: {error}") from error
    end = text.rfind(b"\n") + 1
    added = _added_up(text[:end].decode("utf-8", errors="replace"))
    return dataclasses.replace(earlier.plus(added), counted=start + end)


def _added_up(text: str) -> StoppedSpending:
    """What the ledger's lines ``text`` add up to; a line that is not one of
    :func:`record_stopped_spending` counts nothing."""
    budget = interrupted = 0.0
    causes: set[StopCause] = set()
    budget_stopped: set[str] = set()
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
            budget_stopped.add(parts[0])
        else:
            interrupted += amount
            causes.add(cause)
    return StoppedSpending.of(
        budget=budget, interrupted=interrupted, by=causes, budget_stopped=budget_stopped
    )
