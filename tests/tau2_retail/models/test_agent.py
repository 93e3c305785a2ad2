"""The agent contract: finding a factory by import string, and reading what an agent returns."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import tau2_retail
from tau2_retail.errors import AgentInfraError, ConfigError, EndpointError
from tau2_retail.models.agent import (
    AgentFailed,
    AgentIdentity,
    AgentLedger,
    AgentRunner,
    agent_style,
)
from tau2_retail.models.agent_import import load_agent_factory, parse_agent_spec
from tau2_retail.models.messages import Message, Role

MODULE = """\
class Turn:
    name = "turny"
    version = "2.1"

    def respond(self, messages, tools):
        return "hi"


class Loop:
    async def converse(self, messages, toolbox):
        return "done"


class Nothing:
    pass


def make_turn():
    return Turn()


def make_nothing():
    return Nothing()


def broken_factory():
    raise RuntimeError("no key")


def exiting_factory():
    raise SystemExit(9)


class BadName:
    @property
    def name(self):
        raise RuntimeError("name boom")

    def respond(self, messages, tools):
        return "hi"


def make_bad_name():
    return BadName()


class NeedsClient(Turn):
    def __init__(self, client, *extra, model="m", retries, **options):
        self.client = client


class DefaultsOnly(Turn):
    def __init__(self, client=None, *, model="m"):
        self.client = client


