"""Scenarios in flight ahead of their tests: ``--tau2-concurrency N`` within one process.

A scenario spends nearly all its time waiting for model replies, so one process can keep many
conversations going on its event loop. ``ScenarioScheduler`` starts the conversations of the
scenario tests this process is about to run, up to ``limit`` at once, on the session's event
loop; each test's ``tau2_outcome`` fixture then awaits its own scenario's task. pytest still runs
the tests one by one, in its order: each scenario keeps its own test, outcome, report line,
artifacts and junit entry, reported when pytest reaches it.

Which items come next is pytest's decision, read, never made here: without xdist the items of
the session after the one being set up (after ``-k``, ``--lf``, ``--tau2-tasks``, resume and
shard deselection); in an xdist worker the items the controller has sent and not yet run (all
of them at once with ``--dist each``, see ``interop.worker_share``; ``--dist load`` sends a few
at a time).
Once pytest is stopping (``-x``, ``--maxfail``) nothing new starts. ``aclose`` (the session's
end, Ctrl-C included) cancels what is still running; a scenario's coroutine records its own
artifacts when it finishes, so every finished one is kept, whether pytest reached its test or
not. Each cancellation has its cause (:class:`StopCause`), which ``stop_cause`` tells the
scenario as it stops (the run says what stopped the scenarios it counts unscored).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pytest

from tau2_retail.data.tasks import Task
from tau2_retail.engine.shards import shard_tasks
from tau2_retail.plugins.interop import scheduled_items
from tau2_retail.plugins.scenario_report import scenario_of_item
from tau2_retail.results.stopped_spending import StopCause

__all__ = [
    "NotStarted",
    "ScenarioScheduler",
    "SchedulerInterrupted",
    "upcoming_items",
    "worker_share_items",
]

T = TypeVar("T")
_REFILL_SECONDS = 0.1
Start = Callable[[pytest.Item], Coroutine[Any, Any, T]]


class NotStarted(Exception):
    """``admit()`` refused a scenario that was not started yet (the budget is spent)."""


class SchedulerInterrupted(Exception):
    """The run is being interrupted (``interrupt``): no outcome for this item."""


@dataclass(eq=False, kw_only=True)
class ScenarioScheduler(Generic[T]):
    """Keeps up to ``limit`` scenarios of this process running, in the order pytest runs them.

    ``start(item)`` makes the coroutine of one scenario item; ``upcoming(item)`` lists the
    items pytest will run after ``item``; ``wanted(item)`` says whether an item is a scenario
    this scheduler may start ahead; ``stopping()`` is true once pytest stops starting tests;
    ``admit()`` false means no new scenario starts (the budget is spent): those in flight
    finish, ``outcome`` of one not started raises ``NotStarted``. ``upcoming_is_final``: no
    item joins the upcoming ones later (pytest's own list; an xdist worker receives more), so
    once a look has found every one of them started, no later look is made (each would walk
    the whole rest of the run: quadratic in the scenarios of a process).
    """

    limit: int
    start: Start[T]
    upcoming: Callable[[pytest.Item], Iterable[pytest.Item]]
    wanted: Callable[[pytest.Item], bool]
    stopping: Callable[[], bool]
    admit: Callable[[], bool] = lambda: True
    upcoming_is_final: bool = False
    peak_in_flight: int = field(default=0, init=False)
    _all_started: bool = field(default=False, init=False)
    _tasks: dict[str, asyncio.Task[T]] = field(default_factory=dict, init=False)
    # started items by id(): each look at the upcoming items tests every one of them, and an
    # item's nodeid is a computed property (pytest 9), far dearer than id()
    _started: set[int] = field(default_factory=set, init=False)
    # tasks not done: counted, not summed over every task per look
    _running: int = field(default=0, init=False)
    _current: pytest.Item | None = field(default=None, init=False)
    _closed: bool = field(default=False, init=False)
    _interrupted: str | None = field(default=None, init=False)
    #: why each cancelled scenario was cancelled (by node id)
    _causes: dict[str, StopCause] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ValueError(f"limit must be >= 1, got {self.limit}")

    @property
    def current(self) -> pytest.Item | None:
        """The item whose outcome was asked for last."""
        return self._current

    @property
    def in_flight(self) -> int:
        return self._running

    @property
    def interrupted(self) -> bool:
        """``interrupt`` was called: the run is stopping."""
        return self._interrupted is not None

    def started(self, item: pytest.Item) -> bool:
        return id(item) in self._started

    def stop_cause(self, item: pytest.Item) -> StopCause:
        """Why ``item``'s scenario, stopping unscored, was stopped: the cause of its
        cancellation, else an interrupt (a ``KeyboardInterrupt`` landed in it)."""
        return self._causes.get(item.nodeid, StopCause.INTERRUPT)

    def _cancel(self, nodeid: str, task: asyncio.Task[T], cause: StopCause) -> None:
        self._causes.setdefault(nodeid, cause)
        task.cancel()

    def abandon(self, item: pytest.Item, cause: StopCause) -> None:
        """``item``'s test is over without taking its outcome (an exception from outside the
        loop, such as pytest-timeout's signal, left it waiting; ``cause``): its scenario is
        cancelled rather than finishing, and writing its record, during a later test."""
        task = self._tasks.pop(item.nodeid, None)
        if task is not None and not task.done():
            self._cancel(item.nodeid, task, cause)

    async def outcome(self, item: pytest.Item) -> T:
        """The result of ``item``'s scenario: started now if it was not yet, then awaited.

        Also starts the scenarios that follow ``item``, up to the limit.
        """
        self._current = item
        if self._interrupted is not None:
            raise SchedulerInterrupted(self._interrupted)
        if item.nodeid not in self._tasks and not self.admit():
            raise NotStarted(item.nodeid)
        task = self._ensure(item)
        self._fill()
        try:
            # Look again now and then while waiting: an xdist worker receives its items over a
            # channel while its first test already runs, and ``--dist load`` sends more later.
            while not task.done() and not self.interrupted:
                await asyncio.wait({task}, timeout=_REFILL_SECONDS)
                self._fill()
            if self.interrupted and (not task.done() or task.cancelled()):
                raise SchedulerInterrupted(str(self._interrupted))
            return task.result()
        finally:
            # the test holds its outcome from here; the scheduler lets go of it (memory). One
            # still running stays: an exception from outside the loop (a timeout's signal)
            # ended the wait, and the test's end cancels it (``abandon``)
            if task.done():
                self._tasks.pop(item.nodeid, None)

    def _ensure(self, item: pytest.Item) -> asyncio.Task[T]:
        task = self._tasks.get(item.nodeid)
        if task is None:
            task = asyncio.get_running_loop().create_task(
                self.start(item), name=f"tau2 {item.nodeid}"
            )
            self._running += 1
            task.add_done_callback(self._on_done)
            self._tasks[item.nodeid] = task
            self._started.add(id(item))
            self.peak_in_flight = max(self.peak_in_flight, self._running)
        return task

    def _fill(self) -> None:
        # A limit of 1 starts nothing ahead: each scenario runs in its own test's set-up.
        if self.limit == 1 or self._closed or self._current is None or self._all_started:
            return  # (all started: pytest's list gets no new item; a worker's queue may)
        if self.stopping():
            return
        free = self.limit - self._running
        if free <= 0 or not self.admit():
            return  # full (most looks with hundreds in flight): no walk over the items
        for item in self.upcoming(self._current):
            if free <= 0:
                break
            if id(item) in self._started or not self.wanted(item):
                continue
            self._ensure(item)
            free -= 1
        else:
            # every upcoming item is started (or not one to start)
            self._all_started = self.upcoming_is_final

    def _on_done(self, task: asyncio.Task[T]) -> None:
        # A finished conversation frees a slot: start the next one without waiting for pytest
        # to reach the test of the one that finished.
        self._running -= 1
        self._fill()

    def interrupt(self, reason: str) -> None:
        """Stop as for Ctrl-C: nothing new starts, the scenarios still running are cancelled
        (those that finished keep their records), and ``outcome`` raises
        :class:`SchedulerInterrupted` for every item not finished."""
        self._interrupted = reason
        self._closed = True
        current = asyncio.current_task()
        for nodeid, task in self._tasks.items():
            if task is not current and not task.done():
                self._cancel(nodeid, task, StopCause.INTERRUPT)

    async def aclose(self, cause: StopCause = StopCause.SESSION_END) -> None:
        """Cancel the scenarios still running, for ``cause`` (those that finished keep their
        results)."""
        self._closed = True
        pending = [(nodeid, task) for nodeid, task in self._tasks.items() if not task.done()]
        for nodeid, task in pending:
            self._cancel(nodeid, task, cause)
        if pending:
            await asyncio.gather(*(task for _, task in pending), return_exceptions=True)
        for task in self._tasks.values():
            if not task.cancelled():
                task.exception()  # retrieved (a Ctrl-C may have landed in one): no GC warning


def _after(items: list[pytest.Item], item: pytest.Item) -> Iterator[pytest.Item]:
    try:
        index = items.index(item)
    except ValueError:
        return
    yield from items[index + 1 :]


def upcoming_items(
    session: pytest.Session,
) -> tuple[Callable[[pytest.Item], Iterable[pytest.Item]], bool]:
    """The items this process will run after a given one, as pytest (or xdist) schedules them,
    and whether that list is final: in an xdist worker those it was sent and has not run yet
    (``scheduled_items``; more may come), else the session's items after it (final)."""
    scheduled = scheduled_items(session)
    if scheduled is None:
        return (lambda item: _after(session.items, item)), True
    return scheduled, False


def _task_of(item: pytest.Item) -> Task | None:
    scenario = scenario_of_item(item)
    return scenario.task if scenario is not None else None


def worker_share_items(
    items: Sequence[pytest.Item], share: tuple[int, int]
) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """The items of this worker's ``share`` (I, N) of the selected scenarios, and the others.

    Scenarios are dealt by task, as ``--tau2-shard`` deals them (all trials of a task on one
    worker); a test that is not a scenario stays with every worker, as ``--dist each`` means.
    """
    tasks = {task.id: task for item in items if (task := _task_of(item)) is not None}
    mine = {task.id for task in shard_tasks(tasks.values(), index=share[0], count=share[1])}
    keep: list[pytest.Item] = []
    others: list[pytest.Item] = []
    for item in items:
        task = _task_of(item)
        (keep if task is None or task.id in mine else others).append(item)
    return keep, others
