"""Agents as Python code in a conversation: turn style through the model path, loop style
through the toolbox, both scored exactly like an endpoint making the same calls."""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import openai
import pytest
from openai import OpenAI

from tau2_retail import codec
from tau2_retail.data.tasks import Task, load_user_guidelines
from tau2_retail.engine.conversation_setup import Limits
from tau2_retail.engine.conversation_state import TOOLBOX_ENDED, TOOLBOX_STOPPED
from tau2_retail.engine.ending import StopReason
from tau2_retail.engine.harness import DataBundle, Harness, Roles, load_bundle
from tau2_retail.engine.scenario import Scenario, ScenarioOutcome, run_scenario
from tau2_retail.errors import AgentInfraError
from tau2_retail.models.agent import AgentIdentity, AgentRunner
from tau2_retail.models.choice import ModelChoice
from tau2_retail.models.config import EndpointConfig
from tau2_retail.models.messages import AssistantTurn, Message, Usage
from tau2_retail.testing.loopback_server import Drop, HttpError
from tau2_retail.testing.object_graph import reachable, type_name
from tau2_retail.testing.scripted_endpoint import ScriptedEndpoint, always
from tau2_retail.tools.store import Store

CUSTOMER = ModelChoice(name="builtin:customer", endpoint=None)
ORACLE = ModelChoice(name="builtin:oracle", endpoint=None)
TASK = "5"  # several gold writes and a transfer-free ending


@pytest.fixture(scope="module")
def bundle(data_dir: Path) -> DataBundle:
    return load_bundle(data_dir)


@pytest.fixture
def endpoint(bundle: DataBundle, data_dir: Path) -> Iterator[ScriptedEndpoint]:
    scripted = ScriptedEndpoint(bundle.tasks, load_user_guidelines(data_dir))
    with scripted.server:
        yield scripted


def _scenario(bundle: DataBundle, task_id: str = TASK) -> Scenario:
    return Scenario(task=bundle.tasks[task_id], trial=0, trials=1, seed=7)


def _run(
    bundle: DataBundle,
    agent: object | None,
    *,
    roles: Roles | None = None,
    task_id: str = TASK,
    limits: Limits | None = None,
) -> ScenarioOutcome:
    async def go() -> ScenarioOutcome:
        async with Harness(
            bundle=bundle,
            roles=roles or Roles(agent=ORACLE, user=CUSTOMER),
            limits=limits or Limits(),
        ) as harness:
            runner = None
            if agent is not None:
                runner = AgentRunner(lambda: agent, AgentIdentity(source="test:agent"))
            return await harness.run(_scenario(bundle, task_id), agent=runner)

    return asyncio.run(go())


class ForwardingTurnAgent:
    """Turn style: forwards to the endpoint with the openai client, returns the completion."""

    def __init__(self, base_url: str) -> None:
        self.client = OpenAI(base_url=base_url, api_key="x", max_retries=0)
        self.seen: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        self.seen.append((json.loads(json.dumps(messages)), json.loads(json.dumps(tools))))
        return self.client.chat.completions.create(
            model="m",
            messages=messages,  # type: ignore[arg-type]
            tools=tools,  # type: ignore[arg-type]
            seed=7,
        )

    def close(self) -> None:
        self.client.close()


class ForwardingLoopAgent:
    """Loop style: its own tool loop against the endpoint, tools through the toolbox."""

    def __init__(self, base_url: str) -> None:
        self.client = OpenAI(base_url=base_url, api_key="x", max_retries=0)

    async def converse(self, messages: list[dict[str, Any]], toolbox: Any) -> str:
        history = list(messages)
        while True:
            completion = await asyncio.to_thread(
                self.client.chat.completions.create,
                model="m",
                messages=history,
                tools=toolbox.schemas,
                seed=7,
            )
            message = completion.choices[0].message
            if not message.tool_calls:
                return message.content or ""
            history.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                result = toolbox.call(call.function.name, call.function.arguments, call_id=call.id)
                history.append({"role": "tool", "tool_call_id": call.id, "content": result})
            if toolbox.ended:
                return ""

    def close(self) -> None:
        self.client.close()


