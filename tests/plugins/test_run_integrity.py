"""What a CI job and a person trust: start-up refusals (defaults, run ids, resume mismatches),
TOML values, a silent plugin without scenarios, junit XML, and the gate against a baseline."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path

import pytest

from tau2_retail import codec
from tau2_retail.cli.main import main
from tau2_retail.data.tasks import Task
from tau2_retail.plugins.hints import NAMED_NO_SCENARIO_HINT, NO_SCENARIO_HINT
from tau2_retail.results.records import RunArgs, RunConfiguration

from .conftest import CHAT, SEED_DB_TASKS, Bench, ScriptedEndpoint


def error_text(result: pytest.RunResult) -> str:
    return result.stderr.str() + result.stdout.str()


def refusal(result: pytest.RunResult) -> str:
    """The output of a run refused at start-up, after asserting its exit code (4)."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, error_text(result)
    return error_text(result)


# -- start-up refusals ---------------------------------------------------------------------------


def test_an_endpoint_agent_with_the_default_customer_is_refused(bench: Bench) -> None:
    ini = bench.path / "pytest.ini"
    ini.write_text(ini.read_text().replace("tau2_user_model = builtin:customer\n", ""))

    result = bench.run_inprocess("--co", "--tau2-agent-model=my-agent")

    text = refusal(result)
    assert "--tau2-agent-model: the agent 'my-agent' is an endpoint" in text
    assert "--tau2-user-model=builtin:customer to accept the scripted one" in text
    # asked for explicitly, it runs (the agent's endpoint said to take no key: OpenAI's
    # default base URL without a key would stop the run at start-up)
    accepted = bench.run_inprocess(
        "--co",
        "--tau2-agent-model=my-agent",
        "--tau2-agent-api-key-env=none",
        "--tau2-user-model=builtin:customer",
    )
    assert accepted.ret == pytest.ExitCode.OK


def test_an_existing_run_id_is_refused_unless_resuming(bench: Bench) -> None:
    (bench.output_dir / "dup").mkdir(parents=True)

    result = bench.run_inprocess("--co", "--tau2-run-id=dup")

    assert "continue it with --tau2-resume dup, or choose a new run id" in refusal(result)


def _stored_run(
    bench: Bench,
    run_id: str,
    *,
    agent: str,
    tasks: list[str],
    trials: int,
    shard: list[int] | None = None,
    profile: str | None = None,
    judge: str | None = None,
) -> None:
    run_dir = bench.run_dir(run_id)
    run_dir.mkdir(parents=True)
    settings = {"tasks": tasks, "trials": trials, "seed": 300, "split": "base", "max_steps": 200}
    if shard is not None:
        settings["shard"] = shard
    if profile is not None:
        settings["profile"] = profile
    stored = RunArgs(
        argv=("pytest",),
        configuration=RunConfiguration.of_models(
            agent=agent, judge=judge, run_id=run_id, settings=settings
        ),
        trials=trials,
        expected=(),
        versions={},
    )
    (run_dir / "run_args.json").write_text(json.dumps(codec.encode(stored)), encoding="utf-8")


def test_resume_refuses_other_models_naming_the_keys_and_the_fix(bench: Bench) -> None:
    _stored_run(bench, "old", agent="builtin:noop", tasks=["0"], trials=1)

    result = bench.run_inprocess("--co", "--tau2-resume=old", "--tau2-tasks=0,5")

    text = refusal(result)
    assert "agent_model: stored 'builtin:noop', now 'builtin:oracle'" in text
    assert "tasks: stored ['0'], now ['0', '5']" in text
    assert "resume with the stored settings" in text


def test_resume_without_the_judge_says_the_judge_must_be_given_again(bench: Bench) -> None:
    """The fix named only the agent and the customer; the judge is not adopted either."""
    _stored_run(bench, "judged", agent="builtin:oracle", judge="gpt-x", tasks=["0"], trials=1)

    text = refusal(bench.run_inprocess("--co", "--tau2-resume=judged"))

    assert "judge_model: stored 'gpt-x', now None" in text
    assert "the agent, the customer and the judge are not stored as options" in text


