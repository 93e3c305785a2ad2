"""Agents as Python code: what the in-process path costs, and whether sync agents overlap.

Run: ``TAU2_DATA_DIR=... python benchmarks/bench_agent.py [--scenarios N] [--json OUT]``.
Prints two tables (timings, never assertions):

1. CPU per agent turn over all 114 scenarios (gold script, built-in customer), one process:
   - ``model path``: a ``ChatModel`` in the process answering with the gold script (the
     conversation's own cost per turn: what an endpoint turn costs without the HTTP client);
   - ``turn agent, sync`` / ``async``: the same script as a ``respond`` agent (wire encoding,
     a thread per sync call, the reply read as an endpoint's);
   - ``loop agent``: the same calls through the toolbox;
   - ``endpoint (loopback HTTP)``: the OpenAI client against the loopback server playing the
     same script (server thread included in the process CPU).
   The in-process agent's cost over the endpoint path is its row minus the model path's.
   Then the hop alone: one call of a ``respond`` that returns at once, sync and async, through
   the scenario's agent thread (its own event loop), one call after the other.
2. A sync agent that sleeps 1 s per turn, all scenarios at once (``--tau2-concurrency 114``):
   in the engine (``asyncio.gather``), and through pytest with ``--tau2-agent`` (minus the same
   run with an agent that does not sleep: start-up, collection and reporting), against the
   ideal (the most agent turns of one scenario x 1 s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _checkout  # noqa: F401  (this checkout's tau2_retail, or a clear stop)

from tau2_retail.data.files import resolve_data_dir
from tau2_retail.data.tasks import load_user_guidelines
from tau2_retail.engine.harness import Harness, Roles, load_bundle
from tau2_retail.engine.scenario import Scenario, ScenarioOutcome
from tau2_retail.models.agent import AgentIdentity, AgentRunner
from tau2_retail.models.choice import ModelChoice
from tau2_retail.models.config import EndpointConfig
from tau2_retail.models.messages import AssistantTurn, Message, ToolCall, Usage
from tau2_retail.models.wire import encode_messages
from tau2_retail.testing.fake_models import FunctionModel
from tau2_retail.testing.loopback_server import Completion
from tau2_retail.testing.scripted_endpoint import Request, ScriptedEndpoint

CUSTOMER = ModelChoice(name="builtin:customer", endpoint=None)
ORACLE = ModelChoice(name="builtin:oracle", endpoint=None)


def _script(endpoint: ScriptedEndpoint, task_id: str, wire: list[dict[str, Any]]) -> dict[str, Any]:
    """The gold script's next assistant message for ``wire`` messages, as a wire dict."""
    reply = endpoint._agent(  # the script itself, without HTTP
        Request(role="agent", task_id=task_id, seed=None, attempt=0, body={"messages": wire}, at=0)
    )
    assert isinstance(reply, Completion)
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.tool_calls
        ]
    return message


