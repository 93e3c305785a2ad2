"""Headers of an endpoint's requests beyond the bearer key: the key in another header, and
headers of the team's own.

Some endpoints take the key in a header of their own (Azure OpenAI's ``api-key``, gateways'
``x-api-key``) and gateways want headers of theirs (a second key, a routing or tracing tag).
An endpoint's configuration names them (``key_header``, ``headers``); :func:`headers_hook` is
the HTTP client's request hook that sets them, below the ``openai`` package, so that every
release of it sends the same bytes:

- with ``key_header``, the key goes in that header, as it is (no ``Bearer``), and no
  ``Authorization`` header is sent unless ``headers`` names one;
- ``headers`` are set on every request, over the package's own (``User-Agent`` included);
- both go only to the base URL's origin (an ``http://`` to ``https://`` upgrade of the same
  host is the same origin, as the HTTP library has it): a redirect elsewhere carries neither,
  as the library drops ``Authorization`` there.

Header values may be secrets: they are masked like the key wherever the run writes or shows
text, and the recorded settings keep their names only (``secrets.redact_headers``).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

__all__ = ["AUTHORIZATION", "header_name_problem", "headers_hook", "headers_problem"]

AUTHORIZATION: Final = "authorization"

# RFC 9110 token characters
_TOKEN: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# visible ASCII, space and tab: what every HTTP library sends as it is
_VALUE: Final = re.compile(r"[\t\x20-\x7e]*")
_FRAMING: Final = frozenset(
    {
        "connection",
        "content-encoding",
        "content-length",
        "content-type",
        "expect",
        "host",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
"""Headers the HTTP client sets from the request itself: a value of ours would break it."""

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def header_name_problem(name: object) -> str | None:
    """Why ``name`` cannot be a header of ours, or None."""
    if not isinstance(name, str) or not _TOKEN.fullmatch(name):
        return f"{name!r} is not a header name (letters, digits and !#$%&'*+-.^_`|~)"
    if name.lower() in _FRAMING:
        return f"{name} is set by the HTTP client from the request itself"
    return None


def headers_problem(
    headers: Mapping[Any, Any], *, key_header: str | None, bearer_key: bool
) -> str | None:
    """Why ``headers`` cannot be sent beside the key (in ``key_header``; as the bearer key
    with ``bearer_key``), or None. A value is never quoted: it may be a secret."""
    seen: set[str] = set()
    for name, value in headers.items():
        problem = header_name_problem(name)
        if problem is not None:
            return problem
        folded = name.lower()
        if folded in seen:
            return f"{name} is named twice (header names ignore case)"
        seen.add(folded)
        if key_header is not None and folded == key_header.lower():
            return f"{name} is the key's header (the key is its value)"
        if bearer_key and folded == AUTHORIZATION:
            return f"{name} carries the bearer key"
        if not isinstance(value, str) or not _VALUE.fullmatch(value):
            return (
                f"the value of {name} is not a string of visible ASCII characters, spaces "
                "and tabs (not shown: it may be a secret)"
            )
    return None


def _origin(scheme: str, host: str, port: int | None) -> tuple[str, str, int]:
    scheme = scheme.lower()
    return scheme, host.lower(), port or _DEFAULT_PORTS.get(scheme, 0)


def _same_origin(base: tuple[str, str, int], url: Any) -> bool:
    """Whether a request to ``url`` (the HTTP library's URL) goes to the base URL's origin,
    an ``http`` to ``https`` upgrade on the default ports included."""
    scheme, host, port = _origin(url.scheme, url.host, url.port)
    if host != base[1]:
        return False
    if (scheme, port) == (base[0], base[2]):
        return True
    return base[0] == "http" and base[2] == 80 and scheme == "https" and port == 443


def headers_hook(
    base_url: str, *, key: str, key_header: str | None, headers: Mapping[str, str]
) -> Callable[[Any], Awaitable[None]] | None:
    """The request hook (``event_hooks={"request": [...]}``) of an endpoint at ``base_url``
    sending ``key`` in ``key_header`` and ``headers``; None when it sends neither."""
    if key_header is None and not headers:
        return None
    parts = urlsplit(base_url)
    base = _origin(parts.scheme, parts.hostname or "", parts.port)
    ours = dict(headers)
    names = [*ours, *([key_header] if key_header is not None else [])]

    async def hook(request: Any) -> None:
        if not _same_origin(base, request.url):
            # a redirect's request copies the headers of the one before it
            for name in names:
                request.headers.pop(name, None)
            return
        if key_header is not None:
            request.headers.pop(AUTHORIZATION, None)
            request.headers[key_header] = key
        request.headers.update(ours)

    return hook
