"""How a conversation ended: its ``StopReason`` and the typed ``Ending`` (reason, detail, failed
role)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum

from tau2_retail.engine.metrics import ROLES
from tau2_retail.errors import ContextWindowExceeded, EndpointError, UnparsedModelOutput

__all__ = [
    "EMPTY_AGENT",
    "Ending",
    "StopReason",
    "empty_agent_ending",
    "failure_reason",
    "user_reply_ending",
    "why_empty",
]


class StopReason(StrEnum):
    AGENT_EXIT = "agent_exit"
    USER_STOP = "user_stop"
    MAX_STEPS = "max_steps"
    TOO_MANY_ERRORS = "too_many_errors"
    TIMEOUT = "timeout"
    AGENT_ERROR = "agent_error"
    CONTEXT_WINDOW_EXCEEDED = "context_window_exceeded"
    INFRA_ERROR = "infra_error"
    # upstream's endings without a counterpart here: only runs imported from an upstream
    # results.json (``python -m tau2_retail import``) carry them; the engine never ends so
    USER_ERROR = "user_error"
    UNEXPECTED_ERROR = "unexpected_error"


# endings that a role's model (or its endpoint) caused: their detail is recorded "role: ..."
_ROLE_ENDINGS = frozenset(
    {StopReason.INFRA_ERROR, StopReason.CONTEXT_WINDOW_EXCEEDED, StopReason.AGENT_ERROR}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ending:
    """How a conversation ended: the reason, its detail as recorded, and the role whose model
    or endpoint failed (None when no role failed: a limit, a stop, the agent's exit).

    ``detail`` is the text the artifacts record (``transcript.json``'s ``detail``,
    ``metrics.json``'s ``stop_detail``), e.g. ``"agent: HTTP 500: ..."``; ``failed_role`` is
    the typed truth the harness decides by, set where the conversation ends.
    """

    reason: StopReason
    detail: str = ""
    failed_role: str | None = None

    @classmethod
    def failure(cls, reason: StopReason, role: str, message: str) -> Ending:
        """The ending caused by ``role``, recorded as ``"role: message"``."""
        return cls(reason=reason, detail=f"{role}: {message}", failed_role=role)

    @classmethod
    def from_record(cls, reason: str, detail: str) -> Ending:
        """The ending of a saved transcript (which records ``stop_reason`` and ``detail`` only):
        the failed role is the detail's ``role:`` prefix; an infra error without one was the
        agent's (the only role whose failures were once recorded without it)."""
        stop = StopReason(reason)
        role = None
        if stop in _ROLE_ENDINGS:
            prefix = detail.partition(":")[0]
            if prefix in ROLES:
                role = prefix
            elif stop is not StopReason.CONTEXT_WINDOW_EXCEEDED:
                role = "agent"
        return cls(reason=stop, detail=detail, failed_role=role)

    def noting(self, note: str) -> Ending:
        """This ending with ``note`` appended to its detail (``"; "``-separated)."""
        return dataclasses.replace(self, detail="; ".join(filter(None, (self.detail, note))))


EMPTY_AGENT = Ending(
    reason=StopReason.AGENT_ERROR,
    detail="the agent returned an empty message twice",
    failed_role="agent",
)


def why_empty(finish_reason: str | None) -> str:
    """What the server said of an empty message, for its ending's detail: its ``finish_reason``
    when that explains it (``length``: the completion budget spent, often on a reasoning
    model's thinking; ``content_filter``: the provider's filter), nothing for ``stop``."""
    if finish_reason is None or finish_reason == "stop":
        return ""
    return f" (finish_reason {finish_reason})"


def empty_agent_ending(finish_reason: str | None, *, asked_again: bool = True) -> Ending:
    """The agent's ending after an empty message: asked again and empty again (the default
    profile), or at the first one (``asked_again`` False: the tau2 profile asks no second time)."""
    detail = EMPTY_AGENT.detail if asked_again else "the agent returned an empty message"
    return dataclasses.replace(EMPTY_AGENT, detail=detail + why_empty(finish_reason))


def user_reply_ending(content: str | None, finish_reason: str | None) -> Ending | None:
    """The infra error of the customer's reply that cannot go on, or None: empty (after it was
    asked again), or cut at its length limit (``finish_reason`` ``length``: a model repeating
    itself until its context or its token cap is spent; its text would overflow the agent's
    context, and the agent would be scored for the simulator's failure)."""
    if not (content and content.strip()):
        detail = "the simulator returned an empty message twice" + why_empty(finish_reason)
        return Ending.failure(StopReason.INFRA_ERROR, "user", detail)
    if finish_reason == "length":
        detail = "the simulator's reply was cut at its length limit (finish_reason length)"
        return Ending.failure(StopReason.INFRA_ERROR, "user", detail)
    return None


def failure_reason(role: str, error: EndpointError) -> StopReason:
    """How a failed request ends the conversation: a prompt too long for the agent's model is
    ``context_window_exceeded``, and output the server could not parse is the agent's
    ``agent_error``; anything else, the customer's context overflow and unparsed output
    included (its endpoint is infrastructure, not what is measured), is an infra error of
    ``role``."""
    if role == "agent" and isinstance(error, ContextWindowExceeded):
        return StopReason.CONTEXT_WINDOW_EXCEEDED
    if role == "agent" and isinstance(error, UnparsedModelOutput):
        return StopReason.AGENT_ERROR
    return StopReason.INFRA_ERROR
