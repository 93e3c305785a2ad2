"""``reward_info`` from our own scoring, and our verdicts from an upstream ``reward_info``.

Export (:func:`reward_info`): the reward is the one the run recorded (``tau2_reward`` of
``metrics.json``, upstream's rule applied by the tau2 profile); a simulation that ended other
than by a stop gets reward 0 and no basis, as upstream's evaluator gives it. Otherwise
``reward_basis`` is the task's, ``db_check`` our DB_STATE_MATCH, ``nl_assertions`` the judge's
verdicts as the tau2 profile's judge read them (only the results the judge returned, with its
reasoning), and ``reward_breakdown`` the component of each basis. COMMUNICATE and ACTION are
not in the retail tasks' basis and are left out (``evaluate-trajs`` computes them).

Import (:func:`verdicts_of`): the ``nl_assertions`` of an upstream ``reward_info`` as our
verdicts, one per returned result, numbered in order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tau2_retail.data.tasks import Task
from tau2_retail.engine.judge_result import Verdict
from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.engine.profiles.tau2_judge import NO_RESULT_REASON
from tau2_retail.tau2_format.schema import DBCheck, NLAssertionCheck, RewardInfo
from tau2_retail.tau2_format.terms import SCORED, premature_note

__all__ = ["nl_checks", "reward_info", "verdicts_of"]

DB = "DB"
NL = "NL_ASSERTION"


def nl_checks(judge: Mapping[str, Any] | None) -> tuple[NLAssertionCheck, ...]:
    """The judge's verdicts of ``judge_result.json`` as upstream's checks: one per result the
    judge returned (an assertion it returned none for is not listed, as upstream lists only
    the results)."""
    verdicts = judge.get("nl_assertion_verdicts") if judge else None
    checks = []
    for verdict in verdicts if isinstance(verdicts, list) else ():
        if not isinstance(verdict, dict) or verdict.get("reason") == NO_RESULT_REASON:
            continue
        checks.append(
            NLAssertionCheck(
                nl_assertion=str(verdict.get("assertion", "")),
                met=verdict.get("passed") is True,
                justification=str(verdict.get("reason", "")),
            )
        )
    return tuple(checks)


def reward_info(
    *,
    metrics: ScenarioMetrics,
    task: Task,
    judge: Mapping[str, Any] | None,
    termination: str,
) -> RewardInfo:
    """The ``reward_info`` of one scenario (``termination``: upstream's ending of it); the
    caller has checked that a scenario ended by a stop has a reward."""
    if termination not in SCORED:
        return RewardInfo(reward=0.0, info={"note": premature_note(termination)})
    assert metrics.tau2_reward is not None, "checked by the export before writing"
    db_reward = 1.0 if metrics.db_state_match else 0.0
    breakdown: dict[str, float] = {}
    checks = None
    if DB in task.reward_basis:
        breakdown[DB] = db_reward
    if NL in task.reward_basis:
        checks = nl_checks(judge) if task.nl_assertions else ()
        breakdown[NL] = 1.0 if all(check.met for check in checks) else 0.0
    return RewardInfo(
        reward=metrics.tau2_reward,
        db_check=DBCheck(db_match=metrics.db_state_match, db_reward=db_reward),
        nl_assertions=checks,
        reward_basis=tuple(task.reward_basis),
        reward_breakdown=breakdown,
    )


def verdicts_of(checks: Sequence[NLAssertionCheck]) -> tuple[Verdict, ...]:
    """Upstream's NL checks as our verdicts (1-based, in order)."""
    return tuple(
        Verdict(
            index=index, assertion=check.nl_assertion, passed=check.met, reason=check.justification
        )
        for index, check in enumerate(checks, start=1)
    )
