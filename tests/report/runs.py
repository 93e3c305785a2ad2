"""Real run directories for the report's tests, written by the engine itself.

Each scenario runs through :func:`tau2_retail.engine.scenario.run_scenario` with the built-in
customer and an agent of the test's choosing: the built-in ``oracle`` or ``noop``, a ``hostile``
agent whose every text and tool argument is markup (``<script>``, ``onerror``, ``</script>``,
``<!--``), or an ``infra`` agent whose endpoint fails. A scripted judge answers for the tasks with
NL assertions. Artifacts and run files are written by the suite's own functions, so the report reads
exactly what a pytest run leaves.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tau2_retail import codec
from tau2_retail.engine.scenario import Scenario, scenario_id
from tau2_retail.errors import EndpointError
from tau2_retail.models.builtin import builtin_model
from tau2_retail.models.messages import AssistantTurn, Message, ToolCall, Usage
from tau2_retail.results.artifacts import scenario_dir, scenario_files
from tau2_retail.results.records import RunConfiguration
from tau2_retail.results.scenario_folder import put_scenario_files
from tau2_retail.results.summary import write_run_summary
from tau2_retail.testing.fake_models import FunctionModel, scripted_agent
from tau2_retail.testing.offline import OfflineData
from tau2_retail.tools.schemas import tool_schemas

__all__ = ["HOSTILE", "JUDGE_REASON", "MIXED_PLAN", "write_run"]

#: Markup a model might answer: if the page ever parsed it, it would set window.__pwned.
HOSTILE = (
    '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
    "</script><!-- <b>bold?</b> & done"
)
JUDGE_REASON = f"The agent said {HOSTILE}"

#: task id -> the agent of each trial: every kind of agent, a failed and a passed trial of one
#: task; 2 and 19 have NL assertions (the judge answers), 10 passes with noop.
MIXED_PLAN: dict[str, list[str]] = {
    "0": ["oracle", "noop"],
    "2": ["hostile", "oracle"],
    "5": ["noop", "noop"],
    "7": ["infra", "oracle"],
    "10": ["noop", "oracle"],
    "19": ["oracle", "hostile"],
}


def _down(messages: Sequence[Message]) -> AssistantTurn:
    """An endpoint that is down: every call is an infra error."""
    raise EndpointError("connection refused (test endpoint is down)")


def _judge(messages: Sequence[Message]) -> AssistantTurn:
    """Meets the first assertion and fails the others, with markup in reasons."""
    # out-of-range indices are dropped by the judge's normalization
    verdicts = [
        {"index": n, "passed": n == 1, "reason": JUDGE_REASON if n == 1 else "not said"}
        for n in range(1, 6)
    ]
    reply = {"score": 0.5, "reason": f"overall: {HOSTILE}", "nl_assertion_verdicts": verdicts}
    return AssistantTurn(
        content=json.dumps(reply), usage=Usage(n_calls=1, prompt=300, completion=40)
    )


def _hostile_agent() -> FunctionModel:
    usage = Usage(n_calls=1, prompt=200, completion=20)
    lookup = ToolCall(
        id="call_1",
        name="get_order_details",
        arguments=json.dumps({"order_id": HOSTILE}),
    )
    end = ToolCall(id="call_end", name="end_conversation", arguments="{}")
    return scripted_agent(
        "test:hostile",
        [
            AssistantTurn(content=HOSTILE, tool_calls=(lookup,), usage=usage),
            AssistantTurn(content=f"Here is what I found: {HOSTILE}", usage=usage),
        ],
        end=AssistantTurn(content=None, tool_calls=(end,), usage=usage),
    )


def _agent(kind: str, task: Any) -> Any:
    if kind == "hostile":
        return _hostile_agent()
    if kind == "infra":
        return FunctionModel("test:down", _down)
    return builtin_model(f"builtin:{kind}", task, role="agent")


def write_run(
    run_dir: Path, data_dir: Path, plan: Mapping[str, Sequence[str]], **options: Any
) -> dict[str, Any]:
    """Run ``plan`` (task id -> the agent kind of each trial) into ``run_dir``; the summary.

    Every task gets as many trials as its list has kinds (all lists the same length).
    ``options``: ``judge`` (default True) and ``agent_model`` (the name recorded). The work
    happens in a thread of its own: while playwright's sync API is active the calling thread
    has a running event loop, in which the engine's ``asyncio.run`` cannot start.
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(_write_run, run_dir, data_dir, plan, **options).result()


def _write_run(
    run_dir: Path,
    data_dir: Path,
    plan: Mapping[str, Sequence[str]],
    *,
    judge: bool = True,
    agent_model: str = "test:mixed-agent",
) -> dict[str, Any]:
    trials = {len(kinds) for kinds in plan.values()}
    if len(trials) != 1:
        raise ValueError("every task needs the same number of trials")
    n_trials = trials.pop()
    data = OfflineData.load(data_dir)
    tools = tool_schemas()
    configuration = RunConfiguration.of_models(
        agent=agent_model,
        judge="test:judge" if judge else None,
        settings={
            "trials": n_trials,
            "seed": 300,
            "split": "base",
            "max_steps": 200,
            "agent_notes": True,
            "agent_temperature": 0.0,
            "agent_timeout": 120.0,
            "agent_max_retries": 4,
            "agent_extra_body": {"top_k": 20, "vendor_auth": "[redacted]"},
            # a configured user endpoint beside the built-in customer: not shown with it
            "user_base_url": "http://127.0.0.1:9/v1",
            "breaker_failures": 5,
            "breaker_probe_seconds": 30.0,
        },
    )
    metrics = []
    for task_id, kinds in plan.items():
        task = data.tasks[task_id]
        for trial, kind in enumerate(kinds):
            scenario = Scenario(task=task, trial=trial, trials=n_trials, seed=300 + trial)
            outcome = data.run(
                scenario,
                _agent(kind, task),
                FunctionModel("test:judge", _judge) if judge else None,
            )
            put_scenario_files(
                scenario_files(
                    scenario_dir(run_dir, scenario.name, trial, n_trials),
                    outcome,
                    agent_prompt=data.agent_prompt,
                    user_prompt=data.user_prompt(task),
                    tools=tools,
                    config=codec.encode(configuration),
                )
            )
            metrics.append(outcome.metrics)
    expected = [
        scenario_id(task_id, trial, n_trials) for task_id in plan for trial in range(n_trials)
    ]
    summary = write_run_summary(
        run_dir,
        metrics,
        expected=expected,
        trials=n_trials,
        configuration=configuration,
        versions={"python": platform.python_version()},
    )
    return codec.encode(summary)