def _endpoint_roles(endpoint: ScriptedEndpoint) -> Roles:
    config = EndpointConfig(model="m", base_url=endpoint.base_url, max_retries=0, seed=7)
    return Roles(agent=ModelChoice(name="m", endpoint=config), user=CUSTOMER)


def test_a_turn_agent_is_sent_exactly_what_an_endpoint_model_is(bundle, endpoint):
    by_endpoint = _run(bundle, None, roles=_endpoint_roles(endpoint))
    sent = [(r.body["messages"], r.body["tools"]) for r in endpoint.requests(TASK)]
    endpoint.reset()
    agent = ForwardingTurnAgent(endpoint.base_url)
    by_agent = _run(bundle, agent)
    assert by_endpoint.metrics.db_state_match
    assert by_agent.metrics.db_state_match
    assert len(sent) == 3
    assert agent.seen == sent


def _comparable(outcome: ScenarioOutcome, *, keep_agent_usage: bool) -> dict[str, Any]:
    """``metrics.json`` without timings (and, for a loop agent, without its own request counts:
    its model calls happen inside ``converse``)."""
    data = codec.encode(outcome.metrics)
    for key in ("duration_seconds", "latency_stats"):
        data.pop(key)
    data["turns"] = [{k: v for k, v in turn.items() if k != "timestamp"} for turn in data["turns"]]
    if not keep_agent_usage:
        data["token_usage"].pop("agent")
        data["requests"].pop("agent")
    return data


def test_endpoint_turn_and_loop_agents_making_the_same_calls_score_identically(bundle, endpoint):
    by_endpoint = _run(bundle, None, roles=_endpoint_roles(endpoint))
    by_turn = _run(bundle, ForwardingTurnAgent(endpoint.base_url))
    by_loop = _run(bundle, ForwardingLoopAgent(endpoint.base_url))
    assert by_endpoint.metrics.is_successful
    assert _comparable(by_turn, keep_agent_usage=True) == _comparable(
        by_endpoint, keep_agent_usage=True
    )
    assert _comparable(by_loop, keep_agent_usage=False) == _comparable(
        by_endpoint, keep_agent_usage=False
    )
    # the loop agent's toolbox calls are in the transcript as the endpoint's tool calls are
    calls = [
        (c.id, c.name, c.arguments) for m in by_loop.conversation.messages for c in m.tool_calls
    ]
    expected = [
        (c.id, c.name, c.arguments) for m in by_endpoint.conversation.messages for c in m.tool_calls
    ]
    assert calls == expected
    assert by_loop.conversation.actions == by_endpoint.conversation.actions


class _PlainUser:
    """A customer that says nothing of the task (so the task text cannot reach the agent
    through the conversation): two fixed lines, then the stop token."""

    name = "plain-user"

    def __init__(self) -> None:
        self.lines = iter(["Hello, I need help.", "Thanks. ###STOP###"])

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        seed: int | None = None,
    ) -> AssistantTurn:
        return AssistantTurn(content=next(self.lines, "###STOP###"), usage=Usage(n_calls=1))


class Recorder:
    """Records everything it is given, in either style; calls one tool in loop style."""

    def __init__(self, style: str) -> None:
        self.received: list[str] = []
        if style == "turn":
            self.respond = self._respond
        else:
            self.converse = self._converse

    def _respond(self, messages, tools):
        self.received.append(json.dumps([messages, tools]))
        return "How can I help?"

    def _converse(self, messages, toolbox):
        self.received.append(json.dumps([messages, toolbox.schemas, repr(toolbox)]))
        self.received.append(json.dumps({n: f.__doc__ for n, f in toolbox.functions.items()}))
        return "How can I help?"


