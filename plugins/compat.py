"""Other plugins and pytest's own modes, as a scenario test meets them.

A scenario runs once per test and its record is the test's result. Some plugins a team has
loaded would break that, and are refused once a scenario is collected (:func:`incompatibility`,
held like any unmet need of the run: a session of the team's own tests is not concerned):

- pytest-asyncio turned off (``-p no:asyncio``) or not autoloaded
  (``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` without ``-p asyncio``): the scenario fixtures are
  pytest-asyncio's; every scenario was lost;
- pytest-repeat's ``--count N`` (and pytest-flakefinder's ``--flake-finder``, pytest-loop's
  ``--loop N``): N tests of one scenario wrote one record, the last one won (pytest counted N
  failures, the gate passed);
- pytest-forked's ``--forked``: each test failed in its child process while summary.json
  counted its scenario passed; pytest-benchmark's ``--benchmark-only``: every scenario's test
  skipped (lost), exit status 0;
- pytest-testmon's selection: it deselects the tests whose code did not change, and a
  scenario's result depends on the agent and the models, which it does not see (a run of
  another agent ran no scenario, exit 0);
- pytest-rerunfailures' ``--force-reruns``, or ``--reruns-mode append`` with reruns, and
  flaky's ``--force-flaky``: a re-run scenario made the pass rate best-of-N. Plain
  ``--reruns`` is kept from scenario tests instead (:func:`_keep_from_reruns`, the plugin's own
  marker with no reruns), and the team's other tests are still re-run; so is pytest-retry's
  ``--retries``.

pytest-timeout's timeout for every test (a team's ``timeout = 60`` for its unit tests) is kept
from scenario tests too (:func:`_keep_from_timeouts`): a scenario takes minutes against a
hosted model, and a test waits for its scenario as long as the run's concurrency makes it, so
the timeout lost scenario after scenario (the signal method failed the test mid-conversation,
the thread method ended the whole process); ``--tau2-max-duration`` bounds each scenario.
pytest-socket's ``--disable-socket`` (or ``--allow-hosts``) and pytest-recording's
``--block-network`` likewise (:func:`_keep_from_network_blocking`): a scenario's event loop and
its requests to the model endpoints need sockets, and every scenario was lost. So are
pytest-run-parallel's threads (:func:`_keep_from_threads`): each thread ran the async test on
its own, and every scenario was lost.

pytest's modes that run no test (``--collect-only``, ``--setup-plan``, ``--fixtures``,
``--fixtures-per-test``) claim no run folder, and ``--setup-only`` (which sets fixtures up
without running the tests) runs no scenario (:func:`runs_no_test`, :func:`sets_up_only`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import suppress
from typing import Final

import pytest

__all__ = [
    "incompatibility",
    "keep_scenarios_from_plugins",
    "runs_no_test",
    "sets_up_only",
]

_NO_TEST_MODES = ("collectonly", "setupplan", "showfixtures", "show_fixtures_per_test")
_FIX = "drop it for a run of the scenarios"


def runs_no_test(config: pytest.Config) -> bool:
    """Whether this session only shows what it collected (no run folder is claimed)."""
    return any(getattr(config.option, name, False) for name in _NO_TEST_MODES) or sets_up_only(
        config
    )


def sets_up_only(config: pytest.Config) -> bool:
    """``--setup-only``: fixtures are set up, tests are not run (nor are scenarios)."""
    return bool(getattr(config.option, "setuponly", False))


def _global_count(config: pytest.Config, name: str) -> int:
    """A rerun plugin's count for every test: its option ``name``, else its ini key ``name``
    (pytest-rerunfailures' ``reruns``, pytest-retry's ``retries``); 0 when unreadable."""
    count = config.getoption(name, None)
    if count is None:
        with suppress(ValueError):
            count = config.getini(name)
    try:
        return int(count or 0)
    except (TypeError, ValueError):
        return 0


def incompatibility(config: pytest.Config) -> str | None:
    """What of this session's plugins would make the run's records wrong, with the fix."""
    if not config.pluginmanager.has_plugin("asyncio"):
        return _asyncio_missing(config)
    for problem in (_repeats(config), _reruns(config), _unreported(config), _testmon(config)):
        if problem is not None:
            return problem
    return None


def _repeats(config: pytest.Config) -> str | None:
    """pytest-repeat's ``--count N``, pytest-flakefinder's ``--flake-finder``, pytest-loop's
    ``--loop N`` (or its hours, minutes, seconds): N tests of a scenario, one record."""
    repeated = _repeated(config)
    if repeated is None:
        return None
    how, count = repeated
    return (
        f"{how} would run each scenario {f'{count} times' if count else 'again and again'} "
        f"into one record (the last would count); {_FIX}, and use --tau2-trials "
        f"{count or 'N'} for trials (pass^k over them)"
    )


def _repeated(config: pytest.Config) -> tuple[str, int | None] | None:
    plugins = config.pluginmanager
    count = getattr(config.option, "count", None) if plugins.has_plugin("repeat") else None
    if isinstance(count, int) and count > 1:
        return f"pytest-repeat's --count {count}", count
    if config.getoption("flake_finder_enable", False):
        runs = config.getoption("flake_runs", None)
        return f"pytest-flakefinder's --flake-finder (--flake-runs {runs})", runs
    if not plugins.has_plugin("loop"):
        return None
    loop = config.getoption("loop", 1)
    if isinstance(loop, int) and loop > 1:
        return f"pytest-loop's --loop {loop}", loop
    for unit in ("hours", "minutes", "seconds"):
        value = config.getoption(unit, 0)
        if isinstance(value, (int, float)) and value > 0:
            return f"pytest-loop's --{unit} {value:g}", None
    return None


def _reruns(config: pytest.Config) -> str | None:
    """flaky's ``--force-flaky``, pytest-rerunfailures' forced or appended reruns."""
    plugins = config.pluginmanager
    if plugins.has_plugin("flaky") and config.getoption("force_flaky", False):
        return (
            "flaky's --force-flaky would re-run failed scenarios (a best-of-N pass rate); "
            f"{_FIX} (--tau2-resume re-runs infra errors and lost scenarios)"
        )
    if plugins.has_plugin("rerunfailures"):
        forced = config.getoption("force_reruns", None)
        appended = config.getoption("reruns_mode", None) == "append" and _global_count(
            config, "reruns"
        )
        if forced or appended:
            how = f"--force-reruns {forced}" if forced else "--reruns-mode append"
            return (
                f"pytest-rerunfailures' {how} would re-run failed scenarios (a best-of-N pass "
                f"rate); {_FIX} (plain --reruns leaves scenario tests alone; --tau2-resume "
                "re-runs infra errors and lost scenarios)"
            )
    return None


#: options under which a scenario's test never reports its scenario: (option, what it does)
_UNREPORTED: Final = (
    (
        "forked",
        "pytest-forked's --forked would run each scenario's test in a forked process, whose "
        "report never reaches the run (every test failed while summary.json counted its "
        "scenario passed)",
    ),
    (
        "benchmark_only",
        "pytest-benchmark's --benchmark-only would skip every scenario's test (none uses its "
        "benchmark fixture): every scenario lost, and exit status 0 without a gate",
    ),
)


def _unreported(config: pytest.Config) -> str | None:
    """pytest-forked's ``--forked``, pytest-benchmark's ``--benchmark-only``."""
    for option, what in _UNREPORTED:
        if config.getoption(option, False):
            return f"{what}; {_FIX}"
    return None


def _testmon(config: pytest.Config) -> str | None:
    """pytest-testmon's selection (``--testmon`` and the like, unless it selects nothing out:
    ``--testmon-noselect``, or ``-k``/``-m``/``--lf``/a test named, as it reads them)."""
    given = [
        name
        for name in ("testmon", "testmon_nocollect", "testmon_forceselect", "tmnet")
        if config.getoption(name, False)
    ]
    if not given or config.getoption("no-testmon", False):
        return None
    if not config.getoption("testmon_forceselect", False):
        named = any(".py::" in arg for arg in config.getoption("file_or_dir", None) or ())
        option = config.option
        if config.getoption("testmon_noselect", False) or named:
            return None
        if option.keyword or option.markexpr or getattr(option, "lf", False):
            return None
    return (
        f"pytest-testmon's --{given[0].replace('_', '-')} would deselect the scenarios whose "
        "code did not change, but a scenario's result depends on the agent and the models, "
        "which it does not see (a run of another agent ran no scenario, exit 0); "
        f"{_FIX}, or add --testmon-noselect"
    )


def _asyncio_missing(config: pytest.Config) -> str:
    """Why pytest-asyncio is not loaded, and the fix: turned off, or never autoloaded."""
    if config.pluginmanager.is_blocked("asyncio"):
        return (
            "the scenarios run on pytest-asyncio, which -p no:asyncio turned off; "
            f"{_FIX} (a session without scenarios may keep it)"
        )
    # pytest reads the variable so too: any non-empty value turns autoloading off
    if config.getoption("disable_plugin_autoload", False) or os.environ.get(
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD"
    ):
        return (
            "the scenarios run on pytest-asyncio, which is not loaded: plugin autoloading is "
            "off (PYTEST_DISABLE_PLUGIN_AUTOLOAD or --disable-plugin-autoload); load it first: "
            "`-p asyncio -p xdist -p tau2_retail` (-p xdist to use -n; a -p asyncio after -p "
            "tau2_retail makes pytest warn that asyncio is already imported, an error under "
            "filterwarnings = error)"
        )
    return (
        "the scenarios run on pytest-asyncio, which this session did not load; install it "
        "(pip install 'pytest-asyncio>=1.3') or load it with -p asyncio"
    )


def _keep_from_reruns(config: pytest.Config, items: Sequence[pytest.Item]) -> str | None:
    """Mark ``items`` (scenario tests) with the ``flaky`` marker for no reruns of
    pytest-rerunfailures (over its ``--reruns`` or ini ``reruns``) and of pytest-retry (over
    its ``--retries`` or ini ``retries``, and the marker it puts on every test then), when
    either asks for any (the marker makes rerunfailures run the test's protocol itself: left
    alone otherwise). pytest-retry ran a failed scenario's test again without its scenario:
    the test failed on a ``KeyError`` in place of the scenario's own failure."""
    plugins = config.pluginmanager
    none: dict[str, int | bool] = {}
    if plugins.has_plugin("rerunfailures") and _global_count(config, "reruns"):
        none["reruns"] = 0
    if plugins.has_plugin("pytest-retry") and _global_count(config, "retries"):
        # its retries=0 still retries once; a false condition does not (rerunfailures reads
        # the same condition: no rerun either)
        none.update(retries=0, condition=False)
    if not none:
        return None
    for item in items:  # first: the closest marker, over one pytest-retry put there
        item.add_marker(pytest.mark.flaky(**none), append=False)
    return None  # as for any other test: nothing to say


