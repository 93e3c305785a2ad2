"""Settings every pytest run of a project reads (its ini file, the environment, a ``tau2_agent``
fixture) stop only a session that collects a scenario.

A team's `pyproject.toml` names its agent and customer models for the benchmark, its CI job of
unit tests has no key, its `conftest.py` overrides ``tau2_agent``, its nightly run has a fixed
run id: its own tests (``pytest tests``) must still run, with the plugin silent. The same
problem stops a session that collects a scenario (exit 4, the same one line as at start-up,
before any scenario runs), and a session given a ``--tau2-*`` option is a benchmark run: it
stops at start-up, scenarios or not.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .conftest import Bench

OTHER_TEST = "def test_other():\n    assert 1 + 1 == 2\n"

AGENT_FIXTURE = """\
import pytest


class Agent:
    def respond(self, messages, tools):
        return "Goodbye."


@pytest.fixture
def tau2_agent():
    return Agent()
"""


def _key_unset(bench: Bench) -> str:
    # a host that needs a key (a loopback one needs none); .invalid names never resolve, and
    # the run stops before any request
    bench.add_ini(
        tau2_agent_model="my-agent",
        tau2_agent_base_url="https://models.invalid/v1",
        tau2_agent_api_key_env="TAU2_TEST_AGENT_KEY_NEVER_SET",
    )
    return "ini tau2_agent_model: the agent model 'my-agent': https://models.invalid/v1 needs "


def _replay_cache_missing(bench: Bench) -> str:
    bench.add_ini(tau2_cache="missing.sqlite", tau2_cache_mode="replay")
    return "ini tau2_cache: "


def _agent_fixture_and_scripted_customer(bench: Bench) -> str:
    ini = bench.path / "pytest.ini"
    text = ini.read_text(encoding="utf-8")
    assert "tau2_user_model = builtin:customer\n" in text
    ini.write_text(text.replace("tau2_user_model = builtin:customer\n", ""), encoding="utf-8")
    bench.pytester.makeconftest(AGENT_FIXTURE)
    return "conftest.py::tau2_agent: the agent is Python code (conftest.py::tau2_agent), but "


def _run_id_taken(bench: Bench) -> str:
    bench.add_ini(tau2_output_dir="runs", tau2_run_id="nightly")
    (bench.path / "runs" / "nightly").mkdir(parents=True)
    return "--tau2-run-id nightly: "


PROBLEMS: dict[str, Callable[[Bench], str]] = {
    "key-unset": _key_unset,
    "agent-fixture-with-scripted-customer": _agent_fixture_and_scripted_customer,
    "run-id-taken": _run_id_taken,
    "replay-cache-missing": _replay_cache_missing,
}


def _error_lines(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stderr.lines if line.startswith("ERROR: ")]


@pytest.mark.parametrize("make", PROBLEMS.values(), ids=PROBLEMS.keys())
def test_a_session_without_scenarios_stays_silent(
    bench: Bench, make: Callable[[Bench], str]
) -> None:
    make(bench)
    bench.pytester.makepyfile(test_other=OTHER_TEST)
    before = sorted(bench.path.rglob("*"))

    result = bench.run_inprocess("test_other.py", "-p", "no:cacheprovider", output_dir=False)

    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1)
    output = result.stdout.str() + result.stderr.str()
    assert "tau2:" not in output, output
    assert "tau2 retail" not in output, output
    created = [path for path in sorted(bench.path.rglob("*")) if path not in before]
    assert not [path for path in created if "__pycache__" not in path.parts], created


@pytest.mark.parametrize("make", PROBLEMS.values(), ids=PROBLEMS.keys())
def test_a_session_collecting_a_scenario_stops_before_it_runs(
    bench: Bench, make: Callable[[Bench], str]
) -> None:
    problem = make(bench)

    # no --tau2-* option: the settings are all the ini file's, the environment's, a fixture's
    result = bench.run_inprocess("test_scenarios.py", output_dir=False)

    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    (line,) = _error_lines(result)
    assert line.startswith(f"ERROR: {problem}"), line
    assert "collected 114 items" in result.stdout.str()  # after collection, before any test
    result.assert_outcomes()


def test_a_tau2_option_makes_the_session_a_run_even_without_scenarios(bench: Bench) -> None:
    problem = _key_unset(bench)
    bench.pytester.makepyfile(test_other=OTHER_TEST)

    result = bench.run_inprocess("test_other.py", "--tau2-trials=1", output_dir=False)

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = _error_lines(result)
    assert line.startswith(f"ERROR: {problem}"), line
    assert "collected" not in result.stdout.str()  # at start-up, as every bad option


def test_under_xdist_the_controller_stops_the_session_before_a_scenario_runs(
    bench: Bench,
) -> None:
    problem = _key_unset(bench)

    run = bench.run("-n", "2", output_dir=False)

    assert run.ret == pytest.ExitCode.USAGE_ERROR, run.output
    assert [line for line in run.output.splitlines() if line.startswith(f"ERROR: {problem}")]
    assert "passed" not in run.stdout
    assert "failed" not in run.stdout
    assert not (bench.path / "tau2_runs").exists()  # nothing claimed, nothing written
