"""Scenarios in flight ahead of their tests: ``--tau2-concurrency N`` within one process.

A scenario spends nearly all its time waiting for model replies, so one process can keep many
conversations going on its event loop. ``ScenarioScheduler`` starts the conversations of the
scenario tests this process is about to run, up to ``limit`` at once, on the session's event
loop; each test's ``tau2_outcome`` fixture then awaits its own scenario's task. pytest still runs
the tests one by one, in its order: each scenario keeps its own test, outcome, report line,
artifacts and junit entry, reported when pytest reaches it.

Which items come next is pytest's decision, read, never made here: without xdist the items of
the session after the one being set up (after ``-k``, ``--lf``, ``--tau2-tasks``, resume and
shard deselection); in an xdist worker the items the controller has sent and not yet run (all of
them at once with ``--dist each``, see ``worker_share``; ``--dist load`` sends a few at a time).
Once pytest is stopping (``-x``, ``--maxfail``) nothing new starts. ``aclose`` (the session's
end, Ctrl-C included) cancels what is still running; a scenario's coroutine records its own
artifacts when it finishes, so every finished one is kept, whether pytest reached its test or
not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

import pytest

from tau2_retail.data.tasks import Task
from tau2_retail.engine.scenario import Scenario
from tau2_retail.engine.shards import shard_tasks

__all__ = [
    "SESSION_LOOP_KEY",
    "ScenarioScheduler",
    "settle_interrupted_loop",
    "upcoming_items",
    "worker_share",
    "worker_share_items",
]

#: the event loop the scenarios run on (pytest-asyncio's session loop), set by the scheduler
SESSION_LOOP_KEY = pytest.StashKey[asyncio.AbstractEventLoop]()

T = TypeVar("T")
_REFILL_SECONDS = 0.1
Start = Callable[[pytest.Item], Coroutine[Any, Any, T]]


class ScenarioScheduler(Generic[T]):
    """Keeps up to ``limit`` scenarios of this process running, in the order pytest runs them.

    ``start(item)`` makes the coroutine of one scenario item; ``upcoming(item)`` lists the
    items pytest will run after ``item``; ``wanted(item)`` says whether an item is a scenario
    this scheduler may start ahead; ``stopping()`` is true once pytest stops starting tests.
    """

    def __init__(
        self,
        *,
        limit: int,
        start: Start[T],
        upcoming: Callable[[pytest.Item], Iterable[pytest.Item]],
        wanted: Callable[[pytest.Item], bool],
        stopping: Callable[[], bool],
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self.limit = limit
        self._start = start
        self._upcoming = upcoming
        self._wanted = wanted
        self._stopping = stopping
        self._tasks: dict[str, asyncio.Task[T]] = {}
        self._items: dict[str, pytest.Item] = {}
        self._consumed: set[str] = set()
        self._started: set[str] = set()
        self._current: pytest.Item | None = None
        self._closed = False
        self.peak_in_flight = 0

    @property
    def current(self) -> pytest.Item | None:
        """The item whose outcome was asked for last."""
        return self._current

    @property
    def in_flight(self) -> int:
        return sum(not task.done() for task in self._tasks.values())

    def started(self, item: pytest.Item) -> bool:
        return item.nodeid in self._started

    async def outcome(self, item: pytest.Item) -> T:
        """The result of ``item``'s scenario: started now if it was not yet, then awaited.

        Also starts the scenarios that follow ``item``, up to the limit.
        """
        self._current = item
        task = self._ensure(item)
        self._fill()
        self._consumed.add(item.nodeid)
        try:
            # Look again now and then while waiting: an xdist worker receives its items over a
            # channel while its first test already runs, and ``--dist load`` sends more later.
            while not task.done():
                await asyncio.wait({task}, timeout=_REFILL_SECONDS)
                self._fill()
            return task.result()
        finally:
            # the test holds its outcome from here; the scheduler lets go of it (memory)
            self._tasks.pop(item.nodeid, None)
            self._items.pop(item.nodeid, None)

    def _ensure(self, item: pytest.Item) -> asyncio.Task[T]:
        task = self._tasks.get(item.nodeid)
        if task is None:
            task = asyncio.get_running_loop().create_task(
                self._start(item), name=f"tau2 {item.nodeid}"
            )
            task.add_done_callback(self._on_done)
            self._tasks[item.nodeid] = task
            self._items[item.nodeid] = item
            self._started.add(item.nodeid)
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        return task

    def _fill(self) -> None:
        # A limit of 1 starts nothing ahead: each scenario runs in its own test's set-up.
        if self.limit == 1 or self._closed or self._current is None or self._stopping():
            return
        upcoming = list(self._upcoming(self._current))
        free = self.limit - self.in_flight
        for item in upcoming:
            if free <= 0:
                break
            if item.nodeid in self._started or not self._wanted(item):
                continue
            self._ensure(item)
            free -= 1

    def _on_done(self, task: asyncio.Task[T]) -> None:
        # A finished conversation frees a slot: start the next one without waiting for pytest
        # to reach the test of the one that finished.
        self._fill()

    async def aclose(self) -> None:
        """Cancel the scenarios still running (those that finished keep their results)."""
        self._closed = True
        pending = [task for task in self._tasks.values() if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        for task in self._tasks.values():
            if not task.cancelled():
                task.exception()  # retrieved (a Ctrl-C may have landed in one): no GC warning


def settle_interrupted_loop(config: pytest.Config) -> None:
    """Make the scenarios' loop usable again after a Ctrl-C landed inside it.

    A SIGINT that arrives just after a test's coroutine finished (before asyncio's
    ``run_until_complete`` saw it) is raised inside the loop, leaving that call's "stop the loop"
    callback queued; the next ``run_until_complete`` (pytest-asyncio tearing down the scheduler
    at the session's end) would run it and fail with "Event loop stopped before Future
    completed" instead of cancelling the conversations in flight. One pass over the callbacks
    already queued consumes it (``stop`` before ``run_forever`` runs exactly one pass).
    """
    loop = config.stash.get(SESSION_LOOP_KEY, None)
    if loop is None or loop.is_closed() or loop.is_running():
        return
    loop.stop()
    loop.run_forever()


def _after(items: list[pytest.Item], item: pytest.Item) -> Iterator[pytest.Item]:
    try:
        index = items.index(item)
    except ValueError:
        return
    yield from items[index + 1 :]


def _xdist_worker_queue(config: pytest.Config) -> Any | None:
    """pytest-xdist's worker object (it holds the indices of the items sent to this worker)."""
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "torun"):
            return plugin
    return None