def test_resume_reads_tasks_and_trials_from_the_stored_run(bench: Bench) -> None:
    _stored_run(bench, "old", agent="builtin:oracle", tasks=["0", "5"], trials=2)

    result = bench.run_inprocess("--co", "-q", "--tau2-resume=old")

    assert result.ret == pytest.ExitCode.OK, error_text(result)
    collected = [line for line in result.stdout.lines if "::test_tau2_retail[" in line]
    assert [line.rpartition("[")[2] for line in collected] == [
        "tau2_retail__0-trial1]",
        "tau2_retail__0-trial2]",
        "tau2_retail__5-trial1]",
        "tau2_retail__5-trial2]",
    ]


def test_resume_of_a_shard_keeps_its_share(bench: Bench) -> None:
    tasks = ["0", "1", "10", "12"]
    _stored_run(bench, "s2", agent="builtin:oracle", tasks=tasks, trials=1, shard=[2, 2])

    resumed = bench.run_inprocess("--co", "-q", "--tau2-resume=s2")
    share = bench.run_inprocess("--co", "-q", "--tau2-tasks=0,1,10,12", "--tau2-shard=2/2")

    assert resumed.ret == pytest.ExitCode.OK, error_text(resumed)
    collected = [line for line in resumed.stdout.lines if "::test_tau2_retail[" in line]
    assert collected == [line for line in share.stdout.lines if "::test_tau2_retail[" in line]
    assert len(collected) == 2


def test_resume_refuses_another_version_of_the_plugin(bench: Bench) -> None:
    """A resume after an upgrade mixed the scores of two versions in one run, and the records
    named only the new one."""
    _stored_run(bench, "old", agent="builtin:oracle", tasks=["0"], trials=1)
    path = bench.run_dir("old") / "run_args.json"
    stored = json.loads(path.read_text("utf-8"))
    stored["versions"] = {"tau2-retail-pytest": "0.0.1"}
    path.write_text(json.dumps(stored), encoding="utf-8")

    text = refusal(bench.run_inprocess("--co", "--tau2-resume=old"))

    assert "the stored run's scenarios were scored by tau2-retail-pytest 0.0.1, this is" in text
    assert "install tau2-retail-pytest==0.0.1 to resume it, or start a new run" in text


def test_resume_refuses_another_profile(bench: Bench) -> None:
    _stored_run(bench, "old", agent="builtin:oracle", tasks=["0"], trials=1, profile="tau2")

    result = bench.run_inprocess("--co", "--tau2-resume=old", "--tau2-profile=default")

    assert "profile: stored 'tau2', now 'default'" in refusal(result)


def test_resume_continues_in_the_stored_profile_on_every_worker(bench: Bench) -> None:
    _stored_run(bench, "old", agent="builtin:oracle", tasks=["0", "10"], trials=1, profile="tau2")

    result = bench.run("-n", "2", "--tau2-resume=old")

    assert result.ret == pytest.ExitCode.OK, result.output
    assert "tau2: profile tau2: upstream tau2-bench's prompts" in result.stdout
    for scenario in ("tau2_retail__0", "tau2_retail__10"):
        metrics = bench.metrics("old", scenario)
        assert (metrics["profile"], metrics["stop_reason"]) == ("tau2", "user_stop")
    assert bench.summary("old")["profile"] == "tau2"


def _toml_project(
    bench: Bench, *settings: str, file: str = "pytest.toml", table: str = "pytest"
) -> None:
    """The project configured by a TOML file with these ``key = value`` lines (pytest's native
    table by default; ``table="tool.pytest.ini_options"`` in a ``pyproject.toml``)."""
    (bench.path / "pytest.ini").unlink()
    (bench.path / file).write_text(
        f"[{table}]\n"
        'testpaths = ["test_scenarios.py"]\n'
        'asyncio_default_fixture_loop_scope = "function"\n'
        'addopts = ["-p", "no:syrupy", "-p", "no:cacheprovider"]\n'
        + "".join(f"{line}\n" for line in settings),
        encoding="utf-8",
    )


def test_toml_numbers_and_booleans_are_accepted(bench: Bench) -> None:
    _toml_project(
        bench,
        "tau2_trials = 2",
        "tau2_agent_notes = false",
        "tau2_max_duration = 30.5",
        "tau2_min_pass_rate = 1",
    )

    result = bench.run_inprocess("--co", "-q", "--tau2-tasks=3")

    assert result.ret == pytest.ExitCode.OK, error_text(result)
    assert sum("tau2_retail__3-trial" in line for line in result.stdout.lines) == 2


