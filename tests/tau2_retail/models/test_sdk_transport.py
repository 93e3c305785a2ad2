"""The chat client's HTTP client builds the request the ``openai`` package's HTTP library
builds: the one-pass path for the SDK's plain request, the library's path for anything else;
its ``openai`` client prepares the URL the SDK prepares."""

from __future__ import annotations

import functools
import logging
from typing import Any

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tau2_retail.models.config import EndpointConfig
from tau2_retail.models.sdk_client import build_sdk_client
from tau2_retail.models.sdk_transport import (
    LIBRARY,
    POST_TAKES_CONTENT,
    RawPost,
    SdkClient,
    http_client,
)

URL = "http://127.0.0.1:8000/v1/chat/completions"
BODY = b'{"model":"m","messages":[]}'
SDK_HEADERS = [
    ("Accept", "application/json"),
    ("Content-Type", "application/json"),
    ("User-Agent", "AsyncOpenAI/Python 3.57.0"),
    ("Authorization", "Bearer k"),
    ("Idempotency-Key", "tau2-abc-1"),
    ("x-stainless-retry-count", "0"),
    ("Accept-Encoding", "gzip, deflate"),
]
TIMEOUT = LIBRARY.Timeout(None, connect=30.0)


def _pair(**client: Any) -> tuple[Any, Any]:
    """Our HTTP client and the library's own, alike."""
    return http_client(timeout=TIMEOUT, **client), LIBRARY.AsyncClient(timeout=TIMEOUT, **client)


def _seen(request: Any) -> tuple[Any, ...]:
    """All of a request a transport reads."""
    return (
        request.method,
        str(request.url),
        request.headers.raw,
        request.content,
        type(request.stream),
        request.extensions,
    )


def _same(ours: Any, library: Any, method: str = "POST", **kwargs: Any) -> None:
    kwargs.setdefault("timeout", TIMEOUT)
    assert _seen(ours.build_request(method, URL, **kwargs)) == _seen(
        library.build_request(method, URL, **kwargs)
    )


def test_the_sdks_request_is_the_librarys() -> None:
    ours, library = _pair()
    _same(ours, library, headers=SDK_HEADERS, content=BODY, files=None, params=None)


@pytest.mark.parametrize(
    "headers",
    [
        [("host", "example.test:81")],  # given Host: not added
        [("CONTENT-LENGTH", "5")],  # given length: kept, not added
        [("Transfer-Encoding", "chunked")],  # no length added
        [("accept-encoding", "br"), ("ACCEPT", "text/plain")],  # defaults overridden, any case
        [("X-Twice", "1"), ("x-twice", "2")],  # repeated names stay, in order
        [(b"X-Bytes", b"yes")],
    ],
)
def test_given_headers_merge_as_the_library_merges_them(headers: list[Any]) -> None:
    ours, library = _pair(headers={"X-Default": "d", "Accept": "*/*"})
    _same(ours, library, headers=SDK_HEADERS + headers, content=BODY)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"content": b""},  # an empty body: the library adds Content-Length: 0
        {"content": "text"},  # str content
        {"content": BODY, "params": {"q": "1"}},
        {"content": BODY, "extensions": {"trace": None}},
        {"json": {"a": 1}},
        {"content": BODY, "timeout": LIBRARY.USE_CLIENT_DEFAULT},
        {"content": BODY, "headers": (("X-Tuple", "1"),)},
    ],
    ids=["empty", "str", "params", "extensions", "json", "client-timeout", "tuple-headers"],
)
def test_other_requests_take_the_librarys_path(kwargs: dict[str, Any]) -> None:
    ours, library = _pair()
    kwargs.setdefault("headers", SDK_HEADERS)
    _same(ours, library, **kwargs)


def test_a_client_with_cookies_or_params_takes_the_librarys_path() -> None:
    _same(*_pair(cookies={"session": "s"}), headers=SDK_HEADERS, content=BODY)
    _same(*_pair(params={"api-version": "1"}), headers=SDK_HEADERS, content=BODY)


