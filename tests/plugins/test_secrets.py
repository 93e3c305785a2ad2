"""An API key reaches the endpoint and nothing else: no file of the run, no terminal line.

The key sits in the variable named by ``--tau2-agent-api-key-env`` (and the judge's); the
endpoint even echoes it back in a 401 body on task 0, as some proxies do.
"""

from __future__ import annotations

import pytest

from tau2_retail.testing.loopback_server import HttpError

from .conftest import Bench, ScriptedEndpoint

KEY_ENV = "FAKE_TAU2_API_KEY"
KEY = "fake-tau2-key-3f9a1c7e5b2d46808a1b"


def test_the_api_key_is_sent_but_never_written_or_printed(
    bench: Bench,
    endpoint: ScriptedEndpoint,
    xdist: tuple[str, ...],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    endpoint.agent["0"] = HttpError.openai(
        401, f"Incorrect API key provided: {KEY}.", code="invalid_api_key"
    )

    result = bench.run(
        *xdist,
        "-rA",
        "--tau2-tasks=0,10,24",
        "--tau2-run-id=sec",
        "--junitxml=junit.xml",
        *endpoint.agent_args(),
        *endpoint.judge_args(),
        f"--tau2-agent-api-key-env={KEY_ENV}",
        f"--tau2-judge-api-key-env={KEY_ENV}",
        "--tau2-agent-max-tokens=64",
    )

    result.assert_outcomes(passed=2, errors=1)
    assert endpoint.judge_requests["24"] == 1
    requests = endpoint.server.requests
    assert len(requests) == 4
    assert {request.header("authorization") for request in requests} == {f"Bearer {KEY}"}
    [infra] = bench.summary("sec")["infra_errors"]
    assert infra["scenario_id"] == "tau2_retail__0"
    assert "HTTP 401" in infra["detail"]

    written = [path for path in bench.path.rglob("*") if path.is_file()]
    assert bench.run_dir("sec") / "run_args.json" in written
    assert bench.path / "junit.xml" in written
    leaks = [str(path) for path in written if KEY.encode() in path.read_bytes()]
    assert leaks == []
    assert KEY not in result.stdout.str() + result.stderr.str()

    configuration = bench.read_json("sec", "run_args.json")["configuration"]
    assert configuration["agent"]["endpoint"]["api_key_env"] == KEY_ENV
    assert configuration["judge"]["endpoint"]["api_key_env"] == KEY_ENV
    # regression: the redaction of secrets also hid max_tokens
    assert configuration["settings"]["agent_max_tokens"] == 64
    assert configuration["agent"]["endpoint"]["max_tokens"] == 64
