"""The tau2 retail pytest plugin: thin hooks handing off to the objects that do the work.

Options are declared in ``plugins.options``, fixtures in ``plugins.fixtures``. Every process
that may run scenarios keeps a :class:`~tau2_retail.plugins.process.Tau2Process` in the stash;
the process that writes the run files (the xdist controller, or the only process) also
registers the :class:`~tau2_retail.plugins.run.Tau2Run` plugin object.
"""

from __future__ import annotations

import warnings
from collections.abc import Generator
from typing import Any

import pytest
from pluggy import PluggyTeardownRaisedWarning

from tau2_retail.errors import ArtifactError
from tau2_retail.models.text import printable
from tau2_retail.plugins.agents import AGENTS_KEY, AgentSupply
from tau2_retail.plugins.options import add_options, resolve_settings
from tau2_retail.plugins.process import (
    PROCESS_KEY,
    Tau2InfraError,
    Tau2Process,
    receive_plan,
)
from tau2_retail.plugins.process import scenario_of as scenario_of
from tau2_retail.plugins.rootdir import check_config_file
from tau2_retail.plugins.run import RUN_KEY, Tau2Run
from tau2_retail.plugins.runtime import select_scenarios
from tau2_retail.plugins.scheduler import (
    settle_interrupted_loop,
    worker_share,
    worker_share_items,
)

pytest_plugins = ["tau2_retail.plugins.fixtures"]

__all__ = [
    "pytest_addoption",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_generate_tests",
    "pytest_keyboard_interrupt",
    "pytest_runtest_makereport",
    "pytest_runtest_protocol",
    "pytest_unconfigure",
]

_RUN_PLUGIN = "tau2-run"
_AGENTS_PLUGIN = "tau2-agents"
MARKERS = (
    "tau2_split_train: scenario of the tau2 train split",
    "tau2_split_test: scenario of the tau2 test split",
    "tau2_nl: scenario with natural-language assertions (judged when a judge is configured)",
    "tau2_live: needs a real model endpoint",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    check_config_file(config)
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is not None:
        # the controller resolved the settings and decided the run: the worker reads its plan
        process = Tau2Process(receive_plan(config, workerinput))
        run = None
    else:
        run = Tau2Run(config, resolve_settings(config))
        process = run.start()
    agents = AgentSupply(process.settings.agent_source)
    config.stash[AGENTS_KEY] = agents
    config.pluginmanager.register(agents, _AGENTS_PLUGIN)
    config.stash[PROCESS_KEY] = process
    if run is not None:
        config.stash[RUN_KEY] = run
        config.pluginmanager.register(run, _RUN_PLUGIN)


def pytest_unconfigure(config: pytest.Config) -> None:
    for name in (_RUN_PLUGIN, _AGENTS_PLUGIN):
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin, name)
    run = config.stash.get(RUN_KEY, None)
    if run is not None:
        run.close()  # the run folder's lock, held since the claim


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "tau2_scenario" not in metafunc.fixturenames:
        return
    process = metafunc.config.stash[PROCESS_KEY]
    try:
        scenarios = select_scenarios(process.settings, process.bundle.tasks)
    except ValueError as error:
        # from None: the chained ValueError would print the same message a second time
        raise pytest.fail.Exception(str(error), pytrace=False) from None
    params = []
    for scenario in scenarios:
        marks = [getattr(pytest.mark, f"tau2_split_{scenario.task.split}")]
        if scenario.task.nl_assertions:
            marks.append(pytest.mark.tau2_nl)
        params.append(pytest.param(scenario, id=scenario.id, marks=marks))
    metafunc.parametrize("tau2_scenario", params, indirect=True)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On resume, deselect the scenarios that are already complete; under ``--dist each``,
    those of the other workers' shares.

    Last, after ``-k``/``-m``/``--lf`` and after plugins that record what was collected (an
    xdist worker's collection stays the same on every worker; only its selection differs).
    """
    completed = config.stash[PROCESS_KEY].plan.completed
    share = worker_share(config)
    if not completed and share is None:
        return
    keep: list[pytest.Item] = []
    done: list[pytest.Item] = []
    for item in items:
        (done if scenario_of(item.nodeid) in completed else keep).append(item)
    if share is not None:
        keep, others = worker_share_items(keep, share)
        done += others
    if done:
        config.hook.pytest_deselected(items=done)
        items[:] = keep


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    excinfo = call.excinfo
    if excinfo is None:
        return report
    # Endpoint text reaches these messages (a reply body): its control characters are shown
    # escaped, never sent to the terminal (ANSI escapes, carriage returns). A scenario's own
    # failure messages are escaped where the benchmark module words them.
    if excinfo.errisinstance(Tau2InfraError):
        # an outage is not a bug of the test: one line says what failed, no traceback
        report.longrepr = f"Tau2InfraError: {printable(str(excinfo.value))}"
    elif excinfo.errisinstance(ArtifactError):
        # a failed write (full disk, permissions): one line naming the file and the cause
        report.longrepr = f"ArtifactError: {printable(str(excinfo.value))}"
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    """Ctrl-C is an interruption wherever it lands in a scenario's test.

    A SIGINT that arrives while another plugin's old-style hook wrapper runs (hypothesis has one
    around ``pytest_runtest_makereport``) makes pluggy warn about that wrapper's teardown; under
    ``filterwarnings = error`` the warning replaced the interruption with an INTERNALERROR
    (exit 3). This filter sits inside pytest's own warning filters for the test.
    """
    if scenario_of(item.nodeid) is not None:
        warnings.filterwarnings(
            "ignore", message=r"(?s).*\nKeyboardInterrupt: ", category=PluggyTeardownRaisedWarning
        )
    return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """After Ctrl-C, before the session's fixtures are torn down: the scenarios' loop can run
    again, so the conversations in flight are cancelled as at any other end of the session."""
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        settle_interrupted_loop(session.config)


def has_line_number(entry: Any) -> bool:
    """Whether a traceback entry knows its line (on Python 3.11 an instruction may have none:
    ``tb_lineno`` is None, and pytest's ``TracebackEntry.lineno`` raises ``TypeError``)."""
    try:
        entry.lineno  # noqa: B018 (the property is the check)
    except TypeError:
        return False
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """Ctrl-C is an interruption even when it lands on an instruction without a line number
    (seen in CI inside ``re``'s compiler, called by junitxml while a report was recorded):
    pytest's own formatting of that traceback raised ``TypeError`` and the session ended with
    exit 1 and a traceback instead of exit 2. Such entries are dropped before the terminal
    reporter formats the traceback."""
    excinfo.traceback = excinfo.traceback.filter(has_line_number)