@pytest.mark.parametrize("style", ["turn", "loop"])
def test_no_task_field_reaches_the_agent(bundle, style):
    task = bundle.tasks[TASK]
    agent = Recorder(style)
    profile = bundle.profile

    async def go() -> ScenarioOutcome:
        return await run_scenario(
            _scenario(bundle),
            agent=AgentRunner(lambda: agent, AgentIdentity(source="t:t")),
            user=_PlainUser(),
            judge_model=None,
            gold=bundle.golds[task.id],
            store=Store(bundle.golds.seed),
            profile=profile,
        )

    outcome = asyncio.run(go())
    assert outcome.conversation.stop_reason is StopReason.USER_STOP
    seen = "\n".join(agent.received)
    assert len(agent.received) >= 2
    secrets = [task.reason_for_call, task.task_instructions, task.known_info, task.unknown_info]
    secrets += list(task.nl_assertions) + list(task.communicate_info)
    for action in task.actions:
        secrets.append(json.dumps(action.plain_arguments()))
        secrets += [v for v in action.plain_arguments().values() if isinstance(v, str)]
    # (a fragment that the profile's own prompt or tools contain, e.g. ".", proves nothing)
    public = profile.agent_prompt + json.dumps(profile.tools)
    present = [s for s in secrets if s and s not in public and s in seen]
    assert len([s for s in secrets if s and s not in public]) >= 5
    assert present == []
    # and what it was given is the profile's prompt and tools, the conversation so far
    assert json.dumps(profile.agent_prompt) in seen


# What holds task data, or reaches it: found in what an agent is handed, the agent could
# read the task's instructions, gold actions or expected database.
_FORBIDDEN_MODULES = (
    "tau2_retail.data.tasks",
    "tau2_retail.data.gold",
    "tau2_retail.engine.harness",
    "tau2_retail.engine.scenario",
    "tau2_retail.models.builtin",
    "tau2_retail.plugins",
    "_pytest",
    "pytest_asyncio",
    "asyncio",
)


class GraphWalker:
    """Walks everything reachable from what it is handed, in either style, at its first call
    (from the agent's own thread, as agent code would)."""

    def __init__(self, style: str) -> None:
        self.reached: dict[int, object] = {}
        if style == "turn":
            self.respond = self._respond
        else:
            self.converse = self._converse

    def _walk(self, *handed: object) -> None:
        for value in reachable(handed):
            self.reached[id(value)] = value

    def _respond(self, messages, tools):
        self._walk(messages, tools, self)
        return "How can I help?"

    def _converse(self, messages, toolbox):
        self._walk(messages, toolbox, toolbox.functions, toolbox.schemas, self)
        return "How can I help?"


@pytest.mark.parametrize("style", ["turn", "loop"])
def test_nothing_an_agent_is_handed_reaches_task_data(bundle, style):
    task = bundle.tasks[TASK]
    gold = bundle.golds[task.id]
    user = _PlainUser()
    agent = GraphWalker(style)
    asyncio.run(
        run_scenario(
            _scenario(bundle),
            agent=AgentRunner(lambda: agent, AgentIdentity(source="t:t")),
            user=user,
            judge_model=None,
            gold=gold,
            store=Store(bundle.golds.seed),
            profile=bundle.profile,
        )
    )
    reached = agent.reached
    # the walk went through everything handed: the conversation's store (the scenario's own
    # database) in loop style, the tools' schemas in both
    assert len(reached) > (50_000 if style == "loop" else 500)
    found = [
        type_name(value)
        for value in reached.values()
        if type_name(value).startswith(_FORBIDDEN_MODULES) or isinstance(value, Task)
    ]
    assert found == []
    for forbidden in (task, gold, gold.store, gold.actions, bundle, bundle.golds, user):
        assert id(forbidden) not in reached, type_name(forbidden)
    candidates = [task.task_instructions, task.reason_for_call, task.unknown_info]
    secrets = [text for text in candidates + list(task.nl_assertions) if text and len(text) > 20]
    assert len(secrets) >= 2
    texts = [value for value in reached.values() if isinstance(value, str)]
    assert [s for s in secrets if any(s in text for text in texts)] == []


