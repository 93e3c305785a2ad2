"""One scenario end to end: conversation, judge, signals, and the metrics record.

This is the engine's entry point for the pytest plugin and for ``python -m tau2_retail run``.
Everything it returns is either a record that travels as JSON (``metrics``) or an object used only
in the process that ran the scenario (the conversation result with its store).
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tau2_retail.data.gold import Gold
from tau2_retail.data.tasks import Task
from tau2_retail.engine.conversation import (
    Clock,
    ConversationResult,
    Limits,
    MessageListener,
    StopReason,
    run_conversation,
)
from tau2_retail.engine.metrics import ROLES, LatencyStats, ScenarioMetrics, Turn
from tau2_retail.engine.profiles import Profile, ProfilePolicy, ScenarioFacts
from tau2_retail.engine.scoring import (
    Signal,
    SignalState,
    action_match,
    db_difference,
    describe_db_difference,
)
from tau2_retail.engine.timeouts import TimeoutHit, timeouts_hit
from tau2_retail.errors import ArtifactError, EndpointError, SavedConversationError
from tau2_retail.models.messages import Message, RequestStats, Role, Usage
from tau2_retail.models.progress import tracking
from tau2_retail.models.protocol import ChatModel
from tau2_retail.tools.database import SeedDatabase
from tau2_retail.tools.dispatch import dispatch
from tau2_retail.tools.store import Store

if TYPE_CHECKING:
    from tau2_retail.engine.judge import JudgeResult

__all__ = [
    "SavedConversationError",
    "Scenario",
    "ScenarioOutcome",
    "rejudge",
    "run_scenario",
    "scenario_id",
]


def scenario_id(task_id: str, trial: int, trials: int) -> str:
    """``tau2_retail__N``, with ``-trialK`` (1-based) when a run has several trials."""
    base = f"tau2_retail__{task_id}"
    return base if trials <= 1 else f"{base}-trial{trial + 1}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """A task in one trial: what a parametrized test case runs."""

    task: Task
    trial: int
    trials: int
    seed: int | None

    @property
    def name(self) -> str:
        return f"tau2_retail__{self.task.id}"

    @property
    def id(self) -> str:
        return scenario_id(self.task.id, self.trial, self.trials)


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class ScenarioOutcome:
    """What one scenario produced and how it scored (``policy``: its profile's decisions)."""

    scenario: Scenario
    policy: ProfilePolicy
    conversation: ConversationResult
    gold: Gold
    judge: JudgeResult | None
    db_diff: dict[str, dict[str, dict[str, Any]]]
    metrics: ScenarioMetrics
    #: the time limits that ended it (a request timeout, the scenario's wall-clock limit)
    timeouts: tuple[TimeoutHit, ...] = ()

    def __repr__(self) -> str:
        # Short on purpose: on Python 3.11, asyncio.Runner.run ends with signal.getsignal(),
        # which formats the repr of its SIGINT handler, hence of the finished task and its
        # result; pytest-asyncio's fixture set-up returns this outcome, so a field-by-field
        # repr of the whole conversation was built and thrown away once per scenario.
        return (
            f"ScenarioOutcome(scenario={self.scenario.id!r}, "
            f"stop_reason={self.conversation.stop_reason.value!r})"
        )

    @property
    def is_infra_error(self) -> bool:
        """An endpoint outage of any role (the conversation's, or the judge's after it)."""
        return self.metrics.infra_error

    @property
    def infra_detail(self) -> str:
        """What failed, naming the role (``agent: ...``, ``judge: ...``)."""
        return self.metrics.stop_detail

    def short_reason(self) -> str:
        """Why the scenario failed, in a few words (empty when it succeeded), e.g.
        ``stop max_steps; DB: 2 records differ; NL 1/3 not met``."""
        parts = []
        if self.policy.ending_fails(self.conversation.stop_reason):
            parts.append(f"stop {self.conversation.stop_reason.value}")
        if not self.metrics.db_state_match:
            differing = sum(len(records) for records in self.db_diff.values())
            parts.append(f"DB: {differing} record{' differs' if differing == 1 else 's differ'}")
        count = self.metrics.nl_assertion_pass_count
        total = self.metrics.nl_assertion_total
        if count is not None and count < total:
            parts.append(f"NL {total - count}/{total} not met")
        return "; ".join(parts)

    def signal_failures(self) -> list[str]:
        """One readable message per failed gating signal (empty when the scenario succeeded).

        NL assertions are not included: each is reported on its own as a subtest.
        """
        failures = []
        if not self.metrics.db_state_match:
            failures.append(
                "DB_STATE_MATCH failed: the final database differs from the gold state "
                f"(expected hash {self.metrics.db_state_expected_hash[:12]}, "
                f"actual {self.metrics.db_state_actual_hash[:12]}):\n"
                + describe_db_difference(self.db_diff)
            )
        detail = f" ({self.conversation.detail})" if self.conversation.detail else ""
        if Signal.CLEAN_EXIT.value in self.metrics.success_breakdown[SignalState.FAILED.value]:
            failures.append(
                "CLEAN_EXIT failed: the conversation ended with "
                f"{self.conversation.stop_reason.value}{detail}, not agent_exit"
            )
        if self.conversation.agent_traceback:
            # the agent's own code raised: its traceback, as pytest shows a test's
            failures.append("The agent raised:\n" + self.conversation.agent_traceback.rstrip())
        failures.extend(
            self.policy.ending_failures(
                self.conversation.stop_reason.value, self.conversation.detail
            )
        )
        return failures


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
    ending = conversation.ending
    nl_applicable = policy.judges(task) and judge_configured
    nl_passed: bool | None = None
    if nl_applicable:
        nl_passed = judgement is not None and judgement.pass_count == judgement.total
    actions_matched = action_match(gold.actions, conversation.actions)
    score = policy.score(
        ScenarioFacts(
            task=task,
            stop_reason=ending.reason,
            db_match=db_match,
            nl_passed=nl_passed,
            judgement=judgement,
            judge_configured=judge_configured,
            actions_matched=actions_matched,
        )
    )
    verdict = score.verdict
    usage: dict[str, Usage] = {
        "agent": conversation.usage.get("agent", Usage()),
        "user": conversation.usage.get("user", Usage()),
        "judge": judge.usage if judge is not None else Usage(),
    }
    turns = _turns(conversation.messages, conversation.timestamps)
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
            wait_seconds=judge_error.wait_seconds,
        )
    infra_role = None
    detail = ending.detail
    if ending.reason is StopReason.INFRA_ERROR:
        infra_role = ending.failed_role or "agent"
    elif judge_error is not None:
        infra_role = "judge"
        detail = "; ".join(filter(None, (detail, f"judge: {judge_error}")))
    elif judge is not None and judge_failed:
        infra_role = "judge"
        detail = "; ".join(filter(None, (detail, f"judge: {judge.error}")))
    nl_count = nl_rate = None
    if nl_applicable:
        nl_count = judgement.pass_count if judgement is not None else 0
        nl_rate = judgement.pass_rate if judgement is not None else 0.0
    return ScenarioMetrics(
        profile=policy.name,
        scenario_name=scenario.name,
        scenario_id=scenario.id,
        task_id=task.id,
        trial=scenario.trial + 1,
        seed=scenario.seed,
        split=task.split,
        persona_name=task.persona_name,
        total_turns=len(turns),
        turns=turns,
        duration_seconds=conversation.duration_seconds,
        latency_stats=_latency_stats(conversation.latencies),
        stop_reason=ending.reason.value,
        stop_detail=detail,
        infra_error=infra_role is not None,
        infra_role=infra_role,
        needs_judging=judge_error is not None or judge_failed,
        clean_exit=ending.reason is StopReason.AGENT_EXIT,
        db_state_expected_hash=gold.db_hash,
        db_state_actual_hash=gold.db_hash if db_match else conversation.store.hash(),
        db_state_match=db_match,
        is_action_match=actions_matched,
        nl_assertion_total=len(task.nl_assertions),
        nl_assertion_pass_count=nl_count,
        nl_assertion_pass_rate=nl_rate,
        judge_score=judgement.score if judgement is not None else None,
        token_usage=dict(usage),
        requests={role: requests[role] for role in ROLES if role in requests},
        success_breakdown={state: tuple(names) for state, names in verdict.breakdown.items()},
        is_successful=score.is_successful,
        is_task_successful=verdict.is_task_successful,
        tau2_reward=score.reward,
        judge_unreadable_replies=len(judge.unreadable_replies) if judge is not None else 0,
    )


