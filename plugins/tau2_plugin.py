"""The tau2 retail pytest plugin: thin hooks handing off to the run object.

Options are declared in ``plugins.options``, fixtures in ``plugins.fixtures``, the run state
and its reporting hooks in ``plugins.run`` (an object registered here and kept in the stash).
"""

from __future__ import annotations

import pytest

from tau2_retail.plugins.options import add_options, resolve_settings
from tau2_retail.plugins.rootdir import check_config_file
from tau2_retail.plugins.run import RUN_KEY, Tau2Run, XdistBridge
from tau2_retail.plugins.runtime import select_scenarios
from tau2_retail.plugins.scheduler import worker_share

pytest_plugins = ["tau2_retail.plugins.fixtures"]

__all__ = [
    "pytest_addoption",
    "pytest_configure",
    "pytest_generate_tests",
    "pytest_unconfigure",
]

_RUN_PLUGIN = "tau2-run"
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
    run = Tau2Run(config, resolve_settings(config))
    if not run.is_worker:
        run.prepare_controller()
    config.stash[RUN_KEY] = run
    config.pluginmanager.register(run, _RUN_PLUGIN)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistBridge(run), f"{_RUN_PLUGIN}-xdist")


def pytest_unconfigure(config: pytest.Config) -> None:
    for name in (_RUN_PLUGIN, f"{_RUN_PLUGIN}-xdist"):
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin, name)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "tau2_scenario" not in metafunc.fixturenames:
        return
    run = metafunc.config.stash[RUN_KEY]
    try:
        scenarios = select_scenarios(
            run.settings, run.bundle.tasks, worker_share=worker_share(metafunc.config)
        )
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
