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

The run adds the lines up into ``summary.json``, the budget's into ``not_run_cost`` (their
scenarios, without a record, listed as not run (budget) even when no test reported them), the
others into ``interrupted_cost`` and ``interrupted_by``, once its processes are done. A summary
takes the ledger (:func:`take_stopped_spending`): the live file is renamed to a batch of its own,
``.stopped-spending.<token>`` (a line a process appends later starts a new live file, for the
next summary); every batch the summary it adds to does not already hold is added up, and every
batch there is listed in the new ``summary.json`` (``counted_ledgers``), then removed once that
file is written (:func:`clear_stopped_spending`). So a crash either way counts each line once:
killed before ``summary.json`` is written, the batch is in no summary and the next one counts
it; after, the summary lists it, and the next one skips it (and removes it).
An invocation that ended without its summary (a third Ctrl-C, SIGKILL) leaves its lines to
whatever writes the run's summary next: its ``--tau2-resume``, or ``summarize`` (the
conversations still in flight when it quit at once wrote none: what they spent is not known).
``merge`` adds what a shard's summary does not hold to its amounts and leaves the shard's
folder as it is.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import secrets
from collections.abc import Collection, Iterable
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
    "take_stopped_spending",
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
    #: the ledger's batches whose amounts these are, or which an earlier summary counted
    #: (:func:`take_stopped_spending`): a summary lists them, ``counted_ledgers``
    ledgers: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        *,
        budget: float = 0.0,
        interrupted: float = 0.0,
        by: Iterable[StopCause] = (),
        budget_stopped: Iterable[str] = (),
        ledgers: Iterable[str] = (),
    ) -> StoppedSpending:
        """These amounts, the causes each named once, in order (never the budget)."""
        given = set(by) - {StopCause.BUDGET}
        causes = tuple(cause for cause in StopCause if cause in given)
        return cls(
            budget=budget,
            interrupted=interrupted,
            interrupted_by=causes,
            budget_stopped=tuple(sorted(set(budget_stopped))),
            ledgers=tuple(sorted(set(ledgers))),
        )

    def plus(self, other: StoppedSpending) -> StoppedSpending:
        """This and ``other`` together."""
        return self.of(
            budget=self.budget + other.budget,
            interrupted=self.interrupted + other.interrupted,
            by=(*self.interrupted_by, *other.interrupted_by),
            budget_stopped=(*self.budget_stopped, *other.budget_stopped),
            ledgers=(*self.ledgers, *other.ledgers),
        )


def record_stopped_spending(run_dir: Path, scenario: str, spent: float, cause: StopCause) -> None:
    """Append that ``scenario`` (its id) stopped unscored, by ``cause``, having spent
    ``spent`` USD."""
    fd = os.open(run_dir / STOPPED_SPENDING_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{scenario} {spent!r} {cause.value}\n".encode())
    finally:
        os.close(fd)


def take_stopped_spending(run_dir: Path, *, held: Collection[str]) -> StoppedSpending:
    """The ledger taken for the summary about to be written: the live file is renamed to a
    batch of its own (``.stopped-spending.<token>``; a line a process appends later starts a
    new live file, for the next summary), then every batch but those ``held`` (the ones the
    summary this one adds to already counts) is added up. ``ledgers`` names every batch there:
    the new summary holds them all, and they are removed once it is written.
    ``ArtifactError``: unreadable, or the live file could not be renamed."""
    live = run_dir / STOPPED_SPENDING_FILE
    batch = live.with_name(f"{STOPPED_SPENDING_FILE}.{secrets.token_hex(6)}")
    try:
        live.rename(batch)
    except FileNotFoundError:
        pass  # nothing was stopped since the last summary
    except OSError as error:
        raise ArtifactError(f"cannot rename {live} to {batch.name}: {error}") from error
    return _read(run_dir, held=held, live=False)


def stopped_spending(run_dir: Path, *, held: Collection[str] = ()) -> StoppedSpending:
    """What the ledger holds beyond ``held`` (the batches a summary already counts), read and
    left as it is (``merge`` reads a shard so); ``ArtifactError``: unreadable."""
    return _read(run_dir, held=held, live=True)


def _ledger_files(run_dir: Path, *, live: bool) -> list[Path]:
    """The ledger's batches (and its live file, with ``live``), in name order."""
    try:
        names = sorted(path.name for path in run_dir.iterdir())
    except FileNotFoundError:
        return []
    except OSError as error:
        raise ArtifactError(f"cannot list {run_dir}: {error}") from error
    batch = f"{STOPPED_SPENDING_FILE}."
    return [
        run_dir / name
        for name in names
        if name.startswith(batch) or (live and name == STOPPED_SPENDING_FILE)
    ]


def _read(run_dir: Path, *, held: Collection[str], live: bool) -> StoppedSpending:
    total = StoppedSpending()
    batches: list[str] = []
    for path in _ledger_files(run_dir, live=live):
        if path.name != STOPPED_SPENDING_FILE:
            batches.append(path.name)
        if path.name not in held:
            total = total.plus(_added_up(path))
    return dataclasses.replace(total, ledgers=tuple(batches) if not live else ())


def _added_up(path: Path) -> StoppedSpending:
    """What the lines of one ledger file add up to; a line that is not one of
    :func:`record_stopped_spending` counts nothing."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return StoppedSpending()
    except OSError as error:
        raise ArtifactError(f"cannot read {path}: {error}") from error
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


def clear_stopped_spending(run_dir: Path, ledgers: Iterable[str]) -> None:
    """Remove the batches ``ledgers`` (their amounts are in ``summary.json`` now). One that
    cannot be removed stays, harmless: the summary lists it as counted, so no later summary
    counts it again, and the next one removes it."""
    for name in ledgers:
        with contextlib.suppress(OSError):
            (run_dir / name).unlink(missing_ok=True)
