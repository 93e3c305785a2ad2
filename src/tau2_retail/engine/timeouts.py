"""Which time limit ended a scenario, so that a run can say once which setting raises it.

A slow server (a local model on CPU) fails requests on the request timeout, or runs out the
scenario's wall-clock limit; either way the user needs the one setting that raises that limit,
said once, not a timeout per scenario. The engine names the limit (:class:`TimeoutHit`); the
pytest plugin and the command line word it with their own option names.
"""

from __future__ import annotations

from dataclasses import dataclass

from tau2_retail.engine.ending import StopReason
from tau2_retail.engine.transcript import ConversationResult
from tau2_retail.errors import EndpointError

__all__ = ["TimeoutHit", "timeouts_hit"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeoutHit:
    """A limit that ended a scenario: ``role``'s request timeout (``seconds`` per attempt),
    or, with ``role`` None, the scenario's wall-clock limit of ``seconds``."""

    role: str | None
    seconds: float


def timeouts_hit(
    conversation: ConversationResult,
    *,
    max_duration_seconds: float,
    judge_error: EndpointError | None = None,
    judge_deadline: bool = False,
) -> tuple[TimeoutHit, ...]:
    """The limits that ended ``conversation`` or its judging (``judge_error``, or the judge
    cut by the scenario's limit: ``judge_deadline``)."""
    hits: list[TimeoutHit] = []
    if conversation.stop_reason is StopReason.TIMEOUT or judge_deadline:
        hits.append(TimeoutHit(role=None, seconds=max_duration_seconds))
    if conversation.request_timeout is not None and conversation.failed_role is not None:
        hits.append(TimeoutHit(role=conversation.failed_role, seconds=conversation.request_timeout))
    if judge_error is not None and judge_error.timeout_seconds is not None:
        hits.append(TimeoutHit(role="judge", seconds=judge_error.timeout_seconds))
    return tuple(hits)
