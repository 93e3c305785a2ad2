"""The run files as typed records: ``run_args.json`` and ``summary.json``.

The key spellings are the field names here and readers use attributes (mypy checks them);
:mod:`tau2_retail.codec` reads and writes every record, and its errors name the file and the
key. Derived keys (a rate, its interval, ``models``) are fields computed after ``__init__``:
written, and recomputed on reading. Two shapes are not one object per record: an interval is
written as ``"ci95": [low, high]`` beside ``ci95_method``, and the summary nests its signals and
folds ``not_scorable`` and ``unpriced_models`` into ``tau2_reward`` and ``cost``; the summary's
one serializer and one reader (:class:`RunSummary`) handle both. The per-scenario record is
:class:`tau2_retail.engine.metrics.ScenarioMetrics`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Final

from pydantic import (
    Field,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from tau2_retail.codec import FORMAT_VERSION, Items, Omitted
from tau2_retail.engine.profiles import RunProfile, policy_for
from tau2_retail.models.messages import Usage
from tau2_retail.models.prices import RoleCosts
from tau2_retail.results.stats import WILSON, Interval, wilson_interval
from tau2_retail.results.stopped_spending import StopCause

__all__ = [
    "PACKAGE",
    "Counts",
    "FlakyTask",
    "GroupRate",
    "InfraErrorRow",
    "JudgeReplies",
    "ModelRecord",
    "NlSignal",
    "PassHatK",
    "Rate",
    "RunArgs",
    "RunConfiguration",
    "RunSummary",
    "ScenarioRow",
    "SignalRate",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRecord:
    """Who played a role: the model name and its endpoint (None for a built-in).

    For an agent given as Python code, ``code`` holds ``source`` (``package.module:factory``
    or ``conftest.py::tau2_agent``), ``kind`` (``import`` or ``fixture``) and the agent's
    ``name``/``version`` when it has them (and ``model`` only when it declares one);
    ``model`` is then the readable form of all that.
    """

    model: str
    endpoint: Mapping[str, Any] | None
    code: Annotated[Mapping[str, Any] | None, Omitted] = None

    @property
    def priced_model(self) -> str | None:
        """The model ``--tau2-prices`` prices this role by: the model id, or the one an agent
        given as code declares (None: it declares none, and costs nothing)."""
        if self.code is None:
            return self.model
        model = self.code.get("model")
        return str(model) if model else None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConfiguration:
    """The resolved settings of a run as recorded (secrets redacted), with its run id."""

    run_id: str
    settings: Mapping[str, Any]
    sources: Mapping[str, str]
    agent: ModelRecord
    user: ModelRecord
    judge: ModelRecord | None

    @classmethod
    def of_models(
        cls,
        *,
        agent: str,
        user: str = "builtin:customer",
        judge: str | None = None,
        run_id: str = "run",
        settings: Mapping[str, Any] | None = None,
    ) -> RunConfiguration:
        """A configuration naming only the models (summaries built outside a pytest run)."""
        return cls(
            run_id=run_id,
            settings=dict(settings or {}),
            sources={},
            agent=ModelRecord(model=agent, endpoint=None),
            user=ModelRecord(model=user, endpoint=None),
            judge=ModelRecord(model=judge, endpoint=None) if judge else None,
        )

    def model(self, role: str) -> str | None:
        record = {"agent": self.agent, "user": self.user, "judge": self.judge}[role]
        return record.model if record else None

    def priced_model(self, role: str) -> str | None:
        """The model ``role`` is priced by (:attr:`ModelRecord.priced_model`)."""
        record = {"agent": self.agent, "user": self.user, "judge": self.judge}[role]
        return record.priced_model if record else None

    @property
    def profile(self) -> str | None:
        """The configured profile (None in a configuration that names only the models)."""
        value = self.settings.get("profile")
        return str(value) if value else None


PACKAGE: Final = "tau2-retail-pytest"
"""The distribution whose version scores a run: a resume or a merge keeps to one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunArgs:
    """``run_args.json``: how the run was started and what it meant to produce."""

    format_version: int = FORMAT_VERSION
    argv: tuple[str, ...]
    configuration: RunConfiguration
    trials: Annotated[int, Field(ge=1)]
    expected: tuple[str, ...]
    versions: Mapping[str, str]

    @property
    def scored_by(self) -> str | None:
        """The version of :data:`PACKAGE` that ran it (None: not recorded)."""
        return self.versions.get(PACKAGE)


