"""The ``metrics.json`` record of one scenario (spec: conversation_and_scoring.md §6).

:class:`ScenarioMetrics` is what the engine produces, what the artifact writer writes, what a
pytest worker hands to the controller and what ``summarize``, resume and the report read back.
The spelling of every key lives here, in ``to_json``/``from_json``; ``from_json`` is the only
place a ``metrics.json`` is validated, so readers use attributes, never ``.get``.

Trials are numbered from 1 everywhere a person reads them: the test id (``-trial1``), the
artifact folder (``trial-1``) and ``"trial": 1`` here.

:class:`Fields` reads a JSON object field by field with messages naming the file and the key;
:mod:`tau2_retail.results.records` uses it for the run files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from tau2_retail.errors import ArtifactError
from tau2_retail.models.messages import USAGE_EXTRAS, RequestStats, Usage
from tau2_retail.models.prices import RoleCosts

__all__ = [
    "Fields",
    "LatencyStats",
    "ScenarioMetrics",
    "Turn",
    "UsageCounts",
    "request_stats_from_json",
]


class Fields:
    """Typed access to one JSON object; every failure is an :class:`ArtifactError`."""

    def __init__(self, raw: object, where: str) -> None:
        if not isinstance(raw, dict):
            raise ArtifactError(f"{where}: expected a JSON object, got {type(raw).__name__}")
        self.raw: dict[str, Any] = raw
        self.where = where

    def fail(self, key: str, expected: str) -> NoReturn:
        got = self.raw.get(key, "missing")
        raise ArtifactError(
            f"{self.where}: {key!r} must be {expected}, got {got!r:.60} "
            "(a truncated or foreign file; re-run the scenario)"
        )

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def text(self, key: str) -> str:
        value = self.raw.get(key)
        if not isinstance(value, str):
            self.fail(key, "a string")
        return value

    def opt_text(self, key: str) -> str | None:
        return self.text(key) if self.has(key) else None

    def flag(self, key: str) -> bool:
        value = self.raw.get(key)
        if not isinstance(value, bool):
            self.fail(key, "true or false")
        return value

    def integer(self, key: str) -> int:
        value = self.raw.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            self.fail(key, "an integer")
        return value

    def opt_integer(self, key: str) -> int | None:
        return self.integer(key) if self.has(key) else None

    def number(self, key: str) -> float:
        value = self.raw.get(key)
        if not isinstance(value, int | float) or isinstance(value, bool):
            self.fail(key, "a number")
        return float(value)

    def opt_number(self, key: str) -> float | None:
        return self.number(key) if self.has(key) else None

    def obj(self, key: str) -> Fields:
        return Fields(self.raw.get(key), f"{self.where}: {key}")

    def opt_obj(self, key: str) -> Fields | None:
        return self.obj(key) if self.has(key) else None

    def array(self, key: str) -> list[Any]:
        value = self.raw.get(key)
        if not isinstance(value, list):
            self.fail(key, "a list")
        return value

    def texts(self, key: str) -> tuple[str, ...]:
        values = self.array(key)
        if not all(isinstance(item, str) for item in values):
            self.fail(key, "a list of strings")
        return tuple(values)

    def objects(self, key: str) -> list[Fields]:
        return [Fields(item, f"{self.where}: {key}[{i}]") for i, item in enumerate(self.array(key))]

    def items(self) -> list[tuple[str, Fields]]:
        return [(name, self.obj(name)) for name in self.raw]


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """A spoken turn (agent or user text) and when it was said."""

    timestamp: float
    role: str
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"timestamp": self.timestamp, "role": self.role, "text": self.text}

    @classmethod
    def from_json(cls, f: Fields) -> Turn:
        return cls(timestamp=f.number("timestamp"), role=f.text("role"), text=f.text("text"))


@dataclass(frozen=True, slots=True, kw_only=True)
class LatencyStats:
    """Latency of one role's requests, in seconds."""

    n: int
    mean: float
    p50: float
    p95: float
    max: float

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "mean": self.mean, "p50": self.p50, "p95": self.p95, "max": self.max}

    @classmethod
    def from_json(cls, f: Fields) -> LatencyStats:
        return cls(
            n=f.integer("n"),
            mean=f.number("mean"),
            p50=f.number("p50"),
            p95=f.number("p95"),
            max=f.number("max"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageCounts:
    """Token counts of one role over a scenario (or a run): the fields of
    :class:`~tau2_retail.models.messages.Usage` (``cache_hits`` and the tokens of those hits,
    ``cached_prompt`` of the provider's prompt cache), the extras written only when set."""

    n_calls: int = 0
    prompt: int = 0
    completion: int = 0
    cached_prompt: int = 0
    cache_hits: int = 0
    hit_prompt: int = 0
    hit_completion: int = 0

    @classmethod
    def of(cls, usage: Usage) -> UsageCounts:
        return cls(
            n_calls=usage.n_calls,
            prompt=usage.prompt,
            completion=usage.completion,
            cached_prompt=usage.cached_prompt,
            cache_hits=usage.cache_hits,
            hit_prompt=usage.hit_prompt,
            hit_completion=usage.hit_completion,
        )

    def as_usage(self) -> Usage:
        return Usage(
            n_calls=self.n_calls,
            prompt=self.prompt,
            completion=self.completion,
            cached_prompt=self.cached_prompt,
            cache_hits=self.cache_hits,
            hit_prompt=self.hit_prompt,
            hit_completion=self.hit_completion,
        )

    def __add__(self, other: UsageCounts) -> UsageCounts:
        return UsageCounts.of(self.as_usage() + other.as_usage())

    def to_json(self) -> dict[str, int]:
        return self.as_usage().to_json()

    @classmethod
    def from_json(cls, f: Fields) -> UsageCounts:
        return cls(
            n_calls=f.integer("n_calls"),
            prompt=f.integer("prompt"),
            completion=f.integer("completion"),
            # absent in records written before the response cache and prices existed
            **{name: f.opt_integer(name) or 0 for name in USAGE_EXTRAS},
        )


def request_stats_from_json(f: Fields) -> RequestStats:
    """One role's :class:`~tau2_retail.models.messages.RequestStats` (``retries`` is derived)."""
    return RequestStats(
        requests=f.integer("requests"),
        attempts=f.integer("attempts"),
        failed=f.integer("failed"),
        wait_seconds=f.number("wait_seconds"),
    )


def _cost(f: Fields | None) -> RoleCosts | None:
    if f is None:
        return None
    for role in ("agent", "user", "judge"):
        if f.has(role):
            f.number(role)
    return RoleCosts.from_json(f.raw)


ROLES = ("agent", "user", "judge")
_DEFAULT_PROFILE = "default"


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioMetrics:
    """One scenario trial's ``metrics.json``.

    ``nl_assertion_pass_count``/``_rate`` are None when NL assertions were not applicable (no
    assertions, or no judge configured); ``judge_score`` is None when no judge ran.
    ``profile`` is the run's profile (``default`` in records written before profiles existed);
    ``tau2_reward`` is None in the tau2 profile when a task's NL component needs a judge and
    none is configured (not scorable).

    ``requests`` holds per role what its requests cost on the wire (attempts, retries, failed,
    seconds waited between attempts). ``infra_role`` names the role whose endpoint failed when
    ``infra_error`` is set. ``needs_judging`` marks a finished conversation whose judge was
    down or whose judge replies could not be read: resume re-judges its saved transcript
    instead of running it again. ``judge_unreadable_replies`` counts the judge's replies that
    could not be read (written only when there was one). ``cost`` is the scenario's cost per
    role in USD when the run has prices (``--tau2-prices``).
    """

    profile: str
    scenario_name: str
    scenario_id: str
    task_id: str
    trial: int
    seed: int | None
    split: str
    persona_name: str
    total_turns: int
    turns: tuple[Turn, ...]
    duration_seconds: float
    latency_stats: Mapping[str, LatencyStats]
    stop_reason: str
    stop_detail: str
    infra_error: bool
    clean_exit: bool
    db_state_expected_hash: str
    db_state_actual_hash: str
    db_state_match: bool
    is_action_match: bool
    nl_assertion_total: int
    nl_assertion_pass_count: int | None
    nl_assertion_pass_rate: float | None
    judge_score: float | None
    token_usage: Mapping[str, UsageCounts]
    success_breakdown: Mapping[str, tuple[str, ...]]
    is_successful: bool
    is_task_successful: bool
    tau2_reward: float | None
    requests: Mapping[str, RequestStats]
    infra_role: str | None = None
    needs_judging: bool = False
    cost: RoleCosts | None = None
    judge_unreadable_replies: int = 0

    @property
    def nl_applicable(self) -> bool:
        return self.nl_assertion_pass_rate is not None

    @property
    def total_tokens(self) -> int:
        return sum(u.prompt + u.completion for u in self.token_usage.values())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "profile": self.profile,
            "scenario_name": self.scenario_name,
            "scenario_id": self.scenario_id,
            "task_id": self.task_id,
            "trial": self.trial,
            "seed": self.seed,
            "split": self.split,
            "persona_name": self.persona_name,
            "total_turns": self.total_turns,
            "turns": [turn.to_json() for turn in self.turns],
            "duration_seconds": self.duration_seconds,
            "latency_stats": {role: s.to_json() for role, s in self.latency_stats.items()},
            "stop_reason": self.stop_reason,
            "stop_detail": self.stop_detail,
            "infra_error": self.infra_error,
            "clean_exit": self.clean_exit,
            "db_state_expected_hash": self.db_state_expected_hash,
            "db_state_actual_hash": self.db_state_actual_hash,
            "db_state_match": self.db_state_match,
            "is_action_match": self.is_action_match,
            "nl_assertion_total": self.nl_assertion_total,
            "token_usage": {role: u.to_json() for role, u in self.token_usage.items()},
            "success_breakdown": {k: list(v) for k, v in self.success_breakdown.items()},
            "is_successful": self.is_successful,
            "is_task_successful": self.is_task_successful,
            "tau2_reward": self.tau2_reward,
            "requests": {role: stats.to_json() for role, stats in self.requests.items()},
        }
        if self.nl_assertion_pass_rate is not None:
            out["nl_assertion_pass_count"] = self.nl_assertion_pass_count
            out["nl_assertion_pass_rate"] = self.nl_assertion_pass_rate
        if self.judge_score is not None:
            out["judge_score"] = self.judge_score
        if self.infra_role is not None:
            out["infra_role"] = self.infra_role
        if self.needs_judging:
            out["needs_judging"] = True
        if self.cost is not None:
            out["cost"] = self.cost.to_json()
        if self.judge_unreadable_replies:
            out["judge_unreadable_replies"] = self.judge_unreadable_replies
        return out

    @classmethod
    def from_json(cls, raw: object, where: str = "metrics.json") -> ScenarioMetrics:
        """Parse and check a ``metrics.json`` value; :class:`ArtifactError` names the key."""
        f = Fields(raw, where)
        breakdown = f.obj("success_breakdown")
        return cls(
            profile=f.opt_text("profile") or _DEFAULT_PROFILE,
            scenario_name=f.text("scenario_name"),
            scenario_id=f.text("scenario_id"),
            task_id=f.text("task_id"),
            trial=f.integer("trial"),
            seed=f.opt_integer("seed"),
            split=f.text("split"),
            persona_name=f.text("persona_name"),
            total_turns=f.integer("total_turns"),
            turns=tuple(Turn.from_json(t) for t in f.objects("turns")),
            duration_seconds=f.number("duration_seconds"),
            latency_stats={
                role: LatencyStats.from_json(s) for role, s in f.obj("latency_stats").items()
            },
            stop_reason=f.text("stop_reason"),
            stop_detail=f.text("stop_detail"),
            infra_error=f.flag("infra_error"),
            clean_exit=f.flag("clean_exit"),
            db_state_expected_hash=f.text("db_state_expected_hash"),
            db_state_actual_hash=f.text("db_state_actual_hash"),
            db_state_match=f.flag("db_state_match"),
            is_action_match=f.flag("is_action_match"),
            nl_assertion_total=f.integer("nl_assertion_total"),
            nl_assertion_pass_count=f.opt_integer("nl_assertion_pass_count"),
            nl_assertion_pass_rate=f.opt_number("nl_assertion_pass_rate"),
            judge_score=f.opt_number("judge_score"),
            token_usage={
                role: UsageCounts.from_json(u) for role, u in f.obj("token_usage").items()
            },
            success_breakdown={state: breakdown.texts(state) for state in breakdown.raw},
            is_successful=f.flag("is_successful"),
            is_task_successful=f.flag("is_task_successful"),
            tau2_reward=f.opt_number("tau2_reward"),
            # absent in records written before request stats were kept
            requests={
                role: request_stats_from_json(stats)
                for role, stats in (f.obj("requests").items() if f.has("requests") else [])
            },
            infra_role=f.opt_text("infra_role"),
            needs_judging=f.has("needs_judging") and f.flag("needs_judging"),
            cost=_cost(f.opt_obj("cost")),
            judge_unreadable_replies=(
                f.integer("judge_unreadable_replies") if f.has("judge_unreadable_replies") else 0
            ),
        )

    def sort_key(self) -> tuple[float, str, int]:
        """Order of scenarios in listings: task id as an integer, then trial."""
        number = float(int(self.task_id)) if self.task_id.isdigit() else float("inf")
        return number, self.task_id, self.trial