def test_toolbox_functions_have_the_tools_signatures_and_docstrings(bundle):
    captured: dict[str, Any] = {}

    class Agent:
        def converse(self, messages, toolbox):
            captured["functions"] = dict(toolbox.functions)
            captured["first"] = toolbox.functions["get_order_details"](order_id="#W0000000")
            captured["ended_before"] = toolbox.ended
            captured["end"] = toolbox.functions["end_conversation"]()
            captured["after"] = toolbox.call("list_all_product_types")
            captured["ended_after"] = toolbox.ended
            return ""

    outcome = _run(bundle, Agent())
    functions = captured["functions"]
    assert set(functions) == {t["function"]["name"] for t in bundle.profile.tools}
    signature = inspect.signature(functions["get_order_details"])
    assert list(signature.parameters) == ["order_id"]
    assert signature.parameters["order_id"].annotation is str
    assert "Args:\n    order_id:" in functions["get_order_details"].__doc__
    assert captured["first"] == "Error: Order not found"
    assert (captured["ended_before"], captured["ended_after"]) == (False, True)
    assert captured["after"].startswith("Error: the conversation has ended")
    # the ending tool ended the conversation, and every call was recorded as a model's is
    assert outcome.conversation.stop_reason is StopReason.AGENT_EXIT
    recorded = [(c.name, c.arguments) for m in outcome.conversation.messages for c in m.tool_calls]
    assert recorded == [
        ("get_order_details", '{"order_id": "#W0000000"}'),
        ("end_conversation", "{}"),
    ]
    assert outcome.conversation.tool_errors == 1


def test_a_loop_agent_is_stopped_by_the_error_limit(bundle):
    answers: list[str] = []

    class Agent:
        def converse(self, messages, toolbox):
            for _ in range(5):
                answers.append(toolbox.call("no_such_tool", {}))
            return "sorry"

    outcome = _run(bundle, Agent(), limits=Limits(max_errors=3))
    assert outcome.conversation.stop_reason is StopReason.TOO_MANY_ERRORS
    assert answers[:3] == ["Error: Tool 'no_such_tool' not found."] * 3
    assert answers[3:] == [TOOLBOX_STOPPED] * 2
    assert outcome.conversation.tool_errors == 3


def _wait_for(answers: list[str]) -> None:
    """Until a thread the agent left behind has made its call (5 s at most)."""
    for _ in range(100):
        if answers:
            return
        time.sleep(0.05)


def test_a_call_after_the_ending_tool_says_the_conversation_ended(bundle):
    """A thread of the agent calling after ``end_conversation`` (the toolbox closed since) was
    told "a limit was reached": no limit was."""
    released = threading.Event()
    after: list[str] = []

    class Agent:
        def converse(self, messages, toolbox):
            toolbox.call("end_conversation", {})

            def late() -> None:
                released.wait(10)
                after.append(toolbox.call("get_order_details", {"order_id": "#W0000000"}))

            threading.Thread(target=late, daemon=True).start()
            return "bye"

    outcome = _run(bundle, Agent())
    assert outcome.conversation.stop_reason is StopReason.AGENT_EXIT
    released.set()
    _wait_for(after)
    assert after == [TOOLBOX_ENDED]


def test_a_hung_sync_agent_is_bounded_by_the_deadline_and_cannot_write_afterwards(bundle):
    released = threading.Event()
    after: list[str] = []

    class Agent:
        def converse(self, messages, toolbox):
            released.wait(10)
            after.append(toolbox.call("cancel_pending_order", {"order_id": "#W0000000"}))
            return "late"

    started = time.monotonic()
    outcome = _run(bundle, Agent(), limits=Limits(max_duration_seconds=0.5))
    assert time.monotonic() - started < 10
    assert outcome.conversation.stop_reason is StopReason.TIMEOUT
    released.set()
    _wait_for(after)
    assert after == [TOOLBOX_STOPPED]


@pytest.mark.parametrize("where", ["factory", "respond", "converse"])
def test_an_exception_of_the_agent_ends_its_scenario_as_agent_error(bundle, where):
    class Boom:
        if where == "respond":

            def respond(self, messages, tools):
                raise ValueError("bad prompt assembly")

        else:

            def converse(self, messages, toolbox):
                raise ValueError("bad prompt assembly")

    def factory() -> object:
        if where == "factory":
            raise ValueError("bad prompt assembly")
        return Boom()

    async def go() -> ScenarioOutcome:
        async with Harness(bundle=bundle, roles=Roles(agent=ORACLE, user=CUSTOMER)) as harness:
            runner = AgentRunner(factory, AgentIdentity(source="t:t"))
            return await harness.run(_scenario(bundle), agent=runner)

    outcome = asyncio.run(go())
    conversation = outcome.conversation
    assert conversation.stop_reason is StopReason.AGENT_ERROR
    assert "raised ValueError: bad prompt assembly" in conversation.detail
    assert 'raise ValueError("bad prompt assembly")' in conversation.agent_traceback
    assert not outcome.is_infra_error
    assert any("The agent raised:\nTraceback" in f for f in outcome.signal_failures())


