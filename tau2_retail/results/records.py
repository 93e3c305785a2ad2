"""The run files as typed records: ``run_args.json`` and ``summary.json``.

Each record has one ``to_json`` and one ``from_json``; the key spellings live here and readers
use attributes (mypy checks them). ``from_json`` raises :class:`ArtifactError` naming the file
and the key. The per-scenario record is :class:`tau2_retail.engine.metrics.ScenarioMetrics`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tau2_retail.engine.metrics import Fields, UsageCounts
from tau2_retail.engine.profiles import ProfileName, policy_for
from tau2_retail.models.prices import RoleCosts
from tau2_retail.results.stats import WILSON, Interval, wilson_interval

__all__ = [
    "RESUME_KEYS",
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

#: The settings a resumed run must share with the run it continues (secrets are never stored;
#: output folder, run id, gate thresholds and the like may change between the two).
RESUME_KEYS = (
    "trials",
    "seed",
    "tasks",
    "shard",
    "split",
    "max_steps",
    "max_errors",
    "max_duration",
    "agent_notes",
    "profile",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRecord:
    """Who played a role: the model name and its endpoint (None for a built-in).

    For an agent given as Python code, ``code`` holds ``source`` (``package.module:factory``
    or ``conftest.py::tau2_agent``), ``kind`` (``import`` or ``fixture``) and the agent's
    ``name``/``version`` when it has them; ``model`` is then the readable form of all that.
    """

    model: str
    endpoint: Mapping[str, Any] | None
    code: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data = {"model": self.model, "endpoint": dict(self.endpoint) if self.endpoint else None}
        if self.code:
            data["code"] = dict(self.code)
        return data

    @classmethod
    def from_json(cls, f: Fields) -> ModelRecord:
        endpoint = f.opt_obj("endpoint")
        code = f.opt_obj("code")
        return cls(
            model=f.text("model"),
            endpoint=endpoint.raw if endpoint else None,
            code=code.raw if code else None,
        )

    def identity(self, role: str) -> dict[str, Any]:
        """What a resumed run must share: the model and endpoint, or the agent's code (its
        source; and name/version for an import string, known at start-up)."""
        if self.code:
            out = {f"{role}_code": self.code.get("source")}
            if self.code.get("kind") != "fixture":  # a fixture's agent is seen only later
                out[f"{role}_code_name"] = self.code.get("name")
                out[f"{role}_code_version"] = self.code.get("version")
            return out
        out = {f"{role}_model": self.model}
        endpoint = dict(self.endpoint) if self.endpoint else {}
        for key in sorted(endpoint):
            out[f"{role}_{key}"] = endpoint[key]
        return out


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

    @property
    def profile(self) -> str | None:
        """The configured profile (None in runs recorded before profiles existed)."""
        value = self.settings.get("profile")
        return str(value) if value else None

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "settings": dict(self.settings),
            "sources": dict(self.sources),
            "agent": self.agent.to_json(),
            "user": self.user.to_json(),
            "judge": self.judge.to_json() if self.judge else None,
        }

    @classmethod
    def from_json(cls, f: Fields) -> RunConfiguration:
        judge = f.opt_obj("judge")
        return cls(
            run_id=f.text("run_id"),
            settings=f.obj("settings").raw,
            sources={k: str(v) for k, v in f.obj("sources").raw.items()},
            agent=ModelRecord.from_json(f.obj("agent")),
            user=ModelRecord.from_json(f.obj("user")),
            judge=ModelRecord.from_json(judge) if judge else None,
        )

    def identity(self) -> dict[str, Any]:
        """What a resumed run must share with this one: models, endpoints, the scenario set."""
        out: dict[str, Any] = {
            key: self.settings.get(key) for key in RESUME_KEYS if key in self.settings
        }
        for role in ("agent", "user", "judge"):
            record: ModelRecord | None = getattr(self, role)
            out.update(record.identity(role) if record else {f"{role}_model": None})
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RunArgs:
    """``run_args.json``: how the run was started and what it meant to produce."""

    argv: tuple[str, ...]
    configuration: RunConfiguration
    trials: int
    expected: tuple[str, ...]
    versions: Mapping[str, str]

    def to_json(self) -> dict[str, Any]:
        return {
            "argv": list(self.argv),
            "configuration": self.configuration.to_json(),
            "trials": self.trials,
            "expected": list(self.expected),
            "versions": dict(self.versions),
        }

    @classmethod
    def from_json(cls, raw: object, where: str = "run_args.json") -> RunArgs:
        f = Fields(raw, where)
        trials = f.integer("trials")
        if trials < 1:
            f.fail("trials", "an integer >= 1")
        return cls(
            argv=f.texts("argv"),
            configuration=RunConfiguration.from_json(f.obj("configuration")),
            trials=trials,
            expected=f.texts("expected"),
            versions={k: str(v) for k, v in f.obj("versions").raw.items()},
        )


def _interval_json(interval: Interval | None) -> dict[str, Any]:
    if interval is None:
        return {"ci95": None}
    return {"ci95": [interval.low, interval.high], "ci95_method": interval.method}


def _interval_of(f: Fields, *, derived: bool = False) -> Interval | None:
    """The recorded ``ci95`` (None when absent: a summary written before intervals).

    ``derived``: the record computes a Wilson interval itself, so a recorded one reads as None
    (a record read back equals the one written).
    """
    if not f.has("ci95") or (derived and (f.opt_text("ci95_method") or WILSON) == WILSON):
        return None
    bounds = f.array("ci95")
    if len(bounds) != 2 or not all(
        isinstance(b, int | float) and not isinstance(b, bool) for b in bounds
    ):
        f.fail("ci95", "[low, high]")
    return Interval(
        low=float(bounds[0]), high=float(bounds[1]), method=f.opt_text("ci95_method") or WILSON
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Rate:
    """``passed`` of ``total`` and its 95% interval.

    ``interval`` is set by the summary when the units are clustered (trials of a task); when
    None, :attr:`ci95` is the Wilson interval (also for summaries written before intervals).
    """

    passed: int
    total: int
    interval: Interval | None = None

    @property
    def rate(self) -> float | None:
        return self.passed / self.total if self.total else None

    @property
    def ci95(self) -> Interval | None:
        return self.interval or wilson_interval(self.passed, self.total)

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "total": self.total,
            "rate": self.rate,
            **_interval_json(self.ci95),
        }

    @classmethod
    def from_json(cls, f: Fields) -> Rate:
        return cls(
            passed=f.integer("passed"),
            total=f.integer("total"),
            interval=_interval_of(f, derived=True),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SignalRate:
    rate: Rate
    gating: bool

    def to_json(self) -> dict[str, Any]:
        out = {"gating": self.gating, **self.rate.to_json()}
        if not self.gating:
            out["excluded"] = True
        return out

    @classmethod
    def from_json(cls, f: Fields) -> SignalRate:
        return cls(rate=Rate.from_json(f), gating=f.flag("gating"))


@dataclass(frozen=True, slots=True, kw_only=True)
class NlSignal:
    """NL_ASSERTION, in assertions; ``rate`` None (with a ``reason``) when not applicable."""

    rate: Rate | None
    reason: str = ""
    scenarios: int = 0
    scenarios_passed: int = 0

    def to_json(self) -> dict[str, Any]:
        if self.rate is None:
            return {
                "applicable": False,
                "reason": self.reason,
                "gating": True,
                "unit": "assertions",
            }
        return {
            "applicable": True,
            "gating": True,
            "unit": "assertions",
            **self.rate.to_json(),
            "scenarios": self.scenarios,
            "scenarios_passed": self.scenarios_passed,
        }

    @classmethod
    def from_json(cls, f: Fields) -> NlSignal:
        if not f.flag("applicable"):
            return cls(rate=None, reason=f.text("reason"))
        return cls(
            rate=Rate.from_json(f),
            scenarios=f.integer("scenarios"),
            scenarios_passed=f.integer("scenarios_passed"),
        )


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
    not_run: int = 0

    def to_json(self) -> dict[str, int]:
        out = {
            "expected": self.expected,
            "reported": self.reported,
            "scored": self.scored,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "infra_errors": self.infra_errors,
            "lost": self.lost,
        }
        if self.not_run:
            out["not_run"] = self.not_run
        return out

    @classmethod
    def from_json(cls, f: Fields) -> Counts:
        return cls(
            expected=f.integer("expected"),
            reported=f.integer("reported"),
            scored=f.integer("scored"),
            succeeded=f.integer("succeeded"),
            failed=f.integer("failed"),
            infra_errors=f.integer("infra_errors"),
            lost=f.integer("lost"),
            not_run=f.opt_integer("not_run") or 0,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PassHatK:
    """tau2's pass^k over ``tasks`` and its 95% interval (None in summaries written before
    intervals, or when no task has ``k`` trials)."""

    k: int
    value: float | None
    tasks: int
    ci95: Interval | None = None

    def to_json(self) -> dict[str, Any]:
        return {"k": self.k, "value": self.value, "tasks": self.tasks, **_interval_json(self.ci95)}

    @classmethod
    def from_json(cls, f: Fields) -> PassHatK:
        return cls(
            k=f.integer("k"),
            value=f.opt_number("value"),
            tasks=f.integer("tasks"),
            ci95=_interval_of(f),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupRate:
    """A split's or persona's scenarios: ``succeeded`` of ``n``, with the rate's interval."""

    n: int
    succeeded: int
    interval: Interval | None = None

    @property
    def as_rate(self) -> Rate:
        return Rate(passed=self.succeeded, total=self.n, interval=self.interval)

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "succeeded": self.succeeded,
            "success_rate": self.succeeded / self.n,
            **_interval_json(self.as_rate.ci95),
        }

    @classmethod
    def from_json(cls, f: Fields) -> GroupRate:
        return cls(
            n=f.integer("n"),
            succeeded=f.integer("succeeded"),
            interval=_interval_of(f, derived=True),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class FlakyTask:
    """A task whose trials disagree: ``passed`` of its ``trials`` scored trials succeeded."""

    task_id: str
    passed: int
    trials: int

    def to_json(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "passed": self.passed, "trials": self.trials}

    @classmethod
    def from_json(cls, f: Fields) -> FlakyTask:
        return cls(
            task_id=f.text("task_id"), passed=f.integer("passed"), trials=f.integer("trials")
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Mean:
    mean: float | None
    n: int

    def to_json(self) -> dict[str, Any]:
        return {"mean": self.mean, "n": self.n}

    @classmethod
    def from_json(cls, f: Fields) -> Mean:
        return cls(mean=f.opt_number("mean"), n=f.integer("n"))


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeReplies:
    """The judge's replies of a run (retries after an unreadable reply included) and how many
    could not be read. ``follows_format`` is False when most could not be read."""

    total: int = 0
    unreadable: int = 0

    @property
    def follows_format(self) -> bool:
        return 2 * self.unreadable <= self.total

    def to_json(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "unreadable": self.unreadable,
            "follows_format": self.follows_format,
        }

    @classmethod
    def from_json(cls, f: Fields) -> JudgeReplies:
        return cls(total=f.integer("total"), unreadable=f.integer("unreadable"))


@dataclass(frozen=True, slots=True, kw_only=True)
class InfraErrorRow:
    scenario_id: str
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"scenario_id": self.scenario_id, "detail": self.detail}

    @classmethod
    def from_json(cls, f: Fields) -> InfraErrorRow:
        return cls(scenario_id=f.text("scenario_id"), detail=f.text("detail"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioRow:
    """One scenario's line of the summary."""

    scenario_id: str
    task_id: str
    trial: int
    status: str
    is_successful: bool
    is_task_successful: bool
    db_state_match: bool
    clean_exit: bool
    nl_assertion_pass_rate: float | None
    nl_assertion_pass_count: int | None
    nl_assertion_total: int
    is_action_match: bool
    judge_score: float | None
    tau2_reward: float | None
    stop_reason: str
    total_turns: int
    duration_seconds: float
    cost: float | None = None

    def to_json(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__slots__}
        if self.cost is None:  # a run without prices keeps the old row
            del out["cost"]
        return out

    @classmethod
    def from_json(cls, f: Fields) -> ScenarioRow:
        return cls(
            scenario_id=f.text("scenario_id"),
            task_id=f.text("task_id"),
            trial=f.integer("trial"),
            status=f.text("status"),
            is_successful=f.flag("is_successful"),
            is_task_successful=f.flag("is_task_successful"),
            db_state_match=f.flag("db_state_match"),
            clean_exit=f.flag("clean_exit"),
            nl_assertion_pass_rate=f.opt_number("nl_assertion_pass_rate"),
            nl_assertion_pass_count=f.opt_integer("nl_assertion_pass_count"),
            nl_assertion_total=f.integer("nl_assertion_total"),
            is_action_match=f.flag("is_action_match"),
            judge_score=f.opt_number("judge_score"),
            tau2_reward=f.opt_number("tau2_reward"),
            stop_reason=f.text("stop_reason"),
            total_turns=f.integer("total_turns"),
            duration_seconds=f.number("duration_seconds"),
            cost=f.opt_number("cost"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """``summary.json``: the figures of a run (built by :mod:`tau2_retail.results.summary`).

    ``profile``: ``default``, ``tau2`` (``mixed`` when the scenarios disagree); summaries
    written before profiles existed read as ``default``. ``tau2_reward_not_scorable``: scored
    scenarios without a tau2 reward (tau2 profile: an NL component and no judge), recorded as
    ``tau2_reward.not_scorable`` in the tau2 profile.
    """

    profile: str
    configuration: RunConfiguration | None
    versions: Mapping[str, str]
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
    tau2_reward_not_scorable: int = 0
    pass_hat_k: tuple[PassHatK, ...]
    stop_reasons: Mapping[str, int]
    token_usage: Mapping[str, UsageCounts]
    by_split: Mapping[str, GroupRate]
    by_persona: Mapping[str, GroupRate]
    infra_errors: tuple[InfraErrorRow, ...]
    lost: tuple[str, ...]
    lost_reasons: Mapping[str, str] = field(default_factory=dict)
    judge_replies: JudgeReplies = field(default_factory=JudgeReplies)
    flaky_tasks: tuple[FlakyTask, ...] = ()
    scenarios: tuple[ScenarioRow, ...]
    cost: RoleCosts | None = None
    unpriced_models: tuple[str, ...] = ()
    not_run: tuple[str, ...] = ()

    def model(self, role: str) -> str | None:
        return self.configuration.model(role) if self.configuration else None

    def to_json(self) -> dict[str, Any]:
        reward = self.tau2_reward.to_json()
        if policy_for(self.profile).reward_is_headline:
            reward["not_scorable"] = self.tau2_reward_not_scorable
        return {
            "profile": self.profile,
            "configuration": self.configuration.to_json() if self.configuration else None,
            "versions": dict(self.versions),
            "models": {role: self.model(role) for role in ("agent", "user", "judge")},
            "trials": self.trials,
            "counts": self.counts.to_json(),
            "success_rate": self.success_rate.to_json(),
            "task_success_rate": self.task_success_rate.to_json(),
            "signals": {
                "DB_STATE_MATCH": self.db_state_match.to_json(),
                "CLEAN_EXIT": self.clean_exit.to_json(),
                "NL_ASSERTION": self.nl_assertion.to_json(),
                "ACTION_MATCH": self.action_match.to_json(),
            },
            "judge_score": self.judge_score.to_json(),
            "tau2_reward": reward,
            "pass_hat_k": [entry.to_json() for entry in self.pass_hat_k],
            "stop_reasons": dict(self.stop_reasons),
            "token_usage": {role: usage.to_json() for role, usage in self.token_usage.items()},
            "by_split": {name: group.to_json() for name, group in self.by_split.items()},
            "by_persona": {name: group.to_json() for name, group in self.by_persona.items()},
            "infra_errors": [row.to_json() for row in self.infra_errors],
            "lost": list(self.lost),
            "lost_reasons": dict(self.lost_reasons),
            "judge_replies": self.judge_replies.to_json(),
            "flaky_tasks": [task.to_json() for task in self.flaky_tasks],
            "scenarios": [row.to_json() for row in self.scenarios],
        } | self._optional_json()

    def _optional_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.cost is not None:
            out["cost"] = self.cost.to_json() | {"unpriced_models": list(self.unpriced_models)}
        if self.not_run:
            out["not_run"] = list(self.not_run)
        return out

    @classmethod
    def from_json(cls, raw: object, where: str = "summary.json") -> RunSummary:
        f = Fields(raw, where)
        signals = f.obj("signals")
        configuration = f.opt_obj("configuration")
        reward = f.obj("tau2_reward")
        cost = f.opt_obj("cost")
        return cls(
            profile=f.opt_text("profile") or ProfileName.DEFAULT.value,
            configuration=RunConfiguration.from_json(configuration) if configuration else None,
            versions={k: str(v) for k, v in f.obj("versions").raw.items()},
            trials=f.integer("trials"),
            counts=Counts.from_json(f.obj("counts")),
            success_rate=Rate.from_json(f.obj("success_rate")),
            task_success_rate=Rate.from_json(f.obj("task_success_rate")),
            db_state_match=SignalRate.from_json(signals.obj("DB_STATE_MATCH")),
            clean_exit=SignalRate.from_json(signals.obj("CLEAN_EXIT")),
            nl_assertion=NlSignal.from_json(signals.obj("NL_ASSERTION")),
            action_match=SignalRate.from_json(signals.obj("ACTION_MATCH")),
            judge_score=Mean.from_json(f.obj("judge_score")),
            tau2_reward=Mean.from_json(reward),
            tau2_reward_not_scorable=reward.opt_integer("not_scorable") or 0,
            pass_hat_k=tuple(PassHatK.from_json(e) for e in f.objects("pass_hat_k")),
            stop_reasons={k: int(v) for k, v in f.obj("stop_reasons").raw.items()},
            token_usage={r: UsageCounts.from_json(u) for r, u in f.obj("token_usage").items()},
            by_split={k: GroupRate.from_json(g) for k, g in f.obj("by_split").items()},
            by_persona={k: GroupRate.from_json(g) for k, g in f.obj("by_persona").items()},
            infra_errors=tuple(InfraErrorRow.from_json(e) for e in f.objects("infra_errors")),
            lost=f.texts("lost"),
            lost_reasons=(
                {k: str(v) for k, v in f.obj("lost_reasons").raw.items()}
                if f.has("lost_reasons")
                else {}
            ),
            # absent in summaries written before unreadable judge replies were counted
            judge_replies=(
                JudgeReplies.from_json(f.obj("judge_replies"))
                if f.has("judge_replies")
                else JudgeReplies()
            ),
            flaky_tasks=(
                tuple(FlakyTask.from_json(e) for e in f.objects("flaky_tasks"))
                if f.has("flaky_tasks")
                else ()
            ),
            scenarios=tuple(ScenarioRow.from_json(row) for row in f.objects("scenarios")),
            # absent in summaries written before prices and budgets existed
            cost=RoleCosts.from_json(cost.raw) if cost else None,
            unpriced_models=cost.texts("unpriced_models") if cost else (),
            not_run=f.texts("not_run") if f.has("not_run") else (),
        )