_INI_OPTIONS = {"file": "pyproject.toml", "table": "tool.pytest.ini_options"}


def test_a_toml_array_of_task_ids_is_read_without_pytests_deprecation_lines(
    bench: Bench,
) -> None:
    """pytest 9.1+ warns of an array under a string key; the task ids' array is what a TOML
    user writes, and is read as the ids (no warning lines before the run)."""
    _toml_project(bench, 'tau2_tasks = ["3", "5"]', **_INI_OPTIONS)

    result = bench.run_inprocess("--co", "-q")

    assert result.ret == pytest.ExitCode.OK, error_text(result)
    collected = [line for line in result.stdout.lines if "tau2_retail__" in line]
    assert [line.split("[")[-1] for line in collected] == ["tau2_retail__3]", "tau2_retail__5]"]
    assert "PytestRemovedIn10Warning" not in error_text(result)


def test_a_toml_array_for_a_one_value_setting_is_refused_naming_it(bench: Bench) -> None:
    _toml_project(bench, 'tau2_agent_model = ["a", "b"]', **_INI_OPTIONS)

    output = refusal(bench.run_inprocess("--co", "-q", "--tau2-tasks=3"))

    assert (
        "ini tau2_agent_model: the TOML array ['a', 'b'] is not valid for --tau2-agent-model; "
        "write one value, as a string"
    ) in output
    assert "PytestRemovedIn10Warning" not in output


def test_a_toml_number_is_accepted_by_every_numeric_setting(bench: Bench) -> None:
    # the ini type came from sampling each parser with "1": --tau2-max-reply-bytes (>= 1024) and
    # --tau2-regression-alpha (< 1) refused their TOML numbers; now it is the declared type
    _toml_project(bench, "tau2_max_reply_bytes = 2048", "tau2_regression_alpha = 0.05")

    result = bench.run_inprocess("--co", "-q", "--tau2-tasks=3")

    assert result.ret == pytest.ExitCode.OK, error_text(result)


def test_the_plugin_is_silent_without_scenarios(bench: Bench) -> None:
    bench.pytester.makepyfile(test_other="def test_other():\n    pass\n")

    result = bench.run_inprocess("test_other.py", output_dir=False)

    assert result.ret == pytest.ExitCode.OK
    assert not [line for line in result.stdout.lines if line.startswith("tau2")]
    assert "tau2 retail" not in result.stdout.str()
    assert not bench.output_dir.exists()


def test_k_tau2_retail_in_a_repository_without_the_scenarios_says_to_add_pyargs(
    bench: Bench,
) -> None:
    """Issue 31, item 6: ``pytest -k tau2_retail`` in a team's repository deselected their
    tests and exited 5 without a word; the scenarios are collected with ``--pyargs``."""
    bench.pytester.makepyfile(test_other="def test_other():\n    pass\n")

    result = bench.run_inprocess("test_other.py", "-k", "tau2_retail", output_dir=False)

    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert NO_SCENARIO_HINT in result.stdout.lines
    assert "--pyargs tests_tau2_retail" in NO_SCENARIO_HINT
    # a selection that does not mean the benchmark gets no hint
    other = bench.run_inprocess("test_other.py", "-k", "nothing_matches", output_dir=False)
    assert other.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert NO_SCENARIO_HINT not in other.stdout.lines


# what pytest-picked's --picked does: the paths to collect become the files git shows changed
PICKED = """
def pytest_configure(config):
    config.args = ["test_other.py"]
"""


def test_a_plugin_replacing_the_named_benchmark_is_named_in_the_hint(bench: Bench) -> None:
    """pytest-picked's ``--picked`` replaced ``--pyargs tests_tau2_retail`` with the changed
    files: no scenario ran (exit 5), and the hint said to add the ``--pyargs`` given."""
    bench.pytester.makepyfile(test_other="def test_other():\n    pass\n", picked_standin=PICKED)
    bench.pytester.syspathinsert()

    result = bench.run_inprocess("-p", "picked_standin", "--pyargs", "tests_tau2_retail")

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert NAMED_NO_SCENARIO_HINT in result.stdout.lines
    assert NO_SCENARIO_HINT not in result.stdout.lines


