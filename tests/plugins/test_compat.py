"""Plugins a team has loaded and pytest's own modes, as scenario tests meet them (found by
running the benchmark with pytest-rerunfailures, pytest-timeout, pytest-socket, pytest-repeat,
pytest-flakefinder, pytest-loop, pytest-forked, pytest-testmon, pytest-run-parallel, pytest-split,
``-p no:asyncio``,
``--setup-only``, ``--setup-plan`` and ``--fixtures``).

The plugins' interfaces are stood in for by modules of the same name, holding the options
the benchmark reads (their ``dest`` names are the real plugins'): the refusal is what is
tested. A re-run of a scenario's test is tested through pytest's own protocol, run twice.
"""

from __future__ import annotations

import pytest

from tau2_retail.testing.bench import Bench

from .conftest import usage_errors

pytestmark = pytest.mark.tau2_subprocess

TASKS = "--tau2-tasks=0,10"


def _printing(marker: str, label: str, shown: str) -> str:
    """A stand-in's hook printing each collected test's ``marker`` (``shown`` of it)."""
    return f"""
def pytest_collection_finish(session):
    marked = [item.get_closest_marker("{marker}") for item in session.items]
    print("{label}", [{shown} if marker else None for marker in marked])
"""


RERUNFAILURES = """
def pytest_addoption(parser):
    parser.addoption("--reruns", dest="reruns", type=int, default=None)
    parser.addoption("--force-reruns", dest="force_reruns", type=int, default=None)
    parser.addoption("--reruns-mode", dest="reruns_mode", default="strict")
    parser.addini("reruns", "reruns")

def pytest_configure(config):
    config.addinivalue_line("markers", "flaky(reruns=1): re-run")
""" + _printing("flaky", "FLAKY", "marker.kwargs")

# pytest-retry's plugin is named "pytest-retry"; it puts flaky(retries=N) on every test itself
RETRY = """
class Retry:
    pass

def pytest_addoption(parser):
    parser.addoption("--retries", dest="retries", type=int, default=0)
    parser.addini("retries", "retries", default="0")

def pytest_configure(config):
    config.addinivalue_line("markers", "flaky(retries=1): retry")
    config.pluginmanager.register(Retry(), "pytest-retry")

def pytest_collection_modifyitems(items):
    import pytest
    for item in items:
        item.add_marker(pytest.mark.flaky(retries=2))
""" + _printing("flaky", "FLAKY", "marker.kwargs")

FLAKY = """
def pytest_addoption(parser):
    parser.addoption("--force-flaky", dest="force_flaky", action="store_true", default=False)
"""

REPEAT = """
def pytest_addoption(parser):
    parser.addoption("--count", dest="count", type=int, default=1)
"""

TIMEOUT = """
def pytest_addoption(parser):
    parser.addoption("--timeout", dest="timeout", default=None)
    parser.addini("timeout", "timeout")

def pytest_configure(config):
    config.addinivalue_line("markers", "timeout(seconds): a test's timeout")
""" + _printing("timeout", "TIMEOUT", "marker.args")
TIMEOUT_NOTICE = "tau2: pytest-timeout's timeout ({} s) does not apply to the scenario tests"

# pytest-socket's plugin is named "socket" (a module of that name would be the standard one's)
SOCKET = """
class Socket:
    pass

def pytest_addoption(parser):
    parser.addoption("--disable-socket", dest="disable_socket", action="store_true")
    parser.addoption("--allow-hosts", dest="allow_hosts", default=None)

def pytest_configure(config):
    config.addinivalue_line("markers", "enable_socket(): sockets for this test")
    config.pluginmanager.register(Socket(), "socket")
""" + _printing("enable_socket", "SOCKETS", "True")

FLAKEFINDER = """
def pytest_addoption(parser):
    parser.addoption("--flake-finder", dest="flake_finder_enable", action="store_true")
    parser.addoption("--flake-runs", dest="flake_runs", type=int, default=50)
"""

LOOP = """
def pytest_addoption(parser):
    parser.addoption("--loop", dest="loop", type=int, default=1)
    for unit in ("hours", "minutes", "seconds"):
        parser.addoption(f"--{unit}", dest=unit, type=float, default=0)
"""

FORKED = """
def pytest_addoption(parser):
    parser.addoption("--forked", dest="forked", action="store_true")
"""

BENCHMARK = """
def pytest_addoption(parser):
    parser.addoption("--benchmark-only", dest="benchmark_only", action="store_true")
"""

