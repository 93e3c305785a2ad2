"""The command line as recorded: ini overrides redacted like the options they stand for."""

from __future__ import annotations

import json

import pytest

from tau2_retail.models.secrets import REDACTED, redact_argv

BODY = '{"vendor_auth": "hunter2", "top_k": 20}'
SHOWN = json.dumps({"vendor_auth": REDACTED, "top_k": 20})
HEADERS = '{"Helicone-Auth": "Bearer hunter2", "X-Title": "nightly"}'
HEADERS_SHOWN = json.dumps({"Helicone-Auth": REDACTED, "X-Title": REDACTED})


@pytest.mark.parametrize(
    ("argv", "recorded"),
    [
        (["-o", f"tau2_agent_extra_body={BODY}"], ["-o", f"tau2_agent_extra_body={SHOWN}"]),
        ([f"-otau2_judge_extra_body={BODY}"], [f"-otau2_judge_extra_body={SHOWN}"]),
        (
            ["--override-ini", f"tau2_user_extra_body={BODY}"],
            ["--override-ini", f"tau2_user_extra_body={SHOWN}"],
        ),
        (
            [f"--override-ini=tau2_agent_extra_body={BODY}"],
            [f"--override-ini=tau2_agent_extra_body={SHOWN}"],
        ),
        (["-o", "tau2_agent_extra_body=not json"], ["-o", f"tau2_agent_extra_body={REDACTED}"]),
        (
            ["-o", "tau2_agent_base_url=http://me:hunter2@host/v1"],
            ["-o", "tau2_agent_base_url=http://host/v1"],
        ),
        (["-o", "tau2_trials=3", "-x"], ["-o", "tau2_trials=3", "-x"]),
        (
            [f"--tau2-agent-extra-body={BODY}"],
            [f"--tau2-agent-extra-body={SHOWN}"],
        ),
        (["--tau2-user-headers", HEADERS], ["--tau2-user-headers", HEADERS_SHOWN]),
        ([f"--tau2-user-headers={HEADERS}"], [f"--tau2-user-headers={HEADERS_SHOWN}"]),
        (["-o", f"tau2_judge_headers={HEADERS}"], ["-o", f"tau2_judge_headers={HEADERS_SHOWN}"]),
        (["--tau2-user-headers", "not json"], ["--tau2-user-headers", REDACTED]),
    ],
)
def test_ini_overrides_are_redacted_like_the_options(argv: list[str], recorded: list[str]) -> None:
    flags = {"--tau2-agent-extra-body", "--tau2-user-headers"}
    assert redact_argv(["pytest", *argv], json_flags=flags) == ["pytest", *recorded]
    assert "hunter2" not in " ".join(redact_argv(argv, json_flags=flags))
