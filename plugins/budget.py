"""The run's spending against ``--tau2-max-cost``, shared by every process of the session.

Each process appends one line per finished scenario (``<scenario id> <USD>``) to one ledger
file in the run folder, named by the session's token (the controller's, handed to workers in
``workerinput``): a single ``write`` of a short line to a file opened with ``O_APPEND`` is
atomic, so xdist workers never interleave. Before a new scenario starts, ``Budget.exhausted``
sums the ledger (reading only what was appended since the last look). Scenarios in flight
finish; the cost of a scenario is known when it ends, so a run may pass the budget by what its
scenarios in flight spend, never by a scenario started after the budget was reached.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Final

__all__ = ["BUDGET_VERDICT", "Budget", "new_budget_token"]

BUDGET_VERDICT: Final = "NOT RUN (budget)"
"""The ``tau2_outcome`` property of a scenario the budget kept from starting."""


def new_budget_token() -> str:
    return secrets.token_hex(4)


class Budget:
    """``limit`` USD for the session whose ledger is ``run_dir/.budget-<token>``."""

    def __init__(self, *, limit: float, run_dir: Path, token: str) -> None:
        self.limit = limit
        self.path = run_dir / f".budget-{token}"
        self._offset = 0
        self._spent = 0.0
        self._tail = b""

    def record(self, scenario_id: str, cost: float | None) -> None:
        """Append what a finished scenario cost (an unknown cost cannot happen: every model
        has a price when a budget is set)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = f"{scenario_id} {cost or 0.0!r}\n".encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    @property
    def spent(self) -> float:
        """USD spent so far by every process of the session."""
        try:
            with self.path.open("rb") as ledger:
                ledger.seek(self._offset)
                data = ledger.read()
        except FileNotFoundError:
            return self._spent
        self._offset += len(data)
        lines = (self._tail + data).split(b"\n")
        self._tail = lines.pop()  # a line being written: read it next time
        for line in lines:
            _, _, amount = line.decode().rpartition(" ")
            self._spent += float(amount)
        return self._spent

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.limit

    def line(self, not_run: int) -> str:
        """The one line the run ends with when the budget stopped it."""
        return (
            f"tau2: budget reached: spent ${self.spent:,.4f} of --tau2-max-cost "
            f"${self.limit:,.4f}; {not_run} scenario(s) not run (resume with a higher "
            "--tau2-max-cost to run them)"
        )
