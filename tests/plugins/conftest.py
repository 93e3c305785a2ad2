"""Fixtures of the plugin tests: a pytester project that runs the benchmark module, and one
loopback endpoint that plays both the agent and the judge.

Every run of scenarios is a ``python -m pytest`` subprocess (``tau2_retail.testing.bench``):
xdist, asyncio loops and the data caches of the engine then live in a fresh process, as in a
real run. Runs that stop at start-up or after collection (``--co``) may run in-process, which
is much faster.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tau2_retail.data.tasks import Task, load_user_guidelines
from tau2_retail.testing.bench import Bench, Run, error_lines, hermetic_environ, make_bench
from tau2_retail.testing.scripted_endpoint import (
    CHAT,
    END,
    SERVER_ERROR,
    AgentBehaviour,
    ScriptedEndpoint,
)

__all__ = [
    "CHAT",
    "END",
    "SEED_DB_TASKS",
    "SERVER_ERROR",
    "AgentBehaviour",
    "Bench",
    "ScriptedEndpoint",
    "distributed",
    "run_expecting",
    "usage_errors",
]

# pytester is enabled in the root conftest (pytest_plugins must live there)

# Scenario-running tests run once, with two xdist workers (the tier of subprocess tests);
# test_smoke.py runs the same path once with -n 0.
XDIST = ("-n", "2")

# The 11 tasks whose gold database is the seed: an agent that ends at once matches them.
SEED_DB_TASKS = frozenset({"10", "12", "24", "25", "50", "57", "62", "65", "67", "68", "105"})


@pytest.fixture
def xdist() -> tuple[str, ...]:
    """The worker option of scenario-running tests: ``-n 2``."""
    return XDIST


def distributed(xdist: tuple[str, ...]) -> bool:
    """Whether the run of that ``xdist`` fixture value uses workers."""
    return xdist[-1] != "0"


def in_one_process_and_two_workers(conversations: int) -> pytest.MarkDecorator:
    """Parametrize ``workers`` with the options of ``conversations`` in flight at once: in one
    process (``-n 0``), or half in each of two workers (``-n 2 --dist each``)."""
    return pytest.mark.parametrize(
        "workers",
        [
            ("-n", "0", f"--tau2-concurrency={conversations}"),
            ("-n", "2", "--dist", "each", f"--tau2-concurrency={conversations // 2}"),
        ],
        ids=["one-process", "two-workers"],
    )


def run_expecting(bench: Bench, run_id: str, outcomes: Mapping[str, str], *args: str) -> Run:
    """Run the tasks of ``outcomes`` (task id -> ``passed``/``failed``/``error``) as run
    ``run_id`` on two workers, with ``args``; assert each scenario's outcome."""
    tasks = ",".join(outcomes)
    run = bench.run(*XDIST, "-rA", f"--tau2-tasks={tasks}", f"--tau2-run-id={run_id}", *args)
    expected = {f"tau2_retail__{task}": outcome for task, outcome in outcomes.items()}
    assert run.outcomes() == expected, run.output
    return run


def usage_errors(result: pytest.RunResult | Run) -> list[str]:
    """The ``ERROR:`` lines of a run refused at start-up, after asserting its exit code (4)."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stderr.str()
    return error_lines(result.stderr)


@pytest.fixture
def bench(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, data_dir: Path) -> Bench:
    """A project that runs ``tests_tau2_retail/test_scenarios.py`` with the tau2 plugin.

    Subprocess runs get a hermetic environment (``hermetic_environ``); so does this process for
    in-process runs: no ``TAU2_*``, ``OPENAI_*``, ``PYTEST_*`` or CI variable of the caller
    leaks in, except the data folder.
    """
    environ = hermetic_environ(data_dir)
    for name in list(os.environ):
        if name not in environ:
            monkeypatch.delenv(name)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    return make_bench(pytester.path, data_dir, pytester=pytester)


@pytest.fixture
def endpoint(tasks: Mapping[str, Task], data_dir: Path) -> Iterator[ScriptedEndpoint]:
    """One loopback server playing agent and judge (the customer is the scripted built-in);
    the agent ends every conversation at once unless a test scripts it."""
    scripted = ScriptedEndpoint(tasks, load_user_guidelines(data_dir), default_agent=END)
    with scripted.server:
        yield scripted
