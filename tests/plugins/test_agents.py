"""Your agent as Python code through pytest: ``--tau2-agent`` and the ``tau2_agent`` fixture,
start-up errors, faults of agent code, and the records that name the agent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tau2_retail.models.agent import AgentIdentity
from tau2_retail.plugins.agents import AgentSupply
from tau2_retail.settings import AgentSource
from tau2_retail.testing.bench import error_lines

from .conftest import Bench

# Tasks whose gold database is the seed: an agent that ends the call at once passes them.
TASKS = "--tau2-tasks=10,12,24"

AGENTS = """\
import os

from tau2_retail import AgentInfraError

END = {"tool_calls": [{"id": "e", "type": "function",
                       "function": {"name": "end_conversation", "arguments": "{}"}}]}
made = []


class Ender:
    name = "ender"
    version = "0.3"

    def respond(self, messages, tools):
        return END


class LoopEnder:
    name = "loop-ender"

    async def converse(self, messages, toolbox):
        toolbox.call("end_conversation", {})
        return ""


class FirstRaises(Ender):
    def __init__(self):
        made.append(self)
        self.first = len(made) == 1

    def respond(self, messages, tools):
        if self.first:
            raise ZeroDivisionError("the router divided by zero")
        return END


class Down(Ender):
    def respond(self, messages, tools):
        raise AgentInfraError("our model gateway is down")


class Nothing:
    pass
"""

FIXTURE = """\
import pytest

from my_agents import Ender


@pytest.fixture(scope="session")
def http_client():
    return object()  # e.g. one shared client


@pytest.fixture
def tau2_agent(http_client):
    assert http_client is not None
    return Ender()
"""

SESSION_FACTORY = """\
import time

import pytest


class Slow:
    name = "slow"

    def respond(self, messages, tools):
        time.sleep(0.2)
        return {"tool_calls": [{"id": "e", "type": "function",
                                "function": {"name": "end_conversation", "arguments": "{}"}}]}


@pytest.fixture(scope="session")
def tau2_agent():
    return Slow  # a factory: one fresh agent per scenario, scenarios still in flight


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    scheduler = item.funcargs.get("tau2_scheduler")
    if scheduler is not None:
        with open("peak.txt", "a") as out:
            out.write(f"{scheduler.peak_in_flight}\\n")
"""


@pytest.fixture
def agents(bench: Bench) -> Bench:
    (bench.path / "my_agents.py").write_text(AGENTS, encoding="utf-8")
    return bench


def _summary(bench: Bench, run_id: str) -> dict[str, object]:
    return json.loads((bench.output_dir / run_id / "summary.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("args", "conftest", "expected"),
    [
        (
            ["--tau2-agent=no_such_pkg.agents:make"],
            None,
            "--tau2-agent: no_such_pkg.agents:make: cannot import 'no_such_pkg.agents': "
            "ModuleNotFoundError: No module named 'no_such_pkg'",
        ),
        (
            ["--tau2-agent=my_agents:Missing"],
            None,
            "--tau2-agent: my_agents:Missing: module 'my_agents' has no attribute 'Missing'",
        ),
        (
            ["--tau2-agent=my_agents:Nothing"],
            None,
            "--tau2-agent: my_agents:Nothing: class Nothing has neither respond(messages, tools)",
        ),
        (
            ["--tau2-agent=my_agents", "-x"],
            None,
            "--tau2-agent: 'my_agents' is not valid for --tau2-agent; expected an import string",
        ),
        (
            ["--tau2-agent=my_agents:Ender", "--tau2-agent-model=gpt-x"],
            None,
            "--tau2-agent: --tau2-agent 'my_agents:Ender' and --tau2-agent-model both name the "
            "agent; give one of them",
        ),
        (
            ["--tau2-agent=my_agents:Ender"],
            FIXTURE,
            "--tau2-agent: --tau2-agent 'my_agents:Ender' and the fixture "
            "conftest.py::tau2_agent both name the agent",
        ),
    ],
    ids=["not-importable", "missing", "no-method", "syntax", "with-model", "with-fixture"],
)
def test_a_bad_agent_stops_the_run_at_start_up_with_one_line(
    agents: Bench, args: list[str], conftest: str | None, expected: str
) -> None:
    if conftest is not None:
        (agents.path / "conftest.py").write_text(conftest, encoding="utf-8")
    result = agents.run(*args, TASKS)
    assert result.ret == 4
    errors = error_lines(result.stderr)
    assert len(errors) == 1
    assert expected in errors[0]
    assert not (agents.output_dir).exists() or not any(agents.output_dir.iterdir())


# an agent as code, named by an option or by a fixture: how the run names it, its source
_CODE_AGENTS = pytest.mark.parametrize(
    ("args", "conftest", "named", "source"),
    [
        (["--tau2-agent=my_agents:Ender"], None, "--tau2-agent", "my_agents:Ender"),
        ([], FIXTURE, "conftest.py::tau2_agent", "conftest.py::tau2_agent"),
    ],
    ids=["import-string", "fixture"],
)


@_CODE_AGENTS
def test_a_code_agent_with_the_default_customer_is_refused_as_an_endpoint_agent_is(
    agents: Bench, args: list[str], conftest: str | None, named: str, source: str
) -> None:
    """Issue 31, item 5: the scripted customer makes a score that does not compare with
    tau2's, whoever the agent is; asked for explicitly, it runs."""
    ini = agents.path / "pytest.ini"
    ini.write_text(ini.read_text().replace("tau2_user_model = builtin:customer\n", ""))
    if conftest is not None:
        (agents.path / "conftest.py").write_text(conftest, encoding="utf-8")
    assert agents.pytester is not None
    agents.pytester.syspathinsert()  # my_agents.py, as `python -m pytest` finds it

    result = agents.run_inprocess("--co", *args, TASKS)

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stderr.str()
    assert f"{named}: the agent is Python code" in text
    assert "the simulated user would be the built-in scripted customer" in text
    assert "--tau2-user-model=builtin:customer to accept the scripted one" in text
    accepted = agents.run_inprocess("--co", *args, TASKS, "--tau2-user-model=builtin:customer")
    assert accepted.ret == pytest.ExitCode.OK


