"""The pooled HTTP/1.1 transport under the real ``openai`` client, against real sockets.

The protocol cases talk to a raw asyncio server on 127.0.0.1 that answers each request with
scripted bytes, so that replies the aiohttp-based loopback server would never send (chunked,
close-delimited, cut short, oversized heads, a closed idle connection) reach the client.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from tau2_retail.errors import EndpointError
from tau2_retail.models.config import EndpointConfig
from tau2_retail.models.http1 import MAX_HEAD_BYTES
from tau2_retail.models.messages import Message, Role
from tau2_retail.models.openai_client import OpenAIChatModel
from tau2_retail.models.pool import _Pool, serves
from tau2_retail.testing.loopback_model import RecordedSleeps, loopback_model
from tau2_retail.testing.loopback_server import Completion, Hang, LoopbackOpenAIServer

HELLO = (Message(role=Role.USER, content="Hi"),)


def completion(text: str) -> bytes:
    body = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
    }
    return json.dumps(body).encode()


def reply(body: bytes, *headers: str, length: bool = True) -> bytes:
    lines = ["HTTP/1.1 200 OK", "Content-Type: application/json", *headers]
    if length:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class RawServer:
    """Answers the n-th request with ``replies[n]`` (bytes as given); ``close`` after it closes
    the connection. Counts connections."""

    def __init__(self, *replies: bytes | tuple[bytes, str]) -> None:
        self.replies = list(replies)
        self.connections = 0
        self.server: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.replies:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                await reader.readexactly(length)
                answer = self.replies.pop(0)
                data, then = answer if isinstance(answer, tuple) else (answer, "")
                writer.write(data)
                await writer.drain()
                if then == "close":
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest_asyncio.fixture
async def raw() -> AsyncIterator[RawServer]:
    server = RawServer()
    server.server = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    async with server.server:
        yield server


def model_at(url: str, **fields: Any) -> OpenAIChatModel:
    values: dict[str, Any] = {"model": "m", "base_url": url, "timeout_seconds": 5.0}
    values |= {"max_retries": 0} | fields
    return OpenAIChatModel(EndpointConfig(**values), sleep=RecordedSleeps(), jitter=lambda: 0.0)


def test_it_serves_plain_http_without_a_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert serves("http://127.0.0.1:8000/v1")
    assert not serves("https://api.openai.com/v1")
    assert not serves(None)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    assert not serves("http://127.0.0.1:8000/v1")


@pytest.mark.asyncio
async def test_one_connection_carries_sequential_requests(openai_server: LoopbackOpenAIServer):
    openai_server.enqueue(*(Completion(content=str(n)) for n in range(5)))
    async with loopback_model(openai_server) as model:
        texts = [(await model.complete(HELLO)).content for _ in range(5)]
        pool = model._client._client._transport._pool
        assert (pool.peak, pool.open) == (1, 1)
    assert texts == ["0", "1", "2", "3", "4"]
    assert pool.open == 0  # closed with the model


@pytest.mark.asyncio
async def test_chunked_close_delimited_and_informational_replies_are_read(raw: RawServer):
    body = completion("chunked")
    chunked = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(part), part) for part in (body[:9], body[9:]))
    raw.replies = [
        reply(chunked + b"0\r\nX-Trailer: 1\r\n\r\n", "Transfer-Encoding: chunked", length=False),
        b"HTTP/1.1 100 Continue\r\n\r\n" + reply(completion("after 100")),
        (reply(completion("to the end"), "Connection: close", length=False), "close"),
    ]
    async with model_at(raw.base_url) as model:
        texts = [(await model.complete(HELLO)).content for _ in range(3)]
    assert texts == ["chunked", "after 100", "to the end"]
    assert raw.connections == 1


@pytest.mark.asyncio
async def test_connection_close_and_a_dropped_idle_connection_open_a_new_one(raw: RawServer):
    raw.replies = [
        (reply(completion("a"), "Connection: close"), "close"),
        (reply(completion("b")), "close"),  # closed after the reply, without saying so
        reply(completion("c")),
    ]
    async with model_at(raw.base_url) as model:
        turns = []
        for _ in range(3):
            turns.append(await model.complete(HELLO))
            await asyncio.sleep(0.05)  # the server's close reaches the client meanwhile
    assert [(t.content, t.attempts) for t in turns] == [("a", 1), ("b", 1), ("c", 1)]
    assert raw.connections == 3


@pytest.mark.asyncio
async def test_an_http_1_0_reply_closes_its_connection_unless_it_says_keep_alive(
    raw: RawServer,
) -> None:
    """Python's http.server answers HTTP/1.0 and closes after each reply: the pool reused the
    connection, and every request after the first cost a failed attempt and a backoff (an
    infra error with no retries)."""
    http10 = reply(completion("a")).replace(b"HTTP/1.1", b"HTTP/1.0", 1)
    kept = reply(completion("c"), "Connection: keep-alive").replace(b"HTTP/1.1", b"HTTP/1.0", 1)
    raw.replies = [
        (http10, "close"),
        (http10.replace(b'"a"', b'"b"'), "close"),
        kept,
        reply(completion("d")),
    ]
    async with model_at(raw.base_url) as model:  # no retries: a reused dead one fails
        turns = [await model.complete(HELLO) for _ in range(4)]  # back to back
    assert [(t.content, t.attempts) for t in turns] == [("a", 1), ("b", 1), ("c", 1), ("d", 1)]
    assert raw.connections == 3  # the keep-alive reply's connection carried the fourth


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("sent", "detail"),
    [
        (
            reply(completion("cut"))[:-10],
            "RemoteProtocolError: peer closed connection without sending complete message body",
        ),
        (b"HTTP/1.1 200 OK\r\n", "RemoteProtocolError: Server disconnected in the middle"),
        (b"", "RemoteProtocolError: Server disconnected without sending a response."),
        (b"SMTP ready\r\n\r\n", "RemoteProtocolError: malformed status line"),
        (
            b"HTTP/1.1 200 OK\r\nX-Big: " + b"x" * MAX_HEAD_BYTES + b"\r\n\r\n",
            f"RemoteProtocolError: reply head longer than {MAX_HEAD_BYTES} bytes",
        ),
        (
            reply(b"4\r\nabcd\r\nzz\r\n", "Transfer-Encoding: chunked", length=False),
            "RemoteProtocolError: invalid chunk size",
        ),
        (reply(b"{}", "Transfer-Encoding: gzip", length=False), "unsupported transfer encoding"),
    ],
    ids=["cut body", "cut head", "nothing", "not http", "huge head", "bad chunk", "gzip te"],
)
async def test_broken_replies_are_connection_failures_and_retried(
    raw: RawServer, sent: bytes, detail: str
) -> None:
    raw.replies = [(sent, "close"), reply(completion("fine"))]
    async with model_at(raw.base_url, max_retries=1) as model:
        turn = await model.complete(HELLO)
    assert (turn.content, turn.attempts) == ("fine", 2)
    raw.replies = [(sent, "close")]
    async with model_at(raw.base_url) as model:
        with pytest.raises(EndpointError, match="connection failed") as raised:
            await model.complete(HELLO)
    assert detail in str(raised.value)


@pytest.mark.asyncio
async def test_a_request_waits_for_the_connection_a_timed_out_one_frees(
    openai_server: LoopbackOpenAIServer,
):
    openai_server.enqueue(Hang(seconds=30), Completion(content="next"))
    async with loopback_model(
        openai_server, max_connections=1, timeout_seconds=1.0, max_retries=0
    ) as model:
        hung = asyncio.create_task(model.complete(HELLO))
        await asyncio.sleep(0.5)  # the second starts later: its deadline ends later
        waiting = await model.complete(HELLO)
        with pytest.raises(EndpointError, match="timeout"):
            await hung
        pool = model._client._client._transport._pool
        assert waiting.content == "next"
        assert (pool.peak, pool.open, len(pool.waiters)) == (1, 1, 0)


@pytest.mark.asyncio
async def test_a_waiter_that_gives_up_leaves_no_trace() -> None:
    pool = _Pool(1)
    origin = ("127.0.0.1", 1)
    assert await pool.acquire(origin, pool_timeout=None) is None  # the one place, taken
    with pytest.raises(TimeoutError):
        await pool.acquire(origin, pool_timeout=0.05)
    assert (pool.open, len(pool.waiters)) == (1, 0)
    third = asyncio.create_task(pool.acquire(origin, pool_timeout=5))
    await asyncio.sleep(0)
    pool.opening_failed()  # the first place is given back: the third may open one
    assert await third is None
    assert (pool.open, pool.peak, len(pool.waiters)) == (1, 1, 0)


@pytest.mark.asyncio
async def test_accepted_connections_open_the_ramp_before_any_reply(
    openai_server: LoopbackOpenAIServer,
):
    # 64 conversations at once, each reply a second away: the window (16 at first) grows
    # with each connection the server accepts, so all 64 are in flight before any reply (it
    # used to grow per reply only: 16, then 32, a second apart)
    openai_server.enqueue(*(Completion(content="ok", latency=1.0) for _ in range(64)))
    async with loopback_model(openai_server) as model:
        turns = await asyncio.gather(*(model.complete(HELLO) for _ in range(64)))
    assert [turn.content for turn in turns] == ["ok"] * 64
    assert model.ramp.peak == 64


@pytest.mark.asyncio
async def test_a_redirect_to_https_goes_out_over_tls_never_in_plain_text(raw: RawServer):
    """An ingress redirecting http:// to https:// (308) was refused by the pool ("https://
    through the plain-http connection pool"): every scenario an infra error, where the openai
    client alone follows it. The library's own transport sends it now, over TLS."""
    first_bytes: list[bytes] = []

    async def tls_listener(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first_bytes.append(await reader.read(3))
        writer.close()

    listener = await asyncio.start_server(tls_listener, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    moved = f"HTTP/1.1 308 Permanent Redirect\r\nLocation: https://127.0.0.1:{port}/v1/x"
    raw.replies = [moved.encode() + b"\r\nContent-Length: 0\r\n\r\n"]
    async with listener, model_at(raw.base_url) as model:
        with pytest.raises(EndpointError, match="connection failed"):
            await model.complete(HELLO)  # the listener speaks no TLS: the handshake fails
    # a TLS handshake record (22, version 3.x), not "POST /v1/x"
    assert first_bytes
    assert first_bytes[0][:2] == b"\x16\x03"
