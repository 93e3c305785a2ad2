"""Other plugins behind one adapter: all that the tau2 plugin knows of pytest-xdist, junitxml,
syrupy, pluggy, pytest-asyncio and pytest's formatting of Ctrl-C lives here.

The core plugin (``tau2_plugin``, ``run``, ``fixtures``, ``scheduler``) names none of them: it
hands plain values to the functions below, and ``register_interop`` registers each adapter only
where its plugin is active (``config.pluginmanager.hasplugin``):

- **pytest-xdist** (:class:`XdistController`, on the controller; :class:`XdistWorker`, the
  ``worker_*`` functions and ``scheduled_items`` in a worker). Run-wide values travel to
  workers in ``workerinput`` from ``pytest_configure_node``; each worker's collection, its end
  (or crash) and what it still had to say (its ``workeroutput``) reach the run as plain values
  through :class:`WorkerHub`. Under ``--dist each`` the adapter deals the shares, a replacement
  worker taking the share of the one that crashed. Optional hooks throughout
  (``optionalhook=True``): without xdist nothing calls them. The one read of xdist's internals
  is :func:`scheduled_items` (its worker queue); ``tests/plugins/test_interop.py`` runs it
  against the installed xdist, so a change there fails that test.
- **junitxml** (:func:`record_suite_properties`): the run's rates and gate as ``<testsuite>``
  properties.
- **syrupy** (:class:`SyrupyWarningFilter`): its warning about missing worker reports, after a
  session that did not finish on every worker.
- **pluggy** (:class:`PluggyTeardownFilter`): its warning about an old-style wrapper's teardown
  when Ctrl-C lands in it.
- **pytest-asyncio** (:class:`EventLoopSettling`): the session loop made usable again after a
  Ctrl-C landed inside it; its start-up warning about an unset
  ``asyncio_default_fixture_loop_scope`` kept out of a user's run
  (:func:`quiet_dependency_warnings`).
- **pytest's Ctrl-C traceback** (:class:`InterruptTraceback`): entries without a line number
  dropped before pytest formats them. (A Ctrl-C while the session already stops is the
  plugin's own: :mod:`tau2_retail.plugins.repeated_interrupt`, registered here with them.)
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, Protocol

import pytest
from pluggy import PluggyTeardownRaisedWarning

from tau2_retail import codec
from tau2_retail.plugins.repeated_interrupt import RepeatedInterrupt
from tau2_retail.plugins.scenario_report import WorkerLeftovers, scenario_of_item

__all__ = [
    "SESSION_LOOP_KEY",
    "EventLoopSettling",
    "InterruptTraceback",
    "PluggyTeardownFilter",
    "SyrupyWarningFilter",
    "WorkerHub",
    "XdistController",
    "XdistWorker",
    "distributing_mode",
    "has_line_number",
    "quiet_dependency_warnings",
    "received_leftovers",
    "record_suite_properties",
    "register_interop",
    "remember_session_loop",
    "scheduled_items",
    "settle_interrupted_loop",
    "unregister_interop",
    "worker_input",
    "worker_share",
]

_PREFIX = "tau2-interop-"


class WorkerHub(Protocol):
    """What the run offers the other plugins' adapters: plain values both ways."""

    def worker_payload(self) -> dict[str, Any]:
        """The run-wide values each worker receives (JSON-able)."""
        ...

    def on_worker_collection(self, node_id: str, ids: Sequence[str]) -> None:
        """A worker collected ``ids`` (node ids); no test has been scheduled yet."""
        ...

    def on_worker_down(
        self, node_id: str, error: object | None, leftovers: WorkerLeftovers | None
    ) -> None:
        """A worker ended: cleanly (``error`` None) or not (it crashed, or was interrupted);
        ``leftovers`` is what it still had to say (None when it sent nothing: a crash)."""
        ...

    def incomplete(self, exitstatus: int) -> bool:
        """Whether the session ended before every worker finished (Ctrl-C, a refused claim of
        the run folder, a crashed worker)."""
        ...


