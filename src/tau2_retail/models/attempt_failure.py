"""One failed attempt of a chat completion: what failed, whether asking again can help.

HTTP 408/429/500/502/503/504, Cloudflare's 520-524 (its edge could not get the origin's reply) and
529 (Anthropic's "overloaded") are retried (after the server's ``Retry-After``, seconds or an HTTP
date, when it sends one); a 5xx whose body says the request itself is invalid is not, nor a 429
saying the account's quota is exhausted (OpenAI's ``insufficient_quota``, or its message, which is
all the LiteLLM proxy passes on: waiting does not refill it). A 400 about the context length is
``ContextWindowExceeded``; any other 4xx is an ``EndpointError`` at once, since a wrong URL, model
or key does not heal by waiting. A server that answers an error status saying the model's output
could not be parsed (``tau2_retail.models.unparsed``) raises ``UnparsedModelOutput``: the model's
malformed output, not an outage. Bodies are kept masked: an excerpt for the message, the whole body
(cut at ``FULL_BODY_CHARS``) for the artifacts.
"""

from __future__ import annotations

import email.utils
import ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from tau2_retail.errors import ContextWindowExceeded, EndpointError, UnparsedModelOutput
from tau2_retail.models.secrets import strip_userinfo
from tau2_retail.models.text import finite_or_none, valid_unicode
from tau2_retail.models.unparsed import unparsed_output_server

if TYPE_CHECKING:
    import openai

    from tau2_retail.models.messages import Message

__all__ = [
    "BODY_EXCERPT_CHARS",
    "CONTEXT_WINDOW_MARKERS",
    "FULL_BODY_CHARS",
    "INVALID_REQUEST_MARKERS",
    "RATE_LIMITED",
    "RETRYABLE_STATUSES",
    "AttemptFailure",
    "cause_text",
    "connection_failure",
    "excerpt",
    "full_body",
    "redirected",
    "retry_after_seconds",
    "status_failure",
]

RETRYABLE_STATUSES: Final = frozenset({408, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529})
"""HTTP statuses retried with backoff; any other error status fails at once."""

CONTEXT_WINDOW_MARKERS: Final = (
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "context window",
    "context size",
    "too many tokens",
    "prompt is too long",
    # vLLM's V1 engine
    "is longer than the maximum model length",
    # vLLM (0.32) when the prompt is exactly --max-model-len tokens: no room for one output
    # token (the suite never asks for 0: max_tokens is at least 1)
    "max_tokens must be at least 1, got 0",
    # transformers serve (5.25): a prompt of --max-model-len tokens or more ("The prompt has 1024
    # tokens, but the model takes at most 1024, prompt and answer (`--max-model-len`).")
    "but the model takes at most",
    # TGI (HTTP 422) and Together (400): MaxTotalTokens and InputLength
    "`inputs` tokens + `max_new_tokens` must be",
    "`inputs` must have less than",
    # Gemini's OpenAI-compatible endpoint
    "exceeds the maximum number of tokens allowed",
    # xAI
    "maximum prompt length",
    # Amazon Bedrock (its access gateway passes the text on in a 400)
    "input is too long for requested model",
    # Anthropic (input and max_tokens over the limit)
    "exceed context limit",
    # Cerebras, and OpenAI's own message
    "reduce the length of the messages",
)
"""Lower-case phrases that mark a 400, 413 or 422 as a prompt too long for the model (OpenAI,
vLLM, llama.cpp, TGI and others word it differently), found anywhere in the error body."""

CONTEXT_WINDOW_STATUSES: Final = frozenset({400, 413, 422})

BODY_EXCERPT_CHARS: Final = 300

RATE_LIMITED: Final = 429

QUOTA_EXHAUSTED_MARKERS: Final = (
    "insufficient_quota",
    # OpenAI's message for it: the LiteLLM proxy (1.108) passes the message on, not the code
    "exceeded your current quota",
)
"""Lower-case phrases of a 429 saying the account's quota is exhausted (OpenAI's code and
message): not retried, counted toward the circuit breaker like a 401."""

