"""Where an agent given as code runs: a thread of its own per scenario, with its own event loop.

Every call into the agent's code (its factory, ``respond``, ``converse``, ``close``/``aclose``,
and the ``model_dump()`` of what it returns) runs in its scenario's :class:`AgentThread`, never
on the harness's event loop:

- An async method that blocks (``time.sleep`` inside ``async def``, sync I/O) blocks only its
  own loop: the other scenarios in flight and the scenario's deadline go on. The longest step
  its coroutine held that loop without awaiting is measured, so the run can name the agent.
- Whatever the agent's code raises, ``BaseException`` included (``SystemExit``,
  ``KeyboardInterrupt``, ``GeneratorExit``, a ``CancelledError`` it raised itself), comes back
  as a value (:class:`Raised`), never as an exception inside the harness: the caller decides
  what it means. A cancellation the harness causes (the deadline, Ctrl-C) stays a
  cancellation: it cancels the agent's coroutine on its own loop and is re-raised here.
- One thread per scenario, not per call: the agent's async clients stay on one loop for the
  whole conversation, and a sync agent pays one hand-over per call (measured in
  ``benchmarks/bench_agent.py``). Signals reach only the main thread, so a ``KeyboardInterrupt``
  seen in this thread is always the agent's own.

The thread is a daemon: one whose call never returns (an agent blocked for ever) is abandoned
after the scenario's deadline (:meth:`AgentThread.wait_idle` tells the caller it still runs)
and dies with the process. Endpoint models never come here.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import queue
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Final

from tau2_retail.models.agent_outage import backend_outage

__all__ = ["BLOCKING_STEP_SECONDS", "AgentThread", "Outcome", "Raised", "Returned"]

#: a step of an agent's coroutine that runs this long without awaiting blocks its event loop
BLOCKING_STEP_SECONDS: Final = 0.5
# how long the agent's own tasks get to finish once they are cancelled at the scenario's end
_LOOP_CLOSE_SECONDS: Final = 2.0


@dataclass(frozen=True, slots=True)
class Returned:
    """The agent's call returned ``value`` (after ``then``, see :meth:`AgentThread.run`)."""

    value: Any


@dataclass(frozen=True, slots=True)
class Raised:
    """The agent's call raised: the exception's class, its text and the whole traceback (all
    taken in the agent's thread; the exception object itself stays there), and ``outage``,
    what makes it an outage of the agent's backend when it is one
    (:func:`~tau2_retail.models.agent_outage.backend_outage`: read from the exception's chain,
    which does not leave the thread either)."""

    kind: type[BaseException]
    text: str
    traceback_text: str
    outage: str | None = None

    @classmethod
    def of(cls, error: BaseException) -> Raised:
        try:
            text = str(error)
        except BaseException:  # an exception whose __str__ raises: the agent's, say so
            text = "<unprintable>"
        outage = backend_outage(error)
        try:
            _drop_our_frames(error)
            formatted = "".join(traceback.format_exception(error))
        except BaseException:
            formatted = f"{type(error).__name__}: {text}"
        return cls(kind=type(error), text=text, traceback_text=formatted, outage=outage)


_HERE: Final = os.path.dirname(os.path.abspath(__file__))


def _drop_our_frames(error: BaseException) -> None:
    """The traceback of ``error`` and of the exceptions it chains, from the agent's first
    frame on (the frames of this package that called into the agent's code say nothing)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        tb = current.__traceback__
        while tb is not None and os.path.dirname(tb.tb_frame.f_code.co_filename) == _HERE:
            tb = tb.tb_next
        current.__traceback__ = tb
        current = current.__cause__ or current.__context__


Outcome = Returned | Raised


def _nothing() -> None:
    """The call :meth:`AgentThread.wait_idle` queues: it runs once the calls before it end."""


class _StepTimer:
    """Awaits ``awaitable`` step by step, as a task does, timing each step (the time the agent's
    coroutine runs between two awaits: a long one blocked its loop)."""

    __slots__ = ("_awaitable", "_owner", "closing")

    def __init__(self, awaitable: Awaitable[Any], owner: AgentThread) -> None:
        self._awaitable = awaitable
        self._owner = owner
        #: our own coroutine is being closed (not the agent raising GeneratorExit itself)
        self.closing = False

    def __await__(self) -> Generator[Any, Any, Any]:
        steps = self._awaitable.__await__()
        owner = self._owner
        value: Any = None
        error: BaseException | None = None
        while True:
            owner.step_started = time.perf_counter()
            try:
                yielded = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as stop:
                return stop.value
            finally:
                owner.end_step()
            try:
                value, error = (yield yielded), None
            except GeneratorExit:
                self.closing = True
                with contextlib.suppress(BaseException):  # the agent's code, being closed
                    close = getattr(steps, "close", None)
                    if close is not None:
                        close()
                raise
            except BaseException as raised:  # handed to the agent's coroutine, as a task does
                value, error = None, raised


async def _guarded(timer: _StepTimer, then: Callable[[Any], Any] | None) -> Outcome:
    try:
        value = await timer
        if then is not None:
            value = then(value)
    except asyncio.CancelledError as error:
        task = asyncio.current_task()
        if timer.closing or (task is not None and task.cancelling()):
            raise  # the harness cancelled this call (the scenario's deadline)
        return Raised.of(error)  # raised by the agent's own code
    except BaseException as error:  # anything the agent's code raised is a value here
        if timer.closing:
            raise
        return Raised.of(error)
    return Returned(value)


class _Job:
    """One call: run in the agent's thread, settled on the caller's loop."""

    __slots__ = ("call", "cancelled", "future", "lock", "loop", "task", "then")

    def __init__(
        self,
        call: Callable[[], Any],
        then: Callable[[Any], Any] | None,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.call = call
        self.then = then
        self.loop = loop
        self.future: asyncio.Future[Outcome] = loop.create_future()
        self.lock = threading.Lock()
        self.cancelled = False
        self.task: asyncio.Task[Outcome] | None = None

    def settle(self, outcome: Outcome) -> None:
        """From the agent's thread: hand ``outcome`` to the waiting caller (if it still waits)."""

        def deliver() -> None:
            if not self.future.done():
                self.future.set_result(outcome)

        # a closed loop: the caller is gone (its process is ending)
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(deliver)

    def cancel(self) -> None:
        """From the caller: it stopped waiting; cancel the agent's coroutine if one runs."""
        with self.lock:
            self.cancelled = True
            task = self.task
        if task is not None:
            with contextlib.suppress(RuntimeError):  # its loop is already closed
                task.get_loop().call_soon_threadsafe(task.cancel)