def register_interop(
    config: pytest.Config,
    hub: WorkerHub | None,
    leftovers: Callable[[], WorkerLeftovers] | None = None,
    benchmark: Callable[[], bool] = lambda: True,
) -> None:
    """Register the adapters of the plugins active in this session; ``hub`` is the run, on the
    process that owns it (None in an xdist worker); ``leftovers`` what an xdist worker still
    has to tell the run at its end; ``benchmark`` whether this process has scenarios (only
    then does the plugin take Ctrl-C while the session stops)."""
    manager = config.pluginmanager
    adapters: dict[str, object] = {
        "interrupts": InterruptTraceback(),
        "repeated-interrupts": RepeatedInterrupt(
            active=benchmark, speaks=worker_input(config) is None
        ),
        "pluggy": PluggyTeardownFilter(),
    }
    if manager.hasplugin("asyncio"):
        adapters["asyncio"] = EventLoopSettling()
    if hub is None and leftovers is not None and worker_input(config) is not None:
        adapters["xdist"] = XdistWorker(leftovers)
    if hub is not None and manager.hasplugin("xdist"):
        adapters["xdist"] = XdistController(hub, dist=config.getoption("dist", None))
    if hub is not None and manager.hasplugin("syrupy"):
        adapters["syrupy"] = SyrupyWarningFilter(hub.incomplete)
    for name, adapter in adapters.items():
        manager.register(adapter, _PREFIX + name)


def unregister_interop(config: pytest.Config) -> None:
    manager = config.pluginmanager
    for name, plugin in manager.list_name_plugin():
        if name.startswith(_PREFIX) and plugin is not None:
            if isinstance(plugin, RepeatedInterrupt):
                plugin.restore()
            manager.unregister(plugin, name)


# -- pytest-xdist --------------------------------------------------------------------------------


def worker_input(config: pytest.Config) -> dict[str, Any] | None:
    """This xdist worker's ``workerinput`` (what the controller sent it); None elsewhere."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    return workerinput


def _worker_number(workerinput: Mapping[str, Any]) -> int:
    return int(str(workerinput["workerid"]).removeprefix("gw"))


class XdistController:
    """pytest-xdist on the controller: the run's values to each worker, each worker's
    collection and end to the run, and under ``--dist each`` each worker's share (I, N).

    A worker that replaces a crashed one (xdist restarts it as gw<N>, N >= the worker count)
    takes the dead worker's share: its collection is then the dead one's, and xdist hands it
    the scenarios the dead one had not run (the crashed one is reported lost). A share
    computed from its id would not exist.
    """

    def __init__(self, hub: WorkerHub, *, dist: str | None) -> None:
        self.hub = hub
        self.dist = dist
        #: under ``--dist each``: each live worker's share index, and those of crashed workers
        self.shares: dict[str, int] = {}
        self.free_shares: list[int] = []

    def send_to_worker(self, node: Any, payload: Mapping[str, Any]) -> None:
        node.workerinput.update(payload)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        # workers see --dist as "no": --tau2-concurrency deals shares under "each"
        payload = {**self.hub.worker_payload(), "tau2_dist": self.dist}
        if self.dist == "each":
            count = int(node.workerinput["workercount"])
            index = (
                self.free_shares.pop(0)
                if self.free_shares
                else _worker_number(node.workerinput) + 1
            )
            payload["tau2_share"] = [index, count]
            self.shares[node.gateway.id] = index
        self.send_to_worker(node, payload)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object | None) -> None:
        index = self.shares.pop(node.gateway.id, None)
        if error is not None and index is not None:
            self.free_shares.append(index)
        self.hub.on_worker_down(str(node.gateway.id), error, received_leftovers(node))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        # Called for each worker before the controller schedules any test (xdist schedules
        # once every worker has collected).
        self.hub.on_worker_collection(str(node.gateway.id), list(ids))


_LEFTOVERS_KEY = "tau2_leftovers"


class XdistWorker:
    """pytest-xdist in a worker: what it still has to tell the run goes into its
    ``workeroutput``, which xdist sends the controller when the worker finishes."""

    def __init__(self, leftovers: Callable[[], WorkerLeftovers]) -> None:
        self._leftovers = leftovers

    # after pytest's own (the session's fixtures torn down: their notices count), before
    # xdist's wrapper sends the output
    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        output: dict[str, Any] | None = getattr(session.config, "workeroutput", None)
        if output is not None:
            output[_LEFTOVERS_KEY] = codec.encode(self._leftovers())


def received_leftovers(node: Any) -> WorkerLeftovers | None:
    """What a worker that finished sent in its ``workeroutput`` (None after a crash)."""
    output = getattr(node, "workeroutput", None)
    sent = output.get(_LEFTOVERS_KEY) if isinstance(output, dict) else None
    if sent is None:
        return None
    return codec.decode_value(WorkerLeftovers, sent, "a worker's workeroutput")


def distributing_mode(config: pytest.Config) -> str | None:
    """The ``--dist`` mode when this process hands its tests to xdist workers, else None
    (``-n 0``, ``--collect-only``, no xdist, or an xdist worker): xdist registers its
    ``dsession`` plugin exactly then."""
    if not config.pluginmanager.has_plugin("dsession"):
        return None
    return str(config.getoption("dist"))


def worker_share(config: pytest.Config) -> tuple[int, int] | None:
    """Under ``--dist each``: this xdist worker's share (I, N) of the scenarios.

    (Every worker running every scenario, as ``each`` means for other tests, would only write
    the same artifacts N times.)

    ``--tau2-concurrency`` needs a worker to know its scenarios ahead: ``--dist load`` sends a
    few at a time, ``--dist worksteal`` takes queued items back at the end of a run (items whose
    conversations the worker has already run: the thief starts them again), and ``loadgroup``
    ignores its groups with pytest 9.2 (xdist 3.8 renames node ids through an attribute pytest
    no longer reads). ``each`` sends every worker its whole collection at once and never moves
    an item; each worker collects every scenario and keeps only its share of the selected ones,
    dealt as by ``--tau2-shard`` (the controller passes the mode in ``workerinput``).
    """
    workerinput = worker_input(config)
    if workerinput is None or workerinput.get("tau2_dist") != "each":
        return None
    given = workerinput.get("tau2_share")
    if given is not None:  # dealt by the controller (a replacement takes the dead one's share)
        return int(given[0]), int(given[1])
    return _worker_number(workerinput) + 1, int(workerinput["workercount"])


def _worker_queue(config: pytest.Config) -> Any | None:
    """pytest-xdist's worker object (it holds the indices of the items sent to this worker)."""
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "torun"):
            return plugin
    return None


