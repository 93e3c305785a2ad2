"""The adapters to other plugins (``plugins/interop.py``), each on its own: registered only where
its plugin is active, and doing exactly its one job. The runs that pin their effect end to end
are in ``test_interrupt.py``, ``test_concurrency.py``, ``test_run_integrity.py`` (junit XML)
and ``tests/reliability/test_process_faults.py`` (crashed workers)."""

from __future__ import annotations

import asyncio
import contextlib
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import pytest
from pluggy import PluggyTeardownRaisedWarning

from tau2_retail.data.tasks import Task
from tau2_retail.engine.scenario import Scenario
from tau2_retail.plugins.interop import (
    SESSION_LOOP_KEY,
    EventLoopSettling,
    InterruptTraceback,
    PluggyTeardownFilter,
    SyrupyWarningFilter,
    XdistController,
    XdistWorker,
    has_line_number,
    received_leftovers,
    record_suite_properties,
    scheduled_items,
    settle_interrupted_loop,
    worker_share,
)
from tau2_retail.plugins.scenario_report import WorkerLeftovers

from .conftest import Bench

# -- registration --------------------------------------------------------------------------------


def _adapters(config: pytest.Config) -> set[str]:
    return {
        name.removeprefix("tau2-interop-")
        for name, _ in config.pluginmanager.list_name_plugin()
        if name.startswith("tau2-interop-")
    }


def test_each_adapter_is_registered_only_where_its_plugin_is_active(bench: Bench) -> None:
    assert bench.pytester is not None
    output = f"--tau2-output-dir={bench.output_dir}"

    everything = bench.pytester.parseconfigure(output)
    without = bench.pytester.parseconfigure(output, "-p", "no:xdist", "-p", "no:syrupy")

    assert _adapters(everything) == {
        "interrupts",
        "repeated-interrupts",
        "pluggy",
        "asyncio",
        "xdist",
        "syrupy",
    }
    assert _adapters(without) == {"interrupts", "repeated-interrupts", "pluggy", "asyncio"}


# -- pytest-xdist --------------------------------------------------------------------------------


@dataclass
class Hub:
    """The run's side of the adapter, recording what it was told."""

    collected: list[tuple[str, list[str]]] = field(default_factory=list)
    down: list[tuple[str, object | None]] = field(default_factory=list)
    leftovers: list[WorkerLeftovers | None] = field(default_factory=list)

    def worker_payload(self) -> dict[str, Any]:
        return {"tau2_run_id": "r1", "tau2_completed": ["tau2_retail__0"]}

    def on_worker_collection(self, node_id: str, ids: Sequence[str]) -> None:
        self.collected.append((node_id, list(ids)))

    def on_worker_down(
        self, node_id: str, error: object | None, leftovers: WorkerLeftovers | None
    ) -> None:
        self.down.append((node_id, error))
        self.leftovers.append(leftovers)

    def incomplete(self, exitstatus: int) -> bool:
        return False


def _node(number: int, count: int = 2) -> Any:
    return SimpleNamespace(
        gateway=SimpleNamespace(id=f"gw{number}"),
        workerinput={"workerid": f"gw{number}", "workercount": count},
    )


def test_each_worker_receives_the_run_values_and_under_dist_each_its_share() -> None:
    hub = Hub()
    adapter = XdistController(hub, dist="each")
    nodes = [_node(0), _node(1)]

    for node in nodes:
        adapter.pytest_configure_node(node)

    assert nodes[0].workerinput == {
        "workerid": "gw0",
        "workercount": 2,
        "tau2_run_id": "r1",
        "tau2_completed": ["tau2_retail__0"],
        "tau2_dist": "each",
        "tau2_share": [1, 2],
    }
    assert nodes[1].workerinput["tau2_share"] == [2, 2]
    adapter.pytest_xdist_node_collection_finished(nodes[1], ("a::t[1]", "a::t[2]"))
    assert hub.collected == [("gw1", ["a::t[1]", "a::t[2]"])]


def test_a_worker_replacing_a_crashed_one_takes_its_share() -> None:
    hub = Hub()
    adapter = XdistController(hub, dist="each")
    first, second = _node(0), _node(1)
    adapter.pytest_configure_node(first)
    adapter.pytest_configure_node(second)

    adapter.pytest_testnodedown(first, "Not properly terminated")
    adapter.pytest_testnodedown(second, None)  # a clean end frees no share
    replacement = _node(2)
    adapter.pytest_configure_node(replacement)

    assert replacement.workerinput["tau2_share"] == [1, 2]
    assert hub.down == [("gw0", "Not properly terminated"), ("gw1", None)]