instance = Turn()
number = 3
"""


@pytest.fixture
def agent_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "my_agents_mod.py").write_text(MODULE, encoding="utf-8")
    (tmp_path / "broken_agents_mod.py").write_text("import not_a_module_x\n", encoding="utf-8")
    # a script's guard that exits when imported (not run as __main__)
    (tmp_path / "exiting_agents_mod.py").write_text("raise SystemExit('run me')\n", "utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_agents_mod"
    for name in ("my_agents_mod", "broken_agents_mod", "exiting_agents_mod"):
        sys.modules.pop(name, None)


def test_the_public_surface_is_reexported() -> None:
    assert set(tau2_retail.__all__) == {"AgentInfraError", "LoopAgent", "Toolbox", "TurnAgent"}
    assert tau2_retail.AgentInfraError is AgentInfraError
    # an outage of the agent's backend is an endpoint error: excluded and resumable
    assert issubclass(AgentInfraError, EndpointError)


@pytest.mark.parametrize(
    ("attribute", "style", "name", "version"),
    [
        ("Turn", "turn", "turny", "2.1"),
        ("make_turn", "turn", "turny", "2.1"),
        ("Loop", "loop", None, None),
        ("DefaultsOnly", "turn", "turny", "2.1"),
    ],
)
def test_a_factory_is_found_with_the_identity_of_its_agent(
    agent_module: str, attribute: str, style: str, name: str | None, version: str | None
) -> None:
    factory, identity = load_agent_factory(f"{agent_module}:{attribute}")
    assert identity == AgentIdentity(
        source=f"{agent_module}:{attribute}", name=name, version=version
    )
    assert agent_style(factory()) == style


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            "broken_agents_mod:x",
            "cannot import 'broken_agents_mod': ModuleNotFoundError: "
            "No module named 'not_a_module_x'",
        ),
        ("my_agents_mod:missing", "module 'my_agents_mod' has no attribute 'missing'"),
        (
            "my_agents_mod:Nothing",
            "class Nothing has neither respond(messages, tools) nor converse",
        ),
        ("my_agents_mod:make_nothing", "the factory's Nothing object has neither respond"),
        ("my_agents_mod:instance", "names an agent object, not a factory"),
        ("my_agents_mod:number", "int object is not callable"),
        # a class was only inspected: every scenario ran and failed as agent_error
        (
            "my_agents_mod:NeedsClient",
            "class NeedsClient needs arguments (client, retries), but each scenario's agent is "
            "made with none; give them defaults, or name a function that makes the agent "
            "(e.g. def make_agent(): return NeedsClient(...))",
        ),
        ("my_agents_mod:broken_factory", "the factory raised RuntimeError: no key"),
        # SystemExit was pytest's INTERNALERROR (exit 3), and the command exited with 9
        ("my_agents_mod:exiting_factory", "the factory raised SystemExit: 9"),
        ("exiting_agents_mod:Agent", "cannot import 'exiting_agents_mod': SystemExit: run me"),
    ],
)
def test_a_bad_import_string_says_what_is_wrong(
    agent_module: str, spec: str, expected: str
) -> None:
    with pytest.raises(
        ConfigError,
    ) as raised:
        load_agent_factory(spec)
    assert expected in str(raised.value)
    assert str(raised.value).startswith(spec)


def test_a_missing_dependency_of_the_agent_gets_no_install_hint(agent_module: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_agent_factory("broken_agents_mod:x")
    assert str(raised.value).endswith("No module named 'not_a_module_x'")


@pytest.mark.parametrize(
    ("layout", "hint"),
    [
        (
            "src/acme_agent_x9/__init__.py",
            "it is in src/acme_agent_x9, but src is not on sys.path: install your project "
            "(pip install -e .) or add src to pytest's pythonpath setting",
        ),
        (
            "acme_agent_x9/__init__.py",
            "it is in {where}, which is not on sys.path: run python -m pytest from there, "
            "install your project (pip install -e .) or add . to pytest's pythonpath setting",
        ),
        (
            "elsewhere/acme_agent_x9.py",
            "install the agent's package into this Python (pip install -e .), add the folder "
            "holding it to pytest's pythonpath setting, or run python -m pytest from that folder",
        ),
    ],
)
def test_the_agents_own_package_not_importable_says_how_to_make_it_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str, hint: str
) -> None:
    """``cannot import 'acme_agent.bot': ModuleNotFoundError`` said nothing of the fix."""
    (tmp_path / layout).parent.mkdir(parents=True)
    (tmp_path / layout).write_text("", encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # not on sys.path: pytest's own import mode keeps it off

    with pytest.raises(ConfigError) as raised:
        load_agent_factory("acme_agent_x9.bot:make_agent")

    assert str(raised.value) == (
        "acme_agent_x9.bot:make_agent: cannot import 'acme_agent_x9.bot': ModuleNotFoundError: "
        f"No module named 'acme_agent_x9'; {hint.format(where=tmp_path)}"
    )


def test_an_agent_whose_name_raises_is_named_by_its_source_alone(agent_module: str) -> None:
    """A ``name`` property that raises (or a proxy's ``__getattr__``) stopped pytest with an
    INTERNALERROR at start-up, and lost a fixture agent's scenario as a harness error."""
    _, identity = load_agent_factory(f"{agent_module}:make_bad_name")
    assert identity == AgentIdentity(source=f"{agent_module}:make_bad_name")


class _ModelRaises:
    name = "bot"

    @property
    def model(self) -> str:
        raise RuntimeError("model boom")


@pytest.mark.parametrize(
    ("model", "expected"),
    [("gpt-4.1-mini", "gpt-4.1-mini"), ("", None), (4, None), (object(), None)],
    ids=["str", "empty", "int", "model-object"],
)
def test_an_agent_declares_the_model_that_prices_it_as_a_str(model: object, expected) -> None:
    """A framework's model object (pydantic-ai's ``Model``) is not a model id: ignored."""
    identity = AgentIdentity.of("pkg:Bot", SimpleNamespace(name="bot", version="2", model=model))
    assert identity.model == expected
    shown = "pkg:Bot (bot 2, model gpt-4.1-mini)" if expected else "pkg:Bot (bot 2)"
    assert identity.describe() == shown
    alone = AgentIdentity.of("pkg:Bot", SimpleNamespace(model=model)).describe()
    assert alone == ("pkg:Bot (model gpt-4.1-mini)" if expected else "pkg:Bot")


def test_an_agent_whose_model_raises_is_named_without_one() -> None:
    assert AgentIdentity.of("pkg:Bot", _ModelRaises()) == AgentIdentity(
        source="pkg:Bot", name="bot"
    )


@pytest.mark.parametrize("spec", ["nocolon", "a.b:", ":f", "a b:c", "a:b-c"])
def test_an_import_string_needs_module_and_attribute(spec: str) -> None:
    with pytest.raises(ConfigError, match=r"package\.module:factory"):
        parse_agent_spec(spec)


class _Message:
    """Like an ``openai`` message: ``model_dump()`` gives the wire dict."""

    def __init__(self, data: dict[str, object]) -> None:
        self.data = data

    def model_dump(self) -> dict[str, object]:
        return self.data


def _turn(reply: object) -> tuple[str | None, list[tuple[str, str, str]], int]:
    class Agent:
        def respond(self, messages, tools):
            return reply

    runner = AgentRunner(Agent, AgentIdentity(source="t:t"))
    asyncio.run(runner.start())
    turn = asyncio.run(runner.complete([Message(role=Role.USER, content="hi")], tools=[]))
    return (
        turn.content,
        [(c.id, c.name, c.arguments) for c in turn.tool_calls],
        turn.usage.prompt,
    )


CALL = {"id": "c1", "type": "function", "function": {"name": "calculate", "arguments": ""}}


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("hello", ("hello", [], 0)),
        (
            {"role": "assistant", "content": "x", "tool_calls": [CALL]},
            ("x", [("c1", "calculate", "{}")], 0),
        ),
        (
            _Message({"content": None, "tool_calls": [{**CALL, "id": None}]}),
            (None, [("call_0", "calculate", "{}")], 0),
        ),
        (
            {
                "choices": [{"message": {"content": "y"}}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 2},
            },
            ("y", [], 7),
        ),
        ({"content": "a\ud83d"}, ("a\ufffd", [], 0)),
        # an agent's own count of 5,000 digits lost its scenario (it could not be written)
        (
            {"choices": [{"message": {"content": "z"}}], "usage": {"prompt_tokens": 10**5000}},
            ("z", [], 2**53 - 1),
        ),
    ],
)
def test_a_turn_is_read_as_an_endpoint_reply_is(reply: object, expected: object) -> None:
    assert _turn(reply) == expected