def scheduled_items(session: pytest.Session) -> Callable[[pytest.Item], list[pytest.Item]] | None:
    """In an xdist worker: the items the controller sent and the worker has not run yet.

    ``nextitem_index`` and the ``torun`` queue of xdist's ``WorkerInteractor``, read under its
    lock; xdist has no public API for it. None outside a worker, or in a worker whose xdist
    does not look like that (it then starts only the item under test).
    """
    worker = _worker_queue(session.config)
    if worker is None:
        return None

    def scheduled(item: pytest.Item) -> list[pytest.Item]:
        indices: list[Any] = [getattr(worker, "nextitem_index", None)]
        with worker.torun.lock() as queue:
            indices.extend(queue)
        items = session.items
        return [items[i] for i in indices if isinstance(i, int) and 0 <= i < len(items)]

    return scheduled


# -- junitxml -----------------------------------------------------------------------------------


def record_suite_properties(config: pytest.Config, properties: Mapping[str, object]) -> None:
    """Each of ``properties`` as a ``<property>`` of junit XML's ``<testsuite>`` (None as
    ``n/a``); nothing without ``--junitxml``.

    pytest's public route, the session fixture ``record_testsuite_property``, hands out the
    ``add_global_property`` method of the junit writer that pytest registers on the process
    writing the XML; under xdist that is the controller, which runs no fixture. So the writer is
    found as that fixture finds it in effect: the registered plugin offering that method (by
    what it offers, not by a class name or pytest's private stash key).
    """
    manager = config.pluginmanager
    if not manager.hasplugin("junitxml"):
        return
    for plugin in manager.get_plugins():
        record = getattr(plugin, "add_global_property", None)
        if callable(record):
            for name, value in properties.items():
                record(name, "n/a" if value is None else str(value))
            return


# -- syrupy -------------------------------------------------------------------------------------