def script_model(endpoint: ScriptedEndpoint, task_id: str) -> FunctionModel:
    """The model path: a ChatModel answering with the script (encodes as the client does)."""

    def answer(messages: Sequence[Message]) -> AssistantTurn:
        message = _script(endpoint, task_id, encode_messages(messages))
        calls = tuple(
            ToolCall(id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"])
            for c in message.get("tool_calls", ())
        )
        return AssistantTurn(content=message["content"], tool_calls=calls, usage=Usage(n_calls=1))

    return FunctionModel("script", answer)


class SyncTurn:
    def __init__(self, endpoint: ScriptedEndpoint, task_id: str, sleep: float = 0.0) -> None:
        self.endpoint, self.task_id, self.sleep = endpoint, task_id, sleep

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if self.sleep:
            time.sleep(self.sleep)
        return _script(self.endpoint, self.task_id, messages)


class AsyncTurn(SyncTurn):
    async def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:  # type: ignore[override]
        return _script(self.endpoint, self.task_id, messages)


class Loop(SyncTurn):
    async def converse(self, messages: list[dict[str, Any]], toolbox: Any) -> str:
        history = list(messages)
        while True:
            message = _script(self.endpoint, self.task_id, history)
            if not message.get("tool_calls"):
                return str(message["content"])
            history.append(message)
            for call in message["tool_calls"]:
                result = toolbox.call(
                    call["function"]["name"], call["function"]["arguments"], call_id=call["id"]
                )
                history.append({"role": "tool", "tool_call_id": call["id"], "content": result})
            if toolbox.ended:
                return ""


async def _run_all(
    bundle: Any, task_ids: Sequence[str], make: Any, roles: Roles | None = None
) -> list[ScenarioOutcome]:
    async with Harness(bundle=bundle, roles=roles or Roles(agent=ORACLE, user=CUSTOMER)) as h:

        async def one(task_id: str) -> ScenarioOutcome:
            agent = make(task_id)
            scenario = Scenario(task=bundle.tasks[task_id], trial=0, trials=1, seed=1)
            if isinstance(agent, FunctionModel):
                from tau2_retail.engine.scenario import run_scenario
                from tau2_retail.models.builtin import builtin_model
                from tau2_retail.tools.store import Store

                return await run_scenario(
                    scenario,
                    agent=agent,
                    user=builtin_model("builtin:customer", scenario.task, role="user"),
                    judge_model=None,
                    gold=bundle.golds[task_id],
                    store=Store(bundle.golds.seed),
                    profile=bundle.profile,
                )
            runner = (
                None if agent is None else AgentRunner(lambda: agent, AgentIdentity(source="b"))
            )
            return await h.run(scenario, agent=runner)

        return await asyncio.gather(*(one(t) for t in task_ids))


HOP_CALLS = 2000


class _NoopSync:
    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        return "ok"


class _NoopAsync:
    async def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        return "ok"


def _hop_row(label: str, kind: type) -> dict[str, Any]:
    """CPU and wall time of one agent call through its thread, without the conversation."""

    async def calls() -> tuple[float, float]:
        runner = AgentRunner(kind, AgentIdentity(source="b"))
        await runner.start()
        await runner.complete([], tools=[])  # the thread (and its loop) made
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(HOP_CALLS):
            await runner.complete([], tools=[])
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        await runner.close()
        return cpu, wall

    cpu, wall = asyncio.run(calls())
    return {
        "path": label,
        "calls": HOP_CALLS,
        "cpu_us_per_call": 1e6 * cpu / HOP_CALLS,
        "wall_us_per_call": 1e6 * wall / HOP_CALLS,
    }


def _cpu_row(
    label: str, bundle: Any, task_ids: Sequence[str], make: Any, roles: Roles | None = None
) -> dict[str, Any]:
    asyncio.run(_run_all(bundle, task_ids, make, roles))  # warm the caches (gold replays)
    cpu, wall = time.process_time(), time.perf_counter()
    outcomes = asyncio.run(_run_all(bundle, task_ids, make, roles))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    turns = sum(o.metrics.token_usage["agent"].n_calls for o in outcomes)
    ok = sum(o.metrics.db_state_match and o.metrics.clean_exit for o in outcomes)
    return {
        "path": label,
        "scenarios_ok": ok,
        "agent_turns": turns,
        "cpu_s": cpu,
        "cpu_ms_per_turn": 1000 * cpu / max(turns, 1),
        "wall_s": wall,
    }


AGENT_MODULE = """\
import time
from tau2_retail.data.files import resolve_data_dir
from tau2_retail.data.tasks import load_tasks, load_user_guidelines
from tau2_retail.testing.scripted_endpoint import ScriptedEndpoint
import bench_agent_script as script

SLEEP = {sleep}


class Sleeper:
    def respond(self, messages, tools):
        time.sleep(SLEEP)
        return script.next_turn(messages)
"""

SCRIPT_MODULE = """\
import json
from tau2_retail.data.files import resolve_data_dir
from tau2_retail.data.tasks import load_tasks
from tau2_retail.models.builtin import ScriptedCustomer

TASKS = load_tasks(resolve_data_dir())
OPENINGS = {ScriptedCustomer(t).opening(): t for t in TASKS.values()}


def next_turn(messages):
    task = OPENINGS[next(m["content"] for m in messages if m["role"] == "user")]
    gold = any(str(c.get("id", "")).startswith("gold-") for m in messages
               for c in m.get("tool_calls") or [])
    if task.actions and not gold:
        return {"tool_calls": [{"id": f"gold-{i}", "type": "function", "function": {
            "name": a.name, "arguments": json.dumps(a.plain_arguments())}}
            for i, a in enumerate(task.actions)]}
    if "###STOP###" in (messages[-1].get("content") or "") and messages[-1]["role"] == "user":
        return {"tool_calls": [{"id": "end", "type": "function",
                                "function": {"name": "end_conversation", "arguments": "{}"}}]}
    return "I have taken care of your request. Is there anything else I can help you with?"
"""


def _pytest_span(folder: Path, sleep: float, n: int) -> tuple[float, float, int]:
    """Wall time of a pytest run with a sync agent sleeping ``sleep`` s per turn, and the span
    of its conversations: first start to last end, from the scenarios' ``transcript.json``."""
    name = f"sleep_{int(sleep * 1000)}"
    (folder / f"{name}.py").write_text(AGENT_MODULE.format(sleep=sleep))
    started = time.perf_counter()
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--pyargs",
            "tests_tau2_retail",
            "-q",
            "-n",
            "0",
            "-p",
            "no:randomly",
            f"--tau2-concurrency={n}",
            f"--tau2-agent={name}:Sleeper",
            "--tau2-user-model=builtin:customer",
            f"--tau2-output-dir={folder / 'runs'}",
            f"--tau2-run-id={name}",
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(folder)},
    )
    wall = time.perf_counter() - started
    spans = []
    for transcript in (folder / "runs" / name).glob("*/transcript.json"):
        data = json.loads(transcript.read_text())
        spans.append((data["started_at"], data["started_at"] + data["duration_seconds"]))
    span = max(end for _, end in spans) - min(start for start, _ in spans) if spans else 0.0
    return wall, span, process.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--skip-pytest", action="store_true", help="engine figures only")
    args = parser.parse_args()
    data_dir = resolve_data_dir()
    bundle = load_bundle(data_dir)
    endpoint = ScriptedEndpoint(bundle.tasks, load_user_guidelines(data_dir))
    task_ids = list(bundle.tasks)
    with endpoint.server:
        rows = _cpu_rows(endpoint, bundle, task_ids)
    _print_cpu(rows)

    hops = [_hop_row("sync respond", _NoopSync), _hop_row("async respond", _NoopAsync)]
    print()
    print(f"One agent call through its thread ({HOP_CALLS} calls, one after the other)")
    print(f"{'agent':45} {'CPU us/call':>12} {'wall us/call':>13}")
    for hop in hops:
        print(f"{hop['path']:45} {hop['cpu_us_per_call']:>12.1f} {hop['wall_us_per_call']:>13.1f}")

    overlap = _overlap_rows(endpoint, bundle, task_ids, skip_pytest=args.skip_pytest)
    print()
    print(f"A sync agent sleeping 1 s per turn, {len(task_ids)} scenarios at once")
    print(f"{'where':75} {'wall s':>7} {'ideal s':>8} {'ratio':>6}")
    for row in overlap:
        print(
            f"{row['where']:75} {row['wall_s']:>7.2f} {row['ideal_s']:>8.2f} "
            f"{row['wall_s'] / row['ideal_s']:>6.2f}"
        )
    if args.json:
        args.json.write_text(json.dumps({"cpu": rows, "hops": hops, "overlap": overlap}, indent=2))
    return 0


