"""The response cache around the real OpenAI client and the real loopback server.

Requests are counted at the server: a hit sends nothing. Faults (a corrupted, locked or full
file) turn the cache off with one warning and never fail a completion.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from tau2_retail.errors import CacheMiss
from tau2_retail.models import EndpointConfig, OpenAIChatModel
from tau2_retail.models import cache as cache_module
from tau2_retail.models.cache import (
    CacheMode,
    ResponseCache,
    cache_stats,
    endpoint_host,
    prune_cache,
    request_digest,
)
from tau2_retail.models.cached_model import CachedChatModel
from tau2_retail.models.masking import Masker
from tau2_retail.testing.loopback_server import Completion, LoopbackOpenAIServer, ReplyToolCall
from tau2_retail.testing.run_files import edit_cache_replies

from .conftest import HELLO, KEY_ENV, SECRET


@pytest.fixture
def client(openai_server: LoopbackOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> OpenAIChatModel:
    monkeypatch.setenv(KEY_ENV, SECRET)
    # a password in the URL is never sent, stored or shown
    url = openai_server.base_url.replace("http://", "http://someone:hunter22@")
    config = EndpointConfig(
        model="agent-model", base_url=url, api_key_env=KEY_ENV, max_retries=0, seed=7
    )
    return OpenAIChatModel(config)


@pytest.fixture
def warnings() -> list[str]:
    return []


@pytest.fixture
def make_cache(tmp_path: Path, warnings: list[str]) -> Iterator[Callable[..., ResponseCache]]:
    made: list[ResponseCache] = []

    def make(mode: CacheMode = CacheMode.READ_WRITE, **options: Any) -> ResponseCache:
        cache = ResponseCache(
            options.pop("path", tmp_path / "cache.sqlite"),
            mode=mode,
            warn=warnings.append,
            **options,
        )
        made.append(cache)
        return cache

    yield make
    for cache in made:
        cache.close()


def _files(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


@pytest.mark.asyncio
async def test_a_hit_sends_nothing_and_returns_the_same_reply_for_free(
    openai_server: LoopbackOpenAIServer, client: OpenAIChatModel, make_cache: Any
) -> None:
    call = ReplyToolCall(
        name="find_user_id_by_email",
        arguments='{"email": "a@b.c"}',
        id="c1",
        extra_content={"google": {"thought_signature": "c2ln"}},
    )
    openai_server.enqueue(
        Completion(
            content="Looking.",
            tool_calls=(call,),
            prompt_tokens=40,
            reasoning_content="First the user.",
        )
    )
    cache = make_cache()
    first = await CachedChatModel(client, cache, role="agent", trial=0).complete(HELLO)
    again = await CachedChatModel(client, cache, role="agent", trial=0).complete(HELLO)
    await client.close()

    assert len(openai_server.requests) == 1
    assert (again.content, again.tool_calls) == (first.content, first.tool_calls)
    # what the server requires back comes back from the cache too
    assert again.tool_calls[0].extra_content == {"google": {"thought_signature": "c2ln"}}
    assert again.reasoning_content == first.reasoning_content == "First the user."
    assert first.usage.cache_hits == 0
    assert again.usage.cache_hits == 1
    assert (again.usage.prompt, again.usage.hit_prompt) == (40, 40)
    assert again.usage.hit_completion == again.usage.completion == first.usage.completion
    assert again.from_cache
    assert again.attempts == 0
    assert (cache.hits, cache.misses, cache.stored) == (1, 1, 1)


@pytest.mark.asyncio
async def test_trials_are_independent_and_a_repeated_request_gets_its_own_reply(
    openai_server: LoopbackOpenAIServer, client: OpenAIChatModel, make_cache: Any
) -> None:
    openai_server.enqueue(
        Completion(content="trial 1"),
        Completion(content="trial 2"),
        Completion(content=""),  # an empty reply, asked again once by the conversation
        Completion(content="second answer"),
    )
    cache = make_cache()
    assert (await CachedChatModel(client, cache, role="agent", trial=0).complete(HELLO)).content
    other_trial = CachedChatModel(client, cache, role="agent", trial=1)
    assert (await other_trial.complete(HELLO)).content == "trial 2"
    scenario = CachedChatModel(client, cache, role="user", trial=0)
    assert (await scenario.complete(HELLO)).content == ""
    assert (await scenario.complete(HELLO)).content == "second answer"
    assert len(openai_server.requests) == 4

    replay = CachedChatModel(client, make_cache(CacheMode.REPLAY), role="user", trial=0)
    assert [(await replay.complete(HELLO)).content for _ in range(2)] == ["", "second answer"]
    await client.close()
    assert len(openai_server.requests) == 4


@pytest.mark.asyncio
async def test_replay_never_contacts_the_endpoint_and_a_miss_names_the_digest(
    openai_server: LoopbackOpenAIServer, client: OpenAIChatModel, make_cache: Any
) -> None:
    openai_server.enqueue(Completion(content="recorded"))
    await CachedChatModel(client, make_cache(), role="agent", trial=0).complete(HELLO)
    openai_server.stop()
    replay = make_cache(CacheMode.REPLAY)

    turn = await CachedChatModel(client, replay, role="agent", trial=0).complete(HELLO)
    assert turn.content == "recorded"
    with pytest.raises(CacheMiss) as missed:
        await CachedChatModel(client, replay, role="agent", trial=0).complete(HELLO, seed=8)
    await client.close()

    assert missed.value.digest[:16] in str(missed.value)
    assert "replay from the response cache" in str(missed.value)
    assert "model 'agent-model', trial 1" in str(missed.value)


@pytest.mark.asyncio
async def test_keys_headers_and_url_credentials_never_enter_the_cache(
    openai_server: LoopbackOpenAIServer, client: OpenAIChatModel, make_cache: Any, tmp_path: Path
) -> None:
    openai_server.enqueue(Completion(content="fine"))
    cache = make_cache()
    await CachedChatModel(client, cache, role="agent", trial=0).complete(HELLO)
    await client.close()
    assert openai_server.requests[0].header("authorization") == f"Bearer {SECRET}"
    stored = _files(tmp_path / "cache.sqlite")
    assert SECRET.encode() not in stored
    assert b"hunter22" not in stored
    assert b"someone" not in stored
    assert b"return an order" not in stored  # only a digest of the request is kept
    with closing(sqlite3.connect(tmp_path / "cache.sqlite")) as db:
        (host,) = db.execute("SELECT host FROM responses").fetchone()
    assert host == f"http://127.0.0.1:{openai_server.port}/v1"


def test_the_key_covers_format_role_model_host_body_trial_and_occurrence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base: dict[str, Any] = {
        "role": "agent",
        "model": "m",
        "host": "http://h:1/v1",
        "body": {"model": "m", "messages": [{"role": "user", "content": "x"}], "seed": 1},
        "trial": 0,
    }
    digest = request_digest(**base)
    changed: list[dict[str, Any]] = [
        {"role": "user"},
        {"model": "n"},
        {"host": "http://h:2/v1"},
        {"body": {**base["body"], "seed": 2}},
        {"body": {**base["body"], "temperature": 0.0}},
        {"trial": 1},
        {"occurrence": 1},
    ]
    assert all(request_digest(**(base | change)) != digest for change in changed)
    assert request_digest(**base) == digest
    monkeypatch.setattr(cache_module, "CACHE_FORMAT", 2)
    assert request_digest(**base) != digest
    assert endpoint_host(None) == "default"
    assert endpoint_host("https://u:p@api.example.test:8443/v1/") == (
        "https://api.example.test:8443/v1"
    )


@pytest.mark.asyncio
async def test_a_cache_of_another_format_misses(
    openai_server: LoopbackOpenAIServer,
    client: OpenAIChatModel,
    make_cache: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    openai_server.enqueue(Completion(content="old format"), Completion(content="new format"))
    await CachedChatModel(client, make_cache(), role="agent", trial=0).complete(HELLO)
    monkeypatch.setattr(cache_module, "CACHE_FORMAT", cache_module.CACHE_FORMAT + 1)
    turn = await CachedChatModel(client, make_cache(), role="agent", trial=0).complete(HELLO)
    await client.close()
    assert turn.content == "new format"
    assert len(openai_server.requests) == 2


@pytest.mark.asyncio
async def test_the_server_openai_base_url_names_is_part_of_the_key(
    openai_server: LoopbackOpenAIServer, make_cache: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A role without a base URL sends its requests where ``OPENAI_BASE_URL`` points: a reply
    of one server was served for another (both keyed ``default``)."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    config = EndpointConfig(model="agent-model", api_key_env=KEY_ENV, max_retries=0, seed=7)
    with LoopbackOpenAIServer() as other:
        openai_server.enqueue(Completion(content="from the first server"))
        other.enqueue(Completion(content="from the other server"))
        turns = []
        for server in (openai_server, other, openai_server):
            monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
            client = OpenAIChatModel(config)
            model = CachedChatModel(client, make_cache(), role="agent", trial=0)
            turns.append((await model.complete(HELLO)).content)
            await client.close()
        assert len(other.requests) == 1
    assert turns == ["from the first server", "from the other server", "from the first server"]
    assert len(openai_server.requests) == 1  # the third: a hit


async def both_from_the_endpoint(
    openai_server: LoopbackOpenAIServer,
    client: OpenAIChatModel,
    cache: ResponseCache,
    first: str,
    second: str,
) -> None:
    """The same request twice gets the endpoint's two replies: the cache served neither."""
    openai_server.enqueue(Completion(content=first), Completion(content=second))
    model = CachedChatModel(client, cache, role="agent", trial=0)
    assert (await model.complete(HELLO)).content == first
    assert (await model.complete(HELLO)).content == second