def test_a_relative_url_is_merged_with_the_base_url() -> None:
    ours, library = _pair(base_url="http://127.0.0.1:8000/v1/")
    kwargs = {"headers": SDK_HEADERS, "content": BODY, "timeout": TIMEOUT}
    assert _seen(ours.build_request("POST", "chat/completions", **kwargs)) == _seen(
        library.build_request("POST", "chat/completions", **kwargs)
    )


@pytest.mark.parametrize(
    ("header", "error"),
    [(("X-Name", "caf\u00e9"), UnicodeEncodeError), (("X-Number", 5), TypeError)],
)
def test_a_header_the_library_refuses_is_refused_as_it_refuses_it(
    header: tuple[str, Any], error: type[Exception]
) -> None:
    ours, library = _pair()
    with pytest.raises(error) as library_error:
        library.build_request("POST", URL, headers=[header], content=BODY, timeout=TIMEOUT)
    with pytest.raises(error) as our_error:
        ours.build_request("POST", URL, headers=[header], content=BODY, timeout=TIMEOUT)
    assert str(our_error.value) == str(library_error.value)


_NAMES = st.sampled_from(["Host", "Accept", "Content-Length", "Transfer-Encoding", "X-A", "x-a"])
_CASED = _NAMES.flatmap(lambda name: st.sampled_from([name, name.lower(), name.upper()]))
_VALUES = st.text(alphabet="abc019 ;=/", min_size=0, max_size=8)


@functools.cache
def _shared_pair() -> tuple[Any, Any]:
    """One pair for every example (a client builds an SSL context: tens of milliseconds)."""
    return _pair()


@given(
    defaults=st.dictionaries(_CASED, _VALUES, max_size=3),
    headers=st.lists(st.tuples(_CASED, _VALUES), max_size=5),
    body=st.binary(min_size=1, max_size=40),
)
def test_any_headers_and_body_give_the_librarys_request(
    defaults: dict[str, str], headers: list[tuple[str, str]], body: bytes
) -> None:
    ours, library = _shared_pair()
    ours.headers = library.headers = defaults
    _same(ours, library, headers=headers, content=body)


def _sdk_pair(base_url: str) -> tuple[Any, Any]:
    """Our ``openai`` client and the SDK's own, alike."""
    return (
        SdkClient(base_url=base_url, api_key="k", http_client=http_client()),
        openai.AsyncOpenAI(base_url=base_url, api_key="k", http_client=http_client()),
    )


@pytest.mark.parametrize(
    "url",
    [
        URL,
        "https://models.example.test:8443/v1/chat/completions?x=1",
        "http://[::1]:8000/chat/completions",
        "/chat/completions",
        "chat/completions",
        "//other.test/v1/chat/completions",
    ],
)
def test_the_sdk_client_prepares_the_url_the_sdk_prepares(url: str) -> None:
    ours, sdk = _sdk_pair("http://127.0.0.1:8000/v1/")
    for _ in range(2):  # the remembered one too
        assert ours._prepare_url(url) == sdk._prepare_url(url)
        assert str(ours._prepare_url(url)) == str(sdk._prepare_url(url))


def test_the_sdk_client_parses_an_absolute_url_once() -> None:
    ours, _ = _sdk_pair("http://127.0.0.1:8000/v1/")
    assert ours._prepare_url(URL) is ours._prepare_url(URL)


