"""An endpoint's base URL: checked where it is given, split where a client is built.

A base URL is ``http://`` or ``https://`` (in any case), with a host and, when it names one, a
port from 1 to 65535; what no request could reach (``http:///v1``, port ``99999``, ``:18101:80``)
is refused where it is given, not lost in a scenario's set-up. Its ``user:password@`` part is
dropped first (``secrets.strip_userinfo``, up to the authority's last ``@``: a password may
hold one): the key travels as the bearer key.

The ``openai`` package appends ``chat/completions`` to the base URL as text, after any query:
``…/deployments/gpt-4o?api-version=2024-10-21`` was requested as
``…/gpt-4o/?api-version=2024-10-21chat/completions``. A client is built with the URL without its
query, and the query goes as the package's ``default_query`` (added to every request). A client
without a configured URL takes ``OPENAI_BASE_URL`` as the package would, by the same rules: the
package sent that URL's password as Basic auth instead of the key, and its HTTP library logged
it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from tau2_retail.models.secrets import strip_userinfo

__all__ = [
    "BASE_URL_ENV",
    "NOT_HTTP",
    "ClientURL",
    "checked_base_url",
    "client_url",
    "shown_environment_url",
]

BASE_URL_ENV: Final = "OPENAI_BASE_URL"
"""The variable the ``openai`` package reads when no base URL is given."""

_SCHEMES: Final = ("http", "https")
NOT_HTTP: Final = "not an http:// or https:// URL"


def checked_base_url(raw: str) -> str:
    """``raw`` as a base URL: trimmed, without userinfo, its scheme in lower case; ``ValueError``
    saying what is wrong (the message never holds the dropped userinfo)."""
    value = strip_userinfo(raw.strip())
    scheme, separator, rest = value.partition("://")
    if not separator or scheme.lower() not in _SCHEMES:
        raise ValueError(NOT_HTTP)
    value = f"{scheme.lower()}://{rest}"
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:  # not shown: a password holding "/" leaves its start where a port is
        port = 0
    if not parts.hostname:
        raise ValueError("it names no host")
    if port == 0:
        raise ValueError("its port is not a number from 1 to 65535")
    return value


class ClientURL(NamedTuple):
    """The base URL a client is built with (None: the package's default) and the query it
    adds to every request."""

    base_url: str | None
    query: dict[str, str]


def client_url(base_url: str | None, environ: Mapping[str, str]) -> ClientURL:
    """What a client is built with for the configured ``base_url`` (``OPENAI_BASE_URL`` in
    ``environ`` when None); ``ValueError`` for an ``OPENAI_BASE_URL`` that is no base URL."""
    url = base_url
    if url is None and environ.get(BASE_URL_ENV, "").strip():
        url = checked_base_url(environ[BASE_URL_ENV])
    if url is None:
        return ClientURL(None, {})
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    return ClientURL(urlunsplit(parts._replace(query="", fragment="")), query)


def shown_environment_url(environ: Mapping[str, str]) -> str | None:
    """``OPENAI_BASE_URL`` of ``environ`` as a message names where a role without a base URL
    sends its requests, ``URL (OPENAI_BASE_URL)``; None when unset, or not a base URL (the
    client refuses it as it is built)."""
    try:
        url = client_url(None, environ).base_url
    except ValueError:
        return None
    return f"{url} ({BASE_URL_ENV})" if url else None
