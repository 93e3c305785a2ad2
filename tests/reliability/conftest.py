"""Fixtures of the reliability tests: the benchmark run by pytest in a subprocess, and a
loopback OpenAI-compatible endpoint that plays a scripted agent (and customer, and judge) with
faults injected per task.

Every benchmark run here is a real ``python -m pytest`` process with a timeout: xdist workers,
signals, crashes and asyncio loops behave as in production, and a hang fails the test instead
of stalling CI. The endpoint is :class:`tau2_retail.testing.loopback_server.LoopbackOpenAIServer` (a
real aiohttp server on 127.0.0.1) in a thread of the test process.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import pytest

from tau2_retail.data.files import resolve_data_dir
from tau2_retail.data.tasks import Task, load_tasks, load_user_guidelines
from tau2_retail.engine.judge import JUDGE_SYSTEM_PROMPT
from tau2_retail.engine.prompts import user_system_prompt
from tau2_retail.errors import DataError
from tau2_retail.models.builtin import ScriptedCustomer
from tau2_retail.testing.loopback_server import (
    Completion,
    LoopbackOpenAIServer,
    Reply,
    ReplyToolCall,
)
from tests.run_files import BENCHMARK_MODULE, RunFiles

RUN_TIMEOUT_SECONDS = 150.0
TEMP_PREFIX = ".tmp-"

# Plugins a benchmark run does not need cost seconds of start-up in every xdist worker.
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
# The probe is test-side (the project's conftest, not the product): it tells the SIGKILL test
# which process runs which scenario.
_CONFTEST = """\
import os
from pathlib import Path


def pytest_runtest_setup(item):
    folder = os.environ.get("RELIABILITY_PID_DIR")
    if folder:
        Path(folder, item.name).write_text(str(os.getpid()))
