"""Fixtures of the plugin tests: a pytester project that runs the benchmark module, and one
loopback endpoint that plays both the agent and the judge.

Every run of scenarios goes through ``pytester.runpytest_subprocess``: xdist, asyncio loops
and the data caches of the engine then live in a fresh process, as in a real run. Runs that
stop at start-up or after collection (``--co``) may run in-process, which is much faster.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import pytest

from tau2_retail.data.files import resolve_data_dir
from tau2_retail.data.tasks import Task, load_tasks
from tau2_retail.engine.judge import JUDGE_SYSTEM_PROMPT
from tau2_retail.errors import DataError
from tau2_retail.models.builtin import ScriptedCustomer
from tau2_retail.testing.loopback_server import (
    Completion,
    HttpError,
    LoopbackOpenAIServer,
    Reply,
    ReplyToolCall,
)
from tests.run_files import BENCHMARK_MODULE, RunFiles

# pytester is enabled in the root conftest (pytest_plugins must live there)


# Each test that runs scenarios runs them in-process and with two xdist workers.
XDIST_MODES = [pytest.param(("-n", "0"), id="n0"), pytest.param(("-n", "2"), id="n2")]

# The plugins these runs do not use cost seconds of start-up in every xdist worker
# (hypothesis alone about two), so the inner project switches them off.
_INI = """\
[pytest]
testpaths = test_scenarios.py
asyncio_mode = strict
asyncio_default_fixture_loop_scope = function
filterwarnings =
    error
    # in-process runs: this process imported the installed plugin before the inner pytest
    ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning
strict = true
# an endpoint agent with the scripted customer must be asked for explicitly
tau2_user_model = builtin:customer
addopts = -p no:hypothesispytest -p no:syrupy -p no:anyio -p no:cacheprovider
"""
RUN_TIMEOUT_SECONDS = 240

# The 11 tasks whose gold database is the seed: an agent that ends at once matches them.
SEED_DB_TASKS = frozenset({"10", "12", "24", "25", "50", "57", "62", "65", "67", "68", "105"})


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real data folder ($TAU2_DATA_DIR or fixtures/cache); fails the test if absent."""
    try:
        return resolve_data_dir(None)
    except DataError as error:
        pytest.fail(f"these tests need the upstream data: {error}", pytrace=False)


@pytest.fixture(scope="session")
def tasks(data_dir: Path) -> Mapping[str, Task]:
    return load_tasks(data_dir)


@pytest.fixture(params=XDIST_MODES)
def xdist(request: pytest.FixtureRequest) -> tuple[str, ...]:
    """``-n 0`` or ``-n 2``: scenario-running tests run once with each."""
    mode: tuple[str, ...] = request.param
    return mode


def distributed(xdist: tuple[str, ...]) -> bool:
    """Whether the run of that ``xdist`` fixture value uses workers."""
    return xdist[-1] != "0"


@dataclass(slots=True)
class Bench(RunFiles):
    """A pytester project holding the benchmark module, with the tau2 plugin as its conftest."""

    pytester: pytest.Pytester
    output_dir: Path

    @property
    def path(self) -> Path:
        return self.pytester.path

    def run(self, *args: str, output_dir: bool = True) -> pytest.RunResult:
        """Run pytest in a subprocess; ``--tau2-output-dir`` is the project's unless told."""
        shown = (f"--tau2-output-dir={self.output_dir}",) if output_dir else ()
        return self.pytester.runpytest_subprocess(*shown, *args, timeout=RUN_TIMEOUT_SECONDS)

    def add_ini(self, **values: str) -> None:
        """Append ``key = value`` lines to the project's ``[pytest]`` section."""
        ini = self.path / "pytest.ini"
        lines = "".join(f"{key} = {value}\n" for key, value in values.items())
        ini.write_text(ini.read_text(encoding="utf-8") + lines, encoding="utf-8")

    def run_inprocess(self, *args: str, output_dir: bool = True) -> pytest.RunResult:
        """Run pytest in this process: only for runs that stop at start-up or collection."""
        shown = (f"--tau2-output-dir={self.output_dir}",) if output_dir else ()
        return self.pytester.runpytest_inprocess(*shown, *args)


