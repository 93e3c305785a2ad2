"""How to reach one OpenAI-compatible endpoint: model, URL, key variable, sampling, retries.

``EndpointConfig`` is shared by the agent, the user simulator and the judge, and by the pytest
options layer that builds it. It holds the *name* of the environment variable with the API key,
never the key, so its ``repr`` and ``to_json`` are safe to print and to write into artifacts.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, NoReturn
from urllib.parse import urlsplit

from tau2_retail.codec import Omitted
from tau2_retail.errors import ConfigError
from tau2_retail.models.base_url import BASE_URL_ENV, checked_base_url
from tau2_retail.models.bounded import DEFAULT_MAX_REPLY_BYTES
from tau2_retail.models.breaker import (
    DEFAULT_BREAKER_FAILURES,
    DEFAULT_BREAKER_WINDOW_SECONDS,
    DEFAULT_PROBE_SECONDS,
)
from tau2_retail.models.request_headers import header_name_problem, headers_problem
from tau2_retail.models.secrets import strip_userinfo

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "ENDPOINT_BOUNDS",
    "NO_API_KEY",
    "OPENAI_DEFAULT_BASE_URL",
    "Bound",
    "EndpointConfig",
]

DEFAULT_API_KEY_ENV: Final = "OPENAI_API_KEY"
NO_API_KEY: Final = "none"
"""``api_key_env`` of an endpoint that takes no key: nothing is read, nothing is checked."""
OPENAI_DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
"""Where the ``openai`` package sends requests when neither a base URL nor ``OPENAI_BASE_URL``
is set."""

# special-use and conventional names of a local network: a server there may well take no key
_LOCAL_SUFFIXES: Final = (".localhost", ".local", ".internal", ".lan", ".home.arpa")

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class Bound:
    """The accepted range of a numeric setting: one rule for the option parsers of
    ``tau2_retail.settings`` and for :class:`EndpointConfig` (a non-finite number, or a bool,
    is never accepted)."""

    low: float
    high: float | None = None
    low_open: bool = False
    integer: bool = False

    def accepts(self, value: object) -> bool:
        if not (_is_int(value) if self.integer else _is_number(value)):
            return False
        assert isinstance(value, int | float)
        above = value > self.low if self.low_open else value >= self.low
        return above and (self.high is None or value <= self.high)

    @property
    def accepted(self) -> str:
        """What is accepted, in words: ``an integer >= 1``, ``a number > 0 and <= 1``."""
        if self.integer:
            return f"an integer >= {self.low}"
        low = f"a number {'>' if self.low_open else '>='} {self.low}"
        return low + (f" and <= {self.high}" if self.high is not None else "")


#: the numeric fields of an endpoint and their ranges (None is accepted where the field is
#: optional: temperature, top_p, max_tokens, max_connections)
ENDPOINT_BOUNDS: Final[Mapping[str, Bound]] = {
    "temperature": Bound(0),
    "top_p": Bound(0, 1, low_open=True),
    "max_tokens": Bound(1, integer=True),
    "timeout_seconds": Bound(0, low_open=True),
    "max_retries": Bound(0, integer=True),
    "backoff_base_seconds": Bound(0),
    "backoff_max_seconds": Bound(0),
    "max_connections": Bound(1, integer=True),
    "breaker_failures": Bound(1, integer=True),
    "breaker_window_seconds": Bound(0),
    "breaker_probe_seconds": Bound(0),
    "max_reply_bytes": Bound(1024, integer=True),
}
_OPTIONAL_FIELDS: Final = frozenset({"temperature", "top_p", "max_tokens", "max_connections"})


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointConfig:
    """One OpenAI-compatible chat endpoint and how to call it.

    - ``model``: the model id at the endpoint.
    - ``base_url``: e.g. ``http://127.0.0.1:8000/v1``; None means the ``openai`` package's default
      (``OPENAI_BASE_URL`` if set, else api.openai.com). A ``user:password@`` part is removed
      (never printed, never sent as Basic auth): the key travels as the bearer key.
    - ``api_key_env``: the name of the environment variable holding the key, read when a client is
      built; ``none`` (:data:`NO_API_KEY`) for an endpoint that takes no key. An endpoint that
      needs a key (see :meth:`missing_key`) with the variable unset is refused at start-up; a
      local one without it gets ``EMPTY`` (local servers such as vLLM or Ollama accept any key).
    - ``key_header``: the header that carries the key, as it is (Azure OpenAI's ``api-key``);
      None: ``Authorization: Bearer KEY``. ``headers``: headers sent on every request (a
      gateway's own). Both go to the base URL's origin only; values are masked like the key
      and never recorded (``tau2_retail.models.request_headers``).
    - ``temperature``, ``top_p``, ``max_tokens``: sent only when set.
    - ``seed``: sent when the call passes none; a seed given to the call wins.
    - ``extra_body``: server-specific request fields merged into the JSON body (for example
      ``{"chat_template_kwargs": {"enable_thinking": false}}``); they override same-named fields.
    - ``timeout_seconds``: the total deadline of one attempt, from connecting to the last byte
      of the reply. ``max_retries``: attempts after the first one, with exponential backoff
      from ``backoff_base_seconds`` capped at ``backoff_max_seconds``; a ``Retry-After`` above
      the cap is not waited for (the endpoint counts as down).
    - ``breaker_failures``: consecutive failed attempts after which the endpoint counts as
      down and calls fail at once, provided none succeeded for ``breaker_window_seconds``
      since the first of them; ``breaker_probe_seconds``: how often a down endpoint is probed
      again (see ``tau2_retail.models.breaker``).
    - ``max_connections``: open HTTP connections to the endpoint at most, shared by every
      conversation on the client (None: the ``openai`` package's default, 1000).
    - ``max_reply_bytes``: the largest reply body read, counted as it arrives and after
      decompression (``tau2_retail.models.bounded``); a larger one is an infra error.

    Values are checked at construction; a bad one raises ``ConfigError`` naming the field.
    """

    model: str
    base_url: str | None = None
    api_key_env: str = DEFAULT_API_KEY_ENV
    key_header: Annotated[str | None, Omitted] = None
    headers: Annotated[Mapping[str, str], Omitted] = field(default_factory=dict, repr=False)
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    extra_body: Mapping[str, Any] = field(default_factory=dict, repr=False)
    timeout_seconds: float = 120.0
    max_retries: int = 4
    backoff_base_seconds: float = 1.0
    backoff_max_seconds: float = 30.0
    max_connections: int | None = None
    breaker_failures: int = DEFAULT_BREAKER_FAILURES
    breaker_window_seconds: float = DEFAULT_BREAKER_WINDOW_SECONDS
    breaker_probe_seconds: float = DEFAULT_PROBE_SECONDS
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES

    def __post_init__(self) -> None:
        if not (_is_str(self.model) and self.model.strip()):
            _bad("model", self.model, "a non-empty model id")
        if self.base_url is not None:
            if not _is_str(self.base_url):
                _bad("base_url", self.base_url, "an http:// or https:// URL, or None")
            try:
                object.__setattr__(self, "base_url", checked_base_url(self.base_url))
            except ValueError as error:
                # not shown: what is left of a password holding "/" would be
                raise ConfigError(
                    "EndpointConfig.base_url: expected an http:// or https:// URL naming a "
                    f"host, or None; this one is not ({error})"
                ) from None
        if not (_is_str(self.api_key_env) and _ENV_NAME.fullmatch(self.api_key_env)):
            # The value is not echoed: a user may have pasted the key itself here.
            raise ConfigError(
                "EndpointConfig.api_key_env must be the NAME of an environment variable "
                "(letters, digits and underscores, not starting with a digit), e.g. "
                f"{DEFAULT_API_KEY_ENV}; the value given is not shown in case it is a key"
            )
        self._check_headers()
        if self.seed is not None and not _is_int(self.seed):
            _bad("seed", self.seed, "an integer, or None")
        self._check_extra_body()
        for name, bound in ENDPOINT_BOUNDS.items():
            value = getattr(self, name)
            optional = name in _OPTIONAL_FIELDS
            if not ((optional and value is None) or bound.accepts(value)):
                _bad(name, value, bound.accepted + (", or None" if optional else ""))

    def _check_headers(self) -> None:
        if self.key_header is not None:
            problem = header_name_problem(self.key_header)
            if problem is not None:
                raise ConfigError(f"EndpointConfig.key_header: {problem}")
        if not isinstance(self.headers, Mapping):
            raise ConfigError("EndpointConfig.headers: expected a mapping of names to strings")
        bearer = self.key_header is None and not self.takes_no_key
        problem = headers_problem(self.headers, key_header=self.key_header, bearer_key=bearer)
        if problem is not None:
            raise ConfigError(f"EndpointConfig.headers: {problem}")
        object.__setattr__(self, "headers", dict(self.headers))

    def _check_extra_body(self) -> None:
        if not _is_json_object(self.extra_body):
            _bad("extra_body", self.extra_body, "a JSON object (a mapping with string keys)")
        try:
            json.dumps(self.extra_body, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ConfigError(
                f"EndpointConfig.extra_body: got {self.extra_body!r}; expected JSON-able values "
                f"({e})"
            ) from e
        # A private copy: the frozen config must not change when the caller's dict does.
        object.__setattr__(self, "extra_body", dict(self.extra_body))

    @property
    def takes_no_key(self) -> bool:
        return self.api_key_env.lower() == NO_API_KEY

    def needs_key(self, environ: Mapping[str, str]) -> bool:
        """Whether the endpoint must get a key: OpenAI's default base URL, or any host outside
        the loopback, private and link-local ranges and the local network's names (a bare host
        name, ``localhost``, ``*.local``, ``*.internal``, ``*.lan``, ``*.home.arpa``). Names
        are not resolved: ``gpu.example.com`` needs a key even when it is on your network;
        say ``api_key_env="none"`` for such a server."""
        if self.takes_no_key:
            return False
        try:
            host = urlsplit(self.requests_url(environ)).hostname
        except ValueError:
            return True
        if not host:
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return host != "localhost" and "." in host and not host.endswith(_LOCAL_SUFFIXES)
        return not (address.is_loopback or address.is_private or address.is_link_local)

    def missing_key(self, environ: Mapping[str, str]) -> str | None:
        """Why this endpoint cannot be called with ``environ`` (its key variable unset or empty
        while it needs a key), or None."""
        if not self.needs_key(environ) or environ.get(self.api_key_env, "").strip():
            return None
        state = "empty" if self.api_key_env in environ else "unset"
        return (
            f"{self.requests_url(environ)} needs an API key, but the variable {self.api_key_env} "
            f"is {state}"
        )

    def requests_url(self, environ: Mapping[str, str]) -> str:
        """Where the requests go: the configured base URL, else ``OPENAI_BASE_URL`` in
        ``environ`` (as the ``openai`` package reads it), else OpenAI's; without userinfo."""
        url = self.base_url or environ.get(BASE_URL_ENV, "").strip() or OPENAI_DEFAULT_BASE_URL
        return strip_userinfo(url)


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _is_json_object(value: object) -> bool:
    return isinstance(value, Mapping) and all(isinstance(key, str) for key in value)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _bad(name: str, value: object, accepted: str) -> NoReturn:
    raise ConfigError(f"EndpointConfig.{name}: got {value!r}; expected {accepted}")