@pytest.mark.parametrize("style", ["turn", "loop"])
def test_agent_infra_error_is_an_infra_error_of_the_agent_role(bundle, style):
    class Down:
        def respond(self, messages, tools):
            raise AgentInfraError("our retrieval service is down")

    class DownLoop:
        async def converse(self, messages, toolbox):
            raise AgentInfraError("our retrieval service is down")

    outcome = _run(bundle, Down() if style == "turn" else DownLoop())
    assert outcome.conversation.stop_reason is StopReason.INFRA_ERROR
    assert outcome.is_infra_error
    assert outcome.metrics.infra_role == "agent"
    assert "our retrieval service is down" in outcome.infra_detail


class ModelAPIError(RuntimeError):
    """An agent framework's own class for a failed model request, raised from the client's
    error (pydantic-ai's shape: ``ModelConnectionError`` from ``openai.APIConnectionError``)."""


class FrameworkTurnAgent(ForwardingTurnAgent):
    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        try:
            return super().respond(messages, tools)
        except openai.APIError as error:
            raise ModelAPIError(f"model request failed: {error}") from error


class FrameworkLoopAgent(ForwardingLoopAgent):
    async def converse(self, messages: list[dict[str, Any]], toolbox: Any) -> str:
        try:
            return await super().converse(messages, toolbox)
        except openai.APIError as error:
            raise ModelAPIError(f"model request failed: {error}") from error


FRAMEWORK_AGENTS = {"turn": FrameworkTurnAgent, "loop": FrameworkLoopAgent}


@pytest.mark.parametrize("fault", [Drop(), HttpError.server_error(), HttpError(status=429)])
@pytest.mark.parametrize("style", list(FRAMEWORK_AGENTS))
def test_an_outage_behind_an_agent_framework_is_an_infra_error_of_the_agent_role(
    bundle, endpoint, style, fault
):
    endpoint.default_fault = always(fault)
    agent = FRAMEWORK_AGENTS[style](endpoint.base_url)
    outcome = _run(bundle, agent)
    assert outcome.conversation.stop_reason is StopReason.INFRA_ERROR
    assert outcome.is_infra_error
    assert outcome.metrics.infra_role == "agent"
    assert "raised ModelAPIError (the agent's backend failed: openai." in outcome.infra_detail


@pytest.mark.parametrize("style", list(FRAMEWORK_AGENTS))
def test_a_request_refused_behind_an_agent_framework_is_the_agents_failure(bundle, endpoint, style):
    # a wrong key or model name: the agent's configuration, which waiting does not heal
    endpoint.default_fault = always(HttpError(status=401, body="invalid api key"))
    agent = FRAMEWORK_AGENTS[style](endpoint.base_url)
    outcome = _run(bundle, agent)
    assert outcome.conversation.stop_reason is StopReason.AGENT_ERROR
    assert not outcome.is_infra_error
    assert "raised ModelAPIError: model request failed" in outcome.conversation.detail


def test_bad_output_of_a_turn_agent_is_handled_as_model_output(bundle):
    class Sloppy:
        def __init__(self) -> None:
            self.turns = iter(
                [
                    {"tool_calls": [{"id": "a", "function": {"name": "nope", "arguments": "{}"}}]},
                    {
                        "tool_calls": [
                            {"id": "b", "function": {"name": "calculate", "arguments": "{"}}
                        ]
                    },
                    {"content": ""},
                    {"content": None},
                ]
            )

        def respond(self, messages, tools):
            return next(self.turns)

    outcome = _run(bundle, Sloppy())
    results = [m.content for m in outcome.conversation.messages if m.role.value == "tool"]
    assert results[0] == "Error: Tool 'nope' not found."
    assert results[1].startswith("Error: ")
    assert outcome.conversation.stop_reason is StopReason.AGENT_ERROR
    assert outcome.conversation.detail == "the agent returned an empty message twice"