@pytest.fixture
def bench(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, data_dir: Path) -> Bench:
    """A project that runs ``tests_tau2_retail/test_scenarios.py`` with the tau2 plugin.

    The environment is made hermetic: no ``TAU2_*`` or ``OPENAI_*`` variable of the caller
    leaks into the runs, except the data folder.
    """
    shutil.copy(BENCHMARK_MODULE, pytester.path / "test_scenarios.py")
    (pytester.path / "pytest.ini").write_text(_INI, encoding="utf-8")
    for name in list(os.environ):
        if name.startswith(("TAU2_", "OPENAI_", "PYTEST_XDIST_")) or name == "PYTEST_ADDOPTS":
            monkeypatch.delenv(name)
    monkeypatch.setenv("TAU2_DATA_DIR", str(data_dir))
    # a fixed width: counts of a message in the output must not depend on the terminal (tox
    # exports its own COLUMNS; a wide one makes the short summary repeat whole messages)
    monkeypatch.setenv("COLUMNS", "80")
    # and pytest shows whole messages in the short summary when it sees a CI variable
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("BUILD_NUMBER", raising=False)
    return Bench(pytester=pytester, output_dir=pytester.path / "runs")


# -- the scripted endpoint -----------------------------------------------------------------

END = Completion(tool_calls=(ReplyToolCall(name="end_conversation"),))
"""The agent ends the conversation at once (DB matches only the seed-DB tasks)."""

SERVER_ERROR = HttpError.server_error()
"""A 500: with ``--tau2-agent-max-retries=0`` the scenario ends as ``infra_error``."""

CHAT = Completion(content="Let me look into that for you.")
"""The agent only talks: the customer gives up after its turns, the ending is ``user_stop``."""

AgentBehaviour: TypeAlias = Reply | Callable[[int | None], Reply]
"""A reply, or a function of the request's seed (trials differ by seed) giving one."""


@dataclass(slots=True)
class ScriptedEndpoint:
    """The responder of a loopback server: the agent and the judge, per task.

    The task is recognised from the scripted customer's opening (its first message). A judge
    request has no ``tools`` and the judge's system prompt; it gets one verdict per assertion,
    all met except the 1-based indexes listed in ``judge_fails`` for that task.
    """

    tasks: Mapping[str, Task]
    server: LoopbackOpenAIServer
    agent: dict[str, AgentBehaviour] = field(default_factory=dict)
    judge_fails: dict[str, set[int]] = field(default_factory=dict)
    agent_requests: Counter[str] = field(default_factory=Counter)
    judge_requests: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _openings: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._openings = {ScriptedCustomer(t).opening(): t.id for t in self.tasks.values()}

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def agent_args(self, model: str = "test-agent") -> list[str]:
        return [
            f"--tau2-agent-model={model}",
            f"--tau2-agent-base-url={self.base_url}",
            "--tau2-agent-max-retries=0",
        ]

    def judge_args(self, model: str = "test-judge") -> list[str]:
        return [f"--tau2-judge-model={model}", f"--tau2-judge-base-url={self.base_url}"]

    def __call__(self, body: Mapping[str, Any]) -> Reply:
        messages: Sequence[Mapping[str, Any]] = body["messages"]
        if "tools" not in body and messages[0]["content"] == JUDGE_SYSTEM_PROMPT:
            return self._judge(str(messages[-1]["content"]))
        if "tools" not in body:
            raise AssertionError(f"neither an agent nor a judge request: {body!r}")
        first_user = next(m["content"] for m in messages if m["role"] == "user")
        task_id = self._openings[first_user]
        with self._lock:
            self.agent_requests[task_id] += 1
        behaviour = self.agent.get(task_id, END)
        return behaviour(body.get("seed")) if callable(behaviour) else behaviour

    def _judge(self, user_content: str) -> Reply:
        # the conversation is rendered into the prompt: the longest opening found names the task
        found = [opening for opening in self._openings if opening in user_content]
        task = self.tasks[self._openings[max(found, key=len)]]
        with self._lock:
            self.judge_requests[task.id] += 1
        fails = self.judge_fails.get(task.id, set())
        verdicts = [
            {
                "index": index,
                "passed": index not in fails,
                "reason": "not said" if index in fails else "said",
            }
            for index in range(1, len(task.nl_assertions) + 1)
        ]
        reply = {
            "score": 0.2 if fails else 0.9,
            "reason": "scripted",
            "nl_assertion_verdicts": verdicts,
        }
        return Completion(content=json.dumps(reply))


@pytest.fixture
def endpoint(tasks: Mapping[str, Task]) -> Iterator[ScriptedEndpoint]:
    """One loopback server playing agent and judge (the customer is the scripted built-in)."""
    with LoopbackOpenAIServer() as server:
        scripted = ScriptedEndpoint(tasks=tasks, server=server)
        server.responder = scripted
        yield scripted
