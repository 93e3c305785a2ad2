"""EndpointConfig: defaults, validation at construction, JSON round trip."""

from __future__ import annotations

from typing import Any

import pytest

from tau2_retail import codec
from tau2_retail.errors import ArtifactError, ConfigError
from tau2_retail.models import EndpointConfig


def test_defaults():
    config = EndpointConfig(model="gpt-4.1")
    assert config.base_url is None
    assert config.api_key_env == "OPENAI_API_KEY"
    assert (config.temperature, config.top_p, config.seed, config.max_tokens) == (None,) * 4
    assert config.extra_body == {}
    assert (config.timeout_seconds, config.max_retries) == (120.0, 4)
    assert (config.backoff_base_seconds, config.backoff_max_seconds) == (1.0, 30.0)


def test_json_round_trip():
    config = EndpointConfig(
        model="Qwen/Qwen3-8B",
        base_url="http://127.0.0.1:8000/v1",
        api_key_env="VLLM_KEY",
        temperature=0.0,
        seed=300,
        max_tokens=1024,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    assert codec.decode_value(EndpointConfig, codec.encode(config)) == config


def test_extra_body_is_a_private_copy():
    extra: dict[str, Any] = {"top_k": 20}
    config = EndpointConfig(model="m", extra_body=extra)
    extra["top_k"] = 1
    assert config.extra_body == {"top_k": 20}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("model", ""),
        ("base_url", "127.0.0.1:8000/v1"),
        ("temperature", -0.1),
        ("temperature", float("nan")),
        ("top_p", 0),
        ("top_p", 1.5),
        ("seed", True),
        ("seed", 1.5),
        ("max_tokens", 0),
        ("extra_body", {"bad": object()}),
        ("extra_body", {1: "non-string key"}),
        ("timeout_seconds", 0),
        ("max_retries", -1),
        ("backoff_base_seconds", -1),
        ("backoff_max_seconds", "30"),
    ],
)
def test_bad_values_raise_config_error_naming_the_field(field, value):
    with pytest.raises(ConfigError, match=rf"EndpointConfig\.{field}\b"):
        EndpointConfig(**{"model": "m", field: value})


def test_a_key_pasted_as_the_variable_name_is_rejected_without_echoing_it():
    key = "sk-proj-abcdef0123456789"
    with pytest.raises(ConfigError, match="NAME of an environment variable") as caught:
        EndpointConfig(model="m", api_key_env=key)
    assert key not in str(caught.value)


def test_a_recorded_config_is_checked_when_read():
    with pytest.raises(ArtifactError, match="'model' is missing"):
        codec.decode_value(EndpointConfig, {}, "run_args.json")
    with pytest.raises(ArtifactError, match="'temperature' must be a number, got '0'"):
        codec.decode_value(EndpointConfig, {"model": "m", "temperature": "0"}, "run_args.json")
    with pytest.raises(ConfigError, match=r"temperature: got -1\.0"):
        codec.decode_value(EndpointConfig, {"model": "m", "temperature": -1}, "run_args.json")


@pytest.mark.parametrize(
    ("base_url", "environ", "needs"),
    [
        (None, {}, True),  # the openai package's default: api.openai.com
        (None, {"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1"}, False),
        ("https://api.example.com/v1", {}, True),
        ("http://8.8.8.8:8000/v1", {}, True),
        ("http://127.0.0.1:8000/v1", {}, False),
        ("http://[::1]:8000/v1", {}, False),
        ("http://localhost:11434/v1", {}, False),
        ("http://10.1.2.3:8000/v1", {}, False),
        ("http://192.168.1.20:8000/v1", {}, False),
        ("http://172.20.0.5:8000/v1", {}, False),
        ("http://vllm:8000/v1", {}, False),  # a bare host name: a compose service, a LAN host
        ("http://gpu-box.local:8000/v1", {}, False),
        ("http://ollama.internal:11434/v1", {}, False),
        ("http://gpu.example.com:8000/v1", {}, True),
    ],
)
def test_an_endpoint_needs_a_key_unless_it_is_local(
    base_url: str | None, environ: dict[str, str], needs: bool
) -> None:
    config = EndpointConfig(model="m", base_url=base_url)
    assert config.needs_key(environ) is needs
    problem = config.missing_key(environ)
    assert (problem is not None) is needs
    assert config.missing_key({**environ, "OPENAI_API_KEY": "sk-test"}) is None


def test_a_missing_key_names_the_variable_and_says_unset_or_empty() -> None:
    config = EndpointConfig(model="m", api_key_env="MY_KEY")
    assert config.missing_key({}) == (
        "https://api.openai.com/v1 needs an API key, but the variable MY_KEY is unset"
    )
    assert config.missing_key({"MY_KEY": " "}) == (
        "https://api.openai.com/v1 needs an API key, but the variable MY_KEY is empty"
    )


def test_none_says_the_endpoint_takes_no_key() -> None:
    config = EndpointConfig(model="m", base_url="https://api.example.com/v1", api_key_env="none")
    assert config.takes_no_key
    assert not config.needs_key({})
    assert config.missing_key({}) is None