def upcoming_items(session: pytest.Session) -> Callable[[pytest.Item], Iterable[pytest.Item]]:
    """The items this process will run after a given one, as pytest (or xdist) schedules them.

    In an xdist worker these are the items the controller sent and the worker has not run yet
    (``nextitem_index`` and the ``torun`` queue of xdist's ``WorkerInteractor``, read under its
    lock; xdist has no public API for it). A worker whose xdist does not look like that starts
    only the item under test.
    """
    worker = _xdist_worker_queue(session.config)
    if worker is None:
        return lambda item: _after(session.items, item)

    def scheduled(item: pytest.Item) -> Iterable[pytest.Item]:
        indices: list[Any] = [getattr(worker, "nextitem_index", None)]
        with worker.torun.lock() as queue:
            indices.extend(queue)
        items = session.items
        return [items[i] for i in indices if isinstance(i, int) and 0 <= i < len(items)]

    return scheduled


def worker_share(config: pytest.Config) -> tuple[int, int] | None:
    """Under ``--dist each``: this xdist worker's share (I, N) of the scenarios.

    (Every worker running every scenario, as ``each`` means for other tests, would only write
    the same artifacts N times.)

    ``--tau2-concurrency`` needs a worker to know its scenarios ahead: ``--dist load`` sends a
    few at a time, ``--dist worksteal`` takes queued items back at the end of a run (items whose
    conversations the worker has already run: the thief starts them again), and ``loadgroup``
    ignores its groups with pytest 9.2 (xdist 3.8 renames node ids through an attribute pytest
    no longer reads). ``each`` sends every worker its whole collection at once and never moves
    an item; each worker collects every scenario and keeps only its share of the selected ones
    (``worker_share_items``), dealt as by ``--tau2-shard`` (the controller passes the mode in
    ``workerinput``).
    """
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or workerinput.get("tau2_dist") != "each":
        return None
    given = workerinput.get("tau2_share")
    if given is not None:  # dealt by the controller (a replacement takes the dead one's share)
        return int(given[0]), int(given[1])
    number = int(str(workerinput["workerid"]).removeprefix("gw"))
    return number + 1, int(workerinput["workercount"])


def _task_of(item: pytest.Item) -> Task | None:
    callspec = getattr(item, "callspec", None)
    scenario = callspec.params.get("tau2_scenario") if callspec is not None else None
    return scenario.task if isinstance(scenario, Scenario) else None


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