TESTMON = """
def pytest_addoption(parser):
    for flag in ("testmon", "testmon-noselect", "testmon-nocollect", "testmon-forceselect"):
        parser.addoption(f"--{flag}", dest=flag.replace("-", "_"), action="store_true")
    parser.addoption("--no-testmon", dest="no-testmon", action="store_true")
"""

# pytest-run-parallel's plugin is named "run-parallel"
RUN_PARALLEL = """
class RunParallel:
    pass

def pytest_addoption(parser):
    parser.addoption("--parallel-threads", dest="parallel_threads", default=1)
    parser.addoption("--iterations", dest="iterations", type=int, default=1)

def pytest_configure(config):
    config.addinivalue_line("markers", "thread_unsafe: one thread")
    config.addinivalue_line("markers", "iterations(n): n iterations")
    config.pluginmanager.register(RunParallel(), "run-parallel")
""" + _printing("thread_unsafe", "ONE_THREAD", "marker.kwargs")

# what pytest-split's --splits 2 --group 1 does: a hook of an object registered at configure
# keeps its group of the tests collected (here every second one)
SPLIT = """
import pytest

class Split:
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        config.hook.pytest_deselected(items=items[1::2])
        items[:] = items[::2]

def pytest_configure(config):
    config.pluginmanager.register(Split(), "split")
"""

# pytest-recording's plugin is named "recording"
RECORDING = """
class Recording:
    pass

def pytest_addoption(parser):
    parser.addoption("--block-network", dest="block_network", action="store_true")

def pytest_configure(config):
    config.addinivalue_line("markers", "block_network(allowed_hosts): hosts let through")
    config.pluginmanager.register(Recording(), "recording")
""" + _printing("block_network", "BLOCKS", "marker.kwargs")

NETWORK_BLOCKERS = {"socket": SOCKET, "recording": RECORDING}

HANG_UP = """
END = {"tool_calls": [{"id": "e", "type": "function",
                       "function": {"name": "end_conversation", "arguments": "{}"}}]}

class HangUp:
    def respond(self, messages, tools):
        return END

@pytest.fixture
def tau2_agent():
    return HangUp()
"""

# what any plugin re-running a test does: pytest's protocol for the same item, again
RERUN_TWICE = """
import pytest
from _pytest.runner import runtestprotocol

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for attempt in range(2):
        for report in runtestprotocol(item, nextitem=nextitem, log=False):
            if attempt == 0 and report.failed:
                report.outcome = "rerun"
            item.ihook.pytest_runtest_logreport(report=report)
    return True
"""


@pytest.mark.parametrize(
    ("module", "args", "problem"),
    [
        (None, ["-p", "no:asyncio"], "the scenarios run on pytest-asyncio, which -p no:asyncio"),
        ("repeat", ["--count=3"], "pytest-repeat's --count 3 would run each scenario 3 times"),
        ("rerunfailures", ["--force-reruns=2"], "pytest-rerunfailures' --force-reruns 2"),
        (
            "rerunfailures",
            ["--reruns=1", "--reruns-mode=append"],
            "pytest-rerunfailures' --reruns-mode append",
        ),
        ("flaky", ["--force-flaky"], "flaky's --force-flaky would re-run failed scenarios"),
        (
            "flakefinder",
            ["--flake-finder", "--flake-runs=3"],
            "pytest-flakefinder's --flake-finder (--flake-runs 3) would run each scenario 3",
        ),
        ("loop", ["--loop=2"], "pytest-loop's --loop 2 would run each scenario 2 times"),
        ("loop", ["--minutes=5"], "pytest-loop's --minutes 5 would run each scenario again"),
        ("forked", ["--forked"], "pytest-forked's --forked would run each scenario's test"),
        (
            "benchmark",
            ["--benchmark-only"],
            "pytest-benchmark's --benchmark-only would skip every scenario's test",
        ),
        ("testmon", ["--testmon"], "pytest-testmon's --testmon would deselect the scenarios"),
        (
            "testmon",
            ["--testmon-forceselect", "-k", "tau2"],
            "pytest-testmon's --testmon-forceselect would deselect",
        ),
    ],
)
def test_a_plugin_that_would_make_the_records_wrong_stops_the_run_at_start_up(
    bench: Bench, module: str | None, args: list[str], problem: str
) -> None:
    """All 114 scenarios were lost (``-p no:asyncio``); N tests of a scenario wrote one
    record and the gate passed on the last (``--count``); a re-run scenario made the rate
    best-of-N (``--force-reruns``)."""
    plugin = ["-p", module] if module else []
    if module:
        sources = {"repeat": REPEAT, "flaky": FLAKY, "flakefinder": FLAKEFINDER}
        sources.update(forked=FORKED, testmon=TESTMON, loop=LOOP, benchmark=BENCHMARK)
        source = sources.get(module, RERUNFAILURES)
        bench.pytester.makepyfile(**{module: source})
        bench.pytester.syspathinsert()
    result = bench.run_inprocess(*plugin, *args, TASKS)
    (line,) = usage_errors(result)
    assert problem in line
    assert "drop it for a run of the scenarios" in line
    assert not bench.output_dir.exists()


