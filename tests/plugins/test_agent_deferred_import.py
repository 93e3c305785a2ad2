"""An agent the ini file or the environment names is imported only by a session that collects a
scenario: a team's own test sessions (``pytest tests``) never import it, nor call its factory.

A session given a ``--tau2-*`` option imports it at start-up (tests/plugins/test_agents.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tau2_retail.errors import ConfigError
from tau2_retail.models.agent import AgentIdentity
from tau2_retail.plugins.agents import AgentSupply
from tau2_retail.settings import AgentSource

from .conftest import Bench

# writes where it was imported and each call of its factory, in the folder pytest runs in
AGENT = """\
import os

with open("agent-log.txt", "a") as log:
    log.write(f"import {os.getpid()}\\n")

END = {"tool_calls": [{"id": "e", "type": "function",
                       "function": {"name": "end_conversation", "arguments": "{}"}}]}


class Ender:
    name = "ender"
    version = "0.3"

    def respond(self, messages, tools):
        return END


def make():
    with open("agent-log.txt", "a") as log:
        log.write(f"factory {os.getpid()}\\n")
    return Ender()
"""

WORKERS = pytest.mark.parametrize("workers", ["0", "2"], ids=["one-process", "two-workers"])


def _log(bench: Bench) -> list[str]:
    log = bench.path / "agent-log.txt"
    return log.read_text(encoding="utf-8").split() if log.exists() else []


@pytest.fixture
def named(bench: Bench, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Bench:
    """The project's agent module, named by the ini file or (``env``) by ``TAU2_AGENT``; the
    team's own tests in ``tests/``."""
    (bench.path / "lazy_agent.py").write_text(AGENT, encoding="utf-8")
    if getattr(request, "param", "ini") == "env":
        monkeypatch.setenv("TAU2_AGENT", "lazy_agent:make")  # runs get this environment
    else:
        bench.add_ini(tau2_agent="lazy_agent:make")
    (bench.path / "tests").mkdir()
    (bench.path / "tests" / "test_mine.py").write_text("def test_mine():\n    pass\n")
    return bench


@pytest.mark.tau2_subprocess
@WORKERS
@pytest.mark.parametrize("named", ["ini", "env"], indirect=True)
def test_a_session_without_scenarios_never_imports_the_agent(named: Bench, workers: str) -> None:
    own = named.run("-n", workers, "tests", output_dir=False)

    assert own.ret == pytest.ExitCode.OK, own.output
    own.assert_outcomes(passed=1)
    assert _log(named) == []  # not imported, no factory called
    assert "tau2:" not in own.output


@pytest.mark.tau2_subprocess
@WORKERS
def test_a_session_collecting_scenarios_imports_it_and_runs_it(named: Bench, workers: str) -> None:
    # every setting from the ini file, none on the command line
    named.add_ini(tau2_tasks="10,12,24", tau2_run_id="lazy", tau2_output_dir="runs")

    run = named.run("-n", workers, output_dir=False)

    run.assert_outcomes(passed=3)
    assert run.ret == pytest.ExitCode.OK, run.output
    # imported before the header, which names the agent by its attributes
    run.stdout.fnmatch_lines(["tau2: agent code lazy_agent:make (ender 0.3); *"])
    log = _log(named)
    assert log.count("import") >= 1
    assert log.count("factory") >= 3  # one per scenario, after the checks at the import
    configuration = json.loads(Path(named.path / "runs" / "lazy" / "run_args.json").read_text())[
        "configuration"
    ]
    assert configuration["agent"]["code"] == {
        "source": "lazy_agent:make",
        "kind": "import",
        "name": "ender",
        "version": "0.3",
    }
    assert configuration["sources"]["agent"] == "ini tau2_agent"


@pytest.mark.tau2_subprocess
def test_a_tau2_option_imports_it_at_start_up_even_without_scenarios(named: Bench) -> None:
    own = named.run("-n", "0", "tests", "--tau2-trials=1", output_dir=False)

    own.assert_outcomes(passed=1)
    assert _log(named).count("import") == 1


def test_a_scenario_never_plays_another_agent_in_place_of_one_not_imported(
    tmp_path: Path,
) -> None:
    """A process whose import failed (the controller stops the session at its collection)
    raises rather than handing the scenario the agent model."""
    pending = AgentSource(identity=AgentIdentity(source="lazy_agent:make"), pending=True)
    supply = AgentSupply(pending, tmp_path)
    assert not pending.is_fixture
    with pytest.raises(ConfigError, match="the agent lazy_agent:make was not imported"):
        supply.runner("t1")
