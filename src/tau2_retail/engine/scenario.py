"""One scenario end to end: conversation, judge, signals, and the metrics record.

This is the engine's entry point for the pytest plugin and for ``python -m tau2_retail run``.
Everything it returns is either a record that travels as JSON (``metrics``) or an object used only
in the process that ran the scenario (the conversation result with its store).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tau2_retail.data.gold import Gold
from tau2_retail.data.tasks import Task
from tau2_retail.engine.conversation import run_conversation
from tau2_retail.engine.conversation_setup import Clock, Limits, MessageListener, UsageListener
from tau2_retail.engine.ending import StopReason
from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.engine.profiles import Profile, ProfilePolicy
from tau2_retail.engine.scenario_record import build_metrics
from tau2_retail.engine.scoring import (
    Signal,
    SignalState,
    db_difference,
    describe_db_difference,
)
from tau2_retail.engine.timeouts import TimeoutHit, timeouts_hit
from tau2_retail.engine.transcript import ConversationResult
from tau2_retail.errors import ArtifactError, EndpointError, SavedConversationError
from tau2_retail.models.progress import tracking
from tau2_retail.models.protocol import ChatModel
from tau2_retail.tools.database import SeedDatabase
from tau2_retail.tools.dispatch import dispatch
from tau2_retail.tools.store import Store

if TYPE_CHECKING:
    from tau2_retail.engine.judge_result import JudgeResult

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
    #: the whole error reply of the judge's endpoint, when the judge failed on one
    judge_error_body: str = ""

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
    def error_body(self) -> str:
        """The whole error reply of the endpoint that failed the scenario (the conversation's,
        else the judge's; the metrics keep 300 characters of it): ``endpoint_error.txt``."""
        return self.conversation.error_body or self.judge_error_body

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
    on_usage: UsageListener | None = None,
) -> ScenarioOutcome:
    """Run the conversation on ``store``, judge it when a judge is given, score it.

    ``profile`` gives the prompts, the tools, the routing rules, the judge and the score.
    ``on_message`` sees each conversation message as it is recorded, ``on_usage`` each
    completion's tokens of the agent and the user as they are counted.
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
        on_usage=on_usage,
        rules=profile.rules,
    )
    return await _judge_and_score(
        scenario, conversation, judge_model=judge_model, gold=gold, limits=limits, profile=profile
    )


async def _judged(
    scenario: Scenario,
    conversation: ConversationResult,
    *,
    judge_model: ChatModel,
    gold: Gold,
    limits: Limits,
    profile: Profile,
) -> tuple[JudgeResult | None, EndpointError | None, bool]:
    """The judgement, or the judge's failure, and whether the scenario's deadline cut it."""
    with tracking() as progress:
        try:
            # Each request has its own deadline; this bounds the judge's retries as a whole.
            async with asyncio.timeout(limits.max_duration_seconds):
                judge = await profile.judge(
                    judge_model,
                    task=scenario.task,
                    messages=conversation.messages,
                    reference_actions=gold.actions,
                    recorded_actions=conversation.actions,
                    seed=scenario.seed,
                )
        except EndpointError as error:
            return None, error, False
        except TimeoutError:
            return (
                None,
                EndpointError(
                    f"no verdict within the {limits.max_duration_seconds:g} s scenario limit",
                    # the request cut in flight, as far as it had gone
                    attempts=max(progress.attempts, 1),
                    wait_seconds=progress.wait_seconds,
                ),
                True,
            )
    return judge, None, False


async def _judge_and_score(
    scenario: Scenario,
    conversation: ConversationResult,
    *,
    judge_model: ChatModel | None,
    gold: Gold,
    limits: Limits | None,
    profile: Profile,
) -> ScenarioOutcome:
    """The end both paths share (a conversation just run, or one replayed from its
    transcript): judge it, compare its final database (``conversation.store``) with the
    gold one, and build the metrics."""
    limits = limits or Limits()
    judge: JudgeResult | None = None
    judge_error: EndpointError | None = None
    judge_deadline = False
    infra = conversation.stop_reason is StopReason.INFRA_ERROR
    if judge_model is not None and profile.policy.judges(scenario.task) and not infra:
        judge, judge_error, judge_deadline = await _judged(
            scenario,
            conversation,
            judge_model=judge_model,
            gold=gold,
            limits=limits,
            profile=profile,
        )
    db_diff = db_difference(conversation.store, gold.store)
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
        judge_error_body=judge_error.full_body if judge_error is not None else "",
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
        scenario, conversation, judge_model=judge_model, gold=gold, limits=limits, profile=profile
    )
