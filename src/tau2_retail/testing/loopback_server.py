"""A loopback OpenAI-compatible chat server for tests and benchmarks.

``LoopbackOpenAIServer`` serves ``POST /v1/chat/completions`` on ``127.0.0.1`` (never any other
address) from a queue of scripted replies or from a responder callback, and records every request
so tests can assert on what reached the wire. It runs aiohttp's web server in a thread of its own
with its own event loop, so sync tests, async tests and benchmark drivers all use it the same way::

    with LoopbackOpenAIServer(replies=[Completion(content="Hello!")]) as server:
        ...  # point any OpenAI client at server.base_url

Replies are small frozen records (:mod:`tau2_retail.testing.replies`, exported here too):
``Completion`` (text and/or tool calls with raw argument strings, usage, finish reason) and the
faults ``HttpError``, ``Hang``, ``Drop``, ``InvalidJson``, ``NoChoices`` and ``SlowDrip``
(headers at once, then the body one byte per interval: a server that never trips a per-read
timeout). Every reply takes a ``latency`` (seconds to wait before answering), added to the
server-wide one. An empty message is ``Completion(content="")``; malformed tool-call arguments
are ``ReplyToolCall(name=..., arguments="{not json")``. When the script is exhausted and no
responder is set, the server answers 500 with a body that says so, so tests fail loudly.

``billed_usd(prices)`` is what the server's completions would cost at ``prices`` (USD per million
tokens by model, as ``--tau2-prices`` takes them), counted from the usage it sent: a measure of a
run's spending independent of the suite's own accounting.

``dialect="llamacpp"`` speaks like llama-cpp-python 0.3's server with ``--chat_format
chatml-function-calling``: a message whose ``content`` is null is rejected with an HTTP 500
validation error, and tools sent without a ``tool_choice`` are ignored (the reply is the
script's, but ``RecordedRequest.tools_seen`` is False, as the model never saw them).
llama.cpp's own ``llama-server`` does neither. ``disconnects`` counts requests whose client
went away before the reply was complete (a timed-out request whose connection was closed).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Final, Self, assert_never

from aiohttp import web

from tau2_retail.testing import replies as records

# the reply records, exported here too: tests script the server with them
from tau2_retail.testing.replies import *  # noqa: F403

__all__ = ["CHAT_COMPLETIONS_PATH", "LoopbackOpenAIServer", *records.__all__]

HOST: Final = "127.0.0.1"
CHAT_COMPLETIONS_PATH: Final = "/v1/chat/completions"

# Bounds how long stop() waits for in-flight handlers; they return at once when stopping is
# signalled, so this only matters if a handler is stuck in a bug.
DIALECTS: Final = ("openai", "llamacpp")
LLAMACPP_NULL_CONTENT_ERROR: Final = (
    "1 validation error for CreateChatCompletionRequest\nmessages.{index}.content\n"
    "  Input should be a valid string [type=string_type, input_value=None, input_type=NoneType]"
)
"""The gist of llama-cpp-python's HTTP 500 for a message whose content is null (0.3.36 answers
a JSON error listing seven validation errors, among them ``Input should be a valid string``)."""

_SHUTDOWN_TIMEOUT_SECONDS: Final = 2.0
_START_TIMEOUT_SECONDS: Final = 10.0


class LoopbackOpenAIServer:
    """An OpenAI-compatible chat server on 127.0.0.1, scripted, in a thread of its own.

    Scripted replies (``replies`` and ``enqueue``) are used first, in order; then the
    ``responder`` if one is set; otherwise the server answers 500 saying the script ran out.
    ``latency`` is added before every reply (benchmarks use it to model a real server).
    ``record=False`` keeps no ``requests`` (a benchmark's thousands of large bodies would
    cost the server memory and garbage-collection time).
    """

    def __init__(
        self,
        *,
        replies: Iterable[records.Reply] = (),
        responder: records.Responder | None = None,
        latency: float = 0.0,
        port: int = 0,
        dialect: str = "openai",
        backlog: int = 128,
        record: bool = True,
    ) -> None:
        if dialect not in DIALECTS:
            raise ValueError(f"dialect must be one of {', '.join(DIALECTS)}, got {dialect!r}")
        self.dialect = dialect
        self._disconnects = 0
        self._script: deque[records.Reply] = deque(replies)
        self.responder = responder
        self._latency = latency
        self._requested_port = port
        self._backlog = backlog
        self._requests: list[records.RecordedRequest] = []
        self._requests_lock = threading.Lock()
        #: (model, prompt tokens, completion tokens) of every completion sent
        self._billed: list[tuple[str, int, int]] = []
        self._record = record
        self._n_received = 0
        self._port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._stopping: asyncio.Event | None = None
        # Touched only in the server thread.
        self._n_answered = 0

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Self:
        """Bind 127.0.0.1 (port 0 picks a free one) and serve; returns once the port is bound."""
        if self._thread is not None:
            raise RuntimeError("LoopbackOpenAIServer is already started")
        loop = asyncio.new_event_loop()
        thread = threading.Thread(
            target=_run_loop, args=(loop,), name="loopback-openai-server", daemon=True
        )
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            future = asyncio.run_coroutine_threadsafe(self._serve(), loop)
            self._port = future.result(timeout=_START_TIMEOUT_SECONDS)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop serving, end pending hangs and delays, and join the thread. Idempotent."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            if self._runner is not None:
                future = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
                future.result(timeout=_SHUTDOWN_TIMEOUT_SECONDS + _START_TIMEOUT_SECONDS)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            self._loop = self._thread = None
            self._runner = None
            self._port = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- what tests use -----------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port; the server must be started."""
        if self._port is None:
            raise RuntimeError("LoopbackOpenAIServer is not started")
        return self._port

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:<port>/v1``."""
        return f"http://{HOST}:{self.port}/v1"

    def enqueue(self, *replies: records.Reply) -> None:
        """Append replies to the script (safe from any thread)."""
        self._script.extend(replies)

    @property
    def pending(self) -> int:
        """How many scripted replies have not been used yet."""
        return len(self._script)

    @property
    def disconnects(self) -> int:
        """Requests whose client closed the connection before the reply was complete."""
        return self._disconnects

    @property
    def requests(self) -> tuple[records.RecordedRequest, ...]:
        """Every request received so far, oldest first."""
        with self._requests_lock:
            return tuple(self._requests)

    def completion_costs(self, prices: Mapping[str, Mapping[str, float]]) -> list[float]:
        """USD of each completion sent so far, at ``prices`` (a model without one costs 0)."""
        with self._requests_lock:
            billed = list(self._billed)
        costs = []
        for model, prompt, completion in billed:
            price = prices.get(model, {})
            usd = prompt * price.get("input", 0.0) + completion * price.get("output", 0.0)
            costs.append(usd / 1_000_000)
        return costs

    def billed_usd(self, prices: Mapping[str, Mapping[str, float]]) -> float:
        """USD of every completion sent so far at ``prices``."""
        return sum(self.completion_costs(prices))

    # -- the server thread --------------------------------------------------------------------

    async def _serve(self) -> int:
        self._stopping = asyncio.Event()
        app = web.Application()
        app.router.add_post(CHAT_COMPLETIONS_PATH, self._chat_completions)
        # handler_cancellation: a handler whose client went away (timed out on a Hang) is
        # cancelled at once instead of sleeping on; no access log keeps per-request cost low.
        runner = web.AppRunner(
            app,
            access_log=None,
            handler_cancellation=True,
            shutdown_timeout=_SHUTDOWN_TIMEOUT_SECONDS,
        )
        await runner.setup()
        self._runner = runner
        site = web.TCPSite(runner, HOST, self._requested_port, backlog=self._backlog)
        await site.start()
        port: int = runner.addresses[0][1]
        return port

    async def _shutdown(self) -> None:
        if self._stopping is not None:
            self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _pause(self, seconds: float) -> bool:
        """Wait ``seconds``; False when the server began stopping meanwhile."""
        assert self._stopping is not None
        try:
            async with asyncio.timeout(seconds):
                await self._stopping.wait()
        except TimeoutError:
            return True
        return False

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = None
        ignores_tools = (
            self.dialect == "llamacpp" and isinstance(body, dict) and "tool_choice" not in body
        )
        with self._requests_lock:
            if self._record:
                self._requests.append(
                    records.RecordedRequest(
                        method=request.method,
                        path=request.path,
                        body=body,
                        headers={name.lower(): value for name, value in request.headers.items()},
                        tools_seen=isinstance(body, dict)
                        and bool(body.get("tools"))
                        and not ignores_tools,
                        raw_body=raw,
                        query=request.query_string,
                    )
                )
            self._n_received += 1
            n_received = self._n_received
        if not isinstance(body, dict):
            return _error_response(400, "loopback server: the request body is not a JSON object")
        if self.dialect == "llamacpp":
            rejected = _llamacpp_rejection(body)
            if rejected is not None:
                return rejected
        try:
            return await self._reply(request, body, n_received)
        except asyncio.CancelledError:
            # handler_cancellation: the client went away before the reply was complete
            self._disconnects += 1
            raise

    async def _reply(
        self, request: web.Request, body: dict[str, Any], n_received: int
    ) -> web.StreamResponse:
        reply = self._next_reply(body)
        if reply is None:
            return _error_response(
                500,
                f"loopback server: the reply script ran out at request {n_received} "
                "(enqueue more replies or set a responder)",
                error_type="loopback_script_exhausted",
            )
        delay = self._latency + reply.latency
        if delay > 0 and not await self._pause(delay):
            return _error_response(503, "loopback server: stopping")
        self._n_answered += 1
        return await self._answer(request, body, reply)

    def _next_reply(self, body: Mapping[str, Any]) -> records.Reply | None:
        try:
            return self._script.popleft()
        except IndexError:
            pass
        if self.responder is None:
            return None
        return self.responder(body)

    async def _answer(
        self, request: web.Request, body: Mapping[str, Any], reply: records.Reply
    ) -> web.StreamResponse:
        match reply:
            case records.Completion():
                return _json_response(200, self._completion_body(body, reply))
            case records.HttpError(status=status, body=text, headers=headers, content_type=ctype):
                return web.Response(status=status, text=text, headers=headers, content_type=ctype)
            case records.InvalidJson(body=text, content_type=ctype):
                return web.Response(status=200, text=text, content_type=ctype)
            case records.NoChoices():
                return _json_response(200, self._envelope(body, choices=[], usage=None))
            case records.SlowDrip(reply=completion, interval=interval):
                data = json.dumps(self._completion_body(body, completion)).encode()
                response = web.StreamResponse(
                    status=200, headers={"Content-Type": "application/json"}
                )
                response.content_length = len(data)
                await response.prepare(request)
                for index in range(len(data)):
                    await response.write(data[index : index + 1])
                    if not await self._pause(interval):
                        break
                await response.write_eof()
                return response
            case records.RawBody(body=data, headers=headers, status=status, sent=sent):
                response = web.StreamResponse(
                    status=status, headers={"Content-Type": "application/json", **headers}
                )
                response.content_length = len(data)
                await response.prepare(request)
                try:
                    for start in range(0, len(data), 65536):
                        await response.write(data[start : start + 65536])
                        sent.append(min(65536, len(data) - start))
                    await response.write_eof()
                except ConnectionError:
                    pass  # the client stopped reading (a reply over its limit) and hung up
                return response
            case records.Hang(seconds=seconds):
                if await self._pause(seconds):
                    return _error_response(500, "loopback server: the hang ended without a reply")
                return _error_response(503, "loopback server: stopping")
            case records.Drop():
                transport = request.transport
                if transport is not None:
                    transport.close()
                # The connection is gone: wait to be cancelled (handler_cancellation) rather
                # than write a response nobody can read.
                await self._pause(_SHUTDOWN_TIMEOUT_SECONDS)
                raise web.HTTPInternalServerError(text="loopback server: dropped")
            case _:
                assert_never(reply)

    def _completion_body(
        self, body: Mapping[str, Any], reply: records.Completion
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.reasoning_content is not None:
            message["reasoning_content"] = reply.reasoning_content
        if reply.tool_calls:
            message["tool_calls"] = [
                self._wire_tool_call(call, index) for index, call in enumerate(reply.tool_calls)
            ]
        finish_reason = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        usage: dict[str, int] | None = None
        if reply.include_usage:
            prompt = (
                reply.prompt_tokens if reply.prompt_tokens is not None else _prompt_estimate(body)
            )
            completion = reply.completion_tokens
            if completion is None:
                n_chars = len(reply.content or "") + sum(len(c.arguments) for c in reply.tool_calls)
                completion = n_chars // 4 + 1
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
            with self._requests_lock:
                self._billed.append((str(body.get("model")), prompt, completion))
        choice = {"index": 0, "message": message, "finish_reason": finish_reason}
        return self._envelope(body, choices=[choice], usage=usage)

    def _wire_tool_call(self, call: records.ReplyToolCall, index: int) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        if not call.omit_id:
            wire["id"] = call.id or f"call_loopback_{self._n_answered}_{index}"
        if call.extra_content is not None:
            wire["extra_content"] = dict(call.extra_content)
        return wire

    def _envelope(
        self, body: Mapping[str, Any], *, choices: list[Any], usage: dict[str, int] | None
    ) -> dict[str, Any]:
        envelope: dict[str, Any] = {
            "id": f"chatcmpl-loopback-{self._n_answered}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "loopback"),
            "choices": choices,
        }
        if usage is not None:
            envelope["usage"] = usage
        return envelope


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        # Anything still pending (a handler stuck past the shutdown timeout) is cancelled so
        # closing the loop leaves no destroyed-while-pending tasks behind.
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def _prompt_estimate(body: Mapping[str, Any]) -> int:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return 0
    n_chars = sum(
        len(m["content"])
        for m in messages
        if isinstance(m, dict) and isinstance(m.get("content"), str)
    )
    return n_chars // 4


def _llamacpp_rejection(body: Mapping[str, Any]) -> web.Response | None:
    """llama.cpp's answer to a message with ``content: null`` (its request model wants a str)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    for index, message in enumerate(messages):
        if isinstance(message, dict) and "content" in message and message["content"] is None:
            text = LLAMACPP_NULL_CONTENT_ERROR.format(index=index)
            return web.Response(status=500, text=text, content_type="text/plain")
    return None


def _json_response(status: int, data: Any) -> web.Response:
    return web.Response(status=status, text=json.dumps(data), content_type="application/json")


def _error_response(
    status: int, message: str, *, error_type: str = "loopback_error"
) -> web.Response:
    body = {"error": {"message": message, "type": error_type, "param": None, "code": None}}
    return _json_response(status, body)