def _cpu_rows(
    endpoint: ScriptedEndpoint, bundle: Any, task_ids: Sequence[str]
) -> list[dict[str, Any]]:
    """1. CPU per agent turn along each path, all scenarios in flight (the server running)."""
    paths: list[tuple[str, Any]] = [
        ("model path (in-process ChatModel)", lambda t: script_model(endpoint, t)),
        ("turn agent, sync (its scenario's thread)", lambda t: SyncTurn(endpoint, t)),
        ("turn agent, async", lambda t: AsyncTurn(endpoint, t)),
        ("loop agent (toolbox)", lambda t: Loop(endpoint, t)),
    ]
    rows = [_cpu_row(label, bundle, task_ids, make) for label, make in paths]
    config = EndpointConfig(model="m", base_url=endpoint.base_url, max_retries=0)
    roles = Roles(agent=ModelChoice(name="m", endpoint=config), user=CUSTOMER)
    rows.append(
        _cpu_row(
            "endpoint (loopback HTTP, server in-process)", bundle, task_ids, lambda t: None, roles
        )
    )
    return rows


def _print_cpu(rows: list[dict[str, Any]]) -> None:
    base = rows[0]["cpu_ms_per_turn"]
    print("CPU per agent turn, all scenarios in flight in one process")
    print(f"{'path':45} {'ok':>4} {'turns':>6} {'CPU s':>7} {'ms/turn':>8} {'over model path':>16}")
    for row in rows:
        print(
            f"{row['path']:45} {row['scenarios_ok']:>4} {row['agent_turns']:>6} "
            f"{row['cpu_s']:>7.2f} {row['cpu_ms_per_turn']:>8.3f} "
            f"{row['cpu_ms_per_turn'] - base:>+16.3f}"
        )


def _overlap_rows(
    endpoint: ScriptedEndpoint, bundle: Any, task_ids: Sequence[str], *, skip_pytest: bool
) -> list[dict[str, Any]]:
    """2. Sync agents sleeping 1 s per turn, all at once: in the engine, then through pytest."""
    with endpoint.server:
        started = time.perf_counter()
        outcomes = asyncio.run(
            _run_all(bundle, task_ids, lambda t: SyncTurn(endpoint, t, sleep=1.0))
        )
        wall = time.perf_counter() - started
    ideal = max(o.metrics.token_usage["agent"].n_calls for o in outcomes) * 1.0
    ok = sum(o.metrics.db_state_match and o.metrics.clean_exit for o in outcomes)
    overlap: list[dict[str, Any]] = [
        {"where": "engine (asyncio.gather)", "ok": ok, "wall_s": wall, "ideal_s": ideal}
    ]
    if not skip_pytest:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "bench_agent_script.py").write_text(SCRIPT_MODULE)
            wall, span, code = _pytest_span(folder, 1.0, len(task_ids))
        overlap.append(
            {
                "where": f"pytest --tau2-concurrency {len(task_ids)}, conversations' span "
                f"(exit {code}; whole run {wall:.1f} s)",
                "ok": None,
                "wall_s": span,
                "ideal_s": ideal,
            }
        )
    return overlap


if __name__ == "__main__":
    raise SystemExit(main())
