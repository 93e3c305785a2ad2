"""The benchmark: one test per retail scenario (and trial), parametrized by the tau2 plugin.

The scenario runs in the ``tau2_outcome`` fixture. Here its signals become assertions: each
NL assertion is a subtest judged on its own, then DB_STATE_MATCH and CLEAN_EXIT.
"""

from __future__ import annotations

import pytest

from tau2_retail.engine.scenario import ScenarioOutcome
from tau2_retail.plugins.options import Tau2Settings

NO_JUDGE = (
    "NL assertion not applicable: no judge configured "
    "(set --tau2-judge-model and --tau2-judge-base-url, or tau2_judge_* in pyproject.toml)"
)


@pytest.mark.asyncio(loop_scope="session")
async def test_tau2_retail(
    tau2_outcome: ScenarioOutcome, tau2_settings: Tau2Settings, subtests: pytest.Subtests
) -> None:
    task = tau2_outcome.scenario.task
    judge = tau2_outcome.judge
    for index, assertion in enumerate(task.nl_assertions, start=1):
        with subtests.test(msg=f"NL assertion {index}", assertion=assertion):
            if tau2_settings.judge is None:
                pytest.skip(NO_JUDGE)
            if judge is None:
                pytest.fail("the judge did not run", pytrace=False)
            verdict = judge.verdicts[index - 1]
            if not verdict.passed:
                # one line, like the signal failures below (no traceback, no settings repr)
                pytest.fail(f"judged not met: {verdict.reason}", pytrace=False)
    failures = tau2_outcome.signal_failures()
    if failures:
        pytest.fail("\n".join(failures), pytrace=False)
