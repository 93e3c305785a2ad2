"""An endpoint's base URL as real teams write it: checked where it is given (a URL no request
can reach stops the run at start-up), its password never sent or shown, its query kept."""

from __future__ import annotations

import base64
import re

import pytest

from tau2_retail.errors import ConfigError, EndpointError
from tau2_retail.models.base_url import checked_base_url, client_url
from tau2_retail.models.choice import ModelChoice
from tau2_retail.models.config import EndpointConfig
from tau2_retail.models.messages import Message, Role
from tau2_retail.models.secrets import strip_userinfo
from tau2_retail.testing.loopback_model import loopback_model
from tau2_retail.testing.loopback_server import Completion, HttpError, LoopbackOpenAIServer

HELLO = (Message(role=Role.USER, content="Where is my order?"),)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("http://127.0.0.1:99999/v1", "its port is not a number from 1 to 65535"),
        ("http://127.0.0.1:18101:80/v1", "its port is not a number from 1 to 65535"),
        ("http://127.0.0.1:0/v1", "its port is not a number from 1 to 65535"),
        ("http:///v1", "it names no host"),
        ("ftp://127.0.0.1/v1", "not an http:// or https:// URL"),
        ("127.0.0.1:8000/v1", "not an http:// or https:// URL"),
        # a password holding "/" leaves its start where a port is: never shown
        ("http://user:pa/ss@127.0.0.1/v1", "its port is not a number from 1 to 65535"),
    ],
)
def test_a_url_no_request_can_reach_is_refused_where_it_is_given(raw: str, reason: str) -> None:
    """Port 99999 and ``:18101:80`` lost the scenario with a traceback (OverflowError,
    InvalidURL); ``http:///v1`` failed with a misleading "UnsupportedProtocol"."""
    with pytest.raises(ValueError, match=f"^{re.escape(reason)}$"):
        checked_base_url(raw)
    with pytest.raises(ConfigError) as refused:
        EndpointConfig(model="m", base_url=raw)
    assert str(refused.value).startswith("EndpointConfig.base_url: expected an http://")
    assert reason in str(refused.value)
    assert "pa/ss" not in str(refused.value)


@pytest.mark.parametrize(
    ("raw", "kept"),
    [
        ("HTTP://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),  # was refused
        ("  https://[::1]:8443/v1/ ", "https://[::1]:8443/v1/"),
        ("http://user:PW@SECRET@127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("http://user:pa#SECRET@127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("https://gw.example/openai?api-version=2024-10-21", "https://gw.example/openai?api-version=2024-10-21"),
    ],
)  # fmt: skip
def test_a_base_url_is_kept_without_its_password(raw: str, kept: str) -> None:
    """A password holding an unencoded ``@`` or ``#`` was cut at its first one: the rest
    (``SECRET``) reached run_args.json, summary.json and report.html."""
    assert checked_base_url(raw) == kept
    assert EndpointConfig(model="m", base_url=raw).base_url == kept
    assert "SECRET" not in strip_userinfo(f"--tau2-agent-base-url={raw} and more")


def test_the_query_goes_apart_and_openai_base_url_follows_the_same_rules() -> None:
    url = client_url("https://gw.example/openai/deployments/d?api-version=2024-10-21&x=", {})
    assert url == (
        "https://gw.example/openai/deployments/d",
        {"api-version": "2024-10-21", "x": ""},
    )
    assert client_url(None, {}) == (None, {})
    from_env = client_url(None, {"OPENAI_BASE_URL": "http://u:PW@127.0.0.1:9/v1?k=v"})
    assert from_env == ("http://127.0.0.1:9/v1", {"k": "v"})
    with pytest.raises(ValueError, match="it names no host"):
        client_url(None, {"OPENAI_BASE_URL": "http:///v1"})


@pytest.mark.asyncio
async def test_a_query_in_the_base_url_reaches_the_server_after_the_path(
    openai_server: LoopbackOpenAIServer,
) -> None:
    """Azure's ``?api-version=``: the request went to ``/v1/?api-version=...chat/completions``
    (the package appends the path to the URL as text), a 404 for every scenario."""
    openai_server.enqueue(Completion(content="ok"), Completion(content="again"))
    base_url = f"{openai_server.base_url}?api-version=2024-10-21"
    async with loopback_model(openai_server, base_url=base_url) as model:
        assert (await model.complete(HELLO)).content == "ok"
        assert (await model.complete(HELLO)).content == "again"
    for request in openai_server.requests:
        assert (request.path, request.query) == ("/v1/chat/completions", "api-version=2024-10-21")


@pytest.mark.asyncio
async def test_a_password_in_openai_base_url_is_never_sent(
    openai_server: LoopbackOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no base URL given, the package read ``OPENAI_BASE_URL`` itself and sent its
    password as Basic auth instead of the key (and its HTTP library logged the URL whole)."""
    host = openai_server.base_url.removeprefix("http://")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://user:CANARY-PW-987@{host}")
    openai_server.enqueue(Completion(content="ok"))
    environ = {"AGENT_KEY": "sk-test-key-0123456789"}
    async with loopback_model(
        openai_server, base_url=None, api_key_env="AGENT_KEY", environ=environ
    ) as model:
        assert (await model.complete(HELLO)).content == "ok"
    (request,) = openai_server.requests
    assert request.header("authorization") == "Bearer sk-test-key-0123456789"
    sent = " ".join(f"{name}: {value}" for name, value in request.headers.items())
    assert "CANARY-PW-987" not in sent
    assert base64.b64encode(b"user:CANARY-PW-987").decode() not in sent


def test_a_role_without_a_base_url_is_described_at_openai_base_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run header said "at the openai default base URL" while every request went to the
    gateway ``OPENAI_BASE_URL`` names (as the package sends them)."""
    choice = ModelChoice(name="gpt-4o", endpoint=EndpointConfig(model="gpt-4o"))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert choice.describe() == "gpt-4o at the openai default base URL"
    monkeypatch.setenv("OPENAI_BASE_URL", "https://u:PW-1@gw.example/v1?team=a")
    assert choice.describe() == "gpt-4o at https://gw.example/v1 (OPENAI_BASE_URL)"


@pytest.mark.asyncio
async def test_an_endpoint_error_names_the_url_of_openai_base_url(
    openai_server: LoopbackOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A role without a base URL sends to ``OPENAI_BASE_URL``; its errors (in metrics.json, the
    summary and the report), its breaker's "is down" line and its dropped-parameter notice
    said "at the default URL", OpenAI's, beside "check the base URL"."""
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    openai_server.enqueue(HttpError.openai(404, "unknown model"))
    async with loopback_model(openai_server, base_url=None, max_retries=0) as model:
        with pytest.raises(EndpointError) as failed:
            await model.complete(HELLO)
    assert str(failed.value).startswith(
        f"model 'agent-model' at {openai_server.base_url} (OPENAI_BASE_URL): "
    )