@pytest.mark.parametrize("how", ["environment", "option"])
def test_plugin_autoloading_off_asks_for_p_asyncio_not_to_drop_a_p_no_asyncio(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 pytest -p tau2_retail`` was told to drop the
    ``-p no:asyncio`` it never passed."""
    args = ["-p", "tau2_retail"]
    if how == "environment":
        monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    else:
        args.insert(0, "--disable-plugin-autoload")

    result = bench.run_inprocess(*args, TASKS)

    assert usage_errors(result) == [
        "ERROR: the scenarios run on pytest-asyncio, which is not loaded: plugin autoloading is "
        "off (PYTEST_DISABLE_PLUGIN_AUTOLOAD or --disable-plugin-autoload); load it first: "
        "`-p asyncio -p xdist -p tau2_retail` (-p xdist to use -n; a -p asyncio after -p "
        "tau2_retail makes pytest warn that asyncio is already imported, an error under "
        "filterwarnings = error)"
    ]
    assert not bench.output_dir.exists()


@pytest.mark.parametrize(
    "args", [["--testmon", "--testmon-noselect"], ["--testmon", "-k", "tau2"], ["--no-testmon"]]
)
def test_testmon_selecting_nothing_out_is_kept(bench: Bench, args: list[str]) -> None:
    """pytest-testmon deselected every scenario of a run of another agent (its code had not
    changed): exit 0, no scenario run. Without its selection (as it reads ``-k`` too), the
    scenarios run."""
    bench.pytester.makepyfile(testmon=TESTMON)
    run = bench.run("-p", "testmon", *args, TASKS, "--co")
    assert run.returncode == pytest.ExitCode.OK, run.output
    assert "2 tests collected" in run.output, run.output


def test_a_team_session_without_scenarios_keeps_those_plugins(bench: Bench) -> None:
    # a plain project: the bench's pytest.ini names pytest-asyncio's keys (strict config)
    bench.pytester.makefile(".ini", pytest="[pytest]\n")
    bench.pytester.makepyfile(test_other="def test_other():\n    pass\n")
    result = bench.pytester.runpytest_inprocess("test_other.py", "-p", "no:asyncio")
    assert result.ret == pytest.ExitCode.OK


def test_plain_reruns_leave_scenario_tests_alone(bench: Bench) -> None:
    """pytest-rerunfailures' ``--reruns 1`` re-ran a failed scenario's test: the oracle played
    the re-run of a ``tau2_agent`` fixture's agent, 114/114. Scenario tests carry the
    plugin's marker for no reruns; without ``--reruns`` they carry nothing."""
    bench.pytester.makepyfile(rerunfailures=RERUNFAILURES)
    rerun = bench.run("-p", "rerunfailures", "--reruns=1", "--co", TASKS)
    assert "FLAKY [{'reruns': 0}, {'reruns': 0}]" in rerun.stdout, rerun.output
    plain = bench.run("-p", "rerunfailures", "--co", TASKS)
    assert "FLAKY [None, None]" in plain.stdout, plain.output


@pytest.mark.parametrize("given", ["option", "environment", "ini"])
def test_a_timeout_for_every_test_leaves_scenario_tests_alone(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    """A team's ``timeout = 60`` for its unit tests lost every scenario that took longer from
    its test's start (pytest-timeout's signal method failed the test mid-conversation; its
    thread method ended the process and the run's summary with it). Scenario tests carry its
    marker for no timeout (the real plugin then sets no timer); without a timeout, nothing."""
    bench.pytester.makepyfile(timeout=TIMEOUT)
    args = ["-p", "timeout", TASKS, "--tau2-user-model=builtin:customer"]
    if given == "option":
        args.append("--timeout=60")
    elif given == "environment":
        monkeypatch.setenv("PYTEST_TIMEOUT", "60")
    else:
        bench.add_ini(timeout="60")
    run = bench.run(*args)
    assert "TIMEOUT [(0,), (0,)]" in run.stdout, run.output
    assert run.stdout.count(TIMEOUT_NOTICE.format(60)) == 1, run.output

    plain = bench.run(*args, "--timeout=0")  # the option first, as the plugin reads them
    assert "TIMEOUT [None, None]" in plain.stdout, plain.output
    assert "pytest-timeout" not in plain.stdout


EVERY_HOST = "{'allowed_hosts': ['.*']}"


@pytest.mark.parametrize(
    ("standin", "args", "flag", "marked"),
    [
        (
            "socket",
            ["--disable-socket"],
            "pytest-socket's --disable-socket",
            "SOCKETS [True, True]",
        ),
        (
            "socket",
            ["--allow-hosts=127.0.0.1"],
            "pytest-socket's --allow-hosts",
            "SOCKETS [True, True]",
        ),
        (
            "recording",
            ["--block-network"],
            "pytest-recording's --block-network",
            f"BLOCKS [{EVERY_HOST}, {EVERY_HOST}]",
        ),
    ],
)
def test_network_blocking_leaves_scenario_tests_alone(
    bench: Bench, standin: str, args: list[str], flag: str, marked: str
) -> None:
    """pytest-socket's ``--disable-socket`` (a team's addopts, for hermetic unit tests) lost
    every scenario: its event loop cannot even be made (``SocketBlockedError``), nor can its
    requests reach the model endpoints; pytest-recording's ``--block-network`` refused every
    request to a remote endpoint (``Network is disabled``). Scenario tests carry the plugin's
    marker that lets them through (the real plugins then do); without blocking, nothing."""
    bench.pytester.makepyfile(**{f"pytest_{standin}_standin": NETWORK_BLOCKERS[standin]})
    common = ["-p", f"pytest_{standin}_standin", TASKS, "--tau2-user-model=builtin:customer"]
    run = bench.run(*common, *args)
    assert marked in run.stdout, run.output
    notice = f"tau2: {flag} does not apply to the scenario tests"
    assert run.stdout.count(notice) == 1, run.output
    plain = bench.run(*common)
    assert f"{marked.split()[0]} [None, None]" in plain.stdout, plain.output
    assert "does not apply to the scenario tests" not in plain.stdout


@pytest.mark.parametrize(
    ("args", "flags"),
    [
        (["--parallel-threads=2"], "--parallel-threads 2"),
        (
            ["--parallel-threads=auto", "--iterations=3"],
            "--parallel-threads auto and --iterations 3",
        ),
    ],
)
def test_pytest_run_parallel_leaves_scenario_tests_alone(
    bench: Bench, args: list[str], flags: str
) -> None:
    """pytest-run-parallel's ``--parallel-threads 2`` ran each scenario's async test in two
    threads of its own: every scenario was lost (``a coroutine was expected, got None``).
    Scenario tests carry its markers for one thread and one iteration; without, nothing."""
    bench.pytester.makepyfile(run_parallel_standin=RUN_PARALLEL)
    common = ["-p", "run_parallel_standin", TASKS, "--tau2-user-model=builtin:customer"]
    run = bench.run(*common, *args)
    once = "{'reason': 'a scenario runs once per test'}"
    assert f"ONE_THREAD [{once}, {once}]" in run.stdout, run.output
    notice = f"tau2: pytest-run-parallel's {flags} does not apply to the scenario tests"
    assert run.stdout.count(notice) == 1, run.output
    plain = bench.run(*common)
    assert "ONE_THREAD [None, None]" in plain.stdout, plain.output
    assert "pytest-run-parallel" not in plain.stdout


def test_a_resume_runs_the_missing_scenarios_of_its_own_split(bench: Bench) -> None:
    """pytest-split's ``--splits 2 --group 1`` on ``--tau2-resume``: the resume deselected the
    complete scenarios first and the split dealt the rest anew, so the group-1 run ran (and
    recorded) scenarios of group 2. The resume deselects after every plugin's selection."""
    bench.pytester.makepyfile(split_standin=SPLIT)
    args = ["-p", "split_standin", "--tau2-tasks=0,1,2,3", "--tau2-user-model=builtin:customer"]
    first = bench.run(*args, "--tau2-run-id=g1")
    assert "2 passed, 2 deselected" in first.output, first.output
    (bench.run_dir("g1") / "tau2_retail__0" / "metrics.json").unlink()
    resumed = bench.run(*args, "--tau2-resume=g1")
    assert "1 passed, 3 deselected" in resumed.output, resumed.output
    assert bench.summary("g1")["counts"]["expected"] == 2
    assert not (bench.run_dir("g1") / "tau2_retail__3").exists()


def test_pytest_retry_leaves_scenario_tests_alone(bench: Bench) -> None:
    """pytest-retry's ``--retries 2`` ran a failed scenario's test again without its scenario:
    the test failed on ``KeyError: 'tau2_outcome'`` in place of its own failure. Its
    ``retries=0`` still retries once; a false ``condition`` does not."""
    bench.pytester.makepyfile(pytest_retry_standin=RETRY)
    retry = bench.run("-p", "pytest_retry_standin", "--retries=2", "--co", TASKS)
    none = "{'retries': 0, 'condition': False}"
    assert f"FLAKY [{none}, {none}]" in retry.stdout, retry.output
    plain = bench.run("-p", "pytest_retry_standin", "--co", TASKS)
    assert "FLAKY [{'retries': 2}, {'retries': 2}]" in plain.stdout, plain.output


def test_a_re_run_test_does_not_run_its_scenario_again(bench: Bench) -> None:
    """Any other plugin re-running a test: the second run of a scenario's test plays nothing
    (not the default oracle in the fixture agent's place), and the scenario counts as lost."""
    bench.pytester.makeconftest(RERUN_TWICE + HANG_UP)
    run = bench.run(
        "--tau2-tasks=0,10", "--tau2-run-id=twice", "--tau2-user-model=builtin:customer"
    )
    assert "runs a second time (a plugin re-running tests?)" in run.output
    assert run.returncode == pytest.ExitCode.TESTS_FAILED
    # each test ran twice: each second run is refused, and each scenario lost
    assert bench.summary("twice")["counts"]["lost"] == 2
    log = (bench.run_dir("twice") / "tau2_retail__0" / "conversation_log.txt").read_text()
    assert "cancel_pending_order" not in log  # the oracle never played (the gold's write)


@pytest.mark.parametrize("mode", ["--setup-plan", "--fixtures", "--fixtures-per-test"])
def test_a_mode_that_runs_no_test_claims_no_run_folder(bench: Bench, mode: str) -> None:
    run = bench.run(mode, TASKS, "--tau2-min-pass-rate=0.5")
    assert run.returncode == pytest.ExitCode.OK, run.output
    assert not bench.output_dir.exists()
    assert "tau2 gate" not in run.output


def test_setup_only_runs_no_scenario(bench: Bench) -> None:
    """``--setup-only`` sets fixtures up without running tests: the scenarios ran (with an
    endpoint, at a cost) and the gate passed with "no tests ran"."""
    run = bench.run("--setup-only", TASKS, "--tau2-min-pass-rate=0.5")
    assert "2 skipped" in run.output, run.output
    assert not bench.output_dir.exists()
    assert "tau2 gate" not in run.output


# what pytest-timeout's signal method does: SIGALRM, then pytest.fail from wherever the main
# thread is (here: the event loop, while the scenario's conversation runs)
SIGNAL_TIMEOUT = """
import asyncio
import signal

import pytest

END = {"tool_calls": [{"id": "e", "type": "function",
                       "function": {"name": "end_conversation", "arguments": "{}"}}]}


class Slow:
    async def respond(self, messages, tools):
        await asyncio.sleep(1.5)
        return END


@pytest.fixture
def tau2_agent():
    return Slow()


def _timeout(signum, frame):
    pytest.fail("Timeout (>0.3s) from pytest-timeout.")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    if "tau2_retail__10" in item.nodeid:
        signal.signal(signal.SIGALRM, _timeout)
        signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        return (yield)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
"""


def test_a_test_stopped_by_a_signal_leaves_no_record_behind(bench: Bench) -> None:
    """pytest-timeout's signal method stopped the test while its scenario ran on: the run
    counted it lost, but its record was written during the next test, so ``summarize``
    disagreed with summary.json and ``--tau2-resume`` did not run it again."""
    bench.pytester.makeconftest(SIGNAL_TIMEOUT)
    args = ("--tau2-tasks=10,12", "--tau2-user-model=builtin:customer", "-p", "no:xdist")
    run = bench.run(*args, "--tau2-run-id=alarm")
    assert "Timeout (>0.3s)" in run.output
    assert bench.summary("alarm")["counts"]["lost"] == 1
    assert not (bench.run_dir("alarm") / "tau2_retail__10" / "metrics.json").exists()
    summarized = bench.python("-m", "tau2_retail", "summarize", str(bench.run_dir("alarm")))
    assert "0 infra errors, 1 lost" in summarized.stdout, summarized.stdout + summarized.stderr
    bench.pytester.makeconftest(SIGNAL_TIMEOUT.replace("0.3)", "30)"))
    resumed = bench.run(*args, "--tau2-resume=alarm")
    assert resumed.returncode == pytest.ExitCode.OK, resumed.output
    assert "1 passed, 1 deselected" in resumed.output
