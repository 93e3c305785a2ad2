"""The scheduler on its own: what starts ahead, when, and what a close keeps (no pytest run)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from tau2_retail.plugins.scheduler import NotStarted, ScenarioScheduler
from tau2_retail.results.stopped_spending import StopCause


@dataclass(frozen=True)
class FakeItem:
    nodeid: str


@dataclass
class Conversations:
    """Scenario coroutines that finish only when the test releases them."""

    started: list[str] = field(default_factory=list)
    gates: dict[str, asyncio.Event] = field(default_factory=dict)
    cancelled: list[str] = field(default_factory=list)

    async def start(self, item: FakeItem) -> str:
        self.started.append(item.nodeid)
        gate = self.gates.setdefault(item.nodeid, asyncio.Event())
        try:
            await gate.wait()
        except asyncio.CancelledError:
            self.cancelled.append(item.nodeid)
            raise
        return f"outcome of {item.nodeid}"

    def release(self, nodeid: str) -> None:
        self.gates.setdefault(nodeid, asyncio.Event()).set()


ITEMS = [FakeItem(f"test[{name}]") for name in "abcdef"]


def make(
    *, limit: int, stop: list[bool] | None = None, admit: Callable[[], bool] = lambda: True
) -> tuple[Conversations, ScenarioScheduler[str]]:
    """The scripted conversations and a scheduler of ITEMS that starts them."""
    conversations = Conversations()
    stop = stop if stop is not None else [False]
    scheduler: ScenarioScheduler[str] = ScenarioScheduler(
        limit=limit,
        start=conversations.start,  # type: ignore[arg-type]
        upcoming=lambda item: ITEMS[ITEMS.index(item) + 1 :],  # type: ignore[arg-type,index]
        wanted=lambda item: True,
        stopping=lambda: stop[0],
        admit=admit,
    )
    return conversations, scheduler


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_the_first_outcome_starts_the_next_scenarios_up_to_the_limit() -> None:
    conversations, scheduler = make(limit=3)
    waiting = asyncio.ensure_future(scheduler.outcome(ITEMS[0]))  # type: ignore[arg-type]
    await settle()

    assert conversations.started == ["test[a]", "test[b]", "test[c]"]

    conversations.release("test[b]")  # a later scenario finishing frees a slot at once
    await settle()
    assert conversations.started == ["test[a]", "test[b]", "test[c]", "test[d]"]
    assert scheduler.peak_in_flight == 3

    conversations.release("test[a]")
    assert await waiting == "outcome of test[a]"
    await scheduler.aclose()


@pytest.mark.asyncio
async def test_a_limit_of_one_runs_only_the_scenario_under_test() -> None:
    conversations, scheduler = make(limit=1)
    conversations.release("test[a]")

    assert await scheduler.outcome(ITEMS[0]) == "outcome of test[a]"  # type: ignore[arg-type]
    await settle()

    assert conversations.started == ["test[a]"]
    await scheduler.aclose()


@pytest.mark.asyncio
async def test_nothing_new_starts_once_pytest_is_stopping() -> None:
    stop = [False]
    conversations, scheduler = make(limit=2, stop=stop)
    waiting = asyncio.ensure_future(scheduler.outcome(ITEMS[0]))  # type: ignore[arg-type]
    await settle()
    stop[0] = True  # e.g. -x after a failure

    conversations.release("test[b]")
    conversations.release("test[a]")
    await waiting
    await settle()

    assert conversations.started == ["test[a]", "test[b]"]
    await scheduler.aclose()


@pytest.mark.asyncio
async def test_close_cancels_the_scenarios_still_running() -> None:
    conversations, scheduler = make(limit=3)
    conversations.release("test[a]")
    await scheduler.outcome(ITEMS[0])  # type: ignore[arg-type]
    await settle()
    assert scheduler.in_flight == 3  # b, c and d, started when a finished

    await scheduler.aclose()

    assert scheduler.in_flight == 0


@pytest.mark.asyncio
async def test_each_cancelled_scenario_is_told_why_it_was_cancelled() -> None:
    """A timeout's signal ends a test's wait for its scenario: the scenario was let go of, so
    its test's end cancelled nothing and it ran on (here until -x stopped the session, which
    then named the wrong cause); what is stopped, and why, is what the run says it spent."""
    conversations, scheduler = make(limit=3)
    waiting = asyncio.ensure_future(scheduler.outcome(ITEMS[0]))  # type: ignore[arg-type]
    await settle()
    waiting.cancel()  # an exception from outside the loop ends the wait of a's test
    with pytest.raises(asyncio.CancelledError):
        await waiting

    scheduler.abandon(ITEMS[0], StopCause.TIMEOUT)  # a's test is over: its finalizer
    await settle()
    assert conversations.cancelled == ["test[a]"]
    await scheduler.aclose(StopCause.MAXFAIL)

    # d started when a's cancellation freed its slot
    assert conversations.cancelled == ["test[a]", "test[b]", "test[c]", "test[d]"]
    causes = [scheduler.stop_cause(item) for item in ITEMS[:4]]  # type: ignore[arg-type]
    assert causes == [StopCause.TIMEOUT, *[StopCause.MAXFAIL] * 3]


@pytest.mark.asyncio
async def test_an_interrupt_cancels_the_others_as_an_interrupt() -> None:
    conversations, scheduler = make(limit=3)
    waiting = asyncio.ensure_future(scheduler.outcome(ITEMS[0]))  # type: ignore[arg-type]
    await settle()

    scheduler.interrupt("KeyboardInterrupt in tau2_retail__9")  # an agent's, elsewhere
    await settle()
    await scheduler.aclose(StopCause.SESSION_END)

    assert waiting.exception() is not None
    assert conversations.cancelled == ["test[a]", "test[b]", "test[c]"]
    causes = {scheduler.stop_cause(item) for item in ITEMS[:3]}  # type: ignore[arg-type]
    assert causes == {StopCause.INTERRUPT}


@pytest.mark.asyncio
async def test_once_admit_refuses_nothing_new_starts_and_those_in_flight_finish() -> None:
    spent = [False]
    conversations, scheduler = make(limit=3, admit=lambda: not spent[0])
    waiting = asyncio.ensure_future(scheduler.outcome(ITEMS[0]))  # type: ignore[arg-type]
    await settle()
    assert conversations.started == ["test[a]", "test[b]", "test[c]"]

    spent[0] = True  # the budget is reached: a finished scenario frees a slot, none starts
    conversations.release("test[a]")
    assert await waiting == "outcome of test[a]"
    await settle()
    assert conversations.started == ["test[a]", "test[b]", "test[c]"]

    conversations.release("test[b]")  # started before the budget ran out: it finishes
    assert await scheduler.outcome(ITEMS[1]) == "outcome of test[b]"  # type: ignore[arg-type]
    with pytest.raises(NotStarted):
        await scheduler.outcome(ITEMS[3])  # type: ignore[arg-type]
    assert "test[d]" not in conversations.started
    await scheduler.aclose()


def test_the_open_files_limit_is_raised_for_many_conversations() -> None:
    resource = pytest.importorskip("resource")
    from tau2_retail.plugins.scenario_fixtures import raise_open_files_limit

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 3 * 912 + 256:
        pytest.skip(f"the hard limit of open files here is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (512, hard))  # as low as on many systems
    try:
        raise_open_files_limit(912)
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (3 * 912 + 256, hard)
        raise_open_files_limit(3)  # never lowered
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == 3 * 912 + 256
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _counting(
    items: list[FakeItem], *, final: bool
) -> tuple[Conversations, ScenarioScheduler[str], list[int]]:
    """A scheduler of ``items`` (which a test may extend) that counts its looks at them."""
    conversations = Conversations()
    looks: list[int] = []

    def upcoming(item: FakeItem) -> list[FakeItem]:
        looks.append(1)
        return items[items.index(item) + 1 :]

    scheduler: ScenarioScheduler[str] = ScenarioScheduler(
        limit=10,
        start=conversations.start,  # type: ignore[arg-type]
        upcoming=upcoming,  # type: ignore[arg-type]
        wanted=lambda item: True,
        stopping=lambda: False,
        upcoming_is_final=final,
    )
    return conversations, scheduler, looks


@pytest.mark.asyncio
async def test_a_final_list_all_started_is_not_walked_again() -> None:
    items = list(ITEMS)
    conversations, scheduler, looks = _counting(items, final=True)
    for name in "abcdef":
        conversations.release(f"test[{name}]")
    for item in items:
        assert await scheduler.outcome(item) == f"outcome of {item.nodeid}"  # type: ignore[arg-type]
    # one look started b..f and found no more; the five tests after it looked no more
    assert len(looks) == 1
    assert conversations.started == [item.nodeid for item in items]
    await scheduler.aclose()


@pytest.mark.asyncio
async def test_a_list_that_grows_is_looked_at_again() -> None:
    # an xdist worker: more items arrive while the first ones run
    items = list(ITEMS[:2])
    conversations, scheduler, looks = _counting(items, final=False)
    conversations.release("test[a]")
    assert await scheduler.outcome(items[0]) == "outcome of test[a]"  # type: ignore[arg-type]
    assert conversations.started == ["test[a]", "test[b]"]
    items.extend(ITEMS[2:4])
    conversations.release("test[b]")
    assert await scheduler.outcome(items[1]) == "outcome of test[b]"  # type: ignore[arg-type]
    await settle()
    assert conversations.started == ["test[a]", "test[b]", "test[c]", "test[d]"]
    assert len(looks) >= 2
    await scheduler.aclose()
