"""What the scenarios an interrupt stopped unscored had spent: a ledger in the run folder.

A scenario cut short by Ctrl-C, SIGTERM or an agent's ``KeyboardInterrupt`` (its conversation
cancelled, also one started ahead of its test) has no record, so the run's ``Cost (USD)`` line,
the records' total, leaves out what it had spent. With prices, the process that ran it appends
one line to ``.interrupted-spending`` in the run folder as it stops, ``<scenario> <USD>``: a
single ``write`` of a short line to a file opened with ``O_APPEND`` is atomic, so the processes
of a session need no lock. This is the channel that still works under xdist after a Ctrl-C,
when the controller no longer reads its workers' reports.

The run adds the lines up into ``summary.json``'s ``interrupted_cost`` once its processes are
done (:func:`interrupted_spending`), then removes the file (:func:`clear_interrupted_spending`)
as soon as ``summary.json`` is written, before ``all_summary.txt`` (a later failure must not
leave lines the summary already holds for the next summary to count again):
an invocation that ended without its summary (a third Ctrl-C, SIGKILL) leaves its lines to
whatever writes the run's summary next, which counts them: its ``--tau2-resume``, or
``summarize`` (each adds them to the earlier summary's amount and removes the file). ``merge``
adds a shard's lines to its summary's amount and leaves the shard's folder as it is.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Final

from tau2_retail.errors import ArtifactError

__all__ = [
    "INTERRUPTED_SPENDING_FILE",
    "clear_interrupted_spending",
    "interrupted_spending",
    "record_interrupted_spending",
]

INTERRUPTED_SPENDING_FILE: Final = ".interrupted-spending"


def record_interrupted_spending(run_dir: Path, scenario: str, spent: float) -> None:
    """Append that ``scenario`` (its id) stopped unscored having spent ``spent`` USD."""
    fd = os.open(run_dir / INTERRUPTED_SPENDING_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{scenario} {spent!r}\n".encode())
    finally:
        os.close(fd)


def interrupted_spending(run_dir: Path) -> float:
    """USD the ledger's lines add up to (0 without a ledger); a line that is not one of
    :func:`record_interrupted_spending` counts nothing. ``ArtifactError``: unreadable."""
    path = run_dir / INTERRUPTED_SPENDING_FILE
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return 0.0
    except OSError as error:
        raise ArtifactError(f"cannot read {path}: {error}") from error
    total = 0.0
    for line in text.splitlines():
        try:
            amount = float(line.rpartition(" ")[2])
        except ValueError:
            continue
        if math.isfinite(amount) and amount > 0:
            total += amount
    return total


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