FULL_BODY_CHARS: Final = 1_000_000
"""At most this much of an error body is kept whole for the artifacts (a hostile server could
send gigabytes): an error status's body is read this many bytes at most, then cut with a
marker (``error_body_hook``), before the ``openai`` client reads it whole."""

INVALID_REQUEST_MARKERS: Final = ("input should be", "validation error")
"""Lower-case phrases of a body saying the request itself is invalid: such a reply is not
retried even with a 5xx status (llama.cpp's server answers a schema violation with HTTP 500)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptFailure:
    """One failed attempt, kept to decide the wait and to word the final error.

    ``fatal`` is the error to raise at once (retrying cannot help); ``endpoint_level`` says
    whether the failure counts toward the circuit breaker (a 401 does; an invalid request or
    a context-length 400 shows the endpoint is up).
    """

    detail: str
    cause: BaseException
    status: int | None = None
    body: str = ""
    full_body: str = ""
    retry_after: float | None = None
    fatal: EndpointError | None = None
    endpoint_level: bool = True
    connection: bool = False  # no connection, or it broke before any reply
    timeout: float | None = None  # the attempt got no complete reply within this many seconds

    @property
    def answered(self) -> bool:
        """The endpoint sent a reply (an error status or a body we refuse)."""
        return self.status is not None or not self.endpoint_level


def status_failure(
    error: openai.APIStatusError,
    *,
    where: str,
    attempts: int,
    redact: Callable[[str], str],
    sent: Sequence[Message] | None = None,
) -> AttemptFailure:
    """The failure of an HTTP error status; ``fatal`` is set when retrying cannot help.
    ``sent``: the request's messages (whether a server's words about the history's arguments
    can be about the model's)."""
    status = error.status_code
    text = error.response.text  # at most FULL_BODY_CHARS bytes and a marker (the hook)
    body = excerpt(text, redact)
    whole = valid_unicode(redact(text))
    server = unparsed_output_server(status, text, sent=sent)
    if server is not None:
        # the model's malformed output: asking again sends the same prompt (at
        # temperature 0 the same output); the endpoint answered, so it is up
        fatal: EndpointError = UnparsedModelOutput(
            f"{where}: the server could not parse the model's output "
            f"({server}, HTTP {status}; its whole reply is in the scenario's "
            f"endpoint_error.txt): {body}",
            server=server,
            status=status,
            body=body,
            full_body=whole,
        )
        return AttemptFailure(detail=body, cause=error, fatal=fatal, endpoint_level=False)
    invalid = any(m in text.lower() for m in INVALID_REQUEST_MARKERS)
    no_quota = status == RATE_LIMITED and _quota_exhausted(text)
    shown = f"HTTP {status}{redirected(error.response, redact)}"
    if status in RETRYABLE_STATUSES and not (status >= 500 and invalid) and not no_quota:
        return AttemptFailure(
            detail=f"{shown}: {body}",
            cause=error,
            status=status,
            body=body,
            full_body=whole,
            retry_after=retry_after_seconds(error.response.headers),
        )
    lowered = text.lower()  # the whole body: a proxy may put its words before the marker
    if status in CONTEXT_WINDOW_STATUSES and any(m in lowered for m in CONTEXT_WINDOW_MARKERS):
        fatal = ContextWindowExceeded(
            f"{where}: the prompt exceeds the model's context window (HTTP {status}): {body}",
            status=status,
            body=body,
            full_body=whole,
        )
        return AttemptFailure(detail=body, cause=error, fatal=fatal, endpoint_level=False)
    return _refused(
        error, where=where, attempts=attempts, body=body, whole=whole, invalid=invalid, shown=shown
    )


def _refused(
    error: openai.APIStatusError,
    *,
    where: str,
    attempts: int,
    body: str,
    whole: str,
    invalid: bool,
    shown: str,
) -> AttemptFailure:
    """The failure of an error status that is not retried: the request, URL, model or key
    (``shown``: the status as the message says it, with the redirect that led to it)."""
    status = error.status_code
    request_rejected = status in (400, 413, 422) or (status >= 500 and invalid)
    if request_rejected:
        why = (
            "the server rejected the request as invalid; its whole reply is in the scenario's "
            "endpoint_error.txt"
        )
    elif status == 402 or _quota_exhausted(whole):
        why = "the account's quota or credits are exhausted"
    elif status in (401, 403, 404):
        why = "check the base URL, model name and API key"
    else:
        why = "waiting does not help this status"
    fatal = EndpointError(
        f"{where}: chat completion failed after {attempts} attempt(s): "
        f"{shown} (not retried: {why}): {body}",
        status=status,
        body=body,
        full_body=whole,
    )
    return AttemptFailure(
        detail=f"{shown}: {body}",
        cause=error,
        fatal=fatal,
        endpoint_level=not request_rejected,
    )


