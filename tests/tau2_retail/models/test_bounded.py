"""Bounded replies (issue 21, item 2): a reply's size is counted as it arrives and after
decompression; an oversize reply or a gzip bomb is refused without ever being held whole."""

from __future__ import annotations

import asyncio
import gzip
import json
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tau2_retail.errors import EndpointError
from tau2_retail.models import EndpointConfig, OpenAIChatModel
from tau2_retail.models.attempt_failure import FULL_BODY_CHARS
from tau2_retail.models.bounded import ReplyTooLarge, read_bounded
from tau2_retail.models.messages import Message, Role
from tau2_retail.testing.loopback_server import Completion, LoopbackOpenAIServer, RawBody

MiB = 1024 * 1024
HELLO = [Message(role=Role.USER, content="hello")]


class FakeResponse:
    """Raw chunks and headers, as an HTTP response hands them over."""

    def __init__(self, chunks: list[bytes], encoding: str | None = None) -> None:
        self.headers = {"content-encoding": encoding} if encoding else {}
        self._chunks = chunks
        self.read = 0

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            self.read += 1
            yield chunk


def _socket_buffers_max() -> int:
    """The most a TCP connection buffers in the kernel: the largest receive buffer of one
    socket plus the largest send buffer of the other (Linux's limits; 64 MiB elsewhere)."""
    try:
        limits = [
            int(Path(f"/proc/sys/net/ipv4/tcp_{kind}").read_text().split()[2])
            for kind in ("rmem", "wmem")
        ]
    except (OSError, ValueError, IndexError):
        return 64 * MiB
    return sum(limits)


def _chunks(data: bytes, size: int = 64 * 1024) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def _bomb(inflated: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(MiB)
    return b"".join(compressor.compress(block) for _ in range(inflated // MiB)) + (
        compressor.flush()
    )


@pytest.mark.parametrize("encoding", [None, "gzip", "deflate"])
def test_a_reply_within_the_limit_is_read_whole(encoding: str | None) -> None:
    body = json.dumps({"text": "x" * 300_000}).encode()
    wire = {None: body, "gzip": gzip.compress(body), "deflate": zlib.compress(body)}[encoding]
    response = FakeResponse(_chunks(wire, 1000), encoding)
    assert asyncio.run(read_bounded(response, max_bytes=len(body))) == body


@pytest.mark.parametrize("chunk", [1, 2, 1000])
def test_a_raw_deflate_reply_is_read_as_httpx_reads_it(chunk: int) -> None:
    """Some servers send ``deflate`` without its zlib header (it was refused as "not valid
    deflate": an error status lost its classification too)."""
    body = json.dumps({"text": "y" * 50_000}).encode()
    raw = zlib.compress(body)[2:-4]  # the stream without its header and checksum
    response = FakeResponse(_chunks(raw, chunk), "deflate")
    assert asyncio.run(read_bounded(response, max_bytes=len(body))) == body


def test_a_corrupt_deflate_body_is_refused() -> None:
    with pytest.raises(ReplyTooLarge, match="not valid deflate"):
        asyncio.run(read_bounded(FakeResponse([b"\xff\xfe not deflate"], "deflate"), max_bytes=MiB))


def test_an_oversize_reply_stops_at_the_first_chunk_past_the_limit() -> None:
    response = FakeResponse(_chunks(bytes(50 * MiB)))
    with pytest.raises(ReplyTooLarge, match="more than the 1048576 byte limit") as refused:
        asyncio.run(read_bounded(response, max_bytes=MiB))
    assert not refused.value.inflated
    assert response.read == 17  # 16 chunks of 64 KiB fill the MiB; the 17th is refused


def test_a_gzip_bomb_is_refused_without_inflating_it() -> None:
    bomb = _bomb(256 * MiB)  # 256 MiB of zeros: about 250 KB on the wire
    response = FakeResponse(_chunks(bomb), "gzip")
    tracemalloc.start()
    try:
        with pytest.raises(ReplyTooLarge, match="inflates to more than") as refused:
            asyncio.run(read_bounded(response, max_bytes=2 * MiB))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert refused.value.inflated
    assert peak < 8 * MiB  # the limit and a chunk, never the 256 MiB
    assert response.read <= 2  # stopped on the first chunks of the bomb


@pytest.mark.parametrize("encoding", ["br", "zstd", "compress"])
def test_an_encoding_that_cannot_be_bounded_is_refused(encoding: str) -> None:
    with pytest.raises(ReplyTooLarge, match=f"content encoding '{encoding}'"):
        asyncio.run(read_bounded(FakeResponse([b"xx"], encoding), max_bytes=MiB))


def test_a_corrupt_gzip_body_is_refused() -> None:
    with pytest.raises(ReplyTooLarge, match="not valid gzip"):
        asyncio.run(read_bounded(FakeResponse([b"not gzip at all"], "gzip"), max_bytes=MiB))


# -- the client against the loopback server ------------------------------------------------------


@pytest.fixture
def make_model(openai_server: LoopbackOpenAIServer) -> Callable[..., OpenAIChatModel]:
    async def no_sleep(_: float) -> None:
        return None

    def make(**overrides: Any) -> OpenAIChatModel:
        fields: dict[str, Any] = {
            "model": "agent-model",
            "base_url": openai_server.base_url,
            "max_retries": 2,
            "timeout_seconds": 20.0,
            "max_reply_bytes": MiB,
        }
        return OpenAIChatModel(EndpointConfig(**(fields | overrides)), sleep=no_sleep)

    return make


def _completion_bytes(content: str) -> bytes:
    return json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "agent-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "length",
                }
            ],
        }
    ).encode()