@pytest.mark.skipif(
    not POST_TAKES_CONTENT,
    reason="openai 1.x: the chat client takes the typed call, and the SDK hands the URL object",
)
@pytest.mark.asyncio
async def test_the_sdks_requests_parse_the_endpoints_url_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The SDK prepares the URL (SdkClient: once) and hands the HTTP client its text for every
    # request; that text is parsed once, not per request (2.5 % of the samples at 912 in flight)
    seen: list[str] = []

    def answer(request: Any) -> Any:
        seen.append(str(request.url))
        return LIBRARY.Response(200, stream=LIBRARY.ByteStream(b'{"ok": true}'))

    client = SdkClient(
        api_key="k",
        base_url="http://127.0.0.1:8000/v1",
        max_retries=0,
        http_client=http_client(transport=LIBRARY.MockTransport(answer), timeout=TIMEOUT),
    )
    post = RawPost(client)
    assert await post(BODY, max_bytes=1000) == b'{"ok": true}'
    parses = 0
    init = LIBRARY.URL.__init__

    def counted(self: Any, url: Any = "", **kwargs: Any) -> None:
        nonlocal parses
        parses += isinstance(url, str)  # a URL object given is copied, not parsed
        init(self, url, **kwargs)

    monkeypatch.setattr(LIBRARY.URL, "__init__", counted)
    for _ in range(3):
        assert await post(BODY, max_bytes=1000) == b'{"ok": true}'
    assert parses == 0
    assert seen == [URL] * 4
    await client.close()


def test_a_relative_url_follows_the_clients_base_url() -> None:
    ours, sdk = _sdk_pair("http://127.0.0.1:8000/v1/")
    assert str(ours._prepare_url("chat/completions")) == URL
    ours.base_url = sdk.base_url = "http://127.0.0.1:9000/v2/"
    assert str(ours._prepare_url("chat/completions")) == "http://127.0.0.1:9000/v2/chat/completions"
    assert ours._prepare_url("chat/completions") == sdk._prepare_url("chat/completions")


def test_the_sdks_debug_record_of_a_request_keeps_no_body(caplog: pytest.LogCaptureFixture) -> None:
    # openai 1.x logs every request's options, its JSON body whole (an extra body's credential
    # included), at DEBUG on its own logger; later releases do not log the body at all
    canary = "canary-extra-body-credential-5d1e"
    options = {"method": "post", "json_data": {"vendor_auth": canary, "messages": []}}
    sdk_log = logging.getLogger("openai._base_client")
    with caplog.at_level(logging.DEBUG, logger="openai._base_client"):
        sdk_log.debug("Request options: %s", options)
        sdk_log.debug("Retrying due to status code %i", 503)
    assert canary not in caplog.text
    assert [record.getMessage() for record in caplog.records] == [
        "Request options: (not logged: the body holds the conversation)",
        "Retrying due to status code 503",
    ]


def test_a_clients_key_is_masked_in_the_http_stacks_debug_records(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """httpcore's DEBUG trace prints a reply's headers whole: a key a server echoed there
    reached the terminal, the log file and the junit XML (``-o junit_logging=all``)."""
    key = "sk-echoed-key-0123456789abcdef"
    build_sdk_client(EndpointConfig(model="m", base_url="https://127.0.0.1:9/v1"), key)
    core = sorted(
        name
        for name in logging.root.manager.loggerDict
        if name.startswith("httpcore") and "." in name
    )
    assert core  # the core library's loggers exist once the openai package is imported
    with caplog.at_level(logging.DEBUG):
        logging.getLogger(core[0]).debug(
            "receive_response_headers.complete return_value=%r",
            (b"HTTP/1.1", 200, [(b"X-Echo", f"Bearer {key}".encode())]),
        )
        logging.getLogger("openai._base_client").debug("HTTP Request: POST http://u:PW-1x@h/v1")
    assert key not in caplog.text
    assert "Bearer ***" in caplog.text
    assert "PW-1x" not in caplog.text


def test_a_server_sees_the_packages_user_agent() -> None:
    # the SDK names the client's class: servers and gateways saw "SdkClient/Python ..."
    ours, sdk = _sdk_pair("http://127.0.0.1:8000/v1/")
    assert ours.user_agent == sdk.user_agent
    assert ours.default_headers["User-Agent"] == sdk.default_headers["User-Agent"]
