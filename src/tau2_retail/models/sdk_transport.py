"""How the OpenAI-compatible client drives the ``openai`` package: its generic raw-body POST,
and the HTTP client it is given.

- :class:`RawPost`: ``AsyncOpenAI.post("/chat/completions", content=<bytes>, stream=True,
  cast_to=<the HTTP library's Response>)``, the SDK's public call for requests it has no typed
  method for: the SDK builds the request (headers, auth, URL, error statuses as
  ``APIStatusError``) and returns the response unread; the body is read here within
  ``max_bytes`` (``read_bounded``). The typed ``chat.completions.create`` ran its transform
  and re-encoded the whole history for every request. :data:`POST_TAKES_CONTENT` is False for
  an SDK without raw request bodies (the caller then uses the typed call).

  What ``post`` does besides, once per client instead of per request (a quarter of the
  harness's CPU per completion with hundreds in flight; the request on the wire is the same,
  ``tests/tau2_retail/models/test_request_body.py`` compares it with the SDK's typed call):
  the URL is the one ``post`` would make of the path (``base_url`` + ``chat/completions``),
  given whole, so that the SDK parses it once instead of joining a relative path (two parses);
  the request options (``FinalRequestOptions``, a pydantic model whose construction deep-copies
  its defaults) are built once and copied per request with the body, through the SDK's own
  ``request`` (what ``post`` calls), where the SDK has them (:data:`OPTIONS_TEMPLATE`); the
  idempotency key is a counter, not a fresh UUID (the OpenAI client sends no idempotency
  header; retries are ours). The URL's text is parsed once (:func:`_parsed_url`), by the
  ``openai`` client (:class:`SdkClient`) and by the HTTP client the SDK hands it to.
- :func:`http_options`: for a plain ``http://`` endpoint without a proxy, the pooled
  transport (``models/pool.py``; each connection it opens widens the ramp) and a timeout that
  bounds only connecting: the attempt's own deadline bounds connect to last byte, and read,
  write and pool timers (one each per request, never firing first) cost CPU for nothing.
  Other endpoints get the ``openai`` client's default transport and the plain timeout.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import itertools
import logging
import uuid
from collections.abc import Callable
from typing import Any, Final

import openai

from tau2_retail.models.bounded import ACCEPT_ENCODING, read_bounded
from tau2_retail.models.pool import pooled_transport, serves

__all__ = [
    "CONNECTION_ERRORS",
    "LIBRARY",
    "OPTIONS_TEMPLATE",
    "POST_TAKES_CONTENT",
    "TIMEOUT_ERRORS",
    "RawPost",
    "SdkClient",
    "http_client",
    "http_options",
    "read_reply",
]

LIBRARY: Final[Any] = importlib.import_module(
    type(openai.DEFAULT_CONNECTION_LIMITS).__module__.partition(".")[0]
)
"""The HTTP library the ``openai`` package uses (``httpx``, or ``httpx2`` in recent releases),
found from its own default limits so that no module here names it."""

POST_TAKES_CONTENT: Final = "content" in inspect.signature(openai.AsyncOpenAI.post).parameters
"""``AsyncOpenAI.post(content=...)`` (raw request bodies) came with the httpx2-based releases."""

TIMEOUT_ERRORS: Final[tuple[type[BaseException], ...]] = (
    TimeoutError,
    openai.APITimeoutError,
    LIBRARY.TimeoutException,
)
"""An attempt that timed out: the deadline, the SDK's timeout, or the library's while the
body is read (after the SDK returned)."""
CONNECTION_ERRORS: Final[tuple[type[BaseException], ...]] = (
    openai.APIConnectionError,
    LIBRARY.TransportError,
)
"""An attempt whose connection failed: the SDK's, or the library's while the body is read."""

# only encodings read_bounded inflates within its limit
_HEADERS: Final = {"Accept-Encoding": ACCEPT_ENCODING, "Content-Type": "application/json"}


class _UnloggedRequestBodies(logging.Filter):
    """``openai`` 1.x logs each request's options at DEBUG (``Request options: {...}``), its
    JSON body whole: the conversation, and the extra body's values, where some vendors take
    credentials. With ``--log-level=DEBUG`` and a log file they reached the file. The record
    keeps its place, without them (later releases log no body)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == "Request options: %s" and record.args:
            record.msg = "Request options: (not logged: the body holds the conversation)"
            record.args = ()
        return True


logging.getLogger("openai._base_client").addFilter(_UnloggedRequestBodies())  # the SDK's logger