@pytest.mark.tau2_subprocess
@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize("team_test", ["pass", "assert False"])
def test_a_tau2_option_on_the_teams_tests_alone_says_to_add_pyargs(
    bench: Bench, workers: str, team_test: str
) -> None:
    """``pytest test_other.py --tau2-tasks=0``: the team's tests ran (exit 0 or 1) and no
    scenario did; the option shows the benchmark was meant (under xdist too, where only the
    workers collect)."""
    bench.pytester.makepyfile(test_other=f"def test_other():\n    {team_test}\n")

    result = bench.run("-n", workers, "test_other.py", "--tau2-tasks=0")

    assert result.ret == (pytest.ExitCode.OK if team_test == "pass" else 1)
    assert NO_SCENARIO_HINT in result.stdout.lines
    # the benchmark collected (its scenarios deselected by -k): no hint
    collected = bench.run("-n", workers, "--tau2-tasks=0", "-k", "test_other or nothing")
    assert NO_SCENARIO_HINT not in collected.stdout.lines


# -- junit XML, the judge notice, the gate against a baseline -----------------------------------


def _nl_seed_task(tasks: Mapping[str, Task]) -> str:
    return next(t for t in sorted(SEED_DB_TASKS, key=int) if tasks[t].nl_assertions)


def _testcases(path: Path) -> tuple[ET.Element, list[ET.Element]]:
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    return suite, suite.findall("testcase")


def _suite_properties(suite: ET.Element) -> dict[str, str]:
    return {p.get("name", ""): p.get("value", "") for p in suite.iterfind("properties/property")}


def test_junit_one_outcome_per_scenario_and_the_gate_against_a_baseline(
    bench: Bench, endpoint: ScriptedEndpoint, tasks: Mapping[str, Task]
) -> None:
    nl_task = _nl_seed_task(tasks)
    selected = f"--tau2-tasks=0,10,12,{nl_task}"
    base_xml = bench.path / "base.xml"

    base = bench.run(
        "-n", "0", selected, "--tau2-run-id=base", f"--junitxml={base_xml}",
        *endpoint.agent_args(),
    )  # fmt: skip

    base.assert_outcomes(passed=3, failed=1)
    suite, cases = _testcases(base_xml)
    assert suite.get("tests") == "4"
    for case in cases:  # one outcome per scenario: no <skipped> beside a <failure>
        assert len([child for child in case if child.tag != "properties"]) <= 1
    nl_case = next(c for c in cases if f"[tau2_retail__{nl_task}]" in c.get("name", ""))
    nl_properties = {p.get("name"): p.get("value") for p in nl_case.iterfind("properties/property")}
    assert nl_properties["tau2_nl_1"].startswith("not judged: no judge configured")
    assert nl_properties["tau2_outcome"] == "PASS"
    properties = _suite_properties(suite)
    assert properties["tau2_success_rate"] == "0.75"
    assert properties["tau2_lost"] == "0"
    rates = next(line for line in base.stdout.lines if line.startswith("Overall success rate"))
    assert rates.endswith("; NL assertions of 1 scenario(s) NOT judged: no judge")
    # summarize keeps what the run recorded (it used to write "versions": {})
    assert main(["summarize", str(bench.run_dir("base"))]) == 0
    assert bench.summary("base")["versions"]["pytest"] == pytest.__version__

    endpoint.agent["10"] = CHAT  # task 10 now fails: a flip from pass to fail
    current_xml = bench.path / "current.xml"
    current = bench.run(
        "-n", "2", selected, "--tau2-run-id=current", f"--junitxml={current_xml}",
        f"--tau2-baseline={bench.run_dir('base')}", "--tau2-max-regression=0.2",
        *endpoint.agent_args(),
    )  # fmt: skip

    assert current.ret == pytest.ExitCode.TESTS_FAILED
    lines = current.stdout.lines
    gate = (
        "tau2 gate: profile default, success rate 50.00% [15.0, 85.0], baseline 75.00% (change "
        "-25.00%, max regression 20.00%), 1 flipped pass->fail, 0 fail->pass of 4 paired, p=0.5, "
        "infra errors 0 (max 0): FAIL"
    )
    assert gate in lines
    assert "flipped pass->fail against the baseline: tau2_retail__10" in lines
    # the gate is the last tau2 line
    section = lines[lines.index(gate) + 1]
    assert section.startswith("====")
    suite, cases = _testcases(current_xml)
    assert suite.get("tests") == "4"
    properties = _suite_properties(suite)
    assert properties["tau2_gate"] == "FAIL"
    assert properties["tau2_gate_line"] == gate