"""
_SHORT_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR) test_scenarios\.py::test_tau2_retail\[(.+?)\]")
_HERMETIC_PREFIXES = ("TAU2_", "OPENAI_", "PYTEST_", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


# -- data -----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def data_dir() -> Path:
    try:
        return resolve_data_dir(None)
    except DataError as error:
        pytest.skip(f"the tau2 retail data is not available: {error}")


@pytest.fixture(scope="session")
def tasks(data_dir: Path) -> Mapping[str, Task]:
    return load_tasks(data_dir)


def file_digests(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder``, by relative path."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


# -- the benchmark in a subprocess ------------------------------------------------------------


@dataclass(slots=True)
class Run:
    """A finished pytest run: exit code, output, and its junit XML."""

    returncode: int
    stdout: str
    stderr: str
    junit: Path

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def outcomes(self) -> dict[str, str]:
        """``passed``, ``failed`` or ``error`` per scenario id, from the ``-rA`` short summary.

        Not from the junit XML: there a passing scenario whose NL subtests were skipped (no
        judge) reads as skipped.
        """
        found: dict[str, str] = {}
        for line in self.stdout.splitlines():
            match = _SHORT_SUMMARY.match(line)
            if match:
                outcome = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error"}[match[1]]
                if found.get(match[2]) != "error":  # an error at teardown follows a pass
                    found[match[2]] = outcome
        return found


@dataclass(slots=True)
class Bench(RunFiles):
    """A project holding the benchmark module, with the tau2 plugin in its conftest."""

    path: Path
    output_dir: Path
    env: dict[str, str]
    prefix: list[str] = field(default_factory=list)  # e.g. a wrapper that drops privileges
    _runs: int = 0

    def command(self, *args: str) -> tuple[list[str], Path]:
        self._runs += 1
        junit = self.path / f"junit-{self._runs}.xml"
        command = [
            *self.prefix,
            sys.executable,
            "-m",
            "pytest",
            f"--tau2-output-dir={self.output_dir}",
            f"--junitxml={junit}",
            "-rA",
            *args,
        ]
        return command, junit

    def run(self, *args: str, timeout: float = RUN_TIMEOUT_SECONDS) -> Run:
        """Run pytest to the end (killed, and the test failed, after ``timeout`` seconds)."""
        command, junit = self.command(*args)
        process = subprocess.run(
            command,
            cwd=self.path,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return Run(process.returncode, process.stdout, process.stderr, junit)

    def start(self, *args: str) -> Started:
        """Start pytest in a session of its own (signals can go to the group); see ``Started``."""
        command, junit = self.command(*args)
        out = (self.path / f"stdout-{self._runs}.txt").open("w+")
        err = (self.path / f"stderr-{self._runs}.txt").open("w+")
        process = subprocess.Popen(
            command, cwd=self.path, env=self.env, stdout=out, stderr=err, start_new_session=True
        )
        return Started(process=process, junit=junit, out=out, err=err)


@dataclass(slots=True)
class Started:
    """A pytest process still running; ``wait`` collects it like ``Bench.run`` does."""

    process: subprocess.Popen[bytes]
    junit: Path
    out: Any
    err: Any

    def wait(self, timeout: float = RUN_TIMEOUT_SECONDS) -> Run:
        try:
            self.process.wait(timeout=timeout)
        finally:
            self._stop()
        self.out.seek(0)
        self.err.seek(0)
        run = Run(self.process.returncode, self.out.read(), self.err.read(), self.junit)
        self.close()
        return run

    def close(self) -> None:
        self.out.close()
        self.err.close()

    def kill(self) -> None:
        """Kill what is left of the process group this run started (its xdist workers too)."""
        self._stop()
        self.close()

    def _stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


@pytest.fixture
def bench(tmp_path: Path, data_dir: Path) -> Bench:
    """A benchmark project in ``tmp_path/project``; its runs write to ``tmp_path/project/runs``.

    The environment is hermetic: no ``TAU2_*``, ``OPENAI_*``, ``PYTEST_*`` or proxy variable of
    the caller leaks into the runs, except the data folder.
    """
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_scenarios.py").write_bytes(BENCHMARK_MODULE.read_bytes())
    (project / "conftest.py").write_text(_CONFTEST)
    (project / "pytest.ini").write_text(_INI)
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(_HERMETIC_PREFIXES)}
    # pytest shows whole messages in the short summary when it sees a CI variable
    env.pop("CI", None)
    env.pop("BUILD_NUMBER", None)
    env.update(
        TAU2_DATA_DIR=str(data_dir),
        NO_PROXY="127.0.0.1,localhost",
        PYTHONDONTWRITEBYTECODE="1",
        COLUMNS="80",  # output must not depend on the caller's terminal (tox sets COLUMNS)
    )
    return Bench(path=project, output_dir=project / "runs", env=env)


def files_under(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file())


def temp_files(folder: Path) -> list[Path]:
    """Half-written files (the atomic writer's temporaries) under ``folder``."""
    return [path for path in files_under(folder) if path.name.startswith(TEMP_PREFIX)]


# -- the scripted endpoint ------------------------------------------------------------------

REPORT = "I have taken care of your request. Is there anything else I can help you with?"
CUSTOMER_DONE = "No, that's all I needed. Thank you! ###STOP###"
CUSTOMER_YES = "Yes, please go ahead."
END = Completion(tool_calls=(ReplyToolCall(name="end_conversation", id="end"),))


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One request as the endpoint understood it.

    ``attempt`` counts the earlier requests of the same role, task and seed (client retries
    included): a fault on ``attempt == 0`` only is transient, one on every attempt persists.
    """

    role: str
    task_id: str
    seed: int | None
    attempt: int
    body: Mapping[str, Any] = field(repr=False)
    at: float


Fault: TypeAlias = Callable[[Request], Reply | None]
"""A reply that replaces the scripted one, or None to let the script answer."""


def once(reply: Reply, *, role: str = "agent") -> Fault:
    """``reply`` to the first request of ``role`` in each scenario, then the script."""
    return lambda request: reply if request.role == role and request.attempt == 0 else None


def always(reply: Reply, *, role: str = "agent") -> Fault:
    """``reply`` to every request of ``role``."""
    return lambda request: reply if request.role == role else None


def is_gold_call(call: Mapping[str, Any]) -> bool:
    return str(call.get("id", "")).startswith("gold-")


class ScriptedEndpoint:
    """The responder of a loopback server: agent, customer and judge for every task.

    - agent: all of the task's gold actions in one message (ids ``gold-<n>``), then a report
      asking whether anything else is needed, then ``end_conversation`` once the customer
      stopped. With the built-in customer (or the scripted one here) it reaches ``agent_exit``
      with the gold database in three requests.
    - customer (``--tau2-user-model`` at this endpoint): the built-in customer's words.
    - judge: every assertion met.

    ``faults`` maps a task id to a :data:`Fault`; ``default_fault`` applies to tasks without
    one. Every request is kept in ``log``.
    """

    def __init__(self, tasks: Mapping[str, Task], guidelines: str) -> None:
        self.tasks = tasks
        self.faults: dict[str, Fault] = {}
        self.default_fault: Fault | None = None
        self.log: list[Request] = []
        self._lock = threading.Lock()
        self._attempts: Counter[tuple[str, str, int | None]] = Counter()
        self._openings = {ScriptedCustomer(task).opening(): task.id for task in tasks.values()}
        self._user_prompts = {user_system_prompt(guidelines, t): t.id for t in tasks.values()}
        self.server = LoopbackOpenAIServer(responder=self)

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def args(self, role: str = "agent", *, model: str | None = None, **options: Any) -> list[str]:
        """``--tau2-<role>-model/-base-url`` for this endpoint, plus ``--tau2-<role>-<option>``."""
        shown = [f"--tau2-{role}-model={model or 'scripted-' + role}"]
        shown.append(f"--tau2-{role}-base-url={self.base_url}")
        shown += [f"--tau2-{role}-{k.replace('_', '-')}={v}" for k, v in options.items()]
        return shown

    def reset(self) -> None:
        """Forget earlier requests (before another run against this endpoint)."""
        with self._lock:
            self.log.clear()
            self._attempts.clear()

    def requests(self, task_id: str, role: str = "agent") -> list[Request]:
        with self._lock:
            return [r for r in self.log if r.task_id == task_id and r.role == role]

    # -- the responder --

    def __call__(self, body: Mapping[str, Any]) -> Reply:
        role, task_id = self._identify(body)
        seed = body.get("seed")
        with self._lock:
            key = (role, task_id, seed)
            request = Request(
                role=role,
                task_id=task_id,
                seed=seed,
                attempt=self._attempts[key],
                body=body,
                at=time.monotonic(),
            )
            self._attempts[key] += 1
            self.log.append(request)
        fault = self.faults.get(task_id, self.default_fault)
        reply = fault(request) if fault is not None else None
        if reply is not None:
            return reply
        script = {"agent": self._agent, "user": self._customer, "judge": self._judge}[role]
        return script(request)

    def _identify(self, body: Mapping[str, Any]) -> tuple[str, str]:
        messages: Sequence[Mapping[str, Any]] = body["messages"]
        if "tools" in body:
            first_user = next(m["content"] for m in messages if m["role"] == "user")
            return "agent", self._openings[first_user]
        system = messages[0]["content"]
        if system == JUDGE_SYSTEM_PROMPT:
            # the conversation is in the prompt: the longest opening found names the task
            content = str(messages[-1]["content"])
            found = [opening for opening in self._openings if opening in content]
            return "judge", self._openings[max(found, key=len)]
        return "user", self._user_prompts[system]

    def _agent(self, request: Request) -> Reply:
        messages = request.body["messages"]
        task = self.tasks[request.task_id]
        calls = [c for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        if task.actions and not any(is_gold_call(call) for call in calls):
            return Completion(
                tool_calls=tuple(
                    ReplyToolCall(
                        name=action.name,
                        arguments=json.dumps(action.plain_arguments()),
                        id=f"gold-{index}",
                    )
                    for index, action in enumerate(task.actions)
                )
            )
        last = messages[-1]
        if last["role"] == "user" and "###STOP###" in (last.get("content") or ""):
            return END
        return Completion(content=REPORT)

    def _customer(self, request: Request) -> Reply:
        messages = request.body["messages"]
        if not any(m["role"] == "assistant" for m in messages):
            return Completion(content=ScriptedCustomer(self.tasks[request.task_id]).opening())
        if "anything else" in str(messages[-1].get("content") or "").lower():
            return Completion(content=CUSTOMER_DONE)
        return Completion(content=CUSTOMER_YES)

    def _judge(self, request: Request) -> Reply:
        assertions = self.tasks[request.task_id].nl_assertions
        verdicts = [
            {"index": index, "passed": True, "reason": "said"}
            for index in range(1, len(assertions) + 1)
        ]
        return Completion(
            content=json.dumps(
                {"score": 1.0, "reason": "scripted", "nl_assertion_verdicts": verdicts}
            )
        )


@pytest.fixture
def endpoint(tasks: Mapping[str, Task], data_dir: Path) -> Iterator[ScriptedEndpoint]:
    """A started loopback server answering as :class:`ScriptedEndpoint`."""
    scripted = ScriptedEndpoint(tasks, load_user_guidelines(data_dir))
    with scripted.server:
        yield scripted