def _global_timeout(config: pytest.Config) -> float:
    """pytest-timeout's timeout for every test, read as it reads it: its option, else
    ``PYTEST_TIMEOUT``, else its ini key (0: none, or one it refuses itself)."""
    given: object = config.getoption("timeout", None)
    if given is None:
        given = os.environ.get("PYTEST_TIMEOUT") or None
    if given is None:
        with suppress(ValueError):
            given = config.getini("timeout") or None
    try:
        return float(given) if isinstance(given, (str, int, float)) else 0.0
    except ValueError:
        return 0.0


def _keep_from_timeouts(config: pytest.Config, items: Sequence[pytest.Item]) -> str | None:
    """Mark ``items`` (scenario tests) with pytest-timeout's marker for no timeout, over its
    timeout for every test when there is one; the notice that says so (None: nothing to do)."""
    if not items or not config.pluginmanager.has_plugin("timeout"):
        return None
    timeout = _global_timeout(config)
    if timeout <= 0:
        return None
    for item in items:
        item.add_marker(pytest.mark.timeout(0))
    return (
        f"tau2: pytest-timeout's timeout ({timeout:g} s) does not apply to the scenario tests "
        "(a test waits for its scenario, minutes against a hosted model: the timeout lost "
        "them); --tau2-max-duration bounds each scenario"
    )


