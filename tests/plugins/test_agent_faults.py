"""Agent code written to misbehave, through the real plugin (pytest in a subprocess, with the
plugins users load: xdist, syrupy, hypothesis): it fails its own scenario, never the others or
the run; it cannot reach task data, change another scenario's tools, share itself between
scenarios, block the run, or run tool calls past the step limit.

The agents dispatch on their scenario: the scripted customer's first words name the task.
"""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path

import pytest

from tau2_retail.engine.profiles import ProfileName, load_profile
from tau2_retail.testing.bench import RUN_TIMEOUT_SECONDS, Run

from .conftest import Bench, usage_errors

# Tasks whose gold database is the seed: an agent that ends the call at once passes them.
SEED = ("10", "12", "24", "25", "50", "57", "62", "65", "67", "68")

# the head of the agents' modules: which task a conversation is (the customer's first words)
DISPATCH = """\
import asyncio
import glob
import json
import os
import threading
import time

from tau2_retail.data.files import resolve_data_dir
from tau2_retail.data.tasks import load_tasks
from tau2_retail.models.builtin import ScriptedCustomer

TASKS = load_tasks(resolve_data_dir())
BY_OPENING = {ScriptedCustomer(task).opening(): task.id for task in TASKS.values()}
END = {"tool_calls": [{"id": "e", "type": "function",
                       "function": {"name": "end_conversation", "arguments": "{}"}}]}


def task_of(messages):
    return BY_OPENING[next(m["content"] for m in messages if m["role"] == "user")]
"""

AGENTS = (
    DISPATCH
    + """
PLAN = json.loads(os.environ.get("AGENT_PLAN", "{}"))


def note(name, text=""):
    with open(name, "a") as out:
        out.write(text + "\\n")


class Unreadable:
    def model_dump(self):
        raise ValueError("the dump broke")


async def hang():
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        note("cancelled")  # the harness's own cancellation reached the agent as one
        raise


async def async_raise(kind):
    await asyncio.sleep(0)
    raise kind


def plan_of(messages, exit_code):
    # this task's plan; the two that both agent kinds raise at once are raised here
    plan = PLAN.get(task_of(messages), "end")
    if plan == "exit":
        raise SystemExit(exit_code)
    if plan == "cancel":
        raise asyncio.CancelledError()
    return plan


class Turn:
    def respond(self, messages, tools):
        plan = plan_of(messages, exit_code=3)
        if plan == "unreadable":
            return Unreadable()
        if plan in ("async-exit", "async-cancel", "async-generator-exit"):
            kind = {"async-exit": SystemExit(4), "async-cancel": asyncio.CancelledError(),
                    "async-generator-exit": GeneratorExit()}[plan]
            return async_raise(kind)  # what an async def respond is: a coroutine
        if plan == "hang":
            return hang()
        return END


class Loop:
    async def converse(self, messages, toolbox):
        plan = plan_of(messages, exit_code=5)
        if plan == "generator-exit":
            raise GeneratorExit()
        toolbox.call("end_conversation", {})
        return ""
"""
)


def _agents(bench: Bench, monkeypatch: pytest.MonkeyPatch, plan: dict[str, str]) -> Bench:
    (bench.path / "my_agents.py").write_text(AGENTS, encoding="utf-8")
    assert bench.env is None  # this process's environment is the runs'
    monkeypatch.setenv("AGENT_PLAN", json.dumps(plan))
    return bench


def _junit_errors(junit: Path | None) -> list[str]:
    assert junit is not None
    root = ET.parse(junit).getroot()
    return [
        case.get("name", "") for case in root.iter("testcase") if case.find("error") is not None
    ]


def _ended(bench: Bench, run_id: str, task: str) -> tuple[str, str]:
    metrics = bench.metrics(run_id, f"tau2_retail__{task}")
    return metrics["stop_reason"], metrics["stop_detail"]


def _run_at_once(
    bench: Bench,
    module: str,
    agent: str,
    tasks: str,
    run_id: str,
    *args: str,
    timeout: float = RUN_TIMEOUT_SECONDS,
) -> Run:
    """Run ``tasks`` (comma-separated) all at once on one worker with the agent
    ``my_agents:AGENT``, the module written from ``module``."""
    (bench.path / "my_agents.py").write_text(module, encoding="utf-8")
    return bench.run(
        "-n", "0", "-rA", f"--tau2-tasks={tasks}", f"--tau2-agent=my_agents:{agent}",
        f"--tau2-concurrency={len(tasks.split(','))}", f"--tau2-run-id={run_id}", *args,
        timeout=timeout,
    )  # fmt: skip