_PATH: Final = "/chat/completions"


def _options_class() -> Any:
    """The SDK's request options model, when ``request`` takes it as ``post`` builds it (a
    pydantic model with ``content``): None otherwise (then ``post`` builds them per request)."""
    try:
        options: Any = importlib.import_module("openai._models").FinalRequestOptions
    except (ImportError, AttributeError):
        return None
    fields = getattr(options, "model_fields", {})
    wanted = ("method", "url", "headers", "content", "idempotency_key")
    if not all(name in fields for name in wanted) or not hasattr(options, "model_copy"):
        return None
    request = getattr(openai.AsyncOpenAI, "request", None)
    parameters = inspect.signature(request).parameters if request is not None else {}
    return options if ("cast_to" in parameters and "options" in parameters) else None


OPTIONS_TEMPLATE: Final[Any] = _options_class() if POST_TAKES_CONTENT else None
"""The SDK's ``FinalRequestOptions`` when a request's options can be one copy of a template
(``request(cast_to, options)``, what ``post`` calls); None: ``post`` per request."""


class RawPost:
    """POSTs of raw bodies to one client's ``/chat/completions``, read within a limit."""

    def __init__(self, client: openai.AsyncOpenAI) -> None:
        self._client = client
        base = client.base_url
        # what the SDK's _prepare_url makes of the relative path, once
        self.url = str(base.copy_with(raw_path=base.raw_path + _PATH.lstrip("/").encode()))
        self._keys = itertools.count()
        self._key_prefix = f"tau2-{uuid.uuid4().hex}-"
        self._template: Any = None
        if OPTIONS_TEMPLATE is not None:
            self._template = OPTIONS_TEMPLATE.construct(
                method="post", url=self.url, headers=_HEADERS
            )

    async def __call__(self, content: bytes, *, max_bytes: int) -> bytes:
        """POST ``content``; the reply body, read within ``max_bytes``."""
        key = f"{self._key_prefix}{next(self._keys)}"
        if self._template is not None:
            options = self._template.model_copy(update={"content": content, "idempotency_key": key})
            response = await self._client.request(LIBRARY.Response, options, stream=True)
        else:
            response = await self._client.post(
                self.url,
                cast_to=LIBRARY.Response,
                content=content,
                options={"headers": _HEADERS, "idempotency_key": key},
                stream=True,
            )
        return await read_reply(response, max_bytes=max_bytes)


async def read_reply(response: Any, *, max_bytes: int) -> bytes:
    """The body of a streamed reply, read as it arrives and inflated within ``max_bytes``
    (never a body whole); the response is closed either way."""
    try:
        body: bytes = await read_bounded(response, max_bytes=max_bytes)
        return body
    finally:
        await response.aclose()


_MAX_URLS: Final = 64


@functools.lru_cache(maxsize=_MAX_URLS)
def _parsed_url(text: str) -> Any:
    """The HTTP library's URL of ``text``, parsed once per text (a URL is immutable): the SDK
    prepares the same URL for every request of an endpoint and hands its text to the HTTP
    client, each of which parsed it again (5 % of the samples at 912 in flight)."""
    return LIBRARY.URL(text)


_PLAIN_ARGUMENTS: Final = frozenset(
    {"content", "headers", "timeout", "params", "files", "data", "json", "cookies", "extensions"}
)
_MERGED_ONLY_WHEN_GIVEN: Final = ("params", "files", "data", "json", "cookies", "extensions")