@_CODE_AGENTS
def test_an_endpoint_option_given_with_a_code_agent_is_refused_not_ignored(
    agents: Bench, args: list[str], conftest: str | None, named: str, source: str
) -> None:
    """``--tau2-agent-timeout`` (or a base URL, a temperature) beside an agent given as code
    did nothing, silently, and run_args.json recorded it as if it applied; ``python -m
    tau2_retail run`` refused it, naming a built-in model the run did not use. The ini file's
    stays quiet: it serves every run of a project."""
    if conftest is not None:
        (agents.path / "conftest.py").write_text(conftest, encoding="utf-8")
    assert agents.pytester is not None
    agents.pytester.syspathinsert()

    refused = agents.run_inprocess("--co", *args, TASKS, "--tau2-agent-timeout=5")

    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        f"--tau2-agent-timeout configures an endpoint agent, but the agent is code ({source}), "
        "which calls its model itself: configure the model in the agent's code, and drop the "
        "option" in refused.stderr.str()
    )
    ini = agents.path / "pytest.ini"
    ini.write_text(ini.read_text() + "tau2_agent_timeout = 5\n")
    assert agents.run_inprocess("--co", *args, TASKS).ret == pytest.ExitCode.OK


def test_an_endpoint_option_of_a_role_no_endpoint_plays_is_refused_in_pytest_too(
    agents: Bench,
) -> None:
    """Only ``python -m tau2_retail run`` refused them; a pytest run ignored them silently."""
    refused = agents.run_inprocess("--co", TASKS, "--tau2-judge-timeout=5")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        "--tau2-judge-timeout given without --tau2-judge-model: name the judge model"
        in refused.stderr.str()
    )


def test_the_agent_comes_from_the_environment_too(agents: Bench, monkeypatch) -> None:
    monkeypatch.setenv("TAU2_AGENT", "my_agents:Missing")
    result = agents.run(TASKS)
    assert result.ret == 4
    assert "TAU2_AGENT: my_agents:Missing: module 'my_agents' has no attribute" in result.stderr