class SyrupyWarningFilter:
    """syrupy warns when an xdist session sent it fewer worker snapshot reports than workers
    (Ctrl-C, also while the workers were still starting; a claim of the run folder refused
    under xdist; a crashed worker). With ``filterwarnings = error`` that warning became a
    traceback and exit 1, hiding the run's own verdict. A benchmark session asserts no
    snapshots: the warning says nothing here. The filter lives inside pytest's
    ``catch_warnings`` of this hook (pytest's own wrapper is outermost)."""

    def __init__(self, incomplete: Callable[[int], bool]) -> None:
        self._incomplete = incomplete

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(
        self, session: pytest.Session, exitstatus: int
    ) -> Generator[None, None, None]:
        if self._incomplete(exitstatus):
            warnings.filterwarnings("ignore", message=r"syrupy: ", category=UserWarning)
        yield


# -- pluggy -------------------------------------------------------------------------------------


class PluggyTeardownFilter:
    """Ctrl-C is an interruption wherever it lands in a scenario's test.

    A SIGINT that arrives while another plugin's old-style hook wrapper runs (hypothesis has one
    around ``pytest_runtest_makereport``) makes pluggy warn about that wrapper's teardown; under
    ``filterwarnings = error`` the warning replaced the interruption with an INTERNALERROR
    (exit 3). This filter sits inside pytest's own warning filters for the test.
    """

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        if scenario_of_item(item) is not None:
            warnings.filterwarnings(
                "ignore",
                message=r"(?s).*\nKeyboardInterrupt: ",
                category=PluggyTeardownRaisedWarning,
            )
        return (yield)


# -- pytest-asyncio -----------------------------------------------------------------------------

#: the event loop the scenarios run on (pytest-asyncio's session loop)
SESSION_LOOP_KEY = pytest.StashKey[asyncio.AbstractEventLoop]()


def remember_session_loop(config: pytest.Config, loop: asyncio.AbstractEventLoop) -> None:
    """Note the loop the scenarios run on, so that a Ctrl-C can be settled on it."""
    config.stash[SESSION_LOOP_KEY] = loop


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


#: pytest-asyncio's warning to every project that has not set its loop scope ini key
_UNSET_LOOP_SCOPE = r'The configuration option "asyncio_default_fixture_loop_scope" is unset'


def quiet_dependency_warnings() -> None:
    """Keep pytest-asyncio's start-up warning about an unset
    ``asyncio_default_fixture_loop_scope`` out of a run: the benchmark's async fixtures and
    test name their loop scope, so the default it warns about changes nothing here, and a user
    who installed this plugin did not ask for pytest-asyncio.

    Called first in the plugin's ``pytest_configure`` (``tryfirst``: before pytest-asyncio's),
    inside the warning filters pytest applies while plugins are configured, so a
    ``filterwarnings = error`` of the user does not turn it into an error either; pytest drops
    the filter with its own when the session's configuration ends."""
    warnings.filterwarnings(
        "ignore", message=_UNSET_LOOP_SCOPE, category=pytest.PytestDeprecationWarning
    )


class EventLoopSettling:
    """After Ctrl-C, before the session's fixtures are torn down: the scenarios' loop can run
    again, so the conversations in flight are cancelled as at any other end of the session."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            settle_interrupted_loop(session.config)


# -- pytest's formatting of Ctrl-C ----------------------------------------------------------------


def has_line_number(entry: Any) -> bool:
    """Whether a traceback entry knows its line (on Python 3.11 an instruction may have none:
    ``tb_lineno`` is None, and pytest's ``TracebackEntry.lineno`` raises ``TypeError``)."""
    try:
        entry.lineno  # noqa: B018 (the property is the check)
    except TypeError:
        return False
    return True


class InterruptTraceback:
    """Ctrl-C is an interruption even when it lands on an instruction without a line number
    (seen in CI inside ``re``'s compiler, called by junitxml while a report was recorded):
    pytest's own formatting of that traceback raised ``TypeError`` and the session ended with
    exit 1 and a traceback instead of exit 2. Such entries are dropped before the terminal
    reporter formats the traceback."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        excinfo.traceback = excinfo.traceback.filter(has_line_number)