def _agent_errors(bench: Bench, run_id: str, tasks: Iterable[str], detail: str) -> None:
    """Each of ``tasks`` ended by the agent's error, its detail holding ``detail``."""
    for task in tasks:
        reason, said = _ended(bench, run_id, task)
        assert reason == "agent_error", task
        assert detail in said, task


# -- item: what no exception handler catches is the agent's failure, of its scenario only -------

TURN_PLAN = {
    "10": "exit",
    "12": "async-exit",
    "24": "cancel",
    "25": "async-cancel",
    "50": "async-generator-exit",
    "57": "unreadable",
    "62": "hang",
}
TURN_DETAILS = {
    "10": "agent: respond() raised SystemExit: 3",
    "12": "agent: respond() raised SystemExit: 4",
    "24": "agent: respond() raised CancelledError",
    "25": "agent: respond() raised CancelledError",
    "50": "agent: respond() raised GeneratorExit",
    "57": "agent: respond() returned an Unreadable whose model_dump() raised ValueError: "
    "the dump broke",
}


@pytest.mark.tau2_subprocess
def test_base_exceptions_of_a_turn_agent_fail_only_its_scenario(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, xdist: tuple[str, ...]
) -> None:
    agents = _agents(bench, monkeypatch, TURN_PLAN)
    agents.junit = True
    tasks = ",".join(SEED[:8])  # 65 and 67: the agent ends the call, they pass
    result = agents.run(
        *xdist,
        "-rA",
        f"--tau2-tasks={tasks}",
        "--tau2-agent=my_agents:Turn",
        "--tau2-concurrency=8",
        "--tau2-max-duration=8",
        "--tau2-run-id=turn",
    )
    outcomes = result.outcomes()
    assert outcomes == {
        **{f"tau2_retail__{task}": "failed" for task in TURN_PLAN},
        "tau2_retail__65": "passed",
    }, result.output
    assert _junit_errors(result.junit) == []
    assert "INTERNALERROR" not in result.output
    for task, detail in TURN_DETAILS.items():
        assert _ended(agents, "turn", task) == ("agent_error", detail)
        traceback = agents.run_dir("turn") / f"tau2_retail__{task}" / "agent_traceback.txt"
        assert "my_agents.py" in traceback.read_text(encoding="utf-8"), task
    # the harness's deadline cancelled the hung agent: a timeout, not the agent's error
    assert _ended(agents, "turn", "62")[0] == "timeout"
    assert (agents.path / "cancelled").is_file()
    summary = agents.summary("turn")
    assert summary["lost"] == []
    assert summary["counts"]["scored"] == 8