@pytest.mark.tau2_subprocess
@pytest.mark.parametrize("style", ["Ender", "LoopEnder"])
def test_an_import_string_agent_runs_and_is_named_in_the_records(
    agents: Bench, xdist: tuple[str, ...], style: str
) -> None:
    result = agents.run(
        *xdist,
        TASKS,
        f"--tau2-agent=my_agents:{style}",
        "--tau2-run-id=imp",
        "--tau2-min-pass-rate=1",
        "--tau2-concurrency=3",
    )
    result.assert_outcomes(passed=3)
    assert result.ret == 0
    described = (
        "my_agents:Ender (ender 0.3)" if style == "Ender" else "my_agents:LoopEnder (loop-ender)"
    )
    result.stdout.fnmatch_lines([f"tau2: agent code {described}; user builtin:customer; *"])
    result.stdout.fnmatch_lines([f"tau2 gate: agent {described}, profile default, *: PASS"])
    summary = _summary(agents, "imp")
    assert summary["models"]["agent"] == described  # type: ignore[index]
    run_args = json.loads((agents.output_dir / "imp" / "run_args.json").read_text())
    assert run_args["configuration"]["agent"]["code"]["source"] == f"my_agents:{style}"
    assert run_args["configuration"]["settings"]["agent"] == f"my_agents:{style}"
    # no model played the agent: the default model's name is not recorded as if one did
    assert run_args["configuration"]["settings"]["agent_model"] is None
    assert run_args["configuration"]["sources"]["agent_model"] == "--tau2-agent"
    assert "OFFLINE SELF-CHECK" not in result.stdout


@pytest.mark.tau2_subprocess
def test_a_fixture_override_gives_each_scenario_its_agent(
    agents: Bench, xdist: tuple[str, ...]
) -> None:
    (agents.path / "conftest.py").write_text(FIXTURE, encoding="utf-8")
    result = agents.run(*xdist, TASKS, "--tau2-run-id=fx", "--tau2-min-pass-rate=1")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["tau2: agent code conftest.py::tau2_agent; *"])
    # name and version are seen when a scenario had the agent (on a worker, too)
    result.stdout.fnmatch_lines(
        ["tau2 gate: agent conftest.py::tau2_agent (ender 0.3), profile default, *: PASS"]
    )
    configuration = _summary(agents, "fx")["configuration"]
    assert configuration["settings"]["agent_model"] is None  # type: ignore[index]
    assert configuration["sources"]["agent_model"] == "conftest.py::tau2_agent"  # type: ignore[index]
    code = configuration["agent"]["code"]  # type: ignore[index]
    assert code == {
        "source": "conftest.py::tau2_agent",
        "kind": "fixture",
        "name": "ender",
        "version": "0.3",
    }


LOOP_FIXTURE = """\
import pytest

from my_agents import LoopEnder


@pytest.fixture
def tau2_agent():
    return LoopEnder()
"""


def _team_tests(bench: Bench, conftest: str) -> None:
    """The team's own tests in ``tests/``, with ``conftest`` there."""
    (bench.path / "tests").mkdir()
    (bench.path / "tests" / "conftest.py").write_text(conftest, encoding="utf-8")
    (bench.path / "tests" / "test_mine.py").write_text("def test_mine():\n    pass\n")


@pytest.mark.tau2_subprocess
def test_a_fixture_in_a_conftest_that_does_not_reach_the_scenarios_is_refused(
    agents: Bench,
) -> None:
    """pytest gives ``tests/conftest.py``'s fixtures to ``tests/`` only: the scenarios got the
    built-in oracle while the records named the team's fixture (100 %, gate PASS)."""
    _team_tests(agents, FIXTURE)

    refused = agents.run("-n", "0", "tests", "test_scenarios.py", TASKS)

    assert refused.ret == pytest.ExitCode.USAGE_ERROR, refused.stdout.str()
    assert (
        "tests/conftest.py::tau2_agent does not reach the scenarios: pytest gives a conftest's "
        "fixtures only to the tests below its folder" in refused.stderr.str()
    )
    assert not list(agents.output_dir.glob("*/*/metrics.json"))
    # the team's own tests alone: as if the plugin were not there
    assert agents.run("-n", "0", "tests", output_dir=False).ret == pytest.ExitCode.OK
    # another agent named: it plays, the fixture plays no part (was "both name the agent")
    named = agents.run(
        "-n", "0", "tests", "test_scenarios.py", TASKS, "--tau2-agent=my_agents:Ender"
    )
    named.assert_outcomes(passed=4)
    named.stdout.fnmatch_lines(["tau2: agent code my_agents:Ender (ender 0.3); *"])


