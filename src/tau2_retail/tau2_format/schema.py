"""Upstream tau2-bench's ``results.json`` as typed records: the part this suite writes and reads.

Upstream's pydantic models (``Results``, ``Info``, ``SimulationRun``, the messages, ``RewardInfo``
in its ``src/tau2/data_model/``) define the file; these frozen records spell the same keys, so
:mod:`tau2_retail.codec` writes them (export) and reads them with a clear error naming the field
(import). Keys this suite never fills are left out on writing (upstream's defaults apply) and
ignored on reading. Where upstream's model insists on a shape, so does the record: a tool
call's ``arguments`` is a JSON object (a string is refused, as upstream's ``dict`` field refuses
it); a tool message carries its call's ``id``.

Messages are one record per kind, told apart by ``role``: :class:`ParticipantMessage`
(``assistant``, ``user``), :class:`ToolMessage` (``tool``) and :class:`SystemMessage`.
The embedded ``tasks`` are written as upstream's own bytes (see
:mod:`tau2_retail.tau2_format.tasks`) and read back only for the fields scoring needs
(:class:`TaskRecord`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field

__all__ = [
    "ActionRecord",
    "AgentInfo",
    "CriteriaRecord",
    "DBCheck",
    "EnvironmentInfo",
    "Info",
    "Message",
    "NLAssertionCheck",
    "ParticipantMessage",
    "ResultsRecord",
    "RewardInfo",
    "SimulationRecord",
    "SystemMessage",
    "TaskRecord",
    "ToolCallRecord",
    "ToolMessage",
    "UserInfo",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallRecord:
    """A tool call: ``arguments`` is a JSON object, never a string."""

    id: str = ""
    name: str
    arguments: Mapping[str, Any]
    requestor: Literal["assistant", "user"] = "assistant"


@dataclass(frozen=True, slots=True, kw_only=True)
class ParticipantMessage:
    """An agent (``assistant``) or simulated user (``user``) message; a tool call when
    ``tool_calls`` is not null. ``usage`` is ``{"completion_tokens", "prompt_tokens"}``."""

    role: Literal["assistant", "user"]
    content: str | None = None
    tool_calls: tuple[ToolCallRecord, ...] | None = None
    turn_idx: int | None = None
    timestamp: str | None = None
    cost: float | None = None
    usage: Mapping[str, Any] | None = None
    generation_time_seconds: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolMessage:
    """A tool's result: ``id`` is its call's id (upstream pairs them by it)."""

    id: str
    role: Literal["tool"]
    content: str | None = None
    requestor: Literal["assistant", "user"] = "assistant"
    error: bool = False
    turn_idx: int | None = None
    timestamp: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemMessage:
    role: Literal["system"]
    content: str | None = None
    turn_idx: int | None = None
    timestamp: str | None = None


Message: TypeAlias = Annotated[
    ParticipantMessage | ToolMessage | SystemMessage, Field(discriminator="role")
]


@dataclass(frozen=True, slots=True, kw_only=True)
class DBCheck:
    db_match: bool
    db_reward: float


@dataclass(frozen=True, slots=True, kw_only=True)
class NLAssertionCheck:
    nl_assertion: str
    met: bool
    justification: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RewardInfo:
    """The reward and its parts; ``reward_basis`` null when the simulation was not evaluated
    (it ended other than by a stop)."""

    reward: float
    db_check: DBCheck | None = None
    nl_assertions: tuple[NLAssertionCheck, ...] | None = None
    reward_basis: tuple[str, ...] | None = None
    reward_breakdown: Mapping[str, float] | None = None
    info: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulationRecord:
    """One ``SimulationRun``: a task in one trial (``trial`` 0-based)."""

    id: str
    task_id: str
    timestamp: str | None = None
    start_time: str
    end_time: str
    duration: float
    termination_reason: str
    agent_cost: float | None = None
    user_cost: float | None = None
    reward_info: RewardInfo | None = None
    messages: tuple[Message, ...] | None = None
    trial: int | None = None
    seed: int | None = None
    mode: str = "half_duplex"
    info: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentInfo:
    implementation: str
    llm: str | None = None
    llm_args: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UserInfo:
    implementation: str
    llm: str | None = None
    llm_args: Mapping[str, Any] | None = None
    global_simulation_guidelines: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvironmentInfo:
    domain_name: str
    policy: str
    tool_defs: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Info:
    git_commit: str
    num_trials: int
    max_steps: int
    max_errors: int
    user_info: UserInfo
    agent_info: AgentInfo
    environment_info: EnvironmentInfo
    seed: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionRecord:
    """A reference action of a task (``evaluation_criteria.actions``)."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    requestor: str = "assistant"


@dataclass(frozen=True, slots=True, kw_only=True)
class CriteriaRecord:
    """What a task is scored on; upstream's default basis is ``[DB, COMMUNICATE]``."""

    actions: tuple[ActionRecord, ...] | None = None
    nl_assertions: tuple[str, ...] | None = None
    reward_basis: tuple[str, ...] = ("DB", "COMMUNICATE")


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskRecord:
    """An embedded task, read for the fields scoring needs."""

    id: str
    evaluation_criteria: CriteriaRecord | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultsRecord:
    """A whole ``results.json`` as read (the export writes it piece by piece)."""

    timestamp: str | None = None
    info: Info
    tasks: tuple[TaskRecord, ...]
    simulations: tuple[SimulationRecord, ...] = ()