def test_a_worker_s_leftovers_reach_the_run_through_its_workeroutput() -> None:
    leftovers = WorkerLeftovers(notices=("tau2: the cache is off",), benchmark_collected=True)
    worker_config = SimpleNamespace(workeroutput={"exitstatus": 0})
    hub = Hub()
    adapter = XdistController(hub, dist="load")
    finished, crashed = _node(0), _node(1)

    XdistWorker(lambda: leftovers).pytest_sessionfinish(
        cast(pytest.Session, SimpleNamespace(config=worker_config))
    )
    finished.workeroutput = worker_config.workeroutput  # as xdist hands it over
    adapter.pytest_testnodedown(finished, None)
    adapter.pytest_testnodedown(crashed, "Not properly terminated")  # sent nothing

    assert hub.leftovers == [leftovers, None]
    assert received_leftovers(SimpleNamespace(workeroutput={"exitstatus": 0})) is None


def test_under_dist_load_no_share_is_dealt() -> None:
    node = _node(0)
    XdistController(Hub(), dist="load").pytest_configure_node(node)

    assert node.workerinput["tau2_dist"] == "load"
    assert "tau2_share" not in node.workerinput


@pytest.mark.parametrize(
    ("workerinput", "share"),
    [
        (None, None),
        ({"workerid": "gw1", "workercount": 3, "tau2_dist": "load"}, None),
        ({"workerid": "gw1", "workercount": 3, "tau2_dist": "each"}, (2, 3)),
        ({"workerid": "gw4", "workercount": 3, "tau2_dist": "each", "tau2_share": [1, 3]}, (1, 3)),
    ],
)
def test_a_worker_reads_its_share_from_its_workerinput(
    workerinput: dict[str, Any] | None, share: tuple[int, int] | None
) -> None:
    config = SimpleNamespace() if workerinput is None else SimpleNamespace(workerinput=workerinput)

    assert worker_share(cast(pytest.Config, config)) == share


class WorkerInteractor:
    """The shape of xdist's worker object that ``scheduled_items`` reads."""

    def __init__(self, next_index: int | None, queued: list[object]) -> None:
        self.nextitem_index = next_index
        self.torun = SimpleNamespace(lock=lambda: contextlib.nullcontext(queued))


def _session(items: list[str], *plugins: object) -> Any:
    manager = SimpleNamespace(get_plugins=lambda: set(plugins))
    return SimpleNamespace(items=items, config=SimpleNamespace(pluginmanager=manager))


def test_a_worker_starts_ahead_the_items_it_was_sent_and_has_not_run() -> None:
    worker = WorkerInteractor(2, [3, "shutdown", 9])
    scheduled = scheduled_items(_session(["a", "b", "c", "d"], object(), worker))

    assert scheduled is not None
    assert scheduled(cast(pytest.Item, "c")) == ["c", "d"]  # 9 is not an item: skipped
    assert scheduled_items(_session(["a"], object())) is None  # not an xdist worker


QUEUE_READER = """
import pytest
from tau2_retail.plugins.interop import scheduled_items

@pytest.fixture
def upcoming(request):
    scheduled = scheduled_items(request.session)
    assert scheduled is not None, "no WorkerInteractor with a torun queue: xdist changed"
    return [item.name for item in scheduled(request.node)]

def test_first(upcoming):
    assert upcoming == ["test_second", "test_third"]

def test_second(upcoming):
    assert upcoming == ["test_third"]

def test_third(upcoming):
    assert upcoming == []
"""


def test_the_worker_queue_is_read_from_the_installed_xdist(bench: Bench) -> None:
    """The one read of xdist's internals (``scheduled_items``), against the real xdist: this
    fails loudly when xdist renames its worker object, its queue or its lock."""
    (bench.path / "test_queue_reader.py").write_text(QUEUE_READER, encoding="utf-8")

    result = bench.run("-n", "1", "--dist", "each", "test_queue_reader.py")

    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=3)


# -- junitxml ------------------------------------------------------------------------------------


class SuiteWriter:
    def __init__(self) -> None:
        self.properties: list[tuple[str, object]] = []

    def add_global_property(self, name: str, value: object) -> None:
        self.properties.append((name, value))


def _manager(*plugins: tuple[object, str]) -> pytest.PytestPluginManager:
    manager = pytest.PytestPluginManager()
    for plugin, name in plugins:
        manager.register(plugin, name)
    return manager


def test_suite_properties_reach_the_junit_writer_as_text() -> None:
    writer = SuiteWriter()
    config = SimpleNamespace(pluginmanager=_manager((object(), "junitxml"), (writer, "logxml")))

    record_suite_properties(cast(pytest.Config, config), {"tau2_lost": 0, "tau2_gate": None})

    assert writer.properties == [("tau2_lost", "0"), ("tau2_gate", "n/a")]


def test_without_junitxml_suite_properties_go_nowhere() -> None:
    writer = SuiteWriter()
    config = SimpleNamespace(pluginmanager=_manager((writer, "logxml")))

    record_suite_properties(cast(pytest.Config, config), {"tau2_lost": 0})

    assert writer.properties == []


# -- syrupy and pluggy warnings ------------------------------------------------------------------


@contextlib.contextmanager
def _warnings_are_errors() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def _raises(category: type[Warning], *, silenced: bool) -> contextlib.AbstractContextManager[Any]:
    return contextlib.nullcontext() if silenced else pytest.raises(category)