def _bounds(interval: Interval | None) -> list[float] | None:
    return None if interval is None else [interval.low, interval.high]


_Ci95 = Annotated[Interval | None, PlainSerializer(_bounds)]
"""An interval written as ``"ci95": [low, high]`` beside its ``"ci95_method"``."""


def _recorded_interval(data: Any, key: str) -> Any:
    """``data`` with ``ci95``/``ci95_method`` read into the field ``key`` (``ci95`` null: no
    interval). For ``key="interval"`` the record derives a Wilson interval
    itself, so a recorded Wilson interval reads as None (a record read back equals the one
    written)."""
    if not isinstance(data, dict):
        return data
    bounds, method = data.get("ci95"), data.get("ci95_method") or WILSON
    if bounds is None or (key == "interval" and method == WILSON):
        return data
    if isinstance(bounds, list) and len(bounds) == 2:
        bounds = {"low": bounds[0], "high": bounds[1], "method": method}
    return {**data, key: bounds}


def _interval_fields(record: Any, interval: Interval | None) -> None:
    object.__setattr__(record, "ci95", interval)
    object.__setattr__(record, "ci95_method", interval.method if interval else None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Rate:
    """``passed`` of ``total`` and its 95% interval.

    ``interval`` is set by the summary when the units are clustered (trials of a task); when
    None, :attr:`ci95` is the Wilson interval.
    """

    passed: int
    total: int
    rate: float | None = field(init=False, default=None)
    ci95: _Ci95 = field(init=False, default=None)
    ci95_method: Annotated[str | None, Omitted] = field(init=False, default=None)
    interval: Annotated[Interval | None, Field(exclude=True)] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate", self.passed / self.total if self.total else None)
        _interval_fields(self, self.interval or wilson_interval(self.passed, self.total))


@dataclass(frozen=True, slots=True, kw_only=True)
class SignalRate:
    """A scenario signal's rate; written as ``{"gating", <the rate's keys>, "excluded"}``
    (``excluded`` only when not gating) inside the summary's ``signals``; ``rate`` None (with a
    ``reason``) when no scored scenario's profile scores the signal, written as NL_ASSERTION's
    is then (``{"applicable": false, "reason", "gating"}``)."""

    rate: Rate | None
    gating: bool
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class NlSignal:
    """NL_ASSERTION, in assertions; ``rate`` None (with a ``reason``) when not applicable."""

    rate: Rate | None
    reason: str = ""
    scenarios: int = 0
    scenarios_passed: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Counts:
    """``expected == scored + infra_errors + lost + not_run``; ``scored == succeeded + failed``.

    ``not_run``: scenarios the budget (``--tau2-max-cost``) kept from starting.
    """

    expected: int
    reported: int
    scored: int
    succeeded: int
    failed: int
    infra_errors: int
    lost: int
    not_run: Annotated[int, Omitted] = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class PassHatK:
    """tau2's pass^k over ``tasks`` and its 95% interval (None when no task has ``k``
    trials)."""

    k: int
    value: float | None
    tasks: int
    ci95: _Ci95 = None
    ci95_method: Annotated[str | None, Omitted] = field(init=False, default=None)

    def __post_init__(self) -> None:
        _interval_fields(self, self.ci95)


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupRate:
    """A split's or persona's scenarios: ``succeeded`` of ``n``, with the rate's interval."""

    n: int
    succeeded: int
    success_rate: float = field(init=False, default=0.0)
    ci95: _Ci95 = field(init=False, default=None)
    ci95_method: Annotated[str | None, Omitted] = field(init=False, default=None)
    interval: Annotated[Interval | None, Field(exclude=True)] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "success_rate", self.succeeded / self.n)
        _interval_fields(self, self.as_rate.ci95)

    @property
    def as_rate(self) -> Rate:
        return Rate(passed=self.succeeded, total=self.n, interval=self.interval)


