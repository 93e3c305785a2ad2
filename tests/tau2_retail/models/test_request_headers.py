"""The key in a header of the endpoint's own and a team's headers, as real servers receive
them: Azure OpenAI's ``api-key``, a gateway's headers, never sent to another origin."""

from __future__ import annotations

import logging

import pytest

from tau2_retail.errors import ConfigError
from tau2_retail.models.cache import endpoint_host
from tau2_retail.models.config import EndpointConfig
from tau2_retail.models.masking import Masker
from tau2_retail.models.messages import Message, Role
from tau2_retail.models.openai_client import OpenAIChatModel
from tau2_retail.models.sdk_client import build_sdk_client
from tau2_retail.testing.loopback_model import loopback_model
from tau2_retail.testing.loopback_server import Completion, HttpError, LoopbackOpenAIServer

HELLO = (Message(role=Role.USER, content="Where is my order?"),)
KEY = "sk-azure-key-0123456789abcdef"
ENVIRON = {"AZURE_KEY": KEY}
GATEWAY = {"X-Title": "nightly", "Helicone-Auth": "Bearer hc-secret-0123456789"}


def gateway_model(server: LoopbackOpenAIServer) -> OpenAIChatModel:
    """A model at ``server`` sending the key in ``api-key`` and the gateway's headers."""
    return loopback_model(
        server, api_key_env="AZURE_KEY", key_header="api-key", headers=GATEWAY, environ=ENVIRON
    )


@pytest.mark.asyncio
async def test_the_key_goes_in_its_own_header_and_no_bearer_is_sent(
    openai_server: LoopbackOpenAIServer,
) -> None:
    """Azure OpenAI's deployments take ``api-key: KEY``; the bearer key was all there was."""
    openai_server.enqueue(Completion(content="ok"))
    async with loopback_model(
        openai_server, api_key_env="AZURE_KEY", key_header="api-key", environ=ENVIRON
    ) as model:
        assert (await model.complete(HELLO)).content == "ok"
    (request,) = openai_server.requests
    assert request.header("api-key") == KEY
    assert request.header("authorization") is None


@pytest.mark.asyncio
async def test_a_teams_headers_go_with_the_bearer_key_over_the_packages_own(
    openai_server: LoopbackOpenAIServer,
) -> None:
    openai_server.enqueue(Completion(content="ok"))
    headers = GATEWAY | {"User-Agent": "team-bench/1"}
    async with loopback_model(
        openai_server, api_key_env="AZURE_KEY", headers=headers, environ=ENVIRON
    ) as model:
        assert (await model.complete(HELLO)).content == "ok"
    (request,) = openai_server.requests
    assert request.header("authorization") == f"Bearer {KEY}"
    assert request.header("x-title") == "nightly"
    assert request.header("helicone-auth") == "Bearer hc-secret-0123456789"
    assert request.header("user-agent") == "team-bench/1"


@pytest.mark.asyncio
async def test_a_redirect_within_the_origin_keeps_them(
    openai_server: LoopbackOpenAIServer,
) -> None:
    moved = f"{openai_server.base_url}/chat/completions"
    openai_server.enqueue(HttpError(status=307, headers={"Location": moved}))
    openai_server.enqueue(Completion(content="ok"))
    async with gateway_model(openai_server) as model:
        assert (await model.complete(HELLO)).content == "ok"
    assert len(openai_server.requests) == 2
    for request in openai_server.requests:
        assert request.header("api-key") == KEY
        assert request.header("helicone-auth") == GATEWAY["Helicone-Auth"]
        assert request.header("authorization") is None


@pytest.mark.asyncio
async def test_a_redirect_to_another_origin_carries_neither_the_key_nor_the_headers(
    openai_server: LoopbackOpenAIServer,
) -> None:
    """The HTTP library drops ``Authorization`` on a redirect elsewhere, not a header it does
    not know: the key in ``api-key`` would have followed."""
    with LoopbackOpenAIServer() as elsewhere:
        moved = f"{elsewhere.base_url}/chat/completions"
        openai_server.enqueue(HttpError(status=307, headers={"Location": moved}))
        elsewhere.enqueue(Completion(content="ok"))
        async with gateway_model(openai_server) as model:
            assert (await model.complete(HELLO)).content == "ok"
        (request,) = elsewhere.requests
    assert openai_server.requests[0].header("api-key") == KEY
    sent = " ".join(f"{name}: {value}" for name, value in request.headers.items())
    assert KEY not in sent
    assert "hc-secret" not in sent
    assert request.header("x-title") is None


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"key_header": "api key"}, "'api key' is not a header name"),
        ({"key_header": "Content-Length"}, "Content-Length is set by the HTTP client"),
        ({"headers": {"Host": "elsewhere"}}, "Host is set by the HTTP client"),
        ({"headers": {"X-A": "1", "x-a": "2"}}, "x-a is named twice"),
        ({"headers": {"Authorization": "Basic SECRET-1"}}, "Authorization carries the bearer"),
        (
            {"key_header": "api-key", "headers": {"Api-Key": "SECRET-1"}},
            "Api-Key is the key's header",
        ),
        ({"headers": {"X-A": "SECRET-1\r\nX-B: 1"}}, "the value of X-A is not a string"),
        ({"headers": {"X-A": "SECRET-é"}}, "the value of X-A is not a string"),
        ({"headers": {"X-A": 1}}, "the value of X-A is not a string"),
    ],
)
def test_headers_no_request_could_send_are_refused_without_their_values(
    fields: dict[str, object], problem: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        EndpointConfig(model="m", **fields)  # type: ignore[arg-type]
    assert problem in str(refused.value)
    assert "SECRET" not in str(refused.value)


def test_an_endpoint_taking_no_key_may_send_its_own_authorization() -> None:
    config = EndpointConfig(model="m", api_key_env="none", headers={"Authorization": "Basic x"})
    assert config.headers == {"Authorization": "Basic x"}
    assert "Basic" not in repr(config)


def test_header_values_are_masked_in_text_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    config = EndpointConfig(
        model="m", base_url="https://127.0.0.1:9/v1", api_key_env="AZURE_KEY", headers=GATEWAY
    )
    masker = Masker.for_endpoints([config], ENVIRON)
    assert masker.text(f"echo {KEY} and Bearer hc-secret-0123456789") == "echo *** and ***"
    assert masker.text("nightly") == "nightly"  # a word-like value is no secret
    build_sdk_client(config, KEY)
    core = sorted(name for name in logging.root.manager.loggerDict if name.startswith("httpcore"))
    with caplog.at_level(logging.DEBUG):
        logging.getLogger(core[-1]).debug("send headers %r", list(GATEWAY.items()))
    assert "hc-secret" not in caplog.text


def test_headers_scope_the_cache_without_showing_their_values() -> None:
    """A gateway's routing header may pick another model: its replies are not another's."""
    url = "https://gw.example/v1"
    plain = endpoint_host(url)
    routed = endpoint_host(url, {"X-Provider": "a", "X-Key": "SECRET-1"})
    assert plain == "https://gw.example/v1"
    assert routed.startswith("https://gw.example/v1 headers:")
    assert "SECRET" not in routed
    assert routed == endpoint_host(url, {"x-key": "SECRET-1", "x-provider": "a"})
    assert routed != endpoint_host(url, {"X-Provider": "b", "X-Key": "SECRET-1"})