@contextmanager
def corrupted_file(
    make_cache: Any, path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[ResponseCache, str]]:
    path.write_bytes(b"\x00garbage" * 512)
    yield make_cache(), "(DatabaseError: "


@contextmanager
def locked_file(
    make_cache: Any, path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[ResponseCache, str]]:
    cache = make_cache(busy_seconds=0.05)
    cache.lookup("warm-up")  # creates the file and its table
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield cache, "OperationalError: database is locked"
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@contextmanager
def full_file(
    make_cache: Any, path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[ResponseCache, str]]:
    real_connect = cache_module._connect

    def full(path: Path, **options: Any) -> sqlite3.Connection:
        connection = real_connect(path, **options)
        connection.execute("PRAGMA max_page_count = 1")
        return connection

    monkeypatch.setattr(cache_module, "_connect", full)
    yield make_cache(), "database or disk is full"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "failure", [corrupted_file, locked_file, full_file], ids=["corrupted", "locked", "full"]
)
async def test_an_unusable_file_turns_the_cache_off_with_one_warning(
    openai_server: LoopbackOpenAIServer,
    client: OpenAIChatModel,
    make_cache: Any,
    warnings: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    failure: Callable[..., AbstractContextManager[tuple[ResponseCache, str]]],
) -> None:
    path = tmp_path / "cache.sqlite"
    try:
        with failure(make_cache, path, monkeypatch) as (cache, error):
            # the first reply is large enough to overflow a one-page file
            await both_from_the_endpoint(openai_server, client, cache, "x" * 10_000, "y")
    finally:
        await client.close()
    assert len(warnings) == 1
    assert warnings[0].startswith(f"tau2: response cache {path} unusable (")
    assert error in warnings[0]
    assert cache.disabled is not None
    assert not cache.active