@pytest.mark.parametrize("reply", [42, {"content": 3}, {"tool_calls": [{"function": "f"}]}])
def test_an_unreadable_turn_is_the_agents_failure(reply: object) -> None:
    with pytest.raises(AgentFailed, match="not an assistant turn"):
        _turn(reply)


@pytest.mark.parametrize(
    ("reply", "detail"),
    [
        (
            {"role": "user", "content": "hi"},
            "the agent returned a dict that is not an assistant turn (its role is 'user')",
        ),
        (
            {"foo": "bar"},
            "the agent returned a dict that is not an assistant turn (it has none of role, "
            "content and tool_calls)",
        ),
        ({}, "the agent returned a dict that is not an assistant turn (it has none of role, "),
        (7, "the agent returned an int that is not an assistant turn (the message is not an "),
    ],
)
def test_a_dict_that_is_no_assistant_message_is_named_so(reply: object, detail: str) -> None:
    # not an empty turn (asked again, then "empty message twice"): the agent's mistake, said
    with pytest.raises(AgentFailed) as raised:
        _turn(reply)
    assert raised.value.detail.startswith(detail), raised.value.detail


def test_a_reply_holding_itself_is_not_a_turn_not_an_exception_of_respond() -> None:
    """Reported as "respond() raised RecursionError", though respond returned normally."""
    reply: dict[str, object] = {"content": "x"}
    reply["tool_calls"] = [reply]
    with pytest.raises(AgentFailed) as raised:
        _turn(reply)
    assert "not an assistant turn (it holds itself, or is nested too deeply)" in str(
        raised.value.detail
    )
    assert "RecursionError" not in raised.value.detail


