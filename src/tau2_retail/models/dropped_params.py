"""Request parameters the suite adds that a model refuses: left out, as upstream tau2 does.

The tau2 profile sends ``temperature`` 0.0 on every role's requests unless one is configured,
as upstream tau2 does, and every profile sends the trial's seed on the agent's and the
customer's requests. Some models refuse them: OpenAI's reasoning models (o1, o3, o4-mini,
gpt-5) take only their default temperature (HTTP 400 ``Unsupported value: 'temperature' does
not support 0.0 with this model``), and Mistral's models take no ``seed`` (HTTP 422
``extra_forbidden`` at ``["body", "seed"]``): every scenario was an infra error. Upstream sends
through litellm with ``drop_params``, which leaves out what a model does not support. A
parameter the suite supplied (never one the user configured: that refusal stays the user's to
fix) is left out the same way here, once the endpoint refuses it: the request goes again at
once without it, and so does every later request of that client; the run says so once. The
run's records keep the parameter as configured, as upstream's ``llm_args`` do.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any, Final

from tau2_retail.models.attempt_failure import AttemptFailure
from tau2_retail.models.config import EndpointConfig

__all__ = ["DROPPABLE", "refused_parameter", "supplied", "without"]

DROPPABLE: Final = ("temperature", "seed")
"""The parameters the suite may supply and a model may refuse."""

_REFUSED: Final = (
    # OpenAI's words (lower case) for a parameter the model does not take, or not that value
    "unsupported value: '{}'",
    "unsupported parameter: '{}'",
    # Azure OpenAI's older API versions
    "unrecognized request argument supplied: {}",
)
# a pydantic server forbidding fields it does not know (Mistral's: "Extra inputs are not
# permitted"), the field named in the error's location; quoted either way: the LiteLLM proxy
# (1.108) passes the detail on as Python's repr inside its own message (['body', 'seed'])
_EXTRA_FORBIDDEN: Final = re.compile(r"""["']extra_forbidden["']""")
_LOCATION: Final = r"""["']loc["']\s*:\s*\[\s*["']body["']\s*,\s*["']{}["']\s*\]"""


def supplied(configured: EndpointConfig, sent: EndpointConfig) -> frozenset[str]:
    """The droppable parameters the suite sends that the user did not configure: the profile's
    (``sent`` carries them, ``configured`` does not) and the trial's seed, unless a seed is
    configured."""
    found = {
        name
        for name in DROPPABLE
        if getattr(configured, name) is None and getattr(sent, name) is not None
    }
    if configured.seed is None:
        found.add("seed")
    return frozenset(found)


def refused_parameter(failure: AttemptFailure, candidates: Iterable[str]) -> str | None:
    """The parameter of ``candidates`` an HTTP 400 or 422 says the model does not take."""
    refused = failure.fatal  # a 400 or 422 is not retried: its error holds the whole body
    if refused is None or refused.status not in (400, 422):
        return None
    body = refused.full_body.lower()
    for name in candidates:
        if any(words.format(name) in body for words in _REFUSED):
            return name
        if _EXTRA_FORBIDDEN.search(body) and re.search(_LOCATION.format(re.escape(name)), body):
            return name
    return None


def without(config: EndpointConfig, names: Iterable[str]) -> EndpointConfig:
    """``config`` sending none of ``names``."""
    left_out: dict[str, Any] = dict.fromkeys(names)
    return dataclasses.replace(config, **left_out)
