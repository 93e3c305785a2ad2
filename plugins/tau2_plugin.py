"""The tau2 retail pytest plugin: thin hooks handing off to the objects that do the work.

Options are declared in ``plugins.options``, fixtures in ``plugins.fixtures``. Every process
that may run scenarios keeps a :class:`~tau2_retail.plugins.process.Tau2Process` in the stash;
the process that writes the run files (the xdist controller, or the only process) also
registers the :class:`~tau2_retail.plugins.controller.Tau2Run` plugin object. What the plugin
knows of other plugins (xdist, junitxml, syrupy, pluggy, pytest-asyncio) is in
``plugins.interop``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Final

import pytest

from tau2_retail.errors import ArtifactError, ConfigError
from tau2_retail.models.text import printable
from tau2_retail.plugins.agents import AGENTS_KEY, AgentSupply, unreachable_fixture_problem
from tau2_retail.plugins.compat import incompatibility, keep_scenarios_from_plugins
from tau2_retail.plugins.controller import RUN_KEY, Tau2Run
from tau2_retail.plugins.hints import no_scenario_hint
from tau2_retail.plugins.installed import installed_benchmark, installed_benchmark_module
from tau2_retail.plugins.interop import (
    quiet_dependency_warnings,
    register_interop,
    unregister_interop,
    worker_input,
    worker_share,
)
from tau2_retail.plugins.options import (
    add_options,
    check_option_names,
    options_given,
    resolve_settings_apart,
)
from tau2_retail.plugins.process import (
    PROCESS_KEY,
    Tau2InfraError,
    Tau2Process,
    receive_plan,
)
from tau2_retail.plugins.rootdir import check_config_file
from tau2_retail.plugins.runtime import select_scenarios
from tau2_retail.plugins.scenario_report import is_benchmark_item, scenario_of_item
from tau2_retail.plugins.scheduler import worker_share_items

pytest_plugins = ["tau2_retail.plugins.scenario_fixtures"]

__all__ = [
    "pytest_addoption",
    "pytest_collect_directory",
    "pytest_collection_finish",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_generate_tests",
    "pytest_itemcollected",
    "pytest_load_initial_conftests",
    "pytest_pycollect_makemodule",
    "pytest_runtest_makereport",
    "pytest_terminal_summary",
    "pytest_unconfigure",
]

#: the lowest pytest the plugin runs under (pyproject.toml declares it too): the benchmark's NL
#: assertions are pytest's built-in subtests (pytest 9)
MIN_PYTEST: Final = (9, 0)

#: the ends after which a session that meant the benchmark and collected none of it is told why
_HINTED_EXITS = (
    pytest.ExitCode.OK,
    pytest.ExitCode.TESTS_FAILED,
    pytest.ExitCode.NO_TESTS_COLLECTED,
)
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


def pytest_load_initial_conftests(early_config: pytest.Config, args: list[str]) -> None:
    if not (early_config.known_args_namespace.help or early_config.known_args_namespace.version):
        check_option_names(args)


def check_pytest_version(version: Sequence[int | str] | None = None) -> None:
    """Refuse a pytest older than :data:`MIN_PYTEST` at start-up (exit 4): under pytest 8 every
    scenario's test errors (``fixture 'subtests' not found``) after its scenario ran."""
    parts = pytest.version_tuple if version is None else version
    if tuple(part for part in parts[:2] if isinstance(part, int)) >= MIN_PYTEST:
        return
    needed = ".".join(map(str, MIN_PYTEST))
    raise pytest.UsageError(
        f"tau2-retail-pytest needs pytest {needed} or later (the benchmark's NL assertions are "
        f"pytest's built-in subtests); this is pytest {'.'.join(map(str, parts))}: "
        f"pip install 'pytest>={needed}'"
    )