class AgentThread:
    """The thread one scenario's agent runs in (started at the first call).

    ``run(call, then)`` runs ``call()`` there; an awaitable it returns is awaited on the
    thread's own event loop (made at the first one, kept for the scenario). ``then`` (e.g.
    reading the reply into plain values) runs there too, on the final value. ``stop()`` lets
    the thread end once its calls are done; its loop's leftover tasks are then cancelled.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running: _Job | None = None
        #: the longest step of the agent's coroutines so far, in seconds
        self.longest_step = 0.0
        #: when the step running now started (``time.perf_counter``), None between steps
        self.step_started: float | None = None

    def end_step(self) -> None:
        started, self.step_started = self.step_started, None
        if started is not None:
            self.longest_step = max(self.longest_step, time.perf_counter() - started)

    def blocking_for(self) -> float:
        """How long the step running now has held the agent's loop (0 between steps)."""
        started = self.step_started
        return 0.0 if started is None else time.perf_counter() - started

    @property
    def busy(self) -> bool:
        """A call is running or waiting (e.g. one abandoned at the deadline that never ended)."""
        return self._running is not None or not self._jobs.empty()

    async def run(
        self, call: Callable[[], Any], then: Callable[[Any], Any] | None = None
    ) -> Outcome:
        job = _Job(call, then, asyncio.get_running_loop())
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._main, name=f"tau2-agent {self.name}", daemon=True
            )
            self._thread.start()
        self._jobs.put(job)
        try:
            return await job.future
        except asyncio.CancelledError:
            job.cancel()
            raise

    async def wait_idle(self, seconds: float) -> bool:
        """Whether the calls already given (one cancelled at the deadline, say) have ended
        within ``seconds``; True at once when none runs. Waits without blocking the caller's
        loop, behind those calls in the thread's queue."""
        if not self.busy:
            return True
        try:
            async with asyncio.timeout(seconds):
                await self.run(_nothing)
        except TimeoutError:  # its empty call stays queued, and runs once theirs end
            return False
        return True

    def stop(self) -> None:
        """The thread ends after the calls already given (at once if it never started)."""
        if self._thread is not None:
            self._jobs.put(None)

    # -- in the agent's thread ----------------------------------------------------------------

    def _main(self) -> None:
        while (job := self._jobs.get()) is not None:
            self._running = job
            try:
                outcome = self._execute(job)
            finally:
                self._running = None
            job.settle(outcome)
        self._close_loop()

    def _execute(self, job: _Job) -> Outcome:
        try:
            value = job.call()
            if inspect.isawaitable(value):
                return self._await(job, value)
            if job.then is not None:
                value = job.then(value)
        except BaseException as error:  # the agent's code: every exception is a value
            return Raised.of(error)
        return Returned(value)

    def _await(self, job: _Job, awaitable: Awaitable[Any]) -> Outcome:
        loop = self._own_loop()
        task = loop.create_task(_guarded(_StepTimer(awaitable, self), job.then))
        with job.lock:
            job.task = task
            cancelled = job.cancelled
        if cancelled:
            task.cancel()
        try:
            return loop.run_until_complete(task)
        except asyncio.CancelledError as error:  # the caller cancelled it and waits no more
            return Raised.of(error)

    def _own_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
        return self._loop

    def _close_loop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        try:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.wait(pending, timeout=_LOOP_CLOSE_SECONDS))
            loop.run_until_complete(loop.shutdown_asyncgens())
        except BaseException:  # the agent's leftover tasks: its scenario is over, nothing to say
            pass
        finally:
            asyncio.set_event_loop(None)
            loop.close()
