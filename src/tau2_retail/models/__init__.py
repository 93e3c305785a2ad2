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
    from tau2_retail.models.attempt_failure import (
        BODY_EXCERPT_CHARS,
        CONTEXT_WINDOW_MARKERS,
        RETRYABLE_STATUSES,
    )
    from tau2_retail.models.openai_client import MISSING_API_KEY, OpenAIChatModel

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

# each lazy name and the module that defines it
_LAZY = {
    "BODY_EXCERPT_CHARS": "tau2_retail.models.attempt_failure",
    "CONTEXT_WINDOW_MARKERS": "tau2_retail.models.attempt_failure",
    "MISSING_API_KEY": "tau2_retail.models.openai_client",
    "RETRYABLE_STATUSES": "tau2_retail.models.attempt_failure",
    "OpenAIChatModel": "tau2_retail.models.openai_client",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