async def run_scenario(
    scenario: Scenario,
    *,
    agent: ChatModel,
    user: ChatModel,
    judge_model: ChatModel | None,
    gold: Gold,
    store: Store,
    profile: Profile,
    limits: Limits | None = None,
    clock: Clock | None = None,
    on_message: MessageListener | None = None,
) -> ScenarioOutcome:
    """Run the conversation on ``store``, judge it when a judge is given, score it.

    ``profile`` gives the prompts, the tools, the routing rules, the judge and the score.
    ``on_message`` sees each conversation message as it is recorded.
    """
    conversation = await run_conversation(
        agent=agent,
        user=user,
        prompts=profile.prompts(scenario.task),
        store=store,
        limits=limits,
        seed=scenario.seed,
        clock=clock,
        on_message=on_message,
        rules=profile.rules,
    )
    return await _judge_and_score(
        scenario,
        conversation=conversation,
        judge_model=judge_model,
        gold=gold,
        store=store,
        limits=limits or Limits(),
        profile=profile,
    )


async def _judge_and_score(
    scenario: Scenario,
    *,
    conversation: ConversationResult,
    judge_model: ChatModel | None,
    gold: Gold,
    store: Store,
    limits: Limits,
    profile: Profile,
) -> ScenarioOutcome:
    judge = None
    judge_error: EndpointError | None = None
    judge_deadline = False
    infra = conversation.stop_reason is StopReason.INFRA_ERROR
    task = scenario.task
    if judge_model is not None and profile.policy.judges(task) and not infra:
        with tracking() as progress:
            try:
                # Each request has its own deadline; this bounds the judge's retries as a whole.
                async with asyncio.timeout(limits.max_duration_seconds):
                    judge = await profile.judge(
                        judge_model,
                        task=task,
                        messages=conversation.messages,
                        reference_actions=gold.actions,
                        recorded_actions=conversation.actions,
                        seed=scenario.seed,
                    )
            except EndpointError as error:
                judge_error = error
            except TimeoutError:
                judge_deadline = True
                judge_error = EndpointError(
                    f"no verdict within the {limits.max_duration_seconds:g} s scenario limit",
                    # the request cut in flight, as far as it had gone
                    attempts=max(progress.attempts, 1),
                    wait_seconds=progress.wait_seconds,
                )
    db_diff = db_difference(store, gold.store)
    metrics = build_metrics(
        scenario=scenario,
        conversation=conversation,
        gold=gold,
        judge=judge,
        judge_configured=judge_model is not None,
        db_match=not db_diff,
        policy=profile.policy,
        judge_error=judge_error,
    )
    return ScenarioOutcome(
        scenario=scenario,
        policy=profile.policy,
        conversation=conversation,
        gold=gold,
        judge=judge,
        db_diff=db_diff,
        metrics=metrics,
        timeouts=timeouts_hit(
            conversation,
            max_duration_seconds=limits.max_duration_seconds,
            judge_error=judge_error,
            judge_deadline=judge_deadline,
        ),
    )


