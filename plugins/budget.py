"""The run's spending against ``--tau2-max-cost``, shared by every process of the session.

A cap, not a hope: every request of a priced endpoint model reserves its estimated cost before
it is sent and settles its real cost when its reply arrives
(:class:`~tau2_retail.models.spending.BudgetedChatModel`). The reservations and the settled
costs of every process go to one ledger file in the run folder, named by the session's token
(the controller's, handed to workers in ``workerinput``), one short line each:
``R <key> <USD>`` reserves, ``S <key> <USD>`` settles. A reservation is decided under an
exclusive ``flock`` of the ledger (read what the other processes appended, check, append), so
two processes never both take the last dollars; a single ``write`` of a short line to a file
opened with ``O_APPEND`` is atomic, so settlements need no lock.

A request whose estimate does not fit is not sent (``BudgetExhausted``): its scenario stops
unscored, "not run (budget)", and a resume runs it. No new scenario starts once the spent and
reserved amounts reach the limit. The run therefore passes its budget only by what the requests
in flight cost beyond their estimates: less than one request per conversation in flight. What
an agent given as code spent through its own backend (its recorded, priced tokens) is charged
when its scenario ends or is stopped (``S`` with a key that reserved nothing): the suite cannot
stop those requests, so it adds to the bound what the code agents of the scenarios in flight
spend.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from tau2_retail.errors import BudgetExhausted

__all__ = ["BUDGET_VERDICT", "Budget", "new_budget_token"]

BUDGET_VERDICT: Final = "NOT RUN (budget)"
"""The ``tau2_outcome`` property of a scenario the budget kept from starting or stopped."""


def new_budget_token() -> str:
    return secrets.token_hex(4)


class Budget:
    """``limit`` USD for the session whose ledger is ``run_dir/.budget-<token>``; the
    :class:`~tau2_retail.models.spending.Spending` of the harness."""

    def __init__(self, *, limit: float, run_dir: Path, token: str) -> None:
        self.limit = limit
        self.path = run_dir / f".budget-{token}"
        self._fd: int | None = None
        self._offset = 0
        self._tail = b""
        self._spent = 0.0
        self._reserved: dict[str, float] = {}
        self._keys = (f"{os.getpid()}.{n}" for n in itertools.count())
        #: requests this process did not send (their estimate did not fit)
        self.refused = 0

    def _ledger(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        return self._fd

    @contextlib.contextmanager
    def _locked(self) -> Iterator[int]:
        fd = self._ledger()
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield fd
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _read(self) -> None:
        """Take in what every process appended since the last look."""
        fd = self._ledger()
        data = os.pread(fd, 1 << 20, self._offset)
        while data:
            self._offset += len(data)
            lines = (self._tail + data).split(b"\n")
            self._tail = lines.pop()  # a line being written: read it next time
            for line in lines:
                kind, key, amount = line.decode().split(" ")
                if kind == "R":
                    self._reserved[key] = float(amount)
                else:
                    self._reserved.pop(key, None)
                    self._spent += float(amount)
            data = os.pread(fd, 1 << 20, self._offset)

    def reserve(self, estimate: float) -> str:
        """Reserve ``estimate`` USD for one request, or refuse it (``BudgetExhausted``)."""
        with self._locked() as fd:
            self._read()
            committed = self._spent + sum(self._reserved.values())
            if committed + estimate > self.limit:
                self.refused += 1
                raise BudgetExhausted(
                    f"the next request (estimated ${estimate:,.4f}) would pass --tau2-max-cost "
                    f"${self.limit:,.4f}: ${self._spent:,.4f} spent, "
                    f"${committed - self._spent:,.4f} reserved by requests in flight"
                )
            key = next(self._keys)
            os.write(fd, f"R {key} {estimate!r}\n".encode())
            self._read()
        return key

    def settle(self, key: str, actual: float) -> None:
        """What the request ``key`` really cost (0 when it failed or came from the cache)."""
        os.write(self._ledger(), f"S {key} {actual!r}\n".encode())

    def charge(self, actual: float) -> None:
        """``actual`` USD spent outside the suite's requests: settled under a key of its own
        that reserved nothing, so it counts as spent in every process at their next look."""
        self.settle(next(self._keys), actual)

    @property
    def spent(self) -> float:
        """USD spent so far by every process of the session."""
        if self._fd is None and not self.path.exists():
            return self._spent
        self._read()
        return self._spent

    @property
    def exhausted(self) -> bool:
        """No new scenario starts: the spent and reserved amounts reached the limit."""
        if self._fd is None and not self.path.exists():
            return False
        self._read()
        return self._spent + sum(self._reserved.values()) >= self.limit

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def line(self, not_run: int) -> str:
        """The one line the run ends with when the budget stopped it."""
        return (
            f"tau2: budget reached: spent ${self.spent:,.4f} of --tau2-max-cost "
            f"${self.limit:,.4f} (a request is sent only while its estimated cost fits); "
            f"{not_run} scenario(s) not run or stopped unscored (resume with a higher "
            "--tau2-max-cost to run them)"
        )
