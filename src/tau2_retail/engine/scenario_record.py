"""The ``metrics.json`` record of one scenario, built from what the harness observed and
scored by its profile's policy (spec: conversation_and_scoring.md §6)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tau2_retail.data.gold import Gold
from tau2_retail.engine.ending import Ending, StopReason
from tau2_retail.engine.metrics import ROLES, LatencyStats, ScenarioMetrics, Turn
from tau2_retail.engine.profiles import ProfilePolicy, ScenarioFacts, Score
from tau2_retail.engine.scoring import action_match
from tau2_retail.engine.transcript import ConversationResult
from tau2_retail.errors import EndpointError
from tau2_retail.models.messages import Message, RequestStats, Role, Usage

if TYPE_CHECKING:
    from tau2_retail.engine.judge_result import JudgeResult
    from tau2_retail.engine.scenario import Scenario

__all__ = ["build_metrics"]


def _turns(messages: Sequence[Message], timestamps: Sequence[float]) -> tuple[Turn, ...]:
    """The spoken turns (agent and user text) with their times."""
    turns = []
    for message, timestamp in zip(messages, timestamps, strict=True):
        if message.role is Role.USER:
            role = "user"
        elif message.role is Role.ASSISTANT and not message.tool_calls and message.content:
            role = "agent"
        else:
            continue
        turns.append(Turn(timestamp=timestamp, role=role, text=message.content or ""))
    return tuple(turns)


def _latency_stats(latencies: Sequence[tuple[str, float]]) -> dict[str, LatencyStats]:
    by_role: dict[str, list[float]] = {}
    for role, seconds in latencies:
        by_role.setdefault(role, []).append(seconds)
    stats = {}
    for role, values in sorted(by_role.items()):
        ordered = sorted(values)
        stats[role] = LatencyStats(
            n=len(ordered),
            mean=statistics.fmean(ordered),
            p50=statistics.median(ordered),
            p95=ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
            max=ordered[-1],
        )
    return stats


def build_metrics(
    *,
    scenario: Scenario,
    conversation: ConversationResult,
    gold: Gold,
    judge: JudgeResult | None,
    judge_configured: bool,
    db_match: bool,
    policy: ProfilePolicy,
    judge_error: EndpointError | None = None,
) -> ScenarioMetrics:
    """The ``metrics.json`` record of spec §6, scored by the profile's ``policy``.

    ``judge_error`` is the judge's outage, and a ``judge`` marked ``unreadable`` its failure
    to answer in a readable form: the scenario is then an infra error of the judge role, marked
    ``needs_judging`` for resume (the unreadable judgement's tokens still count).
    """
    task = scenario.task
    judge_failed = judge is not None and judge.unreadable
    judgement = None if judge_failed else judge
    nl_applicable = policy.judges(task) and judge_configured
    actions_matched = action_match(gold.actions, conversation.actions)
    score = policy.score(
        ScenarioFacts(
            task=task,
            stop_reason=conversation.ending.reason,
            db_match=db_match,
            nl_passed=(
                judgement is not None and judgement.pass_count == judgement.total
                if nl_applicable
                else None
            ),
            judgement=judgement,
            judge_configured=judge_configured,
            actions_matched=actions_matched,
        )
    )
    turns = _turns(conversation.messages, conversation.timestamps)
    return ScenarioMetrics(
        profile=policy.name,
        **_identity(scenario),
        total_turns=len(turns),
        turns=turns,
        duration_seconds=conversation.duration_seconds,
        latency_stats=_latency_stats(conversation.latencies),
        **_ending_fields(conversation.ending, judge, judge_error),
        db_state_expected_hash=gold.db_hash,
        db_state_actual_hash=gold.db_hash if db_match else conversation.store.hash(),
        db_state_match=db_match,
        is_action_match=actions_matched,
        nl_assertion_total=len(task.nl_assertions),
        **_nl_fields(judgement if nl_applicable else None, applicable=nl_applicable),
        judge_score=judgement.score if judgement is not None else None,
        token_usage=_usage(conversation, judge),
        requests=_requests(conversation, judge, judge_error),
        **_score_fields(score),
        judge_unreadable_replies=len(judge.unreadable_replies) if judge is not None else 0,
    )


def _ending_fields(
    ending: Ending, judge: JudgeResult | None, judge_error: EndpointError | None
) -> dict[str, Any]:
    """How the scenario ended: its stop, and whether (and which role's) infra error it is."""
    infra_role, detail = _infra(ending, judge, judge_error)
    return {
        "stop_reason": ending.reason.value,
        "stop_detail": detail,
        "infra_error": infra_role is not None,
        "infra_role": infra_role,
        "needs_judging": judge_error is not None or (judge is not None and judge.unreadable),
        "clean_exit": ending.reason is StopReason.AGENT_EXIT,
    }


def _score_fields(score: Score) -> dict[str, Any]:
    return {
        "success_breakdown": {
            state: tuple(names) for state, names in score.verdict.breakdown.items()
        },
        "is_successful": score.is_successful,
        "is_task_successful": score.verdict.is_task_successful,
        "tau2_reward": score.reward,
    }


def _identity(scenario: Scenario) -> dict[str, Any]:
    """The fields of a record that name its scenario."""
    task = scenario.task
    return {
        "scenario_name": scenario.name,
        "scenario_id": scenario.id,
        "task_id": task.id,
        "trial": scenario.trial + 1,
        "seed": scenario.seed,
        "split": task.split,
        "persona_name": task.persona_name,
    }


def _nl_fields(judgement: JudgeResult | None, *, applicable: bool) -> dict[str, Any]:
    """``nl_assertion_pass_count`` and ``_rate`` (None when not applicable; 0 without a
    readable judgement)."""
    if not applicable:
        return {"nl_assertion_pass_count": None, "nl_assertion_pass_rate": None}
    return {
        "nl_assertion_pass_count": judgement.pass_count if judgement is not None else 0,
        "nl_assertion_pass_rate": judgement.pass_rate if judgement is not None else 0.0,
    }


def _usage(conversation: ConversationResult, judge: JudgeResult | None) -> dict[str, Usage]:
    return {
        "agent": conversation.usage.get("agent", Usage()),
        "user": conversation.usage.get("user", Usage()),
        "judge": judge.usage if judge is not None else Usage(),
    }


def _requests(
    conversation: ConversationResult,
    judge: JudgeResult | None,
    judge_error: EndpointError | None,
) -> dict[str, RequestStats]:
    """What each role's requests cost on the wire, the judge's included."""
    requests = dict(conversation.requests)
    if judge is not None:
        requests["judge"] = RequestStats(
            # a verdict served from the response cache sent nothing (0 attempts)
            requests=judge.requests if judge.attempts else 0,
            attempts=judge.attempts,
            wait_seconds=judge.wait_seconds,
        )
    elif judge_error is not None:
        requests["judge"] = RequestStats(
            requests=1,
            attempts=judge_error.attempts,
            failed=1,
            unsent=int(judge_error.attempts == 0),
            wait_seconds=judge_error.wait_seconds,
        )
    return {role: requests[role] for role in ROLES if role in requests}


def _infra(
    ending: Ending, judge: JudgeResult | None, judge_error: EndpointError | None
) -> tuple[str | None, str]:
    """The role whose endpoint failed (None: no infra error) and the stop detail."""
    detail = ending.detail
    if ending.reason is StopReason.INFRA_ERROR:
        return ending.failed_role or "agent", detail
    if judge_error is not None:
        return "judge", "; ".join(filter(None, (detail, f"judge: {judge_error}")))
    if judge is not None and judge.unreadable:
        return "judge", "; ".join(filter(None, (detail, f"judge: {judge.error}")))
    return None, detail
