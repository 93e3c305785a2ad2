"""What each profile decides, apart from the text it shows: one policy object per profile.

A :class:`ProfilePolicy` owns every decision that differs between the profiles and needs no
data: the request defaults, which tasks are judged, how a scenario scores (signals, reward,
success), which endings cost a scenario and how its failure reads, and how a run's figures are
headed (the summary, gate and terminal lines). :func:`policy_for` looks one up by the name a
run records, so the summary of a finished run (``python -m tau2_retail summarize``) asks the
same object the run did; nothing outside ``engine/profiles`` asks which profile it is.

The text a profile shows the models (prompts, tools, routing rules, the judge's prompt) is
loaded from the data by :func:`tau2_retail.engine.profiles.profile.load_profile`, into a
:class:`~tau2_retail.engine.profiles.profile.Profile` that holds its policy.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar, Final

from tau2_retail.data.tasks import Task
from tau2_retail.engine.ending import StopReason
from tau2_retail.engine.judge_result import JudgeResult
from tau2_retail.engine.profile_names import (
    MIXED,
    PROFILE_NAMES,
    RUN_PROFILE_NAMES,
    ProfileName,
)
from tau2_retail.engine.scoring import Signal, Success, success, tau2_reward
from tau2_retail.errors import ConfigError
from tau2_retail.models.config import EndpointConfig

__all__ = [
    "ALL_SIGNALS",
    "PROFILE_NAMES",
    "REWARD_BASES",
    "SCORED_ENDINGS",
    "UPSTREAM_PROFILE",
    "DefaultPolicy",
    "MixedPolicy",
    "ProfileName",
    "ProfilePolicy",
    "ScenarioFacts",
    "Score",
    "Tau2Policy",
    "parse_profile_name",
    "policy_for",
    "upstream_reward",
]


UPSTREAM_PROFILE: Final = ProfileName.TAU2
"""The profile that reproduces upstream tau2-bench: a run imported from an upstream
``results.json`` is a run of it."""

REWARD_BASES: Final = frozenset({"DB", "NL_ASSERTION"})
"""The reward components of the retail tasks that the tau2 profile computes."""

_UPSTREAM_TEMPERATURE: Final = 0.0
_UPSTREAM_TOOL_CHOICE: Final = "auto"
# Upstream's endings that score: the user's or the agent's own stop. Our ``agent_exit`` is the
# agent's stop in the default profile (the tau2 profile never produces it).
SCORED_ENDINGS: Final = frozenset({StopReason.USER_STOP, StopReason.AGENT_EXIT})
ALL_SIGNALS: Final = tuple(Signal)


def parse_profile_name(raw: str) -> ProfileName:
    """``default`` or ``tau2``; raises ``ConfigError`` naming the accepted values."""
    try:
        return ProfileName(raw.strip())
    except ValueError:
        raise ConfigError(
            f"profile {raw!r} is not known; expected one of {', '.join(PROFILE_NAMES)}"
        ) from None


def upstream_reward(
    *,
    task: Task,
    stop_reason: StopReason,
    db_match: bool,
    judge: JudgeResult | None,
    judge_configured: bool,
) -> float | None:
    """Upstream's reward: 0 unless the conversation ended by a stop; else the product of the
    ``reward_basis`` components. None when an NL component is needed and no judge is configured.
    """
    if stop_reason not in SCORED_ENDINGS:
        return 0.0
    reward = 1.0
    if "DB" in task.reward_basis and not db_match:
        reward = 0.0
    if "NL_ASSERTION" in task.reward_basis and task.nl_assertions:
        if not judge_configured:
            return None
        if judge is None or judge.error is not None or judge.pass_count != judge.total:
            reward = 0.0
    return reward


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioFacts:
    """What the harness observed of one scenario, for its profile to score.

    ``nl_passed``: whether every assertion was met (None when they were not judged);
    ``judgement``: the readable judgement (None without one).
    """

    task: Task
    stop_reason: StopReason
    db_match: bool
    nl_passed: bool | None
    judgement: JudgeResult | None
    judge_configured: bool
    actions_matched: bool


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Score:
    """How one scenario scored in its profile: our signals' verdict, the tau2 reward (None
    when it cannot be computed) and whether the scenario succeeded."""

    verdict: Success
    reward: float | None
    is_successful: bool


class ProfilePolicy(ABC):
    """The decisions of one profile (see the module docstring); stateless, one per profile.

    Consumers ask it questions (what heads a run's figures, which signals it scores, how its
    reward is recorded); none reads a flag of it and decides for it.
    """

    name: ClassVar[str]
    #: what the profile means, for the run header (after ``tau2: profile NAME: ``)
    description: ClassVar[str]
    #: what the run's success rate measures, as the gate's line names it
    success_measure: ClassVar[str]
    #: what becomes of a judge reply that cannot be read, as the summary says it
    judge_unreadable_consequence: ClassVar[str]
    #: the signals this profile scores, in the order they are shown
    _signals: ClassVar[tuple[Signal, ...]] = ALL_SIGNALS

    def agent_notes_problem(self) -> str | None:
        """Why ``--tau2-agent-notes`` cannot be given in this profile (None: it can)."""
        return None

    def scored_signals(self) -> tuple[Signal, ...]:
        """The signals this profile scores (the others are not applicable), in show order."""
        return self._signals

    def headline(
        self, *, reward: Sequence[str], signals: Sequence[str], pass_k: str | None = None
    ) -> list[str]:
        """The lines that head a run's figures: ours, the success rate of our signals
        (``signals``), with ``pass_k`` (a one-line pass^k, when shown) after the first; the
        reward lines (``reward``: upstream's reward and pass^k) come later, informational."""
        lines = list(signals)
        if pass_k:
            lines.insert(1, pass_k)
        return lines

    def informational(self, reward: Sequence[str]) -> list[str]:
        """The reward lines (``reward``) shown beside the headline, informational."""
        return list(reward)

    def reports_pass_k(self, trials: int) -> bool:
        """Whether a run of ``trials`` trials reports pass^k (always, for one trial too, when
        it heads the figures)."""
        return trials > 1

    def reward_record(self, *, not_scorable: int) -> dict[str, int]:
        """The keys ``summary.json``'s ``tau2_reward`` carries beside its mean."""
        return {}

    def upstream_export_problem(self) -> str | None:
        """Why this profile's runs cannot become upstream's ``results.json`` (None: they can)."""
        return None

    def request_config(self, role: str, config: EndpointConfig) -> EndpointConfig:
        """``config`` with this profile's request parameters for ``role``: as configured."""
        return config

    def judges(self, task: Task) -> bool:
        """Whether this task's assertions are judged in this profile."""
        return bool(task.nl_assertions)

    @abstractmethod
    def score(self, facts: ScenarioFacts) -> Score:
        """The scenario's score from what the harness observed."""

    @abstractmethod
    def ending_fails(self, stop_reason: str) -> bool:
        """Whether an ending costs the scenario, whatever its database and assertions."""

    def ending_failures(self, stop_reason: str, detail: str) -> list[str]:
        """Messages, beyond the failed signals, on why this ending cost the scenario."""
        return []

    def pass_k_outcome(self, *, is_successful: bool, reward: float | None) -> bool | None:
        """What a scored trial counts in pass^k (None: not counted)."""
        return is_successful


class DefaultPolicy(ProfilePolicy):
    """Ours: success is DB_STATE_MATCH and CLEAN_EXIT and NL_ASSERTION; the tau2 reward is
    informational."""

    name: ClassVar[str] = ProfileName.DEFAULT
    description = (
        "policy + our notes, our tool descriptions + end_conversation, our judge; headline: "
        "success rate (DB_STATE_MATCH, CLEAN_EXIT, NL_ASSERTION)"
    )
    success_measure = "success rate"
    judge_unreadable_consequence = (
        "each asked again once; still unreadable, an infra error of the judge role"
    )

    def upstream_export_problem(self) -> str | None:
        return (
            "a default-profile run cannot be scored by upstream tau2-bench: its tools find "
            "normalized ids (upstream's replay of `w2378156` fails), its agent ends the call "
            "with end_conversation (not an upstream tool) and its endings (agent_exit, the "
            "grace turn after the user's stop) are not upstream's; run the benchmark with "
            "--tau2-profile=tau2"
        )

    def score(self, facts: ScenarioFacts) -> Score:
        verdict = success(
            db_match=facts.db_match,
            clean_exit=facts.stop_reason is StopReason.AGENT_EXIT,
            nl_passed=facts.nl_passed,
            actions_matched=facts.actions_matched,
        )
        reward = tau2_reward(
            stop_reason=facts.stop_reason, db_match=facts.db_match, nl_passed=facts.nl_passed
        )
        return Score(verdict=verdict, reward=reward, is_successful=verdict.is_successful)

    def ending_fails(self, stop_reason: str) -> bool:
        # CLEAN_EXIT: only the agent's own exit is clean
        return stop_reason != StopReason.AGENT_EXIT


class Tau2Policy(ProfilePolicy):
    """Upstream tau2-bench's: ``temperature`` 0.0 for the three roles and ``tool_choice``
    "auto" for the agent unless configured; only assertions in the task's ``reward_basis`` are
    judged; a scenario succeeds when upstream's reward is 1 (0 unless the conversation ended
    by ``user_stop`` or ``agent_stop``), so pass^k is upstream's; CLEAN_EXIT is not applicable.
    """

    name = ProfileName.TAU2
    description = (
        "upstream tau2-bench's prompts, tools, endings and reward (pinned sources; identifier "
        "normalization off); headline: tau2 reward / pass^k"
    )
    success_measure = "success rate (upstream reward 1)"
    judge_unreadable_consequence = "scored as upstream does (NL not met)"
    _signals = tuple(signal for signal in ALL_SIGNALS if signal is not Signal.CLEAN_EXIT)
    #: the label of our signals, after upstream's reward that heads the figures
    _signals_label = "Our signals (beside upstream's reward; CLEAN_EXIT not applicable):"

    def agent_notes_problem(self) -> str | None:
        return "the tau2 profile sends upstream's agent prompt"

    def headline(
        self, *, reward: Sequence[str], signals: Sequence[str], pass_k: str | None = None
    ) -> list[str]:
        """Upstream's reward and pass^k (``reward``, which holds pass^k: ``pass_k`` is not
        repeated), then our signals, labelled."""
        return [*reward, self._signals_label, *signals]

    def informational(self, reward: Sequence[str]) -> list[str]:
        return []  # the reward heads the figures

    def reports_pass_k(self, trials: int) -> bool:
        return True

    def reward_record(self, *, not_scorable: int) -> dict[str, int]:
        # scored scenarios without a reward: an NL component and no judge
        return {"not_scorable": not_scorable}

    def request_config(self, role: str, config: EndpointConfig) -> EndpointConfig:
        """Upstream's defaults: ``temperature`` 0.0 for every role unless configured, and
        ``tool_choice`` "auto" on the agent's requests unless the extra body sets one."""
        temperature = _UPSTREAM_TEMPERATURE if config.temperature is None else config.temperature
        extra_body = dict(config.extra_body)
        if role == "agent":
            extra_body.setdefault("tool_choice", _UPSTREAM_TOOL_CHOICE)
        return dataclasses.replace(config, temperature=temperature, extra_body=extra_body)

    def judges(self, task: Task) -> bool:
        return bool(task.nl_assertions) and "NL_ASSERTION" in task.reward_basis

    def score(self, facts: ScenarioFacts) -> Score:
        verdict = success(
            db_match=facts.db_match,
            clean_exit=None,
            nl_passed=facts.nl_passed,
            actions_matched=facts.actions_matched,
        )
        reward = upstream_reward(
            task=facts.task,
            stop_reason=facts.stop_reason,
            db_match=facts.db_match,
            judge=facts.judgement,
            judge_configured=facts.judge_configured,
        )
        # without a reward (an NL component and no judge): our task success decides
        is_successful = reward == 1.0 if reward is not None else verdict.is_task_successful
        return Score(verdict=verdict, reward=reward, is_successful=is_successful)

    def ending_fails(self, stop_reason: str) -> bool:
        return stop_reason not in SCORED_ENDINGS

    def ending_failures(self, stop_reason: str, detail: str) -> list[str]:
        if not self.ending_fails(stop_reason):
            return []
        shown = f" ({detail})" if detail else ""
        return [
            f"tau2 reward 0: the conversation ended with {stop_reason}{shown}; upstream scores "
            "only conversations ended by user_stop or agent_stop"
        ]

    def pass_k_outcome(self, *, is_successful: bool, reward: float | None) -> bool | None:
        # upstream's pass^k reads the reward: a trial without one (no judge) is not counted
        return None if reward is None else reward == 1.0


class MixedPolicy(DefaultPolicy):
    """A run whose scenarios ran in different profiles (shards merged, or a run resumed in
    another profile): its figures have no profile's headline, so they read with ours. It scores
    no scenario: each scenario's record names the profile that scored it."""

    name = MIXED
    description = "scenarios of different profiles; headline: success rate of our signals"

    def score(self, facts: ScenarioFacts) -> Score:
        raise TypeError("a mixed run scores no scenario: its scenarios name their profiles")


_POLICIES: Final[dict[str, ProfilePolicy]] = {
    policy.name: policy for policy in (DefaultPolicy(), Tau2Policy(), MixedPolicy())
}


def policy_for(name: str) -> ProfilePolicy:
    """The policy of the profile a run or a record names (``mixed``: a run of several
    profiles). Raises ``ConfigError`` naming the known profiles for any other name (artifacts
    are checked when read: :data:`~tau2_retail.engine.profile_names.RunProfileName`)."""
    policy = _POLICIES.get(name)
    if policy is None:
        known = ", ".join(RUN_PROFILE_NAMES)
        raise ConfigError(f"profile {name!r} is not known; expected one of {known}")
    return policy