@pytest.mark.tau2_subprocess
def test_base_exceptions_of_a_loop_agent_fail_only_its_scenario(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    agents = _agents(bench, monkeypatch, {"10": "exit", "12": "cancel", "24": "generator-exit"})
    agents.junit = True
    result = agents.run(
        "-n",
        "0",
        "-rA",
        "--tau2-tasks=10,12,24,25",
        "--tau2-agent=my_agents:Loop",
        "--tau2-concurrency=4",
        "--tau2-run-id=loop",
    )
    assert result.outcomes() == {
        "tau2_retail__10": "failed",
        "tau2_retail__12": "failed",
        "tau2_retail__24": "failed",
        "tau2_retail__25": "passed",
    }, result.output
    assert _junit_errors(result.junit) == []
    assert _ended(agents, "loop", "10") == ("agent_error", "agent: converse() raised SystemExit: 5")
    assert _ended(agents, "loop", "12") == (
        "agent_error",
        "agent: converse() raised CancelledError",
    )
    assert _ended(agents, "loop", "24") == ("agent_error", "agent: converse() raised GeneratorExit")


# -- item: KeyboardInterrupt from the agent is Ctrl-C ----------------------------------------

INTERRUPTING = (
    DISPATCH
    + """

class Agent:
    async def respond(self, messages, tools):
        task = task_of(messages)
        if task == "25" and not os.path.exists("fixed"):
            # once the others are recorded (at most 60 s), as a user's Ctrl-C would come
            for _ in range(600):
                if len(glob.glob("runs/ki/*/metrics.json")) >= 3:
                    break
                await asyncio.sleep(0.1)
            raise KeyboardInterrupt
        return END
"""
)


@pytest.mark.tau2_subprocess
@pytest.mark.parametrize("workers", ["0", "2"])
def test_keyboard_interrupt_from_the_agent_interrupts_the_run_as_ctrl_c(
    bench: Bench, workers: str
) -> None:
    (bench.path / "my_agents.py").write_text(INTERRUPTING, encoding="utf-8")
    result = bench.run(
        "-n", workers, "--tau2-tasks=10,12,24,25", "--tau2-agent=my_agents:Agent",
        "--tau2-concurrency=4", "--dist=each", "--tau2-run-id=ki",
    )  # fmt: skip
    output = result.output
    assert result.ret == pytest.ExitCode.INTERRUPTED, output
    assert "INTERNALERROR" not in output
    interrupted = "my_agents:Agent: respond() raised KeyboardInterrupt in tau2_retail__25"
    assert f"tau2: interrupted by the agent: {interrupted}" in output
    resume = [line for line in result.stdout.lines if "resume with: " in line]
    assert len(resume) == 1, output
    assert resume[0].endswith("--tau2-resume=ki")
    on_disk = {path.parent.name for path in bench.run_dir("ki").glob("*/metrics.json")}
    assert on_disk == {"tau2_retail__10", "tau2_retail__12", "tau2_retail__24"}
    summary = bench.summary("ki")
    assert {row["scenario_id"] for row in summary["scenarios"]} == on_disk
    assert summary["lost"] == ["tau2_retail__25"]

    (bench.path / "fixed").write_text("", encoding="utf-8")
    resumed = bench.run(
        "-n", workers, "--dist=each", "--tau2-agent=my_agents:Agent", "--tau2-resume=ki"
    )  # fmt: skip
    assert resumed.ret == pytest.ExitCode.OK, resumed.output
    assert len(bench.summary("ki")["scenarios"]) == 4


CLOSE_INTERRUPTING = (
    DISPATCH
    + """

class Agent:
    def respond(self, messages, tools):
        return END

    def close(self):
        if task_of_closing[0] == "10":
            raise KeyboardInterrupt


task_of_closing = ["10"]
"""
)


@pytest.mark.tau2_subprocess
def test_keyboard_interrupt_from_close_keeps_the_finished_verdict(bench: Bench) -> None:
    """The conversation had ended and passed, then ``close()`` raised KeyboardInterrupt: the
    scenario was thrown away (no folder, lost), against "close()'s problems do not change the
    verdict" and "finished scenarios keep their records". It keeps its record now, and the
    run stops as for Ctrl-C."""
    (bench.path / "my_agents.py").write_text(CLOSE_INTERRUPTING, encoding="utf-8")
    result = bench.run("-rA", "--tau2-tasks=10", "--tau2-agent=my_agents:Agent", "--tau2-run-id=kc")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.output
    assert "close() raised KeyboardInterrupt in tau2_retail__10" in result.output
    # its test reports the verdict it scored (it was "SKIPPED: not run" while it counted)
    assert result.outcomes() == {"tau2_retail__10": "passed"}
    metrics = bench.metrics("kc", "tau2_retail__10")
    assert metrics["is_successful"] is True
    assert "agent: close() raised KeyboardInterrupt" in metrics["stop_detail"]
    assert bench.summary("kc")["lost"] == []


# -- item: an async agent that blocks its event loop ---------------------------------------------

BLOCKING = (
    DISPATCH
    + """

class Blocking:
    name = "blocker"

    async def respond(self, messages, tools):
        task = task_of(messages)
        if task == "10":
            threading.Event().wait()  # blocks for ever, inside async def
        if task == "12":
            # blocks its loop until scenario 24 has run (at most 60 s): a harness that
            # serialized every scenario behind it would never get there
            for _ in range(600):
                if os.path.exists("24-ran"):
                    open("12-saw-24", "w").close()
                    break
                time.sleep(0.1)
        if task == "24":
            open("24-ran", "w").close()
        return END
"""
)


@pytest.mark.tau2_subprocess
def test_an_agent_blocking_its_event_loop_is_bounded_and_named(bench: Bench) -> None:
    # a harness serialized behind the first blocker hangs: the run's time limit fails it
    result = _run_at_once(
        bench, BLOCKING, "Blocking", "10,12,24", "block", "--tau2-max-duration=5", timeout=120
    )
    assert result.outcomes() == {
        "tau2_retail__10": "failed",
        "tau2_retail__12": "passed",
        "tau2_retail__24": "passed",
    }, result.output
    assert (bench.path / "12-saw-24").is_file()
    reason, detail = _ended(bench, "block", "10")
    assert reason == "timeout"
    assert "its async code had held its event loop for " in detail
    result.stdout.fnmatch_lines(
        ["tau2: agent my_agents:Blocking blocks its event loop: a step of its async code ran*"]
    )


# -- item: the tools handed to the agent are its own copy ------------------------------------------

EDITING = """\
import hashlib
import json


def digest(value):
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


class Editing:
    def respond(self, messages, tools):
        with open("received.txt", "a") as out:
            out.write(digest(tools) + "\\n")
        for tool in tools:  # every nested dict it was handed
            function = tool["function"]
            function["description"] = "EDITED"
            parameters = function.get("parameters") or {}
            for prop in (parameters.get("properties") or {}).values():
                prop["description"] = "EDITED"
                prop.setdefault("enum", []).append("EDITED")
            parameters.get("required", []).append("EDITED")
        if sum(m["role"] == "user" for m in messages) < 2:
            return "Could you say that again?"
        return {"tool_calls": [{"id": "e", "type": "function",
                                "function": {"name": "end_conversation", "arguments": "{}"}}]}


class EditingLoop:
    async def converse(self, messages, toolbox):
        with open("received.txt", "a") as out:
            out.write(digest(toolbox.schemas) + "\\n")
        for schema in toolbox.schemas:
            schema["function"]["description"] = "EDITED"
        for function in toolbox.functions.values():
            function.__doc__ = "EDITED"
        toolbox.call("end_conversation", {})
        return ""
"""


@pytest.mark.tau2_subprocess
@pytest.mark.parametrize("agent", ["Editing", "EditingLoop"])
def test_an_agent_editing_its_tools_changes_no_other_call_scenario_or_record(
    bench: Bench, data_dir: Path, agent: str
) -> None:
    (bench.path / "my_agents.py").write_text(EDITING, encoding="utf-8")
    result = bench.run(
        "-n", "0", "--tau2-tasks=10,12,24", f"--tau2-agent=my_agents:{agent}",
        "--tau2-concurrency=1", "--tau2-run-id=edit",
    )  # fmt: skip
    result.assert_outcomes(passed=3)
    tools = list(load_profile(ProfileName.DEFAULT, data_dir).tools)
    expected = hashlib.sha256(json.dumps(tools, sort_keys=True).encode()).hexdigest()
    received = (bench.path / "received.txt").read_text(encoding="utf-8").split()
    assert len(received) >= 3
    assert set(received) == {expected}
    for task in ("10", "12", "24"):
        recorded = bench.run_dir("edit") / f"tau2_retail__{task}" / "scenario_config"
        assert json.loads((recorded / "tools.json").read_text(encoding="utf-8")) == tools


# -- item: nothing handed to the agent reaches task data -----------------------------------------

WALKING = """\
import json

from tau2_retail.data.files import resolve_data_dir
from tau2_retail.data.tasks import Task, load_tasks
from tau2_retail.testing.object_graph import reachable, type_name

TASKS = load_tasks(resolve_data_dir())
# what the task knows and the customer never says (it says reason_for_call and known_info)
SECRETS = {task.id: [t for t in (task.task_instructions, task.unknown_info, *task.nl_assertions)
                     if t and len(t) > 20] for task in TASKS.values()}
FORBIDDEN = ("tau2_retail.data.tasks", "tau2_retail.data.gold", "tau2_retail.engine.harness",
             "tau2_retail.engine.scenario", "tau2_retail.models.builtin", "tau2_retail.plugins",
             "_pytest", "pytest", "xdist", "asyncio")


def walk(*handed):
    objects = list(reachable(handed))
    texts = [value for value in objects if isinstance(value, str)]
    report = {
        "objects": len(objects),
        "types": sorted({type_name(value) for value in objects}),
        "forbidden": sorted({type_name(value) for value in objects
                             if type_name(value).startswith(FORBIDDEN) or isinstance(value, Task)}),
        "secrets": sorted({task for task, secrets in SECRETS.items()
                           if any(s in text for s in secrets for text in texts)}),
    }
    with open("walked.jsonl", "a") as out:
        out.write(json.dumps(report) + "\\n")


class WalkingTurn:
    def respond(self, messages, tools):
        walk(messages, tools, self)
        return {"tool_calls": [{"id": "e", "type": "function",
                                "function": {"name": "end_conversation", "arguments": "{}"}}]}


class WalkingLoop:
    def converse(self, messages, toolbox):
        walk(messages, toolbox, toolbox.functions, toolbox.schemas, self)
        toolbox.call("end_conversation", {})
        return ""


class Cheat:
    def converse(self, messages, toolbox):
        task = toolbox._run.__self__.user.task  # the gold actions, through the toolbox
        for action in task.actions:
            toolbox.call(action.name, action.plain_arguments())
        toolbox.call("end_conversation", {})
        return ""
"""


@pytest.mark.tau2_subprocess
@pytest.mark.parametrize("agent", ["WalkingTurn", "WalkingLoop"])
def test_nothing_handed_to_the_agent_reaches_task_data(bench: Bench, agent: str) -> None:
    result = _run_at_once(bench, WALKING, agent, "0,5", "walk")
    assert "Traceback" not in result.output
    reports = [json.loads(line) for line in (bench.path / "walked.jsonl").read_text().splitlines()]
    assert len(reports) == 2
    for report in reports:
        assert report["forbidden"] == []
        assert report["secrets"] == []
        # the walk went through everything handed: the scenario's own database (loop style)
        if agent == "WalkingLoop":
            assert report["objects"] > 50_000
            assert "tau2_retail.tools.store.Store" in report["types"]


@pytest.mark.tau2_subprocess
def test_an_agent_cannot_take_the_gold_actions_through_the_toolbox(bench: Bench) -> None:
    result = _run_at_once(bench, WALKING, "Cheat", "0,1,2", "cheat")
    assert result.outcomes() == dict.fromkeys(
        ("tau2_retail__0", "tau2_retail__1", "tau2_retail__2"), "failed"
    )
    _agent_errors(bench, "cheat", ("0", "1", "2"), "converse() raised AttributeError")


# -- item: one agent object for every scenario ---------------------------------------------------

SHARED = """\
import pytest

END = {"tool_calls": [{"id": "e", "type": "function",
                       "function": {"name": "end_conversation", "arguments": "{}"}}]}


class Ender:
    def respond(self, messages, tools):
        return END


SHARED = Ender()


def shared():
    return SHARED


calls = []


def fresh_at_first():
    # fresh for the two calls at start-up, then one object for every scenario
    calls.append(None)
    return Ender() if len(calls) <= 2 else SHARED
"""


def test_a_factory_returning_one_shared_agent_stops_the_run_at_start_up(bench: Bench) -> None:
    (bench.path / "my_agents.py").write_text(SHARED, encoding="utf-8")
    result = bench.run("--tau2-tasks=10,12", "--tau2-agent=my_agents:shared")
    assert usage_errors(result) == [
        "ERROR: --tau2-agent: my_agents:shared: the factory returned the same Ender object "
        "twice: every scenario would share it; return a fresh agent from each call (e.g. name "
        "the agent's class)"
    ]


@pytest.mark.tau2_subprocess
def test_an_agent_object_given_to_a_second_scenario_is_refused(bench: Bench) -> None:
    result = _run_at_once(bench, SHARED, "fresh_at_first", "10,12,24", "shared")
    outcomes = result.outcomes()
    assert sorted(outcomes.values()) == ["failed", "failed", "passed"], result.output
    refused = [task for task in ("10", "12", "24") if outcomes[f"tau2_retail__{task}"] == "failed"]
    already = "gave an agent object that another scenario of this process already had"
    _agent_errors(bench, "shared", refused, already)


# -- item: the tool calls of one turn ------------------------------------------------------------

FLOOD = """\
CALLS = 1000


class Flood:
    def respond(self, messages, tools):
        return {"tool_calls": [
            {"id": f"c{n}", "type": "function",
             "function": {"name": "calculate", "arguments": '{"expression": "1 + 1"}'}}
            for n in range(CALLS)]}
"""


@pytest.mark.tau2_subprocess
@pytest.mark.parametrize(
    ("profile", "steps", "results"),
    [
        # greeting, user, the turn, then one step per call: 17 of them
        ("default", 20, 17),
        # upstream's orchestrator: user, the turn, all its results as one step
        ("tau2", 3, 1000),
    ],
)
def test_a_turn_of_a_thousand_tool_calls_is_bounded_by_the_step_limit(
    bench: Bench, profile: str, steps: int, results: int
) -> None:
    (bench.path / "my_agents.py").write_text(FLOOD, encoding="utf-8")
    bench.run(
        "-n", "0", "--tau2-tasks=10", "--tau2-agent=my_agents:Flood", f"--tau2-max-steps={steps}",
        f"--tau2-profile={profile}", "--tau2-run-id=flood",
    )  # fmt: skip
    transcript = bench.read_json("flood", "tau2_retail__10/transcript.json")
    ran = [m for m in transcript["messages"] if m["role"] == "tool"]
    assert (transcript["stop_reason"], transcript["steps"]) == ("max_steps", steps)
    assert len(ran) == results
    if profile == "default":
        assert transcript["detail"] == (
            "20 routed messages; 17 of the last turn's 1000 tool calls run"
        )
