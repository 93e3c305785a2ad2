"""The OpenAI-compatible chat model: ``AsyncOpenAI`` for the wire, our own retries around it.

The ``openai`` client's built-in retries are turned off (``max_retries=0``) so that the policy is
ours, visible and testable: connection errors, timeouts, the transient HTTP statuses
(``attempt_failure.RETRYABLE_STATUSES``) and replies that cannot be parsed (a body that is not
JSON, no choices) are retried with exponential backoff (``base * 2**attempt``, capped, plus up
to 10 % jitter) or after the server's ``Retry-After``
(seconds or an HTTP date, also capped). When the attempts run out, ``EndpointError`` says what
failed, with the status, a short body excerpt and the number of attempts. A 400 about the context
length raises ``ContextWindowExceeded`` at once; any other 4xx raises ``EndpointError`` at once,
since a wrong URL, model or key does not heal by waiting (``tau2_retail.models.attempt_failure``
classifies each failed attempt).

The reply body is parsed here, not by the ``openai`` models, so that a malformed reply is caught
where JSON enters: tool-call arguments stay the raw string the model sent (the conversation turns
invalid JSON into a tool error for the model), an empty string becomes ``{}``, a missing call id
gets ``call_<n>``, and half a UTF-16 surrogate pair in any kept text becomes U+FFFD. A reply
is kept exactly as the model wrote it (an echoed API key is masked where the run writes or
shows text, ``tau2_retail.models.masking``); the error text made here is masked as it is made.
The ``finish_reason`` of the first choice is kept on the turn and recorded in the transcript.

A server that answers an error status saying the model's output could not be parsed
(``tau2_retail.models.unparsed``: llama.cpp, vLLM, Ollama, TGI) raises ``UnparsedModelOutput``
at once: the model's malformed output, not an outage.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import os
import random
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import openai

from tau2_retail.errors import EndpointDown, EndpointError
from tau2_retail.models.attempt_failure import (
    RATE_LIMITED,
    AttemptFailure,
    connection_failure,
    excerpt,
    full_body,
    status_failure,
)
from tau2_retail.models.backoff import BackoffGate
from tau2_retail.models.base_url import client_url, shown_environment_url
from tau2_retail.models.bounded import (
    ACCEPT_ENCODING,
    ReplyTooLarge,
    read_bounded,
)
from tau2_retail.models.breaker import CircuitBreaker
from tau2_retail.models.config import EndpointConfig
from tau2_retail.models.dropped_params import refused_parameter, without
from tau2_retail.models.masking import Masker
from tau2_retail.models.messages import AssistantTurn, Message
from tau2_retail.models.progress import current as current_progress
from tau2_retail.models.protocol import ClosedOnExit
from tau2_retail.models.ramp import Ramp
from tau2_retail.models.request_body import BodyEncoder, PreparedRequest, request_head
from tau2_retail.models.sdk_client import DEFAULT_MAX_CONNECTIONS, build_sdk_client
from tau2_retail.models.sdk_transport import (
    CONNECTION_ERRORS,
    POST_TAKES_CONTENT,
    TIMEOUT_ERRORS,
    RawPost,
)
from tau2_retail.models.wire import (
    ReadCompletion,
    UnreadableReply,
    encode_messages,
    read_completion,
)

__all__ = ["MISSING_API_KEY", "OpenAIChatModel", "Sleep"]

MISSING_API_KEY: Final = "EMPTY"
"""Sent when the configured key variable is unset; local servers accept any key."""

# Jitter spreads the retries of many xdist workers hitting one server at the same moment.
_JITTER_FRACTION: Final = 0.1

Sleep = Callable[[float], Awaitable[None]]


class _UnparseableReply(Exception):
    """A 200 reply that is not a chat completion we can read (retried like a 5xx)."""


class OpenAIChatModel(ClosedOnExit):
    """A ``ChatModel`` behind any OpenAI-compatible ``/chat/completions`` endpoint.

    The API key is read from the environment variable named by ``config.api_key_env`` when the
    model is constructed (``environ`` replaces ``os.environ``, for tests); unset or empty (or
    an endpoint that takes no key) means ``MISSING_API_KEY`` is sent. ``sleep``, ``clock`` and
    ``jitter`` (returning a number in [0, 1)) are injectable so tests neither wait nor depend
    on chance. Close the model with ``await model.close()`` or use it as an async context
    manager.
    """

    def __init__(
        self,
        config: EndpointConfig,
        *,
        environ: Mapping[str, str] | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.perf_counter,
        jitter: Callable[[], float] = random.random,
        droppable: frozenset[str] = frozenset(),
        notice: Callable[[str], None] | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        api_key = (not config.takes_no_key and env.get(config.api_key_env)) or MISSING_API_KEY
        self._config = config
        # where the requests go, as the client below is built: OPENAI_BASE_URL of os.environ
        # for a role without a base URL (its errors said "the default URL", OpenAI's, while
        # they came from the server that variable names)
        self._url = config.base_url or shown_environment_url(os.environ) or "the default URL"
        self._sleep = sleep
        self._clock = clock
        self._jitter = jitter
        self._call_ids = itertools.count()
        #: parameters the profile supplied, left out once the endpoint refuses them
        self._droppable = droppable
        self._dropped: set[str] = set()
        self._notice = notice
        self._redact = Masker([api_key, *config.headers.values()]).text
        self._gate = BackoffGate(clock=clock, sleep=sleep)
        self._encoder = BodyEncoder()
        connections = config.max_connections or DEFAULT_MAX_CONNECTIONS
        self.ramp = Ramp(maximum=connections)
        """Attempts in flight on this client: ramps up to the connection limit (slow start)."""
        self.breaker = CircuitBreaker(
            where=self._where(),
            failures=config.breaker_failures,
            window_seconds=config.breaker_window_seconds,
            probe_seconds=config.breaker_probe_seconds,
        )
        """Shared by every request of this client (one client per role and process)."""
        self._client = build_sdk_client(config, api_key, on_connected=self.ramp.connected)
        self._base_url = client_url(config.base_url, os.environ).base_url
        self._post = RawPost(self._client)

    @property
    def name(self) -> str:
        """The model id at the endpoint."""
        return self._config.model

    @property
    def base_url(self) -> str | None:
        """The base URL the client was built with: the configured one, else
        ``OPENAI_BASE_URL``; None for the ``openai`` package's own (OpenAI's)."""
        return self._base_url

    @property
    def config(self) -> EndpointConfig:
        """The endpoint configuration (it holds the key's variable name, never the key)."""
        return self._config

    def __repr__(self) -> str:
        return f"OpenAIChatModel({self._config!r})"

    async def close(self) -> None:
        """Close the HTTP connections. The model cannot be used afterwards."""
        await self._client.close()

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        seed: int | None = None,
    ) -> AssistantTurn:
        """One chat completion, retried as the module docstring says.

        Raises ``ContextWindowExceeded`` when the prompt is too long, ``EndpointDown`` at once
        while the endpoint's circuit breaker is open, and ``EndpointError`` when the endpoint
        failed (after the retries for transient failures, at once for others).
        """
        return await self.send(self.prepare(messages, tools=tools, seed=seed))

    def prepare(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        seed: int | None = None,
    ) -> PreparedRequest:
        """The request ``complete`` sends for these arguments (``send`` sends it), without the
        parameters this endpoint refused (``wire_body`` shows it as configured)."""
        request = PreparedRequest(messages=messages, tools=tools, seed=seed, content=b"")
        return self._encoded(request)

    def wire_body(self, request: PreparedRequest) -> dict[str, Any]:
        """The JSON body a prepared request puts on the wire, as a dict: model, sampling
        parameters, messages, tools and extra body (no key, no header: those travel beside
        it)."""
        sdk = self._request(request.messages, tools=request.tools, seed=request.seed)
        body = {k: v for k, v in sdk.items() if k not in ("messages", "extra_body")}
        body.update(sdk["extra_body"])
        return body

    async def send(self, request: PreparedRequest) -> AssistantTurn:
        """Send a request made by ``prepare``, retried as ``complete`` says."""
        allowed = self._config.max_retries + 1
        failure: AttemptFailure | None = None
        attempts = 0
        waited = 0.0
        progress = current_progress()  # the caller's view, should the request be cut
        for attempt in range(allowed):
            if failure is not None:
                waited += await self._back_off(attempt - 1, failure)
            else:
                waited += await self._gate.wait()
            try:
                self.breaker.before_attempt()
            except EndpointDown as refused:
                refused.attempts, refused.wait_seconds = attempts, waited
                raise
            attempts += 1
            if progress is not None:
                progress.attempts, progress.wait_seconds = attempts, waited
            started = self._clock()
            async with self.ramp.slot():
                outcome = await self._attempt(request, attempts)
                if isinstance(outcome, AttemptFailure) and self._drop_refused(outcome):
                    attempts += 1  # at once: the same request without what it refused
                    request = self._encoded(request)
                    outcome = await self._attempt(request, attempts)
            if isinstance(outcome, ReadCompletion) or outcome.answered:
                self.ramp.answered()
            elif outcome.connection:
                self.ramp.connection_failed()
            if isinstance(outcome, ReadCompletion):
                self.breaker.record_success()
                return AssistantTurn(
                    content=outcome.content,
                    tool_calls=outcome.tool_calls,
                    usage=outcome.usage,
                    finish_reason=outcome.finish_reason,
                    reasoning_content=outcome.reasoning_content,
                    latency_seconds=self._clock() - started,
                    attempts=attempts,
                    wait_seconds=waited,
                )
            failure = outcome
            if progress is not None:
                progress.failed_attempts += 1
                progress.last_failure, progress.failure_timeout = failure.detail, failure.timeout
                progress.endpoint = self._where()
            self._raise_unless_retried(failure, attempts, waited)
        assert failure is not None  # the loop ran at least once and did not return
        raise self._gave_up(failure, attempts, waited) from failure.cause

    def _encoded(self, request: PreparedRequest) -> PreparedRequest:
        """``request`` with its body, without the parameters this endpoint refused
        (``dropped_params``)."""
        config = self._sent_config()
        content = self._encoder.body(
            head=request_head(config, self._sent_seed(request)),
            messages=request.messages,
            tools=request.tools,
            extra=config.extra_body,
        )
        return dataclasses.replace(request, content=content)

    def _sent_config(self) -> EndpointConfig:
        """The configuration requests go with: without the parameters the endpoint refused."""
        return without(self._config, self._dropped) if self._dropped else self._config

    def _sent_seed(self, request: PreparedRequest) -> int | None:
        """The request's seed, unless the endpoint refused seeds."""
        return None if "seed" in self._dropped else request.seed

    def _drop_refused(self, failure: AttemptFailure) -> bool:
        """Whether ``failure`` refused a parameter the profile supplied (left out from now)."""
        # every droppable one: a request in flight when another's refusal dropped it was sent
        # with it, and is sent again without it too
        name = refused_parameter(failure, self._droppable)
        if name is None:
            return False
        if name in self._dropped:
            return True
        self._dropped.add(name)
        if self._notice is not None:
            status = failure.fatal.status if failure.fatal is not None else None
            self._notice(
                f"tau2: {self._where()} does not take the request parameter {name} (HTTP "
                f"{status}): its requests go without it from now on, as upstream tau2's do "
                "(litellm drops what a model does not support); the records keep it as "
                "configured"
            )
        return True

    async def _back_off(self, attempt: int, failure: AttemptFailure) -> float:
        """Wait before retrying after failed attempt ``attempt`` (0-based); the seconds waited."""
        delay = self._delay(attempt, failure.retry_after)
        if failure.status == RATE_LIMITED:
            # the other conversations on this client wait too
            hold = self._gate.hold(delay)
            await self._sleep(delay)
            self._gate.served(hold)
        else:
            await self._sleep(delay)
        return delay

    def _raise_unless_retried(self, failure: AttemptFailure, attempts: int, waited: float) -> None:
        """Record ``failure`` with the breaker; raise when asking again cannot help (a fatal
        failure, the breaker open, a ``Retry-After`` over the backoff cap)."""
        if failure.fatal is not None:
            if failure.endpoint_level:
                self.breaker.record_failure(failure.detail)
            else:
                self.breaker.record_success()  # it answered: the request was the problem
            failure.fatal.attempts, failure.fatal.wait_seconds = attempts, waited
            raise failure.fatal from failure.cause
        cap = self._config.backoff_max_seconds
        too_long = failure.retry_after is not None and failure.retry_after > cap
        if failure.status == RATE_LIMITED and not too_long:
            # busy, not down: it answered and asked to wait (a wait it may name, or none)
            self.breaker.record_success()
        else:
            self.breaker.record_failure(failure.detail)
        if self.breaker.is_open:
            down = self.breaker.down()
            down.attempts, down.wait_seconds = attempts, waited
            raise down from failure.cause
        if too_long:
            raise self._gave_up(
                failure,
                attempts,
                waited,
                f"; the server asks to wait {failure.retry_after:g} s, more than the "
                f"{cap:g} s backoff cap: not retried",
            ) from failure.cause

    def _gave_up(
        self, failure: AttemptFailure, attempts: int, waited: float, why: str = ""
    ) -> EndpointError:
        """The error of a request that is not tried again after ``failure``."""
        return EndpointError(
            f"{self._where()}: chat completion failed after {attempts} attempt(s): "
            f"{failure.detail}{why}",
            status=failure.status,
            body=failure.body,
            full_body=failure.full_body,
            attempts=attempts,
            wait_seconds=waited,
            timeout_seconds=failure.timeout,
        )

    async def _attempt(
        self, request: PreparedRequest, attempts: int
    ) -> ReadCompletion | AttemptFailure:
        """One attempt under the total deadline (connect to the last byte of the reply)."""
        deadline = self._config.timeout_seconds
        try:
            # asyncio.timeout bounds the whole exchange: httpx's own timeout restarts on every
            # byte, so a server dripping one byte per second would never trip it. Cancelling
            # the request closes its connection (httpcore does not reuse a half-read one).
            async with asyncio.timeout(deadline):
                payload = await self._exchange(request)
        except ReplyTooLarge as e:
            # Not the model's output: max_tokens bounds a completion far below the limit, so
            # only a broken or hostile server (or proxy) sends this. An infra error, excluded
            # from the rates; not retried (the same reply would come again) and not counted
            # toward the breaker (the endpoint answered).
            fatal = EndpointError(
                f"{self._where()}: chat completion failed after {attempts} attempt(s): {e}",
                status=200,
            )
            return AttemptFailure(detail=str(e), cause=e, fatal=fatal, endpoint_level=False)
        except openai.APIStatusError as e:
            return status_failure(
                e,
                where=self._where(),
                attempts=attempts,
                redact=self._redact,
                sent=request.messages,
            )
        except TIMEOUT_ERRORS as e:
            return AttemptFailure(
                detail=f"no complete reply within the {deadline:g} s timeout",
                cause=e,
                timeout=deadline,
            )
        except CONNECTION_ERRORS as e:
            return connection_failure(e, where=self._where(), attempts=attempts)
        try:
            return self._parse(payload)
        except _UnparseableReply as e:
            text = payload.decode("utf-8", "replace")
            body = excerpt(text, self._redact)
            return AttemptFailure(
                detail=f"unparseable reply (HTTP 200, {e}): {body}",
                cause=e,
                status=200,
                body=body,
                full_body=full_body(text, self._redact),
            )

    async def _exchange(self, request: PreparedRequest) -> bytes:
        """Send the body through the ``openai`` client; the reply, read within the limit."""
        limit = self._config.max_reply_bytes
        if POST_TAKES_CONTENT:
            return await self._post(request.content, max_bytes=limit)
        # an SDK without raw request bodies: its typed call
        sdk = self._request(
            request.messages,
            tools=request.tools,
            seed=self._sent_seed(request),
            config=self._sent_config(),
        )
        async with self._client.chat.completions.with_streaming_response.create(**sdk) as raw:
            return await read_bounded(raw.http_response, max_bytes=limit)

    def _request(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None,
        seed: int | None,
        config: EndpointConfig | None = None,
    ) -> dict[str, Any]:
        config = self._config if config is None else config
        # The history and the tools travel in ``extra_body``, which the SDK sends as given.
        # Passed as ``messages=``/``tools=``, its type-driven transform walks every message and
        # schema (10-20 ms of CPU per request at a 40 KB history: most of the harness's cost
        # per completion) only to return them unchanged, as they are plain JSON already. The
        # wire body is the same; ``messages=[]`` only satisfies the signature and is replaced.
        body: dict[str, Any] = {"messages": encode_messages(messages)}
        # An empty tools list is rejected by OpenAI ("[] is too short"): send none instead.
        if tools:
            body["tools"] = [dict(tool) for tool in tools]
            # Without it llama.cpp's server leaves the tools out of the prompt; upstream tau2
            # sends it too. The extra body may still override it.
            body["tool_choice"] = "auto"
        body.update(config.extra_body)
        request: dict[str, Any] = {
            "model": config.model,
            "messages": [],
            "extra_body": body,
            # only encodings read_bounded inflates within its limit
            "extra_headers": {"Accept-Encoding": ACCEPT_ENCODING},
        }
        seed = config.seed if seed is None else seed
        optional = {
            "temperature": config.temperature,
            "top_p": config.top_p,
            "seed": seed,
            "max_tokens": config.max_tokens,
        }
        request.update((key, value) for key, value in optional.items() if value is not None)
        return request

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (0-based)."""
        cap = self._config.backoff_max_seconds
        if retry_after is not None:
            return min(max(retry_after, 0.0), cap)
        # The exponent is bounded so a huge max_retries cannot overflow the float.
        backoff = self._config.backoff_base_seconds * 2.0 ** min(attempt, 64)
        return min(backoff * (1 + _JITTER_FRACTION * self._jitter()), cap)

    def _parse(self, payload: bytes) -> ReadCompletion:
        """What a 200 reply says (``wire.read_completion``); raises ``_UnparseableReply``."""
        try:
            data = json.loads(payload)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise _UnparseableReply("body is not JSON") from e
        except ValueError as e:  # an integer longer than Python converts (sys.int_info)
            raise _UnparseableReply(
                f"body is JSON holding an integer of over {sys.get_int_max_str_digits()} digits"
            ) from e
        except RecursionError as e:  # nested deeper than the parser goes: hostile, not JSON
            raise _UnparseableReply("body is JSON nested too deep to read") from e
        try:
            # kept as the model wrote it: masking belongs to what is written or shown
            return read_completion(data, self._call_ids)
        except UnreadableReply as e:
            raise _UnparseableReply(str(e)) from e

    def _where(self) -> str:
        return f"model {self._config.model!r} at {self._url}"