class _LeanRequests:
    """Mixed into the ``openai`` client's HTTP client: a URL's text is parsed once
    (:func:`_parsed_url`), and the SDK's plain
    request (a bytes body, header pairs, an absolute URL; no query, files, form, cookies or
    extensions) is built in one pass instead of through the library's merges, which made and
    re-made its headers six times per request (a third of the SDK's CPU per request).

    The request is the one the library builds (``tests/tau2_retail/models/test_sdk_transport.py``
    compares method, URL, headers in order, body, stream type and extensions): the client's
    default headers, less those the SDK overrides (names compared case-insensitively), then
    the SDK's; ``Host`` first when not given, ``Content-Length`` last. Any other request
    (one whose headers give the body's length or framing too) takes the library's own path.
    """

    def build_request(self, method: str, url: Any, **kwargs: Any) -> Any:
        if isinstance(url, str):
            # the SDK hands over the text of the URL it prepared (``str(prepared_url)``)
            url = _parsed_url(url)
        if self._plain(url, kwargs):
            request = self._plain_request(method, url, kwargs)
            if request is not None:
                return request
        return super().build_request(method, url, **kwargs)  # type: ignore[misc]

    def _plain(self, url: Any, kwargs: dict[str, Any]) -> bool:
        client: Any = self
        content = kwargs.get("content")
        return (
            isinstance(content, bytes)
            and bool(content)
            and isinstance(kwargs.get("headers"), list)
            and kwargs.keys() <= _PLAIN_ARGUMENTS
            and not any(kwargs.get(name) for name in _MERGED_ONLY_WHEN_GIVEN)
            and not url.is_relative_url
            and not client.params
            and not client.cookies
        )

    def _plain_request(self, method: str, url: Any, kwargs: dict[str, Any]) -> Any:
        """The request, or None for headers the library would refuse (it words the error) or
        that frame the body themselves (``Content-Length``, ``Transfer-Encoding``: httpx, under
        ``openai`` 1.x, and httpx2 treat them differently; the SDK sends neither)."""
        client: Any = self
        content: bytes = kwargs["content"]
        try:
            given = [(_header_bytes(name), _header_bytes(text)) for name, text in kwargs["headers"]]
        except (TypeError, ValueError):
            return None
        overridden = {name.lower() for name, _ in given}
        merged = [(n, v) for n, v in client.headers.raw if n.lower() not in overridden] + given
        names = {name.lower() for name, _ in merged}
        if b"content-length" in names or b"transfer-encoding" in names:
            return None  # the body's framing given by hand: releases of the library differ
        merged.append((b"Content-Length", str(len(content)).encode()))
        if b"host" not in names and url.host:
            merged.insert(0, (b"Host", url.netloc))
        timeout = kwargs.get("timeout", LIBRARY.USE_CLIENT_DEFAULT)
        if isinstance(timeout, type(LIBRARY.USE_CLIENT_DEFAULT)):
            timeout = client.timeout
        request = LIBRARY.Request(
            method,
            url,
            headers=merged,
            stream=LIBRARY.ByteStream(content),
            extensions={"timeout": LIBRARY.Timeout(timeout).as_dict()},
        )
        request.read()  # a bytes body is kept read, as the library keeps it
        return request


def _header_bytes(value: Any) -> bytes:
    """A header name or value as the library stores it: bytes, or an ASCII ``str`` (else
    ``TypeError`` or ``UnicodeEncodeError``, a ``ValueError``)."""
    if isinstance(value, bytes):
        return value
    if not isinstance(value, str):
        raise TypeError(type(value).__name__)
    return value.encode("ascii")


_HTTP_CLIENT: Final[Any] = type("HttpClient", (_LeanRequests, openai.DefaultAsyncHttpxClient), {})


class SdkClient(openai.AsyncOpenAI):
    """The ``openai`` client, parsing each absolute request URL once.

    :class:`RawPost` gives the same whole URL for every request of an endpoint, and the SDK
    parsed it again for each (``_prepare_url``: 3 % of the harness's CPU per completion with
    912 conversations in flight, an IP address parsed each time). The URL is the one the SDK
    makes; a relative one (merged with ``base_url``, which may change) is not kept, and any
    other call takes the SDK's path.
    """

    @property
    def user_agent(self) -> str:
        # the SDK names the client's class ("SdkClient/Python ..."): a server sees the package's
        return f"{openai.AsyncOpenAI.__name__}/Python {self._version}"

    def _prepare_url(self, url: Any, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs or not isinstance(url, str):
            return super()._prepare_url(url, *args, **kwargs)
        parsed = _parsed_url(url)
        # an absolute URL is its own (what the SDK makes of it); a relative one is merged
        # with base_url, which may change
        return super()._prepare_url(url) if parsed.is_relative_url else parsed


def http_client(**kwargs: Any) -> Any:
    """The ``openai`` client's default HTTP client (``DefaultAsyncHttpxClient``, its
    arguments), building the SDK's plain request in one pass."""
    return _HTTP_CLIENT(**kwargs)


def http_options(
    base_url: str | None,
    *,
    max_connections: int,
    timeout_seconds: float,
    on_connected: Callable[[], None],
) -> tuple[Any, dict[str, Any]]:
    """The timeout for the ``openai`` client and its HTTP client, and the extra arguments of
    the HTTP client (the pooled transport where it serves the endpoint)."""
    if not serves(base_url):
        return timeout_seconds, {}
    transport = pooled_transport(
        LIBRARY, max_connections=max_connections, on_connected=on_connected
    )
    return LIBRARY.Timeout(None, connect=timeout_seconds), {"transport": transport}
