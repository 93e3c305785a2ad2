"""One scenario trial's view of an endpoint model through the response cache.

``CachedChatModel`` keys each request by ``request_digest`` (``tau2_retail.models.cache``: the
role, model, host, wire body, trial and the occurrence of the same request within the trial),
serves a stored reply when there is one, and otherwise asks the endpoint and stores its reply,
the roles' keys masked. In ``replay`` mode a miss is a ``CacheMiss`` (an infra error naming the
request digest) and no endpoint is contacted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any

from tau2_retail.errors import CacheMiss
from tau2_retail.models.cache import CacheMode, ResponseCache, endpoint_host, request_digest
from tau2_retail.models.masking import Masker
from tau2_retail.models.messages import AssistantTurn, Message

if TYPE_CHECKING:
    from tau2_retail.models.openai_client import OpenAIChatModel

__all__ = ["CachedChatModel"]


@dataclass(slots=True, eq=False)
class CachedChatModel:
    """A ``ChatModel``: ``client``'s completions for one scenario trial, through ``cache``."""

    client: OpenAIChatModel
    cache: ResponseCache
    _: KW_ONLY
    role: str
    trial: int
    masker: Masker | None = None
    # where the requests go: a role without a base URL goes where OPENAI_BASE_URL points
    _host: str = field(init=False)
    _seen: dict[str, int] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self._host = endpoint_host(self.client.base_url, self.client.config.headers)

    @property
    def name(self) -> str:
        return self.client.name

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        seed: int | None = None,
    ) -> AssistantTurn:
        request = self.client.prepare(messages, tools=tools, seed=seed)
        body = self.client.wire_body(request)
        base = request_digest(
            role=self.role, model=self.name, host=self._host, body=body, trial=self.trial
        )
        occurrence = self._seen.get(base, 0)
        self._seen[base] = occurrence + 1
        digest = (
            base
            if occurrence == 0
            else request_digest(
                role=self.role,
                model=self.name,
                host=self._host,
                body=body,
                trial=self.trial,
                occurrence=occurrence,
            )
        )
        cache = self.cache
        cached = cache.lookup(digest, max_bytes=self.client.config.max_reply_bytes)
        if cached is not None:
            return cached
        if cache.mode is CacheMode.REPLAY:
            why = cache.disabled or cache.refused
            usable = "usable " if cache.refused else ""
            why = f" ({why})" if why else ""
            raise CacheMiss(
                f"replay from the response cache {cache.path}: no {usable}reply "
                f"for request {digest[:16]} (model {self.name!r}, trial {self.trial + 1})"
                f"{why}; replay needs the cache file of a run with the same settings",
                digest=digest,
            )
        turn = await self.client.send(request)
        host, masker = self._host, self.masker
        cache.store(digest, role=self.role, model=self.name, host=host, turn=turn, masker=masker)
        return turn
