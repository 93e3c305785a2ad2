"""The ``openai`` client of one endpoint, built from its configuration in this environment.

The HTTP library reads the environment when a client is built: the proxy variables
(``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``) and ``SSL_CERT_FILE``, and the
``openai`` package ``OPENAI_BASE_URL``. A value it cannot use (a SOCKS proxy without its
package, a proxy scheme it does not know, a certificate file that is missing or holds no
certificate) raised in the first scenario's set-up: a traceback, and every scenario lost.
:func:`client_problem` builds the client once at start-up instead, where the problem is one line
naming the role and the variables.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, Final

import openai

from tau2_retail.models.attempt_failure import FULL_BODY_CHARS
from tau2_retail.models.base_url import BASE_URL_ENV, client_url
from tau2_retail.models.bounded import error_body_hook
from tau2_retail.models.config import OPENAI_DEFAULT_BASE_URL, EndpointConfig
from tau2_retail.models.logged_secrets import mask_in_logs
from tau2_retail.models.request_headers import headers_hook
from tau2_retail.models.sdk_transport import LIBRARY, SdkClient, http_client, http_options
from tau2_retail.models.secrets import strip_userinfo

__all__ = ["DEFAULT_MAX_CONNECTIONS", "build_sdk_client", "client_problem"]

DEFAULT_MAX_CONNECTIONS: Final = 1000
"""The SDK's own default (``openai.DEFAULT_CONNECTION_LIMITS.max_connections``)."""

_ENVIRONMENT: Final = (
    BASE_URL_ENV,
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)
"""What the client reads from the environment as it is built (any case, for the proxies)."""


def build_sdk_client(
    config: EndpointConfig, api_key: str, *, on_connected: Callable[[], None] = lambda: None
) -> SdkClient:
    """The ``openai`` client of ``config``: no retries of its own (ours are), keep-alive as
    wide as the connection limit, error bodies read within a bound, the base URL's query sent
    as its default query (``models/base_url.py``), the key in its own header and the
    configured headers set by a request hook (``models/request_headers.py``).
    ``OPENAI_BASE_URL`` is read from ``os.environ``, where the package would read it."""
    where = client_url(config.base_url, os.environ)
    connections = config.max_connections or DEFAULT_MAX_CONNECTIONS
    # Limits of the transport the SDK uses (httpx, or httpx2 in recent releases), taken from
    # its own default so that this module does not name the transport. Keep-alive matches
    # the connection limit: with many conversations in flight, the SDK's default of 100
    # idle connections made every request past the 100th open a new TCP connection.
    limits = type(openai.DEFAULT_CONNECTION_LIMITS)(
        max_connections=connections, max_keepalive_connections=connections
    )
    # plain http: the pooled transport, and only the attempt's deadline (sdk_transport.py)
    timeout, transport = http_options(
        where.base_url,
        max_connections=connections,
        timeout_seconds=config.timeout_seconds,
        on_connected=on_connected,
    )
    hooks: dict[str, list[Any]] = {
        "response": [error_body_hook(LIBRARY.AsyncByteStream, max_bytes=FULL_BODY_CHARS)]
    }
    own = headers_hook(
        where.base_url or OPENAI_DEFAULT_BASE_URL,
        key=api_key,
        key_header=config.key_header,
        headers=config.headers,
    )
    if own is not None:
        hooks["request"] = [own]
    client = SdkClient(
        base_url=where.base_url,
        default_query=where.query or None,
        api_key=api_key,
        timeout=timeout,
        max_retries=0,
        http_client=http_client(
            limits=limits,
            timeout=timeout,
            event_hooks=hooks,
            **transport,
        ),
    )
    # after the client: building it imported the core library's loggers
    for secret in (api_key, *config.headers.values()):
        mask_in_logs(secret)
    return client


def client_problem(config: EndpointConfig) -> str | None:
    """Why no client of ``config`` can be built in this process's environment, naming what it
    read from it; None when one can (it is built, and left unused: it opened nothing)."""
    env: Mapping[str, str] = os.environ
    try:
        build_sdk_client(config, "EMPTY")
    except Exception as error:  # whatever the library raises for a value it cannot use
        cause = strip_userinfo(str(error)) or type(error).__name__
        read = [
            f"{name}={strip_userinfo(value)}"
            for name, value in sorted(env.items())
            if name.upper() in _ENVIRONMENT and value
        ]
        given = "; ".join(read) if read else "none of them is set"
        return (
            f"its HTTP client cannot be made here ({type(error).__name__}: {cause}); check "
            f"the base URL, {', '.join(_ENVIRONMENT[1:])} ({given})"
        )
    return None
