"""Each profile's decisions, asked of its policy (issue 20: the profile is a strategy)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest

from tau2_retail.data.tasks import Task
from tau2_retail.engine.ending import StopReason
from tau2_retail.engine.profiles import (
    MIXED,
    ProfileName,
    ProfilePolicy,
    ScenarioFacts,
    policy_for,
)
from tau2_retail.engine.scoring import Signal
from tau2_retail.errors import ConfigError

DEFAULT = policy_for(ProfileName.DEFAULT)
TAU2 = policy_for(ProfileName.TAU2)


def test_each_profile_has_its_policy_and_a_mixed_run_is_explicit() -> None:
    assert (DEFAULT.name, TAU2.name) == (ProfileName.DEFAULT, ProfileName.TAU2)
    assert policy_for("tau2") is TAU2  # as a run records it
    # a run mixing profiles has its own policy: it reads with our headline, scores nothing
    mixed = policy_for(MIXED)
    assert mixed.name == "mixed"
    assert mixed is not DEFAULT
    assert mixed.scored_signals() == DEFAULT.scored_signals()


@pytest.mark.parametrize("name", ["", "Tau2", "upstream", "default "])
def test_an_unknown_profile_name_is_an_error(name: str) -> None:
    with pytest.raises(ConfigError, match=r"is not known; expected one of default, tau2, mixed"):
        policy_for(name)


@pytest.mark.parametrize("reason", list(StopReason))
def test_which_endings_cost_a_scenario(reason: StopReason) -> None:
    assert DEFAULT.ending_fails(reason) is (reason is not StopReason.AGENT_EXIT)
    assert TAU2.ending_fails(reason.value) is (
        reason not in (StopReason.USER_STOP, StopReason.AGENT_EXIT)
    )


def test_only_the_tau2_policy_explains_an_unscored_ending() -> None:
    assert DEFAULT.ending_failures("max_steps", "200 routed messages") == []
    assert TAU2.ending_failures("user_stop", "") == []
    assert TAU2.ending_failures("max_steps", "200 routed messages") == [
        "tau2 reward 0: the conversation ended with max_steps (200 routed messages); upstream "
        "scores only conversations ended by user_stop or agent_stop"
    ]


def test_pass_k_counts_success_in_ours_and_reward_1_in_tau2() -> None:
    assert DEFAULT.pass_k_outcome(is_successful=True, reward=0.0) is True
    assert DEFAULT.pass_k_outcome(is_successful=False, reward=None) is False
    assert TAU2.pass_k_outcome(is_successful=False, reward=1.0) is True
    assert TAU2.pass_k_outcome(is_successful=True, reward=0.0) is False
    assert TAU2.pass_k_outcome(is_successful=True, reward=None) is None  # not counted


def _score(policy: ProfilePolicy, task: Task, **values: object) -> tuple[object, ...]:
    arguments: dict[str, object] = {
        "task": task,
        "stop_reason": StopReason.USER_STOP,
        "db_match": True,
        "nl_passed": None,
        "judgement": None,
        "judge_configured": False,
        "actions_matched": True,
    }
    score = policy.score(ScenarioFacts(**(arguments | values)))  # type: ignore[arg-type]
    failed = tuple(score.verdict.breakdown["failed"])
    return score.is_successful, score.reward, failed


def test_a_user_stop_fails_clean_exit_in_ours_and_scores_in_tau2(
    tasks: Mapping[str, Task],
) -> None:
    db_only = tasks["33"]
    assert _score(DEFAULT, db_only) == (False, 1.0, ("CLEAN_EXIT",))
    assert _score(TAU2, db_only) == (True, 1.0, ())
    exited = {"stop_reason": StopReason.AGENT_EXIT}
    assert _score(DEFAULT, db_only, **exited) == (True, 1.0, ())
    capped = {"stop_reason": StopReason.MAX_STEPS}
    assert _score(TAU2, db_only, **capped) == (False, 0.0, ())


def test_without_a_judge_tau2_falls_back_on_our_task_success(tasks: Mapping[str, Task]) -> None:
    nl_task = next(
        t for t in tasks.values() if t.nl_assertions and "NL_ASSERTION" in t.reward_basis
    )
    assert _score(TAU2, nl_task) == (True, None, ())
    assert _score(TAU2, nl_task, db_match=False) == (False, None, ("DB_STATE_MATCH",))


def test_tau2_judges_only_assertions_its_reward_reads(tasks: Mapping[str, Task]) -> None:
    task = next(t for t in tasks.values() if t.nl_assertions)
    db_only = dataclasses.replace(task, reward_basis=("DB",))
    quiet = dataclasses.replace(task, nl_assertions=())
    judged = {
        name: (policy.judges(task), policy.judges(db_only), policy.judges(quiet))
        for name, policy in (("default", DEFAULT), ("tau2", TAU2))
    }
    assert judged == {"default": (True, True, False), "tau2": (True, False, False)}


def test_the_headline_and_settings_each_profile_owns() -> None:
    reward, signals = ["reward", "pass^1"], ["overall", "task"]
    assert DEFAULT.headline(reward=reward, signals=signals) == signals
    assert DEFAULT.headline(reward=reward, signals=signals, pass_k="k") == ["overall", "k", "task"]
    assert DEFAULT.informational(reward) == reward
    label = "Our signals (beside upstream's reward; CLEAN_EXIT not applicable):"
    # upstream's reward heads the figures (its pass^k with it: no second pass^k line)
    assert TAU2.headline(reward=reward, signals=signals, pass_k="k") == [*reward, label, *signals]
    assert TAU2.informational(reward) == []
    assert Signal.CLEAN_EXIT in DEFAULT.scored_signals()
    assert Signal.CLEAN_EXIT not in TAU2.scored_signals()
    assert (DEFAULT.reports_pass_k(1), DEFAULT.reports_pass_k(2), TAU2.reports_pass_k(1)) == (
        False,
        True,
        True,
    )
    assert DEFAULT.reward_record(not_scorable=2) == {}
    assert TAU2.reward_record(not_scorable=2) == {"not_scorable": 2}
    assert DEFAULT.agent_notes_problem() is None
    assert TAU2.agent_notes_problem() == "the tau2 profile sends upstream's agent prompt"
    assert TAU2.success_measure == "success rate (upstream reward 1)"