def _keep_from_network_blocking(config: pytest.Config, items: Sequence[pytest.Item]) -> str | None:
    """Mark ``items`` (scenario tests) with the markers that let them reach the network over
    pytest-socket's ``--disable-socket`` or ``--allow-hosts`` (its ``enable_socket``) and
    pytest-recording's ``--block-network`` (its ``block_network`` with every host allowed: its
    ``allowed_hosts`` are regular expressions); the notice that says so (None: nothing to do).
    A remote endpoint's every request was refused (``Network is disabled``): every scenario
    lost."""
    if not items:
        return None
    plugins = config.pluginmanager
    blocking: dict[str, pytest.MarkDecorator] = {}
    if plugins.has_plugin("socket"):
        for flag, dest in (
            ("--disable-socket", "disable_socket"),
            ("--allow-hosts", "allow_hosts"),
        ):
            if config.getoption(dest, None):
                blocking[f"pytest-socket's {flag}"] = pytest.mark.enable_socket
    if plugins.has_plugin("recording") and config.getoption("block_network", False):
        every_host = pytest.mark.block_network(allowed_hosts=[".*"])
        blocking["pytest-recording's --block-network"] = every_host
    if not blocking:
        return None
    markers = {marker.name: marker for marker in blocking.values()}.values()
    for item in items:
        for marker in markers:
            item.add_marker(marker)
    return (
        f"tau2: {' and '.join(blocking)} {'do' if len(blocking) > 1 else 'does'} not apply "
        "to the scenario tests (their event "
        "loops and their requests to the model endpoints need the network); your other tests "
        "keep it"
    )


