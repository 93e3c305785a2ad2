"""The ``--tau2-*`` options: start-up errors, precedence, and the run header.

Runs that stop at start-up go through ``runpytest_inprocess`` (nothing runs, so nothing can
leak); the rest through a subprocess, with ``-n 0`` and ``-n 2``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tau2_retail.data.tasks import trial_seeds
from tau2_retail.plugins.options import _ini_type
from tau2_retail.settings.schema import OPTIONS

from .conftest import Bench, ScriptedEndpoint, usage_errors

NAME_RULE = "at most 100 letters, digits, '_', '.', '-' (not starting with '.', '_' or '-')"
BAD_VALUES = [
    ("--tau2-trials", "0", "an integer >= 1"),
    ("--tau2-trials", "two", "an integer >= 1"),
    ("--tau2-seed", "-1", "an integer >= 0"),
    ("--tau2-tasks", "0,x", "task ids or ranges separated by commas, e.g. 0,5,17 or 0-9,17"),
    ("--tau2-tasks", "9-3", "task ids or ranges separated by commas, e.g. 0,5,17 or 0-9,17"),
    ("--tau2-tasks", "0-99999", "a range of at most 10,000 ids, e.g. 0-113"),
    ("--tau2-split", "dev", "one of base, train, test"),
    ("--tau2-agent-temperature", "hot", "a number >= 0"),
    ("--tau2-user-top-p", "0", "a number > 0 and <= 1"),
    ("--tau2-judge-max-tokens", "0", "an integer >= 1"),
    ("--tau2-agent-extra-body", "[1]", "a JSON object"),
    (
        "--tau2-user-extra-body",
        "{oops",
        """a JSON object, e.g. '{"chat_template_kwargs": {"x": 1}}'""",
    ),
    (
        "--tau2-agent-headers",
        '{"X-Gateway-Key": "CANARY-1"',
        """a JSON object of header names and values, e.g. '{"X-Title": "nightly"}' (the text """
        "given is not shown in case it holds a secret)",
    ),
    (
        "--tau2-judge-headers",
        '{"X-Gateway-Key": "CANARY-1", "X": 1}',
        "a JSON object of header names and values (the value of X is not a string of visible "
        "ASCII characters, spaces and tabs (not shown: it may be a secret))",
    ),
    ("--tau2-judge-base-url", "localhost:8000/v1", "an http:// or https:// URL"),
    ("--tau2-agent-timeout", "0", "a number > 0"),
    ("--tau2-agent-max-retries", "-1", "an integer >= 0"),
    ("--tau2-agent-notes", "maybe", "on or off"),
    ("--tau2-profile", "upstream", "one of default, tau2"),
    ("--tau2-max-steps", "0", "an integer >= 1"),
    ("--tau2-max-errors", "0", "an integer >= 1"),
    ("--tau2-max-duration", "inf", "a number > 0"),
    ("--tau2-run-id", "../escape", NAME_RULE),
    ("--tau2-resume", ".hidden", NAME_RULE),
    ("--tau2-run-id", "r" * 300, NAME_RULE),
    ("--tau2-breaker-failures", "0", "an integer >= 1"),
    ("--tau2-breaker-probe-seconds", "-1", "a number >= 0"),
    ("--tau2-min-pass-rate", "1.5", "a number >= 0 and <= 1"),
    ("--tau2-max-infra-errors", "-1", "an integer >= 0"),
    ("--tau2-max-reply-bytes", "100", "an integer >= 1024"),
    ("--tau2-regression-alpha", "0", "a number > 0 and < 1, e.g. 0.05"),
    ("--tau2-regression-alpha", "1", "a number > 0 and < 1, e.g. 0.05"),
    ("--tau2-regression-alpha", "nan", "a number > 0 and < 1, e.g. 0.05"),
    ("--tau2-regression-alpha", "5%", "a number > 0 and < 1, e.g. 0.05"),
]


def error_line(result: pytest.RunResult) -> str:
    lines = usage_errors(result)
    assert len(lines) == 1, result.stderr.str()
    return lines[0]


@pytest.mark.parametrize(("flag", "value", "accepted"), BAD_VALUES)
def test_a_bad_value_is_a_usage_error_naming_option_value_and_accepted_forms(
    bench: Bench, flag: str, value: str, accepted: str
) -> None:
    result = bench.run_inprocess(f"{flag}={value}")

    # an extra body's text is not echoed: it may hold a credential
    shown = "the value given" if flag.endswith(("extra-body", "headers")) else repr(value)
    assert (
        error_line(result) == f"ERROR: {flag}: {shown} is not valid for {flag}; expected {accepted}"
    )


@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_task_list_is_a_usage_error_not_all_tasks(bench: Bench, value: str) -> None:
    # issue 21: --tau2-tasks=$TASKS with TASKS unset silently ran all 114
    result = bench.run_inprocess(f"--tau2-tasks={value}", "--co")

    assert error_line(result) == (
        "ERROR: --tau2-tasks: an empty value is not valid for --tau2-tasks (an unset "
        "variable?); omit the option for all"
    )


@pytest.mark.parametrize(
    ("flag", "omitted"),
    [
        ("--tau2-baseline", "no baseline"),
        ("--tau2-min-pass-rate", "no threshold"),
        ("--tau2-max-regression", "the default, 0"),
    ],
)
def test_an_empty_gate_option_is_a_usage_error_not_a_gate_turned_off(
    bench: Bench, flag: str, omitted: str
) -> None:
    """``--tau2-baseline=$BASELINE`` with the variable unset dropped that rule of the gate
    without a word: a run that should have failed passed (exit 0)."""
    result = bench.run_inprocess(f"{flag}=", "--co")

    assert error_line(result) == (
        f"ERROR: {flag}: an empty value is not valid for {flag} (an unset variable?); omit the "
        f"option for {omitted}"
    )


@pytest.mark.parametrize(
    ("flag", "value", "accepted"),
    [
        ("--tau2-agent-model", "builtin:gpt", "accepted built-ins: builtin:oracle, builtin:noop"),
        ("--tau2-user-model", "builtin:oracle", "accepted built-ins: builtin:customer"),
        ("--tau2-judge-model", "builtin:oracle", "none (the judge must be an endpoint)"),
    ],
)
def test_an_unknown_builtin_model_is_a_usage_error(
    bench: Bench, flag: str, value: str, accepted: str
) -> None:
    result = bench.run_inprocess(f"{flag}={value}")

    line = error_line(result)
    assert line.startswith(f"ERROR: {flag}: {value!r} is not a built-in")
    assert line.endswith(accepted)


def test_an_endpoint_value_rejected_by_the_client_config_is_a_usage_error(bench: Bench) -> None:
    result = bench.run_inprocess("--tau2-agent-model=m", '--tau2-agent-extra-body={"x": NaN}')

    line = error_line(result)
    assert "--tau2-agent-" in line
    assert "extra_body" in line
    assert "JSON" in line


def test_a_pasted_key_is_never_echoed(bench: Bench) -> None:
    pasted = "sk-proj-Pasted0123456789abcdef"

    result = bench.run_inprocess(f"--tau2-agent-api-key-env={pasted}")

    line = error_line(result)
    assert line.startswith("ERROR: --tau2-agent-api-key-env: the value given is not valid for")
    assert "the NAME of an environment variable" in line
    assert pasted not in result.stdout.str() + result.stderr.str()


def test_a_bad_value_from_the_environment_names_the_variable(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAU2_AGENT_BASE_URL", "ftp://example.invalid")

    result = bench.run_inprocess()

    assert error_line(result) == (
        "ERROR: TAU2_AGENT_BASE_URL: 'ftp://example.invalid' is not valid for "
        "--tau2-agent-base-url; expected an http:// or https:// URL"
    )


def test_a_bad_value_from_the_ini_file_names_the_key(bench: Bench) -> None:
    bench.add_ini(tau2_trials="none")

    result = bench.run_inprocess()

    assert error_line(result) == (
        "ERROR: ini tau2_trials: 'none' is not valid for --tau2-trials; expected an integer >= 1"
    )


def test_resume_of_a_run_that_does_not_exist_is_a_usage_error(bench: Bench) -> None:
    result = bench.run_inprocess("--tau2-resume=nosuchrun")

    line = error_line(result)
    assert line.startswith("ERROR: --tau2-resume nosuchrun: no run directory ")
    assert str(bench.output_dir) in line


def test_resume_and_a_different_run_id_is_a_usage_error(bench: Bench) -> None:
    result = bench.run_inprocess("--tau2-resume=a", "--tau2-run-id=b")

    assert "--tau2-resume 'a' and --tau2-run-id 'b' disagree" in error_line(result)


def test_a_usage_error_stops_an_xdist_run_before_any_worker(bench: Bench) -> None:
    result = bench.run("-n", "2", "--tau2-split=dev")

    assert error_line(result) == (
        "ERROR: --tau2-split: 'dev' is not valid for --tau2-split; "
        "expected one of base, train, test"
    )
    assert "created: 2/2 workers" not in result.stdout.str()


@pytest.mark.parametrize(
    ("given", "hint"),
    [
        ("--tau2-task=0", "did you mean --tau2-tasks?"),
        ("--tau2-agnet-model=m", "did you mean --tau2-agent-model?"),
        ("--tau2-outputdir=runs", "did you mean --tau2-output-dir?"),
        ("--tau2-zzzz", "pytest --help lists them"),
    ],
)
def test_a_misspelled_option_names_the_nearest_one(bench: Bench, given: str, hint: str) -> None:
    result = bench.run_inprocess("--co", given)

    name = given.partition("=")[0]
    assert error_line(result) == (
        f"ERROR: unrecognized arguments: {given}; no tau2 option {name}, {hint}"
    )


# -- precedence: option > environment > ini > default --------------------------------------


def test_precedence_option_then_environment_then_ini_then_default(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, xdist: tuple[str, ...]
) -> None:
    env_output = bench.path / "env-runs"
    monkeypatch.setenv("TAU2_AGENT_MODEL", "env-agent")
    monkeypatch.setenv("TAU2_AGENT_BASE_URL", "http://env.invalid/v1")
    monkeypatch.setenv("TAU2_OUTPUT_DIR", str(env_output))
    monkeypatch.setenv("TAU2_TRIALS", "5")  # trials has no environment variable: ignored
    bench.add_ini(
        tau2_agent_model="ini-agent",
        tau2_agent_base_url="http://ini.invalid/v1",
        tau2_user_base_url="http://ini-user.invalid/v1",
        tau2_trials="3",
        tau2_seed="7",
    )

    result = bench.run(
        *xdist,
        "--tau2-agent-model=builtin:noop",
        "--tau2-trials=2",
        "--tau2-tasks=10",
        "--tau2-run-id=prec",
    )

    result.assert_outcomes(passed=2)
    assert not env_output.exists()
    configuration = bench.read_json("prec", "run_args.json")["configuration"]
    settings, sources = configuration["settings"], configuration["sources"]
    expected = {
        "agent_model": ("builtin:noop", "--tau2-agent-model"),  # option over env and ini
        "agent_base_url": ("http://env.invalid/v1", "TAU2_AGENT_BASE_URL"),  # env over ini
        "output_dir": (str(bench.output_dir), "--tau2-output-dir"),  # option over env
        "user_base_url": ("http://ini-user.invalid/v1", "ini tau2_user_base_url"),
        "trials": (2, "--tau2-trials"),  # option over ini; TAU2_TRIALS is no setting
        "seed": (7, "ini tau2_seed"),
        "max_steps": (200, "default"),
        "split": ("base", "default"),
        "agent_max_tokens": (None, "default"),
    }
    assert {name: (settings[name], sources[name]) for name in expected} == expected
    seeds = [bench.metrics("prec", f"tau2_retail__10/trial-{k}")["seed"] for k in (1, 2)]
    assert seeds == list(trial_seeds(7, 2))


# -- the run header -------------------------------------------------------------------------


DEFAULT_PROFILE_LINE = (
    "tau2: profile default: policy + our notes, our tool descriptions + end_conversation, "
    "our judge; headline: success rate (DB_STATE_MATCH, CLEAN_EXIT, NL_ASSERTION)"
)
TAU2_PROFILE_LINE = (
    "tau2: profile tau2: upstream tau2-bench's prompts, tools, endings and reward "
    "(pinned sources; identifier normalization off); headline: tau2 reward / pass^k"
)


def header(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stdout.lines if line.startswith("tau2:")]


def test_header_of_an_unconfigured_run_says_offline_self_check(bench: Bench) -> None:
    result = bench.run_inprocess("--co", "--tau2-run-id=hdr")

    assert result.ret == pytest.ExitCode.OK
    assert header(result) == [
        "tau2: agent builtin:oracle; user builtin:customer; judge none",
        f"tau2: run hdr -> {bench.output_dir / 'hdr'} (not created: no test runs)",
        "tau2: OFFLINE SELF-CHECK (built-in oracle agent, scripted customer, no judge): "
        "this measures the harness, not a model",
        # the judge's base URL defaults to OpenAI's: the hint asks only for the model
        "tau2: NL assertions not applicable: no judge configured "
        "(set --tau2-judge-model; --tau2-judge-base-url defaults to OpenAI's)",
        DEFAULT_PROFILE_LINE,
    ]


def test_header_of_a_noop_run_names_the_noop_agent(bench: Bench) -> None:
    result = bench.run_inprocess("--co", "--tau2-run-id=hdr", "--tau2-agent-model=builtin:noop")

    assert result.ret == pytest.ExitCode.OK
    lines = header(result)
    assert lines[0] == "tau2: agent builtin:noop; user builtin:customer; judge none"
    # regression: the self-check line claimed the built-in oracle agent
    assert lines[2] == (
        "tau2: OFFLINE SELF-CHECK (built-in noop agent, scripted customer, no judge): "
        "this measures the harness, not a model"
    )


def test_header_of_a_configured_run_names_agent_user_judge_and_folder(
    bench: Bench, endpoint: ScriptedEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = bench.path / "elsewhere"
    monkeypatch.setenv("TAU2_OUTPUT_DIR", str(output))

    result = bench.run_inprocess(
        "--co",
        "--tau2-run-id=hdr",
        *endpoint.agent_args("my-agent"),
        *endpoint.judge_args("my-judge"),
        output_dir=False,
    )

    assert result.ret == pytest.ExitCode.OK
    url = endpoint.base_url
    assert header(result) == [
        f"tau2: agent my-agent at {url}; user builtin:customer; judge my-judge at {url}",
        f"tau2: run hdr -> {output / 'hdr'} (not created: no test runs)",
        DEFAULT_PROFILE_LINE,
    ]
    assert not Path(output).exists()  # collecting writes nothing
    assert endpoint.server.requests == ()


def test_header_of_a_tau2_profile_run_names_the_profile(bench: Bench) -> None:
    result = bench.run_inprocess("--co", "--tau2-run-id=hdr", "--tau2-profile=tau2")

    assert result.ret == pytest.ExitCode.OK
    assert header(result)[-1] == TAU2_PROFILE_LINE


def test_agent_notes_with_the_tau2_profile_is_a_usage_error(bench: Bench) -> None:
    result = bench.run_inprocess("--tau2-profile=tau2", "--tau2-agent-notes=off")

    assert error_line(result) == (
        "ERROR: --tau2-agent-notes: --tau2-agent-notes applies to the default profile only; "
        "the tau2 profile sends upstream's agent prompt (drop the option, or use "
        "--tau2-profile default)"
    )


@pytest.mark.parametrize(
    ("role", "args", "variable"),
    [
        # OpenAI's default base URL, the key variable unset
        (
            "agent",
            ["--tau2-agent-model=gpt-4.1", "--tau2-user-model=builtin:customer"],
            "OPENAI_API_KEY",
        ),
        # a hosted judge whose key variable is set but empty
        (
            "judge",
            [
                "--tau2-judge-model=judge-model",
                "--tau2-judge-base-url=https://judge.example.com/v1",
                "--tau2-judge-api-key-env=TAU2_TEST_EMPTY_KEY",
            ],
            "TAU2_TEST_EMPTY_KEY",
        ),
    ],
)
def test_a_hosted_endpoint_without_its_key_stops_at_start_up(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, role: str, args: list[str], variable: str
) -> None:
    monkeypatch.setenv("TAU2_TEST_EMPTY_KEY", "")

    result = bench.run_inprocess(*args)

    line = error_line(result)
    assert f"the {role} model" in line
    assert f"the variable {variable} is" in line
    assert f"--tau2-{role}-api-key-env=none" in line
    assert not list(bench.output_dir.glob("*/*/metrics.json"))  # no scenario ran


def test_a_local_endpoint_or_an_explicit_none_needs_no_key(
    bench: Bench, endpoint: ScriptedEndpoint
) -> None:
    local = bench.run_inprocess("--collect-only", *endpoint.judge_args())
    hosted_without_key = bench.run_inprocess(
        "--collect-only",
        "--tau2-judge-model=judge-model",
        "--tau2-judge-base-url=https://judge.example.com/v1",
        "--tau2-judge-api-key-env=none",
    )

    assert local.ret == pytest.ExitCode.OK, local.stderr.str()
    assert hosted_without_key.ret == pytest.ExitCode.OK, hosted_without_key.stderr.str()


def test_a_relative_output_dir_in_the_config_file_is_relative_to_that_file(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    ini = bench.path / "pytest.ini"
    ini.write_text(ini.read_text(encoding="utf-8") + "tau2_output_dir = my_runs\n", "utf-8")
    below = bench.path / "sub" / "folder"
    below.mkdir(parents=True)
    monkeypatch.chdir(below)

    result = bench.run_inprocess(
        str(bench.path / "test_scenarios.py"), "--co", "--tau2-run-id=where", output_dir=False
    )

    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    expected = bench.path / "my_runs" / "where"
    assert f"tau2: run where -> {expected}" in result.stdout.str()


def test_the_default_output_dir_is_in_the_rootdir_when_started_from_a_subfolder(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31, item 6: ``cd tests && pytest ...`` wrote ``tests/tau2_runs``; the default
    folder is the rootdir's, as pytest's own cache is."""
    below = bench.path / "tests"
    below.mkdir()
    monkeypatch.chdir(below)

    result = bench.run_inprocess(
        str(bench.path / "test_scenarios.py"), "--co", "--tau2-run-id=where", output_dir=False
    )

    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    assert f"tau2: run where -> {bench.path / 'tau2_runs' / 'where'}" in result.stdout.str()


def test_help_shows_where_the_data_folder_really_defaults_to(bench: Bench) -> None:
    from tau2_retail.data.files import default_cache_dir

    result = bench.run_inprocess("--help", output_dir=False)

    # argparse wraps long lines, a long path even inside a word
    help_text = "".join(result.stdout.str().split())
    assert f"(default:{default_cache_dir()})" in help_text


# The type tags pytest 9.0 and 9.1 accept in ``Parser.addini`` (both assert one of them).
_PYTEST_9_0_INI_TAGS = {"string", "paths", "pathlist", "args", "linelist", "bool", "int", "float"}


@pytest.mark.parametrize("version", [(9, 0), (9, 1), (9, 1, 1)])
def test_before_pytest_9_2_every_ini_key_is_a_type_tag_pytest_accepts(
    version: tuple[int, ...],
) -> None:
    """pytest 9.1 asserted a type tag: the unions registered there failed every session (the
    team's own tests too) at start-up."""
    assert {_ini_type(setting, version) for setting in OPTIONS} <= _PYTEST_9_0_INI_TAGS


def test_from_pytest_9_2_a_numeric_or_on_off_ini_key_also_takes_its_toml_type() -> None:
    types = {setting.name: _ini_type(setting, (9, 2)) for setting in OPTIONS}
    assert types["trials"] == str | int
    assert types["agent_notes"] == str | bool
    assert types["max_duration"] == str | float
    assert types["agent_model"] == "string"