@pytest.mark.parametrize("incomplete", [True, False])
def test_syrupy_missing_reports_warning_is_silenced_only_when_the_session_was_cut_short(
    incomplete: bool,
) -> None:
    seen: list[int] = []

    def cut_short(exitstatus: int) -> bool:
        seen.append(exitstatus)
        return incomplete

    with _warnings_are_errors():
        hook = SyrupyWarningFilter(cut_short).pytest_sessionfinish(
            cast(pytest.Session, None), exitstatus=1
        )
        next(hook)
        with _raises(UserWarning, silenced=incomplete):
            warnings.warn(
                "syrupy: received 1 of 2 xdist worker snapshot reports", UserWarning, stacklevel=1
            )
    assert seen == [1]


@pytest.mark.parametrize("silenced", [True, False], ids=["scenario", "own test"])
def test_pluggy_teardown_warning_of_a_ctrl_c_is_silenced_in_scenario_tests_only(
    silenced: bool, tasks: Mapping[str, Task]
) -> None:
    scenario = Scenario(task=tasks["1"], trial=0, trials=1, seed=0)
    # a scenario's test is known by its parameter, whatever its name
    params = {"tau2_scenario": scenario} if silenced else {"x": 1}
    item = cast(
        pytest.Item,
        SimpleNamespace(
            nodeid="tests/test_own.py::test_x", callspec=SimpleNamespace(params=params)
        ),
    )
    teardown = "A plugin raised an exception during an old-style hookwrapper teardown.\n"
    warning = PluggyTeardownRaisedWarning
    with _warnings_are_errors():
        hook = PluggyTeardownFilter().pytest_runtest_protocol(item)
        next(hook)
        with _raises(PluggyTeardownRaisedWarning, silenced=silenced):
            warnings.warn(teardown + "KeyboardInterrupt: ", warning, stacklevel=1)
        with pytest.raises(PluggyTeardownRaisedWarning):  # any other teardown error still warns
            warnings.warn(teardown + "ValueError: boom", warning, stacklevel=1)


# -- pytest-asyncio ------------------------------------------------------------------------------


def _interrupted_loop() -> asyncio.AbstractEventLoop:
    """A loop in which a SIGINT landed just after a test's coroutine finished (before
    ``run_until_complete`` saw the result): its "stop the loop" callback is still queued."""

    def interrupt() -> None:
        raise KeyboardInterrupt

    async def test_body() -> str:
        asyncio.get_running_loop().call_soon(interrupt)
        return "done"

    loop = asyncio.new_event_loop()
    with pytest.raises(KeyboardInterrupt):
        loop.run_until_complete(test_body())
    return loop


async def _teardown() -> str:
    await asyncio.sleep(0)
    return "closed"


@pytest.mark.parametrize("exitstatus", [pytest.ExitCode.INTERRUPTED, pytest.ExitCode.OK])
def test_after_a_ctrl_c_inside_the_loop_it_is_usable_for_the_closing_cancellation(
    exitstatus: pytest.ExitCode,
) -> None:
    """The next ``run_until_complete`` (the scheduler's teardown) failed with "Event loop
    stopped before Future completed" and the run ended with a traceback instead of exit 2.
    Settling happens only after an interruption."""
    loop = _interrupted_loop()
    try:
        config = SimpleNamespace(stash=pytest.Stash())
        config.stash[SESSION_LOOP_KEY] = loop

        EventLoopSettling().pytest_sessionfinish(
            cast(pytest.Session, SimpleNamespace(config=config)), exitstatus=exitstatus
        )

        if exitstatus == pytest.ExitCode.INTERRUPTED:
            assert loop.run_until_complete(_teardown()) == "closed"
        else:
            with pytest.raises(RuntimeError, match="Event loop stopped before Future completed"):
                loop.run_until_complete(_teardown())
    finally:
        loop.close()


def test_settling_without_a_scenario_loop_does_nothing() -> None:
    settle_interrupted_loop(cast(pytest.Config, SimpleNamespace(stash=pytest.Stash())))


# -- pytest's formatting of Ctrl-C ---------------------------------------------------------------


class _NoLine:
    """A traceback entry as pytest builds it for an instruction without a line number."""

    @property
    def lineno(self) -> int:
        raise TypeError("unsupported operand type(s) for -: 'NoneType' and 'int'")


def test_a_ctrl_c_traceback_entry_without_a_line_is_dropped_before_pytest_formats_it() -> None:
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        excinfo = pytest.ExceptionInfo.from_current()
    real = list(excinfo.traceback)
    excinfo.traceback = type(excinfo.traceback)([*real, _NoLine()])  # type: ignore[list-item]
    assert [has_line_number(entry) for entry in excinfo.traceback] == [True] * len(real) + [False]

    InterruptTraceback().pytest_keyboard_interrupt(excinfo)

    assert list(excinfo.traceback) == real
    assert "KeyboardInterrupt" in str(excinfo.getrepr())  # formats without TypeError
