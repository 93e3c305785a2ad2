"""One-line hints for sessions that ran no scenario although the user asked for the benchmark.

``pytest -k tau2_retail`` selects the scenarios in this project's checkout (its ``testpaths``),
but in a team's repository the benchmark is an installed module that pytest collects only when
named (``--pyargs tests_tau2_retail``): there the session deselects everything and exits 5
without a word about why.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["NAMED_NO_SCENARIO_HINT", "NO_SCENARIO_HINT", "no_scenario_hint"]

NO_SCENARIO_HINT = (
    "tau2: no tau2 scenario was collected: the benchmark is the installed module "
    "tests_tau2_retail, which pytest collects only when it is named; add "
    "--pyargs tests_tau2_retail"
)

# pytest-picked's --picked collects the test files git shows changed in place of those named
NAMED_NO_SCENARIO_HINT = (
    "tau2: no tau2 scenario was collected although tests_tau2_retail was named: a plugin "
    "changed what pytest collects (pytest-picked's --picked collects only the test files git "
    "shows changed); drop it for a run of the scenarios"
)


def no_scenario_hint(*, keyword: str, markexpr: str, args: Sequence[str]) -> str | None:
    """The hint for a session that collected no scenario, when its selection (``-k``, ``-m``),
    a ``--tau2-*`` option or the benchmark named shows that the benchmark was meant; else
    None."""
    if any(arg.split("::")[0] == "tests_tau2_retail" for arg in args):
        return NAMED_NO_SCENARIO_HINT
    asked = "tau2" in keyword or "tau2" in markexpr or any(a.startswith("--tau2-") for a in args)
    return NO_SCENARIO_HINT if asked else None