def _keep_from_threads(config: pytest.Config, items: Sequence[pytest.Item]) -> str | None:
    """Mark ``items`` (scenario tests) with pytest-run-parallel's markers for one thread and
    one iteration, over its ``--parallel-threads N`` or ``--iterations N``; the notice that
    says so (None: nothing to do). Its threads ran the async test function each in a thread
    of its own: every scenario was lost (``a coroutine was expected, got None``)."""
    if not items or not config.pluginmanager.has_plugin("run-parallel"):
        return None
    threads = str(config.getoption("parallel_threads", 1))
    iterations = config.getoption("iterations", 1)
    given = [
        f"{flag} {value}"
        for flag, value, plural in (
            ("--parallel-threads", threads, threads != "1"),
            ("--iterations", iterations, isinstance(iterations, int) and iterations > 1),
        )
        if plural
    ]
    if not given:
        return None
    for item in items:
        item.add_marker(pytest.mark.thread_unsafe(reason="a scenario runs once per test"))
        item.add_marker(pytest.mark.iterations(1))
    return (
        f"tau2: pytest-run-parallel's {' and '.join(given)} does not apply to the scenario "
        "tests (each runs its scenario once, in one thread); your other tests keep it"
    )


def keep_scenarios_from_plugins(config: pytest.Config, items: Sequence[pytest.Item]) -> list[str]:
    """Keep ``items`` (scenario tests) from what the team's plugins do to every test that
    would break a scenario (reruns, timeouts, network blocking, threads): the notices that
    say so, each once."""
    keeps = (
        _keep_from_reruns,
        _keep_from_timeouts,
        _keep_from_network_blocking,
        _keep_from_threads,
    )
    return [notice for keep in keeps if (notice := keep(config, items)) is not None]
