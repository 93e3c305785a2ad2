"""The benchmark: one test per retail scenario (and trial), parametrized by the tau2 plugin.

The scenario runs in the ``tau2_outcome`` fixture. Here its signals become assertions: each
judged NL assertion is a subtest of its own (``SUBPASSED``/``SUBFAILED[NL assertion i]`` under
``-v``, the judge's reason as the failure text), then DB_STATE_MATCH and CLEAN_EXIT. The test
fails when any of them failed, and its message starts with the short reason (``stop max_steps;
DB: 2 records differ; NL 1/3 not met``). With no judge configured no NL subtest is created (the
run header says why). Each NL assertion's verdict is also a ``tau2_nl_<i>`` property (junit XML).
"""

from __future__ import annotations

import pytest

from tau2_retail.engine.scenario import ScenarioOutcome
from tau2_retail.models.text import printable, printable_lines
from tau2_retail.plugins.options import Tau2Settings

NO_JUDGE = "not judged: no judge configured (set --tau2-judge-model)"


@pytest.mark.asyncio(loop_scope="session")
async def test_tau2_retail(
    tau2_outcome: ScenarioOutcome,
    tau2_settings: Tau2Settings,
    subtests: pytest.Subtests,
    request: pytest.FixtureRequest,
) -> None:
    # user_properties directly: the record_property fixture warns under junit's xunit2 family
    def record_property(name: str, value: str) -> None:
        request.node.user_properties.append((name, value))

    task = tau2_outcome.scenario.task
    judge = tau2_outcome.judge
    for index, assertion in enumerate(task.nl_assertions, start=1):
        if tau2_settings.roles.judge is None:
            # no subtest at all: a skipped one would make junit show a testcase both skipped
            # and failed
            record_property(f"tau2_nl_{index}", NO_JUDGE)
            continue
        with subtests.test(msg=f"NL assertion {index}"):
            if judge is None:
                record_property(f"tau2_nl_{index}", "not judged: the judge did not run")
                pytest.fail(f"not judged: the judge did not run\n{assertion}", pytrace=False)
            verdict = judge.verdicts[index - 1]
            record_property(
                f"tau2_nl_{index}", f"{'met' if verdict.passed else 'NOT met'}: {verdict.reason}"
            )
            if not verdict.passed:
                # the judge's reason on one line, whatever it holds (newlines shown as \n)
                pytest.fail(
                    f"judged not met: {printable(verdict.reason)}\n{assertion}", pytrace=False
                )
    failures = tau2_outcome.signal_failures()
    reason = tau2_outcome.short_reason()
    if failures or reason:
        # the NL verdicts failed above, each in its subtest; the scenario fails with its reason
        # database values the agent wrote may hold control characters: shown escaped
        pytest.fail(printable_lines("\n".join([reason or "failed", *failures])), pytrace=False)