@dataclass(frozen=True, slots=True, kw_only=True)
class FlakyTask:
    """A task whose trials disagree: ``passed`` of its ``trials`` scored trials succeeded."""

    task_id: str
    passed: int
    trials: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Mean:
    mean: float | None
    n: int


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeReplies:
    """The judge's replies of a run (retries after an unreadable reply included) and how many
    could not be read. ``follows_format`` is False when most could not be read."""

    total: int = 0
    unreadable: int = 0
    follows_format: bool = field(init=False, default=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "follows_format", 2 * self.unreadable <= self.total)


@dataclass(frozen=True, slots=True, kw_only=True)
class InfraErrorRow:
    scenario_id: str
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioRow:
    """One scenario's line of the summary (``cost`` only in a run with prices)."""

    scenario_id: str
    task_id: str
    trial: int
    status: str
    is_successful: bool
    is_task_successful: bool
    db_state_match: bool
    #: None where the scenario's profile does not score it (tau2)
    clean_exit: bool | None
    nl_assertion_pass_rate: float | None
    nl_assertion_pass_count: int | None
    nl_assertion_total: int
    is_action_match: bool
    judge_score: float | None
    tau2_reward: float | None
    stop_reason: str
    total_turns: int
    duration_seconds: float
    cost: Annotated[float | None, Omitted] = None


#: The summary's ``signals`` object: its keys and the fields that hold them.
_SIGNALS = (
    ("DB_STATE_MATCH", "db_state_match"),
    ("CLEAN_EXIT", "clean_exit"),
    ("NL_ASSERTION", "nl_assertion"),
    ("ACTION_MATCH", "action_match"),
)
_NL = {"gating": True, "unit": "assertions"}


def _signal_json(written: dict[str, Any]) -> dict[str, Any]:
    """A signal's file form from its written fields (``rate`` inline)."""
    if "gating" in written:  # a SignalRate
        if written["rate"] is None:
            return {"applicable": False, "reason": written["reason"], "gating": written["gating"]}
        out = {"gating": written["gating"], **written["rate"]}
        return out | ({} if written["gating"] else {"excluded": True})
    if written["rate"] is None:
        return {"applicable": False, "reason": written["reason"], **_NL}
    scenarios = {k: written[k] for k in ("scenarios", "scenarios_passed")}
    return {"applicable": True, **_NL, **written["rate"], **scenarios}


