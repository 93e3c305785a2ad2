"""What the recorded configuration hides: values under keys naming a secret, and nothing else."""

from __future__ import annotations

import pytest

from tau2_retail.plugins.process import redact


@pytest.mark.parametrize(
    "key",
    ["api_key", "API_KEY", "apiKey", "x-api-key", "access_token", "Authorization", "password"],
)
def test_a_key_naming_a_secret_is_redacted_at_any_depth(key: str) -> None:
    value = {"settings": {"items": [{key: "hunter2"}]}}

    assert redact(value) == {"settings": {"items": [{key: "[redacted]"}]}}


def test_headers_keep_their_names_only() -> None:
    """A role's own headers (a gateway's second key, ``Helicone-Auth``) are recorded by name:
    the settings' ``agent_headers`` and an endpoint record's ``headers`` alike."""
    headers = {"Helicone-Auth": "Bearer hunter2", "X-Title": "nightly"}
    value = {"agent_headers": headers, "endpoint": {"headers": headers, "key_header": "api-key"}}
    shown = {"Helicone-Auth": "[redacted]", "X-Title": "[redacted]"}
    assert redact(value) == {
        "agent_headers": shown,
        "endpoint": {"headers": shown, "key_header": "api-key"},
    }


def test_extra_body_values_are_redacted_unless_their_key_is_harmless() -> None:
    value = {
        "agent_extra_body": {
            "vendor_auth": "hunter2",
            "headers": [{"X-Custom": "hunter2"}],
            "top_k": 20,
            "chat_template_kwargs": {"enable_thinking": False},
        },
        "base_url": "http://user:hunter2@host/v1",
    }
    assert redact(value) == {
        "agent_extra_body": {
            "vendor_auth": "[redacted]",
            "headers": "[redacted]",
            "top_k": 20,
            "chat_template_kwargs": {"enable_thinking": False},
        },
        "base_url": "http://host/v1",
    }


@pytest.mark.parametrize(
    "key", ["agent_max_tokens", "max_tokens", "api_key_env", "judge_api_key_env", "token_usage"]
)
def test_a_key_that_only_mentions_a_secret_word_keeps_its_value(key: str) -> None:
    # regression: max_tokens (a sampling setting) was recorded as "[redacted]"
    assert redact({key: 512}) == {key: 512}
