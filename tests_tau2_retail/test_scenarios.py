"""The benchmark: one test per retail scenario (and trial), parametrized by the tau2 plugin.

The scenario runs in the ``tau2_outcome`` fixture. Here its signals become one outcome: the
test fails when DB_STATE_MATCH, CLEAN_EXIT or any judged NL assertion failed, and its message
starts with the short reason (``stop max_steps; DB: 2 records differ; NL 1/3 not met``). Each
NL assertion's verdict is recorded as a ``tau2_nl_<i>`` property (visible in junit XML).
"""

from __future__ import annotations

import pytest

from tau2_retail.engine.scenario import ScenarioOutcome
from tau2_retail.models.text import printable
from tau2_retail.plugins.options import Tau2Settings

NO_JUDGE = "not judged: no judge configured (set --tau2-judge-model)"


@pytest.mark.asyncio(loop_scope="session")
async def test_tau2_retail(
    tau2_outcome: ScenarioOutcome,
    tau2_settings: Tau2Settings,
    request: pytest.FixtureRequest,
) -> None:
    # user_properties directly: the record_property fixture warns under junit's xunit2 family
    def record_property(name: str, value: str) -> None:
        request.node.user_properties.append((name, value))

    task = tau2_outcome.scenario.task
    judge = tau2_outcome.judge
    failures = []
    for index, assertion in enumerate(task.nl_assertions, start=1):
        if tau2_settings.judge is None:
            record_property(f"tau2_nl_{index}", NO_JUDGE)
            continue
        if judge is None:
            record_property(f"tau2_nl_{index}", "not judged: the judge did not run")
            failures.append(f"NL assertion {index} ({assertion}): the judge did not run")
            continue
        verdict = judge.verdicts[index - 1]
        record_property(
            f"tau2_nl_{index}", f"{'met' if verdict.passed else 'NOT met'}: {verdict.reason}"
        )
        if not verdict.passed:
            # the judge's reason on one line, whatever it holds (newlines shown as \n)
            failures.append(
                f"NL assertion {index} ({assertion}) judged not met: {printable(verdict.reason)}"
            )
    failures[:0] = tau2_outcome.signal_failures()
    if failures:
        reason = tau2_outcome.short_reason() or "the judge did not run"
        pytest.fail("\n".join([reason, *failures]), pytrace=False)
