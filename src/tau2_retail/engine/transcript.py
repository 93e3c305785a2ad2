"""What one conversation produced (``ConversationResult``) and its saved form, ``transcript.json``
(``Transcript`` of ``TimedMessage``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from tau2_retail import codec
from tau2_retail.codec import Omitted
from tau2_retail.engine.ending import Ending, StopReason
from tau2_retail.errors import ArtifactFormatError
from tau2_retail.models.messages import Message, RequestStats, Usage
from tau2_retail.tools.dispatch import Action
from tau2_retail.tools.store import Store

__all__ = ["ConversationResult", "TimedMessage", "Transcript"]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Recorded:
    """What a :class:`ConversationResult` and its ``transcript.json`` (:class:`Transcript`)
    share, in the file's order. ``agent_traceback`` is None when the agent's code raised
    nothing."""

    messages: tuple[Message, ...]
    stop_reason: StopReason
    detail: str
    actions: tuple[Action, ...]
    usage: Mapping[str, Usage]
    latencies: tuple[tuple[str, float], ...]
    started_at: float
    duration_seconds: float
    steps: int
    tool_errors: int
    requests: Mapping[str, RequestStats] = field(default_factory=dict)
    error_body: str = ""
    agent_traceback: Annotated[str | None, Omitted] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationResult(_Recorded):
    """Everything one conversation produced: ``timestamps`` has one wall-clock time per
    message and ``usages`` the tokens of the completion that produced each one (None for the
    greeting and tool results);
    ``store`` is the final database (not JSON)."""

    timestamps: tuple[float, ...]
    store: Store = field(repr=False, compare=False)
    failed_role: str | None = None
    #: the failed role's request timeout (seconds per attempt) when its request ended the
    #: conversation by timing out (not recorded in the transcript)
    request_timeout: float | None = None
    usages: tuple[Usage | None, ...] = ()

    def __post_init__(self) -> None:
        if not self.agent_traceback:
            object.__setattr__(self, "agent_traceback", None)
        if len(self.usages) != len(self.messages):
            object.__setattr__(self, "usages", (None,) * len(self.messages))

    @property
    def ending(self) -> Ending:
        """How the conversation ended, typed."""
        return Ending(reason=self.stop_reason, detail=self.detail, failed_role=self.failed_role)

    @classmethod
    def from_json(
        cls, data: object, store: Store, where: str = "transcript.json"
    ) -> ConversationResult:
        """The conversation of a saved ``transcript.json`` value (``store`` is the final
        database, rebuilt by the caller); :class:`ArtifactError` names the field."""
        if isinstance(data, dict) and (problem := codec.format_problem(data)) is not None:
            raise ArtifactFormatError(f"{where}: {problem}")
        saved = codec.decode_value(Transcript, data, where)
        return cls(
            **_shared(saved)
            | {"messages": tuple(Message(**_shared(m, Message)) for m in saved.messages)},
            timestamps=tuple(m.timestamp for m in saved.messages),
            usages=tuple(m.usage for m in saved.messages),
            failed_role=Ending.from_record(saved.stop_reason, saved.detail).failed_role,
            store=store,
        )

    def to_json(self) -> dict[str, Any]:
        """The ``transcript.json`` value: each message with its timestamp (and its usage)."""
        messages = tuple(
            TimedMessage(**_shared(message, Message), timestamp=timestamp, usage=usage)
            for message, timestamp, usage in zip(
                self.messages, self.timestamps, self.usages, strict=True
            )
        )
        return codec.versioned(codec.encode(Transcript(**_shared(self) | {"messages": messages})))


@dataclass(frozen=True, slots=True, kw_only=True)
class TimedMessage(Message):
    """A message of ``transcript.json``: the message, when it joined the conversation and,
    for a message a model produced, the tokens of its completion (``usage``; absent for the
    greeting and tool results)."""

    timestamp: float
    usage: Annotated[Usage | None, Omitted] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Transcript(_Recorded):
    """``transcript.json``: a :class:`ConversationResult` without its database, each message
    with its timestamp."""

    messages: tuple[TimedMessage, ...]


def _shared(record: object, kind: type = _Recorded) -> dict[str, Any]:
    """The values of ``record`` for the fields of ``kind`` (one of its bases)."""
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(kind)}