@pytest.hookimpl(tryfirst=True)  # before pytest-asyncio's: see quiet_dependency_warnings
def pytest_configure(config: pytest.Config) -> None:
    quiet_dependency_warnings()
    check_pytest_version()
    check_config_file(config)
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    workerinput = worker_input(config)
    try:
        if workerinput is not None:
            # the controller resolved the settings and decided the run: the worker reads it
            process = Tau2Process(receive_plan(config, workerinput))
            run = None
        else:
            settings, unmet = resolve_settings_apart(config)
            problem = incompatibility(config) or unreachable_fixture_problem(config, settings)
            if problem is not None:
                unmet = ConfigError(problem)
            run = Tau2Run(config, settings)
            process = run.start(unmet, defer=not options_given(config))
    except ConfigError as error:
        raise pytest.UsageError(str(error)) from None
    agents = AgentSupply(process.plan.settings.agent_source, config.rootpath)
    config.stash[AGENTS_KEY] = agents
    config.pluginmanager.register(agents, _AGENTS_PLUGIN)
    config.stash[PROCESS_KEY] = process
    if run is not None:
        config.stash[RUN_KEY] = run
        config.pluginmanager.register(run, _RUN_PLUGIN)
    register_interop(
        config,
        run,
        process.leftovers,
        # this process collected scenarios, or (an xdist controller) the run has its folder
        benchmark=lambda: process.benchmark_collected or (run is not None and run.folder.claimed),
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    run = config.stash.get(RUN_KEY, None)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if run is not None and reporter is not None:
        for line in run.closing_lines():
            reporter.write_line(line)
    unregister_interop(config)
    for name in (_RUN_PLUGIN, _AGENTS_PLUGIN):
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin, name)
    if run is not None:
        run.close()  # the run folder's lock, held since the claim


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    return installed_benchmark(path, parent)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(
    module_path: Path, parent: pytest.Collector
) -> pytest.Module | None:
    return installed_benchmark_module(module_path, parent)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "tau2_scenario" not in metafunc.fixturenames:
        return
    process = metafunc.config.stash[PROCESS_KEY]
    try:
        scenarios = select_scenarios(process.plan.settings, process.bundle.tasks)
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


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> Generator[None, None, None]:
    """Keep scenario tests from pytest-rerunfailures' reruns, pytest-timeout's timeout,
    network blocking (pytest-socket, pytest-recording) and pytest-run-parallel's threads; on
    resume, deselect the scenarios that are already complete; under ``--dist each``, those of
    the other workers' shares.

    After every plugin's own hook (a wrapper's end): after ``-k``/``-m``/``--lf``, after
    plugins that record what was collected (an xdist worker's collection stays the same on
    every worker; only its selection differs) and after plugins that split the collection
    (pytest-split's ``--splits 2 --group 1`` dealt a resumed run's remaining scenarios anew,
    and the resume ran the other group's).
    """
    result = yield
    _keep_from_and_resume(config, items)
    return result


def _keep_from_and_resume(config: pytest.Config, items: list[pytest.Item]) -> None:
    scenarios = [item for item in items if is_benchmark_item(item)]
    process = config.stash[PROCESS_KEY]
    for notice in keep_scenarios_from_plugins(config, scenarios):
        process.notice(notice)
    completed = process.plan.completed
    share = worker_share(config)
    if not completed and share is None:
        return
    keep: list[pytest.Item] = []
    done: list[pytest.Item] = []
    for item in items:
        scenario = scenario_of_item(item)
        (done if scenario is not None and scenario.id in completed else keep).append(item)
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


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """A process holding a scenario imports the agent the ini file or the environment names,
    if still pending: an xdist worker here; the run's own process (``Tau2Run``, before this)
    first stops the session on a problem of its settings."""
    config = session.config
    if not any(is_benchmark_item(item) for item in session.items):
        return
    # a worker keeps a failed import in the supply (no scenario runs without its agent): the
    # controller imports the same agent at this worker's collection and stops the session
    with contextlib.suppress(ConfigError):
        config.stash[PROCESS_KEY].import_agent(config.stash[AGENTS_KEY])


def pytest_itemcollected(item: pytest.Item) -> None:
    if is_benchmark_item(item):
        item.config.stash[PROCESS_KEY].benchmark_collected = True


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    """A session that asked for the benchmark and collected none of it says how to collect it:
    ``-k tau2_retail`` in a team's repository (exit 5), or ``pytest tests --tau2-trials=4``
    (the team's own tests ran, and nothing else)."""
    if exitstatus not in _HINTED_EXITS or _benchmark_collected(config):
        return
    if (config.rootpath / "tests_tau2_retail").is_dir():
        return  # this project's checkout: its testpaths hold the benchmark
    hint = no_scenario_hint(
        keyword=config.option.keyword,
        markexpr=config.option.markexpr,
        args=config.invocation_params.args,
    )
    if hint is not None:
        terminalreporter.write_line(hint)


def _benchmark_collected(config: pytest.Config) -> bool:
    """Whether a process of this session collected the benchmark, deselected tests included
    (read at the session's end: an xdist worker tells its controller when it finishes)."""
    run = config.stash.get(RUN_KEY, None)
    return run is None or run.ledger.empty.benchmark_collected