@pytest.mark.asyncio
async def test_stats_and_prune(
    openai_server: LoopbackOpenAIServer,
    client: OpenAIChatModel,
    make_cache: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "cache.sqlite"
    openai_server.enqueue(Completion(content="a"), Completion(content="b"))
    old = make_cache(clock=lambda: 1_000.0)
    await CachedChatModel(client, old, role="agent", trial=0).complete(HELLO)
    old.close()
    new = make_cache(clock=lambda: 10 * 86_400.0)
    await CachedChatModel(client, new, role="user", trial=0).complete(HELLO)
    await CachedChatModel(client, new, role="user", trial=0).complete(HELLO)  # a hit
    new.close()
    await client.close()

    stats = cache_stats(path)
    assert (stats.entries, stats.hits, stats.other_format) == (2, 1, 0)
    assert stats.by_role == {"agent": 1, "user": 1}
    assert stats.by_model == {"agent-model": 2}
    assert stats.size_bytes > 0

    monkeypatch.setattr(cache_module, "CACHE_FORMAT", cache_module.CACHE_FORMAT + 1)
    assert cache_stats(path).other_format == 2
    monkeypatch.undo()
    removed, before, after = prune_cache(path, older_than_days=5, clock=lambda: 10 * 86_400.0 + 1)
    assert removed == 1  # the agent's entry, unused for ~10 days
    assert after <= before
    assert cache_stats(path).by_role == {"user": 1}


# -- issue 30: a cached reply is held to the bounds of a live one --------------------------------


def _negative(reply: dict[str, Any]) -> None:
    reply["usage"]["prompt"] = -5


def _nameless(reply: dict[str, Any]) -> None:
    reply["tool_calls"] = [{"id": "c1", "name": "", "arguments": "{}"}]


def _huge(reply: dict[str, Any]) -> None:
    reply["content"] = "x" * 5000


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (_negative, "its entry is refused (response cache entry: a negative token count)"),
        (_nameless, "its entry is refused (response cache entry: a tool call without a name)"),
        (_huge, "bytes is over the 2,048-byte limit"),
    ],
)
@pytest.mark.asyncio
async def test_an_entry_outside_the_bounds_of_a_live_reply_is_refused(
    openai_server: LoopbackOpenAIServer,
    make_cache: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    edit: Callable[[dict[str, Any]], None],
    why: str,
) -> None:
    config = EndpointConfig(
        model="agent-model", base_url=openai_server.base_url, max_reply_bytes=2048, max_retries=0
    )
    client = OpenAIChatModel(config)
    openai_server.enqueue(Completion(content="recorded"), Completion(content="asked again"))
    await CachedChatModel(client, make_cache(), role="agent", trial=0).complete(HELLO)
    edit_cache_replies(tmp_path / "cache.sqlite", edit)

    replay = make_cache(CacheMode.REPLAY)
    with pytest.raises(CacheMiss) as missed:
        await CachedChatModel(client, replay, role="agent", trial=0).complete(HELLO)
    assert "no usable reply for request" in str(missed.value)
    assert why in str(missed.value)
    # read-write: asked again, like a miss, and overwritten
    cache = make_cache()
    again = await CachedChatModel(client, cache, role="agent", trial=0).complete(HELLO)
    await client.close()
    assert again.content == "asked again"
    assert (cache.misses, cache.stored) == (1, 1)


@pytest.mark.asyncio
async def test_a_key_echoed_in_a_reply_is_served_as_sent_but_stored_masked(
    openai_server: LoopbackOpenAIServer, client: OpenAIChatModel, make_cache: Any, tmp_path: Path
) -> None:
    openai_server.enqueue(Completion(content=f"Your key is {SECRET}."))
    cache = make_cache()
    masker = Masker([SECRET])
    model = CachedChatModel(client, cache, role="agent", trial=0, masker=masker)
    turn = await model.complete(HELLO)
    await client.close()
    assert turn.content == f"Your key is {SECRET}."  # the conversation goes on as the model said
    assert SECRET.encode() not in _files(tmp_path / "cache.sqlite")
    replayed = cache.lookup(next(iter(_digests(tmp_path / "cache.sqlite"))))
    assert replayed is not None
    assert replayed.content == "Your key is ***."


def _digests(path: Path) -> list[str]:
    with closing(sqlite3.connect(path)) as db:
        return [row[0] for row in db.execute("SELECT digest FROM responses")]