def _signal_fields(data: Any, field: str) -> Any:
    """The inverse of :func:`_signal_json` for the summary's field ``field``."""
    if not isinstance(data, dict):
        return data
    if data.get("applicable") is False:
        fields = {"rate": None, "reason": data.get("reason")}
    else:
        fields = {"rate": _recorded_interval(data, "interval")}
    if field != "nl_assertion":
        return fields | {"gating": data.get("gating")}
    if fields["rate"] is None:
        return fields
    return fields | {k: data.get(k) for k in ("scenarios", "scenarios_passed")}


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """``summary.json``: the figures of a run (built by :mod:`tau2_retail.results.summary`).

    ``profile``: ``default``, ``tau2`` (``mixed`` when the scenarios disagree); any other
    name is an error naming the file. ``tau2_reward_not_scorable``: scored
    scenarios without a tau2 reward (tau2 profile: an NL component and no judge), recorded as
    ``tau2_reward.not_scorable`` in the tau2 profile. ``cost`` and ``unpriced_models`` are
    written as one ``cost`` object, in a run with prices.
    """

    format_version: int = FORMAT_VERSION
    profile: RunProfile
    configuration: RunConfiguration | None
    versions: Mapping[str, str]
    models: Mapping[str, str | None] = field(init=False, default_factory=dict)
    trials: int
    counts: Counts
    success_rate: Rate
    task_success_rate: Rate
    db_state_match: SignalRate
    clean_exit: SignalRate
    nl_assertion: NlSignal
    action_match: SignalRate
    judge_score: Mean
    tau2_reward: Mean
    pass_hat_k: Items[PassHatK]
    stop_reasons: Mapping[str, int]
    token_usage: Mapping[str, Usage]
    by_split: Mapping[str, GroupRate]
    by_persona: Mapping[str, GroupRate]
    infra_errors: Items[InfraErrorRow]
    lost: Items[str]
    lost_reasons: Mapping[str, str]
    judge_replies: JudgeReplies
    flaky_tasks: Items[FlakyTask]
    scenarios: Items[ScenarioRow]
    cost: Annotated[RoleCosts | None, Omitted] = None
    not_run: Annotated[Items[str], Omitted] = ()
    #: USD the scenarios of ``not_run`` had spent when the budget stopped them (not in ``cost``,
    #: which sums the scenarios' records)
    not_run_cost: Annotated[float | None, Omitted] = None
    #: USD the scenarios stopped in flight unscored had spent (an interrupt: Ctrl-C, SIGTERM,
    #: an agent's KeyboardInterrupt; -x or --maxfail; a timeout...): they have no record, so
    #: ``cost`` leaves it out too
    interrupted_cost: Annotated[float | None, Omitted] = None
    #: what stopped them (one or more causes, with ``interrupted_cost`` only)
    interrupted_by: Annotated[Items[StopCause], Omitted] = ()
    #: how much of the run folder's ledger of stopped spending (``.stopped-spending``, bytes
    #: from its start: the end of the last complete line read) ``not_run_cost`` and
    #: ``interrupted_cost`` hold: the next summary adds only the lines past it
    stopped_spending_counted: Annotated[int, Omitted] = 0
    tau2_reward_not_scorable: Annotated[int, Field(exclude=True)] = 0
    unpriced_models: Annotated[Items[str], Field(exclude=True)] = ()

    def __post_init__(self) -> None:
        roles = ("agent", "user", "judge")
        object.__setattr__(self, "models", {role: self.model(role) for role in roles})

    def model(self, role: str) -> str | None:
        return self.configuration.model(role) if self.configuration else None

    @model_serializer(mode="wrap")
    def _file_form(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        written: dict[str, Any] = handler(self)
        out: dict[str, Any] = {}
        for key, value in written.items():
            if key == "db_state_match":
                out["signals"] = {name: _signal_json(written[f]) for name, f in _SIGNALS}
            elif key == "tau2_reward":
                record = policy_for(self.profile).reward_record
                out[key] = value | record(not_scorable=self.tau2_reward_not_scorable)
            elif key == "cost":
                out[key] = value | {"unpriced_models": list(self.unpriced_models)}
            elif key not in ("clean_exit", "nl_assertion", "action_match"):
                out[key] = value
        return out

    @model_validator(mode="before")
    @classmethod
    def _fields_of_file(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for key in ("success_rate", "task_success_rate"):
            if key in data:
                data[key] = _recorded_interval(data[key], "interval")
        for key in ("by_split", "by_persona"):
            if isinstance(groups := data.get(key), dict):
                data[key] = {k: _recorded_interval(g, "interval") for k, g in groups.items()}
        if isinstance(entries := data.get("pass_hat_k"), list):
            data["pass_hat_k"] = [_recorded_interval(entry, "ci95") for entry in entries]
        signals = data.pop("signals", None)
        if isinstance(signals, dict):
            data |= {f: _signal_fields(signals.get(name), f) for name, f in _SIGNALS}
        reward = data.get("tau2_reward")
        if isinstance(reward, dict) and reward.get("not_scorable") is not None:
            data["tau2_reward_not_scorable"] = reward["not_scorable"]
        cost = data.get("cost")
        if isinstance(cost, dict):
            data["unpriced_models"] = cost.get("unpriced_models", [])
        return data
