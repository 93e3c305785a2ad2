"""What the recorded configuration hides: values under keys naming a secret, and nothing else."""

from __future__ import annotations

import pytest

from tau2_retail.plugins.process import redact


@pytest.mark.parametrize(
    "key",
    ["api_key", "API_KEY", "apiKey", "x-api-key", "access_token", "Authorization", "password"],
)
def test_a_key_naming_a_secret_is_redacted_at_any_depth(key: str) -> None:
    value = {"extra_body": {"headers": [{key: "hunter2"}]}}

    assert redact(value) == {"extra_body": {"headers": [{key: "[redacted]"}]}}


@pytest.mark.parametrize(
    "key", ["agent_max_tokens", "max_tokens", "api_key_env", "judge_api_key_env", "token_usage"]
)
def test_a_key_that_only_mentions_a_secret_word_keeps_its_value(key: str) -> None:
    # regression: max_tokens (a sampling setting) was recorded as "[redacted]"
    assert redact({key: 512}) == {key: 512}