@pytest.mark.asyncio
async def test_the_client_asks_for_bounded_encodings_and_reads_gzip(
    openai_server: LoopbackOpenAIServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    body = gzip.compress(_completion_bytes("zipped " * 1000))
    openai_server.enqueue(RawBody(body=body, headers={"Content-Encoding": "gzip"}))
    async with make_model() as model:
        turn = await model.complete(HELLO)
    assert turn.content == "zipped " * 1000
    assert turn.finish_reason == "length"
    assert openai_server.requests[0].header("accept-encoding") == "gzip, deflate"


@pytest.mark.parametrize("bomb", [False, True], ids=["plain-50MiB", "gzip-bomb-256MiB"])
@pytest.mark.asyncio
async def test_an_oversize_reply_is_an_infra_error_not_retried(
    openai_server: LoopbackOpenAIServer,
    make_model: Callable[..., OpenAIChatModel],
    bomb: bool,
) -> None:
    if bomb:
        reply = RawBody(body=_bomb(256 * MiB), headers={"Content-Encoding": "gzip"})
    else:
        reply = RawBody(body=_completion_bytes("x" * (50 * MiB)))
    openai_server.enqueue(reply, Completion(content="never asked for"))
    async with make_model() as model:
        with pytest.raises(EndpointError) as failed:
            await model.complete(HELLO)
        assert not model.breaker.is_open
    message = str(failed.value)
    assert "more than the 1048576 byte limit (--tau2-max-reply-bytes)" in message
    assert ("inflates to" in message) is bomb
    assert failed.value.attempts == 1  # the same reply would come again
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize("encoding", ["identity", "gzip"])
@pytest.mark.asyncio
async def test_a_50_mb_error_body_is_read_1_mb_at_most_and_cut_with_a_marker(
    openai_server: LoopbackOpenAIServer, make_model: Callable[..., OpenAIChatModel], encoding: str
) -> None:
    text = b'{"error": {"message": "' + b"x" * (50 * MiB) + b'"}}'
    if encoding == "gzip":  # 50 MB in about 50 KB: the bomb must not be inflated whole either
        huge = RawBody(body=gzip.compress(text), status=400, headers={"Content-Encoding": "gzip"})
    else:
        huge = RawBody(body=text, status=400)
    openai_server.enqueue(huge)
    async with make_model() as model:
        with pytest.raises(EndpointError) as raised:
            await model.complete(HELLO)
    kept = raised.value.full_body
    assert kept.endswith("… [error body cut: more than 1000000 bytes, the rest was not read]")
    assert len(kept) < FULL_BODY_CHARS + 100
    assert kept.startswith('{"error": {"message": "xxx')
    if encoding == "identity":
        # the client read a megabyte and hung up: the server wrote at most that, what the
        # kernel's socket buffers hold (their largest sizes, which autotuning reaches on a busy
        # machine: 10.7 MiB once broke a fixed 10 MiB bound) and aiohttp's write buffer
        assert sum(huge.sent) < 2 * MiB + _socket_buffers_max()
        assert sum(huge.sent) < len(text)
