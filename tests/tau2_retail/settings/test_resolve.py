"""The settings schema without pytest or argparse: precedence, one error type, and the plan a
worker rebuilds from the recorded values."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from tau2_retail.errors import ConfigError
from tau2_retail.settings import (
    OPTIONS,
    SETTINGS,
    Inputs,
    Setting,
    Tau2Settings,
    resolve_settings,
    settings_from_recorded,
)


def resolve(
    options: Mapping[str, str],
    *,
    ini: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Tau2Settings:
    return resolve_settings(
        Inputs(
            flag=lambda setting: setting.flag,
            option=lambda setting: options.get(setting.name),
            ini=lambda setting: (ini or {}).get(setting.name),
            environ=environ or {},
            load_agent=lambda spec, source: None,
        )
    )


def test_the_option_wins_then_the_environment_then_ini_then_the_default() -> None:
    ini = {"agent_model": "ini-model", "agent_base_url": "http://127.0.0.1:1/v1", "trials": "3"}
    environ = {"TAU2_AGENT_MODEL": "env-model", "TAU2_TRIALS": "9"}  # trials reads no env
    settings = resolve(
        {"user_model": "builtin:customer", "agent_base_url": "http://127.0.0.1:2/v1"},
        ini=ini,
        environ=environ,
    )
    assert settings.agent.model == "env-model"
    assert settings.roles.agent.name == "env-model"
    assert settings.roles.agent.endpoint is not None
    assert settings.roles.agent.endpoint.base_url == "http://127.0.0.1:2/v1"
    assert settings.trials == 3
    assert settings.seed == 300
    assert [settings.sources[name] for name in ("agent_model", "agent_base_url", "trials")] == [
        "TAU2_AGENT_MODEL",
        "--tau2-agent-base-url",
        "ini tau2_trials",
    ]


def test_a_bad_value_is_one_error_naming_the_source_the_value_and_the_accepted_forms() -> None:
    with pytest.raises(ConfigError) as error:
        resolve({"trials": "0"})
    assert (
        str(error.value)
        == "--tau2-trials: '0' is not valid for --tau2-trials; expected an integer >= 1"
    )


@pytest.mark.parametrize(
    "options",
    [
        {},
        {
            "profile": "tau2",
            "agent_model": "m",
            "agent_base_url": "http://user:pw@127.0.0.1:1/v1",
            "agent_extra_body": '{"top_k": 5}',
            "user_model": "builtin:customer",
            "judge_model": "j",
            "judge_base_url": "http://127.0.0.1:3/v1",
            "judge_temperature": "0.5",
            "tasks": "0,5",
            "shard": "1/2",
            "prices": '{"m": {"input": 1, "output": 2}, "j": {"input": 1, "output": 2}}',
            "max_cost": "3",
            "cache_mode": "off",
            "breaker_failures": "2",
        },
    ],
)
def test_a_worker_rebuilds_the_same_settings_from_the_recorded_values(
    options: Mapping[str, str],
) -> None:
    settings = resolve(options)
    rebuilt = settings_from_recorded(dict(settings.recorded), dict(settings.sources))
    assert rebuilt == settings


def test_every_setting_of_one_scenario_is_a_run_flag_and_nothing_else_is() -> None:
    run_flags = {setting.cli_flag for setting in OPTIONS if setting.cli}
    assert "--agent-max-connections" in run_flags
    assert not {"--trials", "--tasks", "--output-dir", "--resume", "--min-pass-rate"} & run_flags
    assert isinstance(SETTINGS["seed"], Setting)


def test_an_environment_the_http_client_cannot_use_stops_the_run_at_start_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A proxy variable the HTTP library cannot use raised in the first scenario's set-up: a
    traceback, and every scenario lost. It is one line at start-up, naming what was read."""
    monkeypatch.setenv("ALL_PROXY", "ftp://proxyuser:PROXY-PW@127.0.0.1:21")
    with pytest.raises(ConfigError) as refused:
        resolve(
            {
                "agent_model": "m",
                "agent_base_url": "http://127.0.0.1:9/v1",
                "user_model": "builtin:customer",
            }
        )
    message = str(refused.value)
    assert message.startswith(
        "the agent endpoint ('m' at http://127.0.0.1:9/v1): its HTTP client cannot be made here"
    )
    assert "ALL_PROXY=ftp://127.0.0.1:21" in message
    assert "PROXY-PW" not in message
    monkeypatch.delenv("ALL_PROXY")
    # the offline self-check builds no client: nothing to check
    assert resolve({}).roles.agent.endpoint is None


def test_an_openai_base_url_without_a_scheme_is_named_before_any_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``OPENAI_BASE_URL=127.0.0.1:8000/v1`` (no scheme) for a local server, no key set: the
    run asked for ``OPENAI_API_KEY``, as for a hosted endpoint, and named the URL only once a
    key was set."""
    monkeypatch.setenv("OPENAI_BASE_URL", "127.0.0.1:8000/v1")  # what the client reads
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError) as refused:
        resolve(
            {"agent_model": "m", "user_model": "builtin:customer"},
            environ={"OPENAI_BASE_URL": "127.0.0.1:8000/v1"},
        )
    message = str(refused.value)
    assert message.startswith("the agent endpoint ('m' at the default base URL): its HTTP client")
    assert "not an http:// or https:// URL" in message
    assert "OPENAI_BASE_URL=127.0.0.1:8000/v1" in message
    assert "API key" not in message


@pytest.mark.parametrize(
    "raw", ["ftp://user:SECRET-PW@127.0.0.1/v1", "http://user:SE/CRET@127.0.0.1/v1"]
)
def test_a_refused_url_is_never_shown_with_its_password(raw: str) -> None:
    with pytest.raises(ConfigError) as refused:
        resolve({"agent_base_url": raw, "agent_model": "m", "user_model": "builtin:customer"})
    assert "--tau2-agent-base-url" in str(refused.value)
    assert "SECRET" not in str(refused.value)
    assert "SE/" not in str(refused.value)


def test_values_that_may_hold_a_credential_are_not_in_the_settings_repr() -> None:
    """The ``tau2_settings`` fixture printed (or pytest's ``--debug`` log) showed a gateway's
    header and an extra body's values in clear."""
    settings = resolve(
        {
            "user_model": "builtin:customer",
            "agent_base_url": "http://127.0.0.1:2/v1",
            "agent_headers": '{"X-Gateway-Key": "secret-gw-123456"}',
            "agent_extra_body": '{"vendor_auth": "secret-eb-123456"}',
        },
        environ={"TAU2_AGENT_MODEL": "m"},
    )
    assert settings.agent.headers == {"X-Gateway-Key": "secret-gw-123456"}
    assert "secret" not in repr(settings)
    assert "secret" not in repr(settings.roles)


@pytest.mark.parametrize("name", ["agent_key_header", "judge_headers"])
def test_an_empty_header_option_is_refused_not_taken_as_unset(name: str) -> None:
    """``--tau2-agent-key-header=$HEADER`` with the variable unset sent the bearer key: 401."""
    setting = SETTINGS[name]
    with pytest.raises(ConfigError, match="an empty value is not valid for"):
        resolve_settings(
            Inputs(
                flag=lambda s: s.flag,
                option=lambda s: "" if s.name == name else None,
                ini=lambda s: None,
                environ={},
                load_agent=lambda spec, source: None,
            )
        )
    assert setting.refuse_blank