@pytest.mark.tau2_subprocess
def test_the_run_names_the_fixture_pytest_gives_the_scenarios(agents: Bench) -> None:
    """A plugin module's fixture reaches every test (the run said builtin:oracle, OFFLINE
    SELF-CHECK, while the team's agent played); of two conftests, the rootdir's reaches the
    scenarios (the records named the other)."""
    (agents.path / "my_fixtures.py").write_text(FIXTURE, encoding="utf-8")
    (agents.path / "conftest.py").write_text('pytest_plugins = ["my_fixtures"]\n')

    by_plugin = agents.run("-n", "0", TASKS, "--tau2-run-id=pm")

    by_plugin.assert_outcomes(passed=3)
    by_plugin.stdout.fnmatch_lines(["tau2: agent code my_fixtures.py::tau2_agent; *"])
    assert "OFFLINE SELF-CHECK" not in by_plugin.stdout.str()

    # the rootdir's conftest overrides its own plugin module's fixture (registered after it)
    (agents.path / "conftest.py").write_text('pytest_plugins = ["my_fixtures"]\n' + LOOP_FIXTURE)
    both = agents.run("-n", "0", TASKS, "--tau2-run-id=both")
    both.assert_outcomes(passed=3)
    code = _summary(agents, "both")["configuration"]["agent"]["code"]  # type: ignore[index]
    assert (code["source"], code["name"]) == ("conftest.py::tau2_agent", "loop-ender")

    (agents.path / "conftest.py").write_text(FIXTURE, encoding="utf-8")
    _team_tests(agents, LOOP_FIXTURE)
    two = agents.run("-n", "0", "tests", "test_scenarios.py", TASKS, "--tau2-run-id=two")
    two.assert_outcomes(passed=4)
    code = _summary(agents, "two")["configuration"]["agent"]["code"]  # type: ignore[index]
    assert (code["source"], code["name"]) == ("conftest.py::tau2_agent", "ender")


@pytest.mark.tau2_subprocess
def test_a_plugin_module_given_with_p_is_refused_saying_how_to_load_it(agents: Bench) -> None:
    """A module given with ``-p`` is registered before the plugin's own ``tau2_agent``, which
    pytest then gives the scenarios: the run named the team's fixture at start-up, then every
    scenario was lost ("does not reach ...: define it ... in a plugin module", which it was)."""
    package = agents.path / "team_plugins"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "fixtures.py").write_text(FIXTURE, encoding="utf-8")

    refused = agents.run("-n", "0", "-p", "team_plugins.fixtures", TASKS)

    assert refused.ret == pytest.ExitCode.USAGE_ERROR, refused.stdout.str()
    assert (
        "team_plugins/fixtures.py::tau2_agent does not reach the scenarios: the plugin module "
        "team_plugins.fixtures was loaded before tau2_retail (with -p, or by an entry point)"
        in refused.stderr.str()
    )
    assert 'pytest_plugins = ["team_plugins.fixtures"], without -p' in refused.stderr.str()
    assert not list(agents.output_dir.glob("*/*/metrics.json"))
    # loaded as the message says, or after the plugin: the team's agent plays (a module in a
    # folder of its own is no conftest: its fixtures reach every test)
    (agents.path / "conftest.py").write_text('pytest_plugins = ["team_plugins.fixtures"]\n')
    for run_id, args in (
        ("pp", ()),
        ("late", ("-p", "tau2_retail", "-p", "team_plugins.fixtures")),
    ):
        loaded = agents.run("-n", "0", *args, TASKS, f"--tau2-run-id={run_id}")
        loaded.assert_outcomes(passed=3)
        loaded.stdout.fnmatch_lines(["tau2: agent code team_plugins/fixtures.py::tau2_agent; *"])


