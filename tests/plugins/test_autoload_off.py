"""Plugin autoloading off: the start-up refusal's advice runs as given.

With ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` a session names its plugins with ``-p``, in order.
``-p tau2_retail`` imports the standard library's ``asyncio``; a ``-p asyncio`` after it makes
pytest warn ``Module already imported so cannot be rewritten; asyncio``, which a project's
``filterwarnings = error`` turns into a traceback at start-up. The refusal said "add -p
asyncio" without the order.
"""

from __future__ import annotations

import re

import pytest

from tau2_retail.testing.bench import Bench

from .conftest import usage_errors

TASKS = "--tau2-tasks=0"


@pytest.mark.tau2_subprocess
def test_the_plugins_the_refusal_names_run_clean_under_filterwarnings_error(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    (line,) = usage_errors(bench.run_inprocess("-p", "tau2_retail", TASKS))
    advised = re.search(r"`(-p [^`]+)`", line)
    assert advised, line
    # the bench's ini ignores that warning for its in-process runs: a user's does not
    strict = ("-W", "error::pytest.PytestAssertRewriteWarning")
    run = bench.run(*advised.group(1).split(), *strict, "-n", "2", "-rA", TASKS)
    assert run.returncode == pytest.ExitCode.OK, run.output
    assert run.outcomes() == {"tau2_retail__0": "passed"}, run.output
