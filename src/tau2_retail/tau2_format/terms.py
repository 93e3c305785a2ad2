"""The words of upstream's ``results.json``: endings, implementations, the domain, the mode.

Endings. Ours and upstream's name the same endings alike but two: our ``agent_exit`` is
upstream's ``agent_stop`` and our ``infra_error`` its ``infrastructure_error``; a scenario
whose judge failed after the conversation (an infra error of the judge role, ours) is
``infrastructure_error`` too, as upstream records a simulation whose evaluation raised.
Upstream's ``user_error`` and ``unexpected_error`` have no counterpart in our engine: an
imported run keeps them (:class:`~tau2_retail.engine.ending.StopReason` has them for
that), so the mapping is one-to-one and a round trip keeps every ending.

Tool-call arguments that are not a JSON object. Upstream's LLM layer
(``tau2.utils.llm_utils.generate``) turns every tool call of a reply into
``ToolCall(arguments=json.loads(text))`` and its ``arguments`` field is a ``dict``: text that
is not JSON raises ``JSONDecodeError``, JSON that is not an object fails validation. Nothing
catches it on the way; the runner (``run_with_retry``) retries the whole simulation and, when
every attempt fails, records it as ``infrastructure_error`` with no messages (reward 0, left
out of upstream's metrics). Such a conversation therefore has no upstream form: the export
refuses it (our run answered the call with a tool error and went on), and with
``--allow-incomplete`` writes that simulation as upstream would have recorded it
(:data:`INFRA`, no messages, the reason in ``info``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from tau2_retail.engine.ending import StopReason

__all__ = [
    "AGENT_STOP",
    "DOMAIN",
    "HALF_DUPLEX",
    "INFRA",
    "LLM_AGENT",
    "SCORED",
    "USER_SIMULATOR",
    "from_upstream",
    "premature_note",
    "to_upstream",
]

DOMAIN: Final = "retail"
HALF_DUPLEX: Final = "half_duplex"
LLM_AGENT: Final = "llm_agent"
"""The ``implementation`` of upstream's standard agent scaffold (its prompt and tools, which the
tau2 profile reproduces) driving a model at an endpoint."""
USER_SIMULATOR: Final = "user_simulator"
"""The ``implementation`` of upstream's LLM user simulator (its prompt, reproduced)."""
INFRA: Final = "infrastructure_error"
AGENT_STOP: Final = "agent_stop"
SCORED: Final = frozenset({"user_stop", AGENT_STOP})
"""Upstream's endings that are evaluated; any other is reward 0 without evaluation."""

_OURS_TO_UPSTREAM: Final[Mapping[StopReason, str]] = MappingProxyType(
    {
        StopReason.AGENT_EXIT: AGENT_STOP,
        StopReason.INFRA_ERROR: INFRA,
        **{
            reason: reason.value
            for reason in StopReason
            if reason not in (StopReason.AGENT_EXIT, StopReason.INFRA_ERROR)
        },
    }
)
_UPSTREAM_TO_OURS: Final[Mapping[str, StopReason]] = MappingProxyType(
    {v: k for k, v in _OURS_TO_UPSTREAM.items()}
)


def to_upstream(stop_reason: str, *, infra_error: bool = False) -> str:
    """Upstream's ``termination_reason`` of a scenario that ended with ``stop_reason``
    (``infra_error``: the scenario was an infra error of some role, the judge's included)."""
    if infra_error:
        return INFRA
    return _OURS_TO_UPSTREAM[StopReason(stop_reason)]


def from_upstream(termination_reason: str) -> StopReason:
    """Our ending of upstream's ``termination_reason``; ``ValueError`` for an unknown one."""
    try:
        return _UPSTREAM_TO_OURS[termination_reason]
    except KeyError:
        known = ", ".join(sorted(_UPSTREAM_TO_OURS))
        raise ValueError(
            f"termination_reason {termination_reason!r} is not one of upstream's ({known})"
        ) from None


def premature_note(termination_reason: str) -> str:
    """The note of the ``reward_info`` of a simulation that was not evaluated (reward 0)."""
    return (
        f"not evaluated: the simulation ended with {termination_reason} (only user_stop and "
        "agent_stop are evaluated; any other ending is reward 0)"
    )