_METHOD_CHANGING_REDIRECTS: Final = frozenset({301, 302, 303})


def redirected(response: object, redact: Callable[[str], str]) -> str:
    """Where an error status came from when redirects led to it (the HTTP library follows
    them), else "": the message named the base URL alone, so a 404 or 405 of the server a
    redirect pointed at read as the configured server's own (``check the base URL``)."""
    history = getattr(response, "history", None)
    request = getattr(response, "request", None)
    if not history or request is None:
        return ""
    statuses = ", ".join(str(getattr(step, "status_code", "?")) for step in history)
    url = valid_unicode(redact(strip_userinfo(str(request.url))))
    note = f" from {url}, where HTTP {statuses} redirected the request"
    if request.method == "GET" and any(
        getattr(step, "status_code", None) in _METHOD_CHANGING_REDIRECTS for step in history
    ):
        note += (
            " (a 301, 302 or 303 turns the POST into a GET without its body, which no chat "
            "endpoint answers: set the base URL to the address it redirects to)"
        )
    return note


def _quota_exhausted(text: str) -> bool:
    lowered = text.lower()
    return any(marker in lowered for marker in QUOTA_EXHAUSTED_MARKERS)


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The wait the server asks for: ``retry-after-ms`` (OpenAI) or ``Retry-After``."""
    # Not a finite number ("nan", "inf"): as if the header were absent (the backoff decides);
    # a NaN would otherwise reach the sleep and wait_seconds, which no JSON can hold.
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            wait = finite_or_none(float(milliseconds) / 1000)
        except ValueError:
            wait = None
        if wait is not None:
            return wait
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return finite_or_none(float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - datetime.now(UTC)).total_seconds()


def full_body(text: str, redact: Callable[[str], str]) -> str:
    """The body as sent, key removed, cut at ``FULL_BODY_CHARS``."""
    if len(text) > FULL_BODY_CHARS:
        text = text[:FULL_BODY_CHARS] + f"… [{len(text) - FULL_BODY_CHARS} more characters]"
    return valid_unicode(redact(text))


def excerpt(text: str, redact: Callable[[str], str]) -> str:
    """At most ``BODY_EXCERPT_CHARS`` characters of a body, whitespace collapsed, key removed."""
    flat = redact(" ".join(text.split()))
    if len(flat) <= BODY_EXCERPT_CHARS:
        return flat
    return flat[: BODY_EXCERPT_CHARS - 1] + "…"


def connection_failure(error: BaseException, *, where: str, attempts: int) -> AttemptFailure:
    """The failure of an attempt whose connection failed: retried, unless the server's TLS
    certificate is not trusted here (asking again meets the same certificate: it was retried
    and called the endpoint down, with no word of the fix)."""
    detail = f"connection failed ({cause_text(error)})"
    if not any(isinstance(e, ssl.SSLCertVerificationError) for e in _chain(error)):
        return AttemptFailure(detail=detail, cause=error, connection=True)
    fatal = EndpointError(
        f"{where}: chat completion failed after {attempts} attempt(s): {detail}; the server's "
        "certificate is not trusted here: name the file of its CA with SSL_CERT_FILE (not "
        "retried)"
    )
    return AttemptFailure(detail=detail, cause=error, fatal=fatal, connection=True)


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and its causes and contexts, each once."""
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def cause_text(error: BaseException) -> str:
    """The innermost cause's type and message, e.g. ``RemoteProtocolError: Server disconnected``."""
    inner: BaseException = error
    while inner.__cause__ is not None:
        inner = inner.__cause__
    text = str(inner)
    return f"{type(inner).__name__}: {text}" if text else type(inner).__name__