def test_a_message_dict_without_a_role_or_with_role_none_is_the_assistants() -> None:
    assert _turn({"content": "x"})[0] == "x"
    assert _turn({"role": None, "content": "y"})[0] == "y"


@pytest.mark.parametrize("reply", [None, "", {"content": None}, {"role": "assistant"}])
def test_an_empty_turn_is_still_empty(reply: object) -> None:
    content, calls, _ = _turn(reply)
    assert not content
    assert calls == []


def test_an_exception_of_the_agent_keeps_its_traceback() -> None:
    class Agent:
        async def respond(self, messages, tools):
            raise KeyError("missing thing")

    runner = AgentRunner(Agent, AgentIdentity(source="t:t"))
    asyncio.run(runner.start())
    with pytest.raises(AgentFailed) as raised:
        asyncio.run(runner.complete([], tools=[]))
    assert raised.value.detail == "respond() raised KeyError: 'missing thing'"
    assert "Traceback" in raised.value.traceback_text
    assert 'raise KeyError("missing thing")' in raised.value.traceback_text


def test_agent_infra_error_passes_through() -> None:
    class Agent:
        def respond(self, messages, tools):
            raise AgentInfraError("backend down")

    runner = AgentRunner(Agent, AgentIdentity(source="t:t"))
    asyncio.run(runner.start())
    with pytest.raises(AgentInfraError, match="backend down"):
        asyncio.run(runner.complete([], tools=[]))


def test_each_agent_runs_off_the_event_loop_in_a_thread_of_its_own() -> None:
    import threading

    threads: dict[str, set[int]] = {}

    class Agent:
        def respond(self, messages, tools):
            assert threading.current_thread().name == "tau2-agent t:t"
            threads.setdefault(type(self).__name__, set()).add(threading.get_ident())
            return "ok"

    class AsyncAgent(Agent):
        async def respond(self, messages, tools):  # type: ignore[override]
            return super().respond(messages, tools)

    async def two() -> None:
        runners = [AgentRunner(kind, AgentIdentity(source="t:t")) for kind in (Agent, AsyncAgent)]
        for runner in runners:
            await runner.start()
        for _ in range(2):
            await asyncio.gather(*(r.complete([], tools=[]) for r in runners))
        for runner in runners:
            assert await runner.close() == ""

    asyncio.run(two())
    # one thread per agent, kept across its calls (its async clients stay on one loop)
    assert [len(idents) for idents in threads.values()] == [1, 1]
    idents = set.union(*threads.values())
    assert len(idents) == 2
    assert threading.get_ident() not in idents


def test_an_interruption_while_close_waits_for_the_last_call_ends_the_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C cancels a scenario whose close() waits for the call the deadline cancelled: the
    wait ends there, the agent is not closed, and the process's ledger lets it go."""
    import threading

    from tau2_retail.models import agent as agent_code

    monkeypatch.setattr(agent_code, "_LAST_CALL_SECONDS", 3600.0)
    released = threading.Event()
    closed: list[bool] = []

    class Agent:
        __slots__ = ()  # no weak reference: the ledger holds it until it is released

        def respond(self, messages, tools):
            released.wait(60)
            return "late"

        def close(self):
            closed.append(True)

    agent, ledger = Agent(), AgentLedger()
    runner = AgentRunner(lambda: agent, AgentIdentity(source="t:t"), ledger=ledger)

    async def go() -> None:
        await runner.start()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await runner.complete([], tools=[])
        closing = asyncio.create_task(runner.close())
        await asyncio.sleep(0.1)
        closing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closing

    try:
        asyncio.run(go())
    finally:
        released.set()
    assert closed == []
    assert ledger.claim(agent)
