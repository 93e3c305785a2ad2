"""The real ``OpenAIChatModel`` pointed at a loopback server, with test-friendly waits."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from tau2_retail.models.config import EndpointConfig
from tau2_retail.models.openai_client import OpenAIChatModel, Sleep
from tau2_retail.testing.loopback_server import LoopbackOpenAIServer

__all__ = ["RecordedSleeps", "loopback_model"]


class RecordedSleeps:
    """An injected sleep that records the waits instead of waiting."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def loopback_model(
    server: LoopbackOpenAIServer,
    *,
    sleep: Sleep | None = None,
    jitter: Callable[[], float] = lambda: 0.0,
    clock: Callable[[], float] = time.perf_counter,
    environ: Mapping[str, str] | None = None,
    **fields: Any,
) -> OpenAIChatModel:
    """An ``OpenAIChatModel`` for ``server``: model ``agent-model``, a 5 s deadline per attempt,
    no jitter and no real waits (``sleep`` defaults to a fresh :class:`RecordedSleeps`).

    ``fields`` override those of the :class:`EndpointConfig`; ``environ`` is where the key is
    read (None: ``os.environ``).
    """
    defaults: dict[str, Any] = {
        "model": "agent-model",
        "base_url": server.base_url,
        "timeout_seconds": 5.0,
    }
    config = EndpointConfig(**(defaults | fields))
    waits = RecordedSleeps() if sleep is None else sleep
    return OpenAIChatModel(config, environ=environ, sleep=waits, clock=clock, jitter=jitter)