async def rejudge(
    scenario: Scenario,
    *,
    transcript: Mapping[str, Any],
    judge_model: ChatModel,
    gold: Gold,
    seed: SeedDatabase,
    expected_db_hash: str,
    profile: Profile,
    limits: Limits | None = None,
) -> ScenarioOutcome:
    """Judge a finished conversation again from its saved ``transcript.json``.

    Its recorded writes are replayed on a fresh copy of ``seed`` (with the profile's tool
    rules) to rebuild the final database; ``expected_db_hash`` (the saved
    ``db_state_actual_hash``) must match it. ``profile`` gives the judge and the reward. Raises
    ``SavedConversationError`` when the transcript cannot be read or does not replay to that
    database: the caller then runs the scenario from the start.
    """
    store = Store(seed)
    rules = profile.rules
    try:
        conversation = ConversationResult.from_json(transcript, store)
    except ArtifactError as error:
        raise SavedConversationError(f"unreadable transcript: {error}") from error
    for action in conversation.actions:
        result = dispatch(
            store,
            action.name,
            action.arguments,
            normalize_ids=rules.normalize_ids,
            available=rules.available_tools,
        )
        if result.error:
            raise SavedConversationError(f"a recorded {action.name} failed on replay")
    if store.hash() != expected_db_hash:
        raise SavedConversationError("the replayed writes do not give the recorded database")
    return await _judge_and_score(
        scenario,
        conversation=conversation,
        judge_model=judge_model,
        gold=gold,
        store=store,
        limits=limits or Limits(),
        profile=profile,
    )
