"""Request parameters a profile adds that a model refuses: left out, as upstream tau2 does.

The tau2 profile sends ``temperature`` 0.0 on every role's requests unless one is configured,
as upstream tau2 does. OpenAI's reasoning models (o1, o3, o4-mini, gpt-5) take only their
default temperature and answer HTTP 400 ``Unsupported value: 'temperature' does not support
0.0 with this model``: every scenario was an infra error. Upstream sends through litellm with
``drop_params``, which leaves out what a model does not support. A parameter the profile
supplied (never one the user configured: that refusal stays the user's to fix) is left out the
same way here, once the endpoint refuses it: the request goes again at once without it, and so
does every later request of that client; the run says so once. The run's records keep the
parameter as configured, as upstream's ``llm_args`` do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, Final

from tau2_retail.models.attempt_failure import AttemptFailure
from tau2_retail.models.config import EndpointConfig

__all__ = ["DROPPABLE", "refused_parameter", "supplied", "without"]

DROPPABLE: Final = ("temperature",)
"""The parameters a profile may supply and a model may refuse."""

_REFUSED: Final = ("unsupported value: '{}'", "unsupported parameter: '{}'")
"""OpenAI's words (lower case) for a parameter the model does not take, or not with that value."""


def supplied(configured: EndpointConfig, sent: EndpointConfig) -> frozenset[str]:
    """The droppable parameters ``sent`` carries that the user did not configure."""
    return frozenset(
        name
        for name in DROPPABLE
        if getattr(configured, name) is None and getattr(sent, name) is not None
    )


def refused_parameter(failure: AttemptFailure, candidates: Iterable[str]) -> str | None:
    """The parameter of ``candidates`` an HTTP 400 says the model does not take, or None."""
    refused = failure.fatal  # a 400 is not retried: its error holds the whole body
    if refused is None or refused.status != 400:
        return None
    body = refused.full_body.lower()
    for name in candidates:
        if any(words.format(name) in body for words in _REFUSED):
            return name
    return None


def without(config: EndpointConfig, names: Iterable[str]) -> EndpointConfig:
    """``config`` sending none of ``names``."""
    left_out: dict[str, Any] = dict.fromkeys(names)
    return dataclasses.replace(config, **left_out)