def test_the_offline_banner_shows_also_under_q(bench: Bench) -> None:
    result = bench.run_inprocess("--co", "-q", "--tau2-tasks=0")

    assert result.ret == pytest.ExitCode.OK
    banner = [line for line in result.stdout.lines if "OFFLINE SELF-CHECK" in line]
    assert banner == [
        "tau2: OFFLINE SELF-CHECK (built-in oracle agent, scripted customer, no judge): "
        "this measures the harness, not a model"
    ]


# -- the run folder's lock: a run that starts after start-up checks passed ---------------------

# Another process creates and locks the run folder after this session's start-up checks and
# before its scenarios are collected (two runs with one id started together): the claim at the
# end of collection stops the session, before any scenario ran.
_RACE = """
import subprocess
import sys

_HOLDER = '''
import sys, time
from pathlib import Path
from tau2_retail.results.lock import RunLock
folder = Path(sys.argv[1])
folder.mkdir(parents=True)
lock = RunLock.acquire(folder)
print("ready", flush=True)
time.sleep(600)
'''


def pytest_sessionstart(session):
    if hasattr(session.config, "workerinput"):
        return
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, "runs/race"], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline() == "ready\\n"
    session.config._race_holder = holder
    (session.config.rootpath / "holder.pid").write_text(str(holder.pid))


def pytest_unconfigure(config):
    holder = getattr(config, "_race_holder", None)
    if holder is not None:
        holder.kill()
        holder.wait()
        holder.stdout.close()
"""


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_run_folder_locked_since_start_up_stops_the_session_before_any_scenario(
    bench: Bench, workers: str
) -> None:
    (bench.path / "conftest.py").write_text(_RACE, encoding="utf-8")

    result = bench.run("-n", workers, "--tau2-tasks=0,1", "--tau2-run-id=race")

    text = error_text(result)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    pid = (bench.path / "holder.pid").read_text()
    lines = [line for line in text.splitlines() if "is in use by" in line]
    assert len(lines) == 1, text
    assert f"--tau2-run-id race: run race is in use by pid {pid} on host " in lines[0]
    assert "Traceback" not in text
    assert "INTERNALERROR" not in text
    assert sorted(path.name for path in bench.run_dir("race").iterdir()) == ["run.lock"]


def test_resume_of_results_without_run_args_is_refused(bench: Bench) -> None:
    """run_args.json is written before the first scenario: results without it come from an
    older version (or it was removed), and their settings cannot be compared."""
    scenario = bench.run_dir("old") / "tau2_retail__0"
    scenario.mkdir(parents=True)
    (scenario / "metrics.json").write_text("")

    result = bench.run_inprocess("--co", "--tau2-resume=old", "--tau2-tasks=0")

    text = refusal(result)
    assert "--tau2-resume old: " in text
    assert "has scenario results but no run_args.json, so its settings are unknown" in text


def test_a_resume_whose_requests_would_go_to_another_openai_base_url_is_refused(
    bench: Bench, endpoint: ScriptedEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No base URL given: the agent's requests go where ``OPENAI_BASE_URL`` points, and the
    run records that URL, so a resume sent to another server is refused."""
    agent = ("-n", "0", "--tau2-tasks=0", "--tau2-agent-model=test-agent")
    agent += ("--tau2-agent-max-retries=0",)
    monkeypatch.setenv("OPENAI_BASE_URL", endpoint.base_url)
    bench.run(*agent, "--tau2-run-id=env")
    assert len(endpoint.requests("0")) == 1
    stored = json.loads(bench.run_dir("env").joinpath("run_args.json").read_text("utf-8"))
    assert stored["configuration"]["agent"]["endpoint"]["base_url"] == endpoint.base_url

    monkeypatch.setenv("OPENAI_BASE_URL", endpoint.base_url + "/")  # the same server
    same = bench.run_inprocess("--co", *agent, "--tau2-resume=env")
    assert "tau2: resuming: 1 scenario(s) already complete" in same.stdout.str(), error_text(same)

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    text = refusal(bench.run_inprocess("--co", *agent, "--tau2-resume=env"))
    assert f"agent_base_url: stored '{endpoint.base_url}', now 'http://127.0.0.1:9/v1'" in text
    assert "where OPENAI_BASE_URL points" in text
