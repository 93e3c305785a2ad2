"""Who answers a scenario's requests: the ``ChatModel`` protocol, chat messages, endpoint
configuration and the OpenAI client, the built-in models (``builtin`` defines their names, the
one list), ``choice`` (which model plays a role, the rule shared by options and CLI), ``prices``
and ``spending`` (what a request costs, and the budget's reserve-then-settle of each request).

``OpenAIChatModel`` and its constants are imported lazily: importing the ``openai`` package
costs most of a second, and modules that only need the protocol or the config should not pay it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tau2_retail.models.config import DEFAULT_API_KEY_ENV, EndpointConfig
from tau2_retail.models.protocol import ChatModel

if TYPE_CHECKING:
    from tau2_retail.models.openai_client import (
        BODY_EXCERPT_CHARS,
        CONTEXT_WINDOW_MARKERS,
        MISSING_API_KEY,
        RETRYABLE_STATUSES,
        OpenAIChatModel,
    )

__all__ = [
    "BODY_EXCERPT_CHARS",
    "CONTEXT_WINDOW_MARKERS",
    "DEFAULT_API_KEY_ENV",
    "MISSING_API_KEY",
    "RETRYABLE_STATUSES",
    "ChatModel",
    "EndpointConfig",
    "OpenAIChatModel",
]

_LAZY = frozenset(
    {
        "BODY_EXCERPT_CHARS",
        "CONTEXT_WINDOW_MARKERS",
        "MISSING_API_KEY",
        "RETRYABLE_STATUSES",
        "OpenAIChatModel",
    }
)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module("tau2_retail.models.openai_client"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