@pytest.mark.tau2_subprocess
def test_an_ini_agent_that_cannot_load_stops_only_a_session_with_scenarios(agents: Bench) -> None:
    """The ini file applies to every pytest run of the project: an agent whose framework only
    the benchmark's job installs stopped the team's unit tests at start-up (exit 4)."""
    (agents.path / "framework_agent.py").write_text("import some_agent_framework\n")
    ini = agents.path / "pytest.ini"
    ini.write_text(ini.read_text() + "tau2_agent = framework_agent:Bot\n")
    _team_tests(agents, "")

    for xdist in (("-n", "0"), ("-n", "2")):
        own = agents.run(*xdist, "tests", output_dir=False)
        assert own.ret == pytest.ExitCode.OK, own.stderr.str()
        own.assert_outcomes(passed=1)

    scenarios = agents.run("-n", "2", "tests", "test_scenarios.py", output_dir=False)
    assert scenarios.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        "ini tau2_agent: framework_agent:Bot: cannot import 'framework_agent': "
        "ModuleNotFoundError: No module named 'some_agent_framework'" in scenarios.stderr.str()
    )
    assert not agents.output_dir.exists()


def test_a_scenario_given_another_fixture_than_the_run_named_fails_saying_which(
    tmp_path: Path,
) -> None:
    """The check at each scenario (a conftest pytest loads only while collecting is not seen
    at start-up): a record never credits an agent that did not play."""
    named = AgentSource(
        identity=AgentIdentity(source="tests/conftest.py::tau2_agent", fixture=True)
    )
    supply = AgentSupply(named, tmp_path)
    with pytest.raises(pytest.fail.Exception, match="does not reach the scenarios"):
        supply.accept("t1", None)

    late = AgentSupply(None, tmp_path)
    late.fixture_given = "pkg/conftest.py::tau2_agent"
    with pytest.raises(pytest.fail.Exception) as failed:
        late.accept("t1", object())
    assert (
        "get the tau2_agent fixture of pkg/conftest.py::tau2_agent, but the run started "
        "with the agent model" in str(failed.value)
    )

    supply.fixture_given = "tests/conftest.py::tau2_agent"
    supply.accept("t1", None)  # the fixture the run named
    assert supply.mode == "configured"


@pytest.mark.tau2_subprocess
def test_a_session_scoped_factory_fixture_keeps_scenarios_in_flight(agents: Bench) -> None:
    (agents.path / "conftest.py").write_text(SESSION_FACTORY, encoding="utf-8")
    result = agents.run("-n", "0", TASKS, "--tau2-concurrency=3", "--tau2-run-id=sf")
    result.assert_outcomes(passed=3)
    peaks = [int(x) for x in (agents.path / "peak.txt").read_text().split()]
    assert max(peaks) == 3


@pytest.mark.tau2_subprocess
def test_an_agent_that_raises_fails_its_scenario_not_the_run(
    agents: Bench, xdist: tuple[str, ...]
) -> None:
    # -n 0 so that "the first agent made" is one scenario of the run
    result = agents.run("-n", "0", TASKS, "--tau2-agent=my_agents:FirstRaises", "--tau2-run-id=r")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*CLEAN_EXIT failed: the conversation ended with agent_error (agent: respond() raised "
            "ZeroDivisionError: the router divided by zero), not agent_exit",
            "*The agent raised:",
            "*Traceback (most recent call last):",
            '*raise ZeroDivisionError("the router divided by zero")',
        ]
    )
    traceback = list((agents.output_dir / "r").glob("*/agent_traceback.txt"))
    assert len(traceback) == 1
    assert "ZeroDivisionError: the router divided by zero" in traceback[0].read_text()


@pytest.mark.tau2_subprocess
def test_agent_infra_error_is_excluded_and_resumed_with_the_same_agent_only(
    agents: Bench,
) -> None:
    first = agents.run("-n", "0", TASKS, "--tau2-agent=my_agents:Down", "--tau2-run-id=inf")
    first.assert_outcomes(errors=3)
    first.stdout.fnmatch_lines(["*Tau2InfraError: infra_error: agent: our model gateway is down*"])
    other = agents.run("-n", "0", TASKS, "--tau2-agent=my_agents:Ender", "--tau2-resume=inf")
    assert other.ret == 4
    assert "agent_code: stored 'my_agents:Down', now 'my_agents:Ender'" in other.stderr
    # the same agent, its backend back (here: the module changed under the same name)
    source = (agents.path / "my_agents.py").read_text()
    (agents.path / "my_agents.py").write_text(
        source.replace('raise AgentInfraError("our model gateway is down")', "return END")
    )
    again = agents.run("-n", "0", TASKS, "--tau2-agent=my_agents:Down", "--tau2-resume=inf")
    again.assert_outcomes(passed=3)
