"""The ``metrics.json`` record of one scenario (spec: conversation_and_scoring.md §6).

:class:`ScenarioMetrics` is what the engine produces, what the artifact writer writes, what a
pytest worker hands to the controller and what ``summarize``, resume and the report read back.
The spelling of every key is its field's name; :mod:`tau2_retail.codec` reads and writes it
(the only place a ``metrics.json`` is validated), so readers use attributes, never ``.get``.

Trials are numbered from 1 everywhere a person reads them: the test id (``-trial1``), the
artifact folder (``trial-1``) and ``"trial": 1`` here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

from tau2_retail.codec import FORMAT_VERSION, Omitted
from tau2_retail.engine.profile_names import ScenarioProfile
from tau2_retail.models.messages import RequestStats, Usage
from tau2_retail.models.prices import RoleCosts

__all__ = [
    "LatencyStats",
    "ScenarioMetrics",
    "Turn",
    "UsageCounts",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """A spoken turn (agent or user text) and when it was said."""

    timestamp: float
    role: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LatencyStats:
    """Latency of one role's requests, in seconds."""

    n: int
    mean: float
    p50: float
    p95: float
    max: float


UsageCounts = Usage
"""Deprecated alias of :class:`~tau2_retail.models.messages.Usage` (the twin type it was), kept
for one release."""


ROLES = ("agent", "user", "judge")


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioMetrics:
    """One scenario trial's ``metrics.json``.

    ``nl_assertion_pass_count``/``_rate`` are None when NL assertions were not applicable (no
    assertions, or no judge configured); ``judge_score`` is None when no judge ran.
    ``profile`` is the profile that scored the scenario;
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

    # keys in the order of the file
    format_version: int = FORMAT_VERSION
    profile: ScenarioProfile
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
    token_usage: Mapping[str, Usage]
    success_breakdown: Mapping[str, tuple[str, ...]]
    is_successful: bool
    is_task_successful: bool
    tau2_reward: float | None
    requests: Mapping[str, RequestStats]
    # written only when set
    nl_assertion_pass_count: Annotated[int | None, Omitted] = None
    nl_assertion_pass_rate: Annotated[float | None, Omitted] = None
    judge_score: Annotated[float | None, Omitted] = None
    infra_role: Annotated[str | None, Omitted] = None
    needs_judging: Annotated[bool, Omitted] = False
    cost: Annotated[RoleCosts | None, Omitted] = None
    judge_unreadable_replies: Annotated[int, Omitted] = 0

    @property
    def nl_applicable(self) -> bool:
        return self.nl_assertion_pass_rate is not None

    @property
    def clean_exit_applicable(self) -> bool:
        """Whether the scenario's profile scores CLEAN_EXIT (the tau2 profile does not: its
        success is upstream's, which a customer's stop ends too); ``clean_exit`` is computed
        either way."""
        return "CLEAN_EXIT" not in self.success_breakdown.get("not_applicable", ())

    @property
    def total_tokens(self) -> int:
        return sum(u.prompt + u.completion for u in self.token_usage.values())

    def sort_key(self) -> tuple[float, str, int]:
        """Order of scenarios in listings: task id as an integer, then trial."""
        number = float(int(self.task_id)) if self.task_id.isdigit() else float("inf")
        return number, self.task_id, self.trial
