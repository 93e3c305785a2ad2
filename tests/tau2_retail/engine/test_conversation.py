"""The conversation loop (spec §3): every ending, malformed model output, what each side sees.

Behaviour that depends on the wire (retries, faults, usage, parallel tool calls, empty
arguments) runs through the real ``OpenAIChatModel`` against the loopback server with a no-op
sleep; the rest uses small scripted models defined here. Limits are tested with a fake clock.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from tau2_retail import codec
from tau2_retail.data.seed import load_seed
from tau2_retail.engine.conversation import run_conversation
from tau2_retail.engine.conversation_setup import (
    ConversationRules,
    Limits,
    ScenarioPrompts,
    SystemClock,
)
from tau2_retail.engine.conversation_state import CALLS_PER_YIELD
from tau2_retail.engine.ending import Ending, StopReason
from tau2_retail.engine.prompts import GREETING
from tau2_retail.engine.transcript import ConversationResult
from tau2_retail.errors import ContextWindowExceeded, EndpointError, UnparsedModelOutput
from tau2_retail.models.messages import STOP_TOKENS, AssistantTurn, Message, Role, ToolCall, Usage
from tau2_retail.models.openai_client import OpenAIChatModel
from tau2_retail.models.progress import current as current_progress
from tau2_retail.testing.loopback_model import RecordedSleeps, loopback_model
from tau2_retail.testing.loopback_server import (
    Completion,
    Drop,
    Hang,
    HttpError,
    LoopbackOpenAIServer,
    ReplyToolCall,
)
from tau2_retail.tools.database import SeedDatabase
from tau2_retail.tools.registry import END_CONVERSATION_RESULT
from tau2_retail.tools.schemas import tool_schemas
from tau2_retail.tools.store import Store

AGENT_PROMPT = "You are the agent under test."
USER_PROMPT = "You are the customer under test."
TOOLS = tool_schemas()
PROMPTS = ScenarioPrompts(agent=AGENT_PROMPT, user=USER_PROMPT, tools=TOOLS)
USER_ID = "yusuf_rossi_9620"
ORDER_ID = "#W2378156"
KEY_ENV = "TAU2_TEST_CONVERSATION_KEY"
SEED = 4242
Tools = Sequence[Mapping[str, Any]] | None

# -- scripted models ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    """What a scripted model was asked."""

    messages: tuple[Message, ...]
    tools: Tools
    seed: int | None


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Scripted:
    """A chat model answering from a script; an exception in the script is raised instead."""

    def __init__(
        self,
        name: str,
        replies: Sequence[AssistantTurn | BaseException],
        *,
        clock: FakeClock | None = None,
        seconds_per_call: float = 0.0,
    ) -> None:
        self.name = name
        self.replies = list(replies)
        self.requests: list[Request] = []
        self.clock = clock
        self.seconds_per_call = seconds_per_call

    async def complete(
        self, messages: Sequence[Message], *, tools: Tools = None, seed: int | None = None
    ) -> AssistantTurn:
        self.requests.append(Request(messages=tuple(messages), tools=tools, seed=seed))
        if self.clock is not None:
            self.clock.advance(self.seconds_per_call)
        if not self.replies:
            raise AssertionError(f"{self.name}: the script ran out at call {len(self.requests)}")
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply


_ids = itertools.count()


def say(text: str | None, *, latency: float = 0.0, usage: Usage | None = None) -> AssistantTurn:
    return AssistantTurn(content=text, usage=usage or Usage(n_calls=1), latency_seconds=latency)


def call(name: str, arguments: Any = None, *, id: str | None = None) -> ToolCall:
    """A tool call; ``arguments`` is a dict (dumped to JSON) or the raw text."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return ToolCall(id=id or f"call_{next(_ids)}", name=name, arguments=text)


def act(*calls: ToolCall, text: str | None = None) -> AssistantTurn:
    return AssistantTurn(content=text, tool_calls=calls, usage=Usage(n_calls=1))


def end() -> ToolCall:
    return call("end_conversation")


def lookup() -> ToolCall:
    return call("get_user_details", {"user_id": USER_ID})


def unknown() -> ToolCall:
    return call("fly_to_the_moon")


def user_says(*texts: str) -> Scripted:
    return Scripted("user", [say(text) for text in texts])


@pytest.fixture(scope="module")
def seed_db(data_dir) -> SeedDatabase:
    return load_seed(data_dir)


@pytest.fixture
def store(seed_db) -> Store:
    return Store(seed_db)


async def converse(store: Store, agent: Any, user: Any, **options: Any) -> ConversationResult:
    """``run_conversation`` with the suite's prompts, a fake clock and ``SEED`` unless given."""
    defaults: dict[str, Any] = {"prompts": PROMPTS, "clock": FakeClock(), "seed": SEED}
    return await run_conversation(agent=agent, user=user, store=store, **(defaults | options))


def shape(result: ConversationResult) -> list[tuple[str, str]]:
    """Each message as (role, text or the tool names it calls)."""
    rows = []
    for message in result.messages:
        if message.tool_calls:
            names = ",".join(c.name for c in message.tool_calls)
            rows.append((message.role.value, f"-> {names}"))
        else:
            rows.append((message.role.value, message.content or ""))
    return rows


def agent_last_call_id(result: ConversationResult) -> str:
    calls = [c for m in result.messages for c in m.tool_calls]
    return calls[-1].id


def tool_results(result: ConversationResult) -> list[str]:
    return [m.content or "" for m in result.messages if m.role is Role.TOOL]


# -- endings: agent_exit --------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_end_conversation_is_agent_exit_right_after_its_result(store):
    agent = Scripted("agent", [act(lookup()), act(end())])
    result = await converse(store, agent, user_says("Hi, I am Yusuf Rossi."))
    assert result.stop_reason is StopReason.AGENT_EXIT
    assert result.detail == ""
    assert result.messages[-1] == Message(
        role=Role.TOOL,
        content=END_CONVERSATION_RESULT,
        tool_call_id=agent_last_call_id(result),
        name="end_conversation",
    )
    assert len(agent.requests) == 2
    # greeting, user, call, result, call, result: the exit's result batch counts too.
    assert result.steps == 6


@pytest.mark.asyncio
async def test_transfer_is_agent_exit_and_later_calls_in_the_message_do_not_run(store):
    transfer = call("transfer_to_human_agents", {"summary": "wants a human"})
    cancel = call("cancel_pending_order", {"order_id": "#W5918442", "reason": "no longer needed"})
    agent = Scripted("agent", [act(lookup(), transfer, cancel, end())])
    result = await converse(store, agent, user_says("Get me a human."))
    assert result.stop_reason is StopReason.AGENT_EXIT
    assert tool_results(result)[1] == "Transfer successful"
    assert len(tool_results(result)) == 2  # the lookup and the transfer; nothing after
    assert [a.name for a in result.actions] == ["transfer_to_human_agents"]
    assert store.diff_from_seed() == {}


@pytest.mark.asyncio
async def test_a_failed_transfer_does_not_end_the_conversation(store):
    agent = Scripted(
        "agent",
        [act(call("transfer_to_human_agents", {})), say("Let me try again."), act(end())],
    )
    result = await converse(store, agent, user_says("Human please.", "OK."))
    assert result.stop_reason is StopReason.AGENT_EXIT
    assert tool_results(result)[0].startswith("Error: ")
    assert result.actions == ()


# -- endings: user_stop and the grace turn ---------------------------------------------------------


@pytest.mark.parametrize("token", STOP_TOKENS)
@pytest.mark.asyncio
async def test_each_stop_token_ends_as_user_stop_after_one_grace_turn(store, token):
    agent = Scripted("agent", [say("How can I help?"), say("Goodbye!")])
    user = user_says("Hello.", f"That is all. {token} Bye.")
    result = await converse(store, agent, user)
    assert result.stop_reason is StopReason.USER_STOP
    assert shape(result)[-2:] == [("user", f"That is all. {token} Bye."), ("assistant", "Goodbye!")]
    assert len(agent.requests) == 2  # the grace turn is the last call
    assert len(user.requests) == 2


@pytest.mark.asyncio
async def test_end_conversation_in_the_grace_turn_is_agent_exit(store):
    agent = Scripted("agent", [say("Anything else?"), act(end())])
    result = await converse(store, agent, user_says("Hi.", "No. ###STOP###"))
    assert result.stop_reason is StopReason.AGENT_EXIT
    assert result.messages[-1].content == END_CONVERSATION_RESULT


@pytest.mark.asyncio
async def test_tool_calls_then_end_conversation_in_the_grace_turn_is_agent_exit(store):
    agent = Scripted("agent", [say("Anything else?"), act(lookup()), act(lookup()), act(end())])
    result = await converse(store, agent, user_says("Hi.", "Bye ###TRANSFER###"))
    assert result.stop_reason is StopReason.AGENT_EXIT
    assert len(tool_results(result)) == 3
    assert len(agent.requests) == 4


@pytest.mark.asyncio
async def test_tool_calls_then_text_in_the_grace_turn_is_user_stop(store):
    agent = Scripted("agent", [say("Anything else?"), act(lookup()), say("Bye.")])
    user = user_says("Hi.", "###OUT-OF-SCOPE###")
    result = await converse(store, agent, user)
    assert result.stop_reason is StopReason.USER_STOP
    assert len(user.requests) == 2


@pytest.mark.asyncio
async def test_a_limit_reached_in_the_grace_turn_keeps_the_user_stop(store):
    # greeting 1, user 2, agent 3, user "###STOP###" 4: the grace turn would be step 5.
    agent = Scripted("agent", [say("Anything else?"), say("Bye.")])
    result = await converse(
        store, agent, user_says("Hi.", "No. ###STOP###"), limits=Limits(max_steps=4)
    )
    assert result.stop_reason is StopReason.USER_STOP
    assert result.detail.startswith("grace turn cut short")
    assert len(agent.requests) == 1


# -- endings: limits ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_max_steps_one_stops_after_the_greeting(store):
    agent, user = Scripted("agent", []), Scripted("user", [])
    result = await converse(store, agent, user, limits=Limits(max_steps=1))
    assert result.stop_reason is StopReason.MAX_STEPS
    assert shape(result) == [("assistant", GREETING)]
    assert result.steps == 1
    assert agent.requests == user.requests == []


@pytest.mark.asyncio
async def test_max_steps_counts_greeting_user_and_agent_messages(store):
    agent = Scripted("agent", [say("Sure.")])
    result = await converse(store, agent, user_says("Hi."), limits=Limits(max_steps=3))
    assert result.stop_reason is StopReason.MAX_STEPS
    assert result.detail == "3 routed messages"
    assert shape(result) == [("assistant", GREETING), ("user", "Hi."), ("assistant", "Sure.")]
    assert result.steps == 3


@pytest.mark.asyncio
async def test_max_steps_counts_each_tool_call_and_runs_only_those_it_leaves_room_for(store):
    # greeting 1, user 2, the turn of three calls 3, its first result 4, its second result 5:
    # the third call is not run, and the agent is not asked again.
    agent = Scripted("agent", [act(lookup(), lookup(), lookup()), say("never asked")])
    user = user_says("Hi.")
    result = await converse(store, agent, user, limits=Limits(max_steps=5))
    assert result.stop_reason is StopReason.MAX_STEPS
    assert result.detail == "5 routed messages; 2 of the last turn's 3 tool calls run"
    assert result.steps == 5
    assert [m.role for m in result.messages] == [
        Role.ASSISTANT, Role.USER, Role.ASSISTANT, Role.TOOL, Role.TOOL
    ]  # fmt: skip
    assert len(result.messages[2].tool_calls) == 3  # what the model said is recorded whole
    assert (len(agent.requests), len(user.requests)) == (1, 1)


@pytest.mark.asyncio
async def test_max_steps_stops_before_the_agent_sees_the_tool_results(store):
    agent = Scripted("agent", [act(lookup())])
    result = await converse(store, agent, user_says("Hi."), limits=Limits(max_steps=4))
    assert result.stop_reason is StopReason.MAX_STEPS
    assert [m.role for m in result.messages] == [
        Role.ASSISTANT, Role.USER, Role.ASSISTANT, Role.TOOL
    ]  # fmt: skip
    assert len(agent.requests) == 1


@pytest.mark.asyncio
async def test_too_many_errors_stops_at_exactly_max_errors_counted_across_the_run(store):
    agent = Scripted(
        "agent",
        [
            act(unknown()),
            act(lookup()),
            say("Something failed, what was the order id?"),
            act(unknown()),
            act(call("get_order_details", {"order_id": "#W0000000"})),
            say("never reached"),
        ],
    )
    user = user_says("Hi.", f"It is {ORDER_ID}.")
    result = await converse(store, agent, user, limits=Limits(max_errors=3))
    assert result.stop_reason is StopReason.TOO_MANY_ERRORS
    assert result.detail == "3 tool errors"
    assert result.tool_errors == 3
    assert len(agent.requests) == 5
    assert [r.startswith("Error: ") for r in tool_results(result)] == [True, False, True, True]


@pytest.mark.asyncio
async def test_every_failed_call_of_a_batch_counts(store):
    agent = Scripted("agent", [act(unknown(), unknown(), unknown())])
    result = await converse(store, agent, user_says("Hi."), limits=Limits(max_errors=2))
    assert result.stop_reason is StopReason.TOO_MANY_ERRORS
    assert result.tool_errors == 3
    assert len(tool_results(result)) == 3


@pytest.mark.asyncio
async def test_timeout_with_a_fake_clock(store):
    clock = FakeClock()
    agent = Scripted("agent", [say("Sure."), say("never")], clock=clock, seconds_per_call=10.0)
    user = Scripted("user", [say("Hi."), say("More.")], clock=clock, seconds_per_call=10.0)
    result = await converse(
        store, agent, user, clock=clock, limits=Limits(max_duration_seconds=25.0)
    )
    # user 0->10, agent 10->20, user 20->30, agent would start at 30 >= 25.
    assert result.stop_reason is StopReason.TIMEOUT
    assert result.detail == "30.0 s >= 25.0 s"
    assert [text for _, text in shape(result)] == [GREETING, "Hi.", "Sure.", "More."]
    assert len(agent.requests) == 1
    assert result.duration_seconds == 30.0


@pytest.mark.asyncio
async def test_a_call_that_hangs_is_cut_by_the_wall_clock_limit(store):
    class Hanging:
        name = "hanging"

        async def complete(self, messages, *, tools=None, seed=None):
            await asyncio.sleep(60)
            raise AssertionError("not reached")

    result = await run_conversation(
        agent=Hanging(),
        user=user_says("Hi."),
        prompts=PROMPTS,
        store=store,
        limits=Limits(max_duration_seconds=0.05),
    )
    assert result.stop_reason is StopReason.TIMEOUT
    assert "outlived the 0.05 s limit" in result.detail


# -- endings: agent_error -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("finish_reason", "detail"),
    [
        (None, "the agent returned an empty message twice"),
        ("stop", "the agent returned an empty message twice"),
        ("length", "the agent returned an empty message twice (finish_reason length)"),
        (
            "content_filter",
            "the agent returned an empty message twice (finish_reason content_filter)",
        ),
    ],
)
@pytest.mark.asyncio
async def test_the_empty_message_ending_names_why_the_server_says_it_is_empty(
    store, finish_reason, detail
):
    # a reasoning model that spends its completion budget thinking answers empty, with
    # finish_reason "length"; a provider's filter with "content_filter"
    empty = AssistantTurn(content=None, usage=Usage(n_calls=1), finish_reason=finish_reason)
    agent = Scripted("agent", [empty, empty])
    result = await converse(store, agent, user_says("Hi."))
    assert result.stop_reason is StopReason.AGENT_ERROR
    assert result.detail == detail


@pytest.mark.asyncio
async def test_the_simulators_empty_message_ending_names_its_finish_reason_too(store):
    empty = AssistantTurn(content="", usage=Usage(n_calls=1), finish_reason="content_filter")
    result = await converse(store, Scripted("agent", []), Scripted("user", [empty, empty]))
    assert result.stop_reason is StopReason.INFRA_ERROR
    assert result.detail == (
        "user: the simulator returned an empty message twice (finish_reason content_filter)"
    )


@pytest.mark.asyncio
async def test_a_customer_reply_cut_at_its_length_limit_is_the_simulators_infra_error(store):
    # a local customer model repeating itself writes until its slot's context is full
    # (llama-server: 16,334 tokens of "x", finish_reason "length"); the agent's next request
    # would overflow its context, scored as the agent's failure
    runaway = AssistantTurn(content="x" * 50_000, usage=Usage(n_calls=1), finish_reason="length")
    agent = Scripted("agent", [say("never asked")])
    result = await converse(store, agent, Scripted("user", [runaway]))
    assert result.stop_reason is StopReason.INFRA_ERROR
    assert result.detail == (
        "user: the simulator's reply was cut at its length limit (finish_reason length)"
    )
    assert agent.requests == []  # the agent never read it
    assert shape(result) == [("assistant", GREETING)]


@pytest.mark.asyncio
async def test_a_cut_reply_of_the_agent_is_its_own_text(store):
    cut = AssistantTurn(content="I will look up your ord", usage=Usage(n_calls=1),
                        finish_reason="length")  # fmt: skip
    agent = Scripted("agent", [cut, act(end())])
    result = await converse(store, agent, user_says("Hi.", "Thanks."))
    assert ("assistant", "I will look up your ord") in shape(result)
    assert result.stop_reason is StopReason.AGENT_EXIT


@pytest.mark.asyncio
async def test_an_empty_message_is_asked_again_once_then_agent_error(store):
    agent = Scripted("agent", [say(None), say("   "), say("never")])
    result = await converse(store, agent, user_says("Hi."))
    assert result.stop_reason is StopReason.AGENT_ERROR
    assert result.detail == "the agent returned an empty message twice"
    assert len(agent.requests) == 2
    assert agent.requests[0].messages == agent.requests[1].messages
    assert shape(result) == [("assistant", GREETING), ("user", "Hi.")]  # empties not recorded
    assert result.usage["agent"].n_calls == 2


@pytest.mark.asyncio
async def test_one_empty_message_then_a_good_reply_continues(store):
    agent = Scripted("agent", [say(""), say("Sure, your name?"), act(end())])
    result = await converse(store, agent, user_says("Hi.", "Yusuf."))
    assert result.stop_reason is StopReason.AGENT_EXIT
    assert ("assistant", "Sure, your name?") in shape(result)


@pytest.mark.asyncio
async def test_empty_messages_that_are_not_consecutive_each_get_a_retry(store):
    # Regression: the retry used to be spent for the whole agent turn, so an empty reply
    # after a tool call ended the run without being asked again.
    agent = Scripted("agent", [say(""), act(lookup()), say(""), say("Found you."), act(end())])
    result = await converse(store, agent, user_says("Hi.", "Thanks."))
    assert result.stop_reason is StopReason.AGENT_EXIT
    assert ("assistant", "Found you.") in shape(result)


# -- malformed output (scripted) ------------------------------------------------------------------


@pytest.mark.asyncio
async def test_invalid_json_arguments_become_a_tool_error_and_the_run_goes_on(store):
    agent = Scripted("agent", [act(call("get_user_details", "{not json")), act(end())])
    result = await converse(store, agent, user_says("Hi."))
    assert result.stop_reason is StopReason.AGENT_EXIT
    error = tool_results(result)[0]
    assert error.startswith("Error: Invalid JSON in the arguments of get_user_details: ")
    assert result.tool_errors == 1
    seen = agent.requests[1].messages[-1]
    assert seen.role is Role.TOOL
    assert seen.content == error
    assert seen.error


@pytest.mark.asyncio
async def test_empty_string_arguments_mean_an_empty_object(store):
    agent = Scripted("agent", [act(call("list_all_product_types", "")), act(end())])
    result = await converse(store, agent, user_says("Hi."))
    assert result.tool_errors == 0
    assert json.loads(tool_results(result)[0])  # the product types, not an error


@pytest.mark.asyncio
async def test_unknown_tool_is_an_exact_error(store):
    agent = Scripted("agent", [act(call("x")), act(end())])
    result = await converse(store, agent, user_says("Hi."))
    assert tool_results(result)[0] == "Error: Tool 'x' not found."
    assert result.stop_reason is StopReason.AGENT_EXIT


# -- who sees what --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_the_user_sees_only_agent_text_with_roles_flipped(store):
    agent = Scripted(
        "agent",
        [
            act(lookup(), text="Let me look you up (thinking aloud)."),
            say("You are Yusuf. What next?"),
            act(end()),
        ],
    )
    user = user_says("Hi, I am Yusuf.", "Nothing. ###STOP###")
    result = await converse(store, agent, user)
    assert result.stop_reason is StopReason.AGENT_EXIT
    # The text that came with tool calls is recorded ...
    assert result.messages[2].content == "Let me look you up (thinking aloud)."
    # ... but the user simulator never saw it, nor any tool call or result.
    assert user.requests[1].messages == (
        Message(role=Role.SYSTEM, content=USER_PROMPT),
        Message(role=Role.USER, content=GREETING),
        Message(role=Role.ASSISTANT, content="Hi, I am Yusuf."),
        Message(role=Role.USER, content="You are Yusuf. What next?"),
    )
    assert all(request.tools is None for request in user.requests)


@pytest.mark.asyncio
async def test_the_agent_sees_user_text_its_calls_and_their_results(store):
    first = lookup()
    agent = Scripted("agent", [act(first), act(end())])
    await converse(store, agent, user_says("Hi."))
    messages = agent.requests[1].messages
    assert [m.role for m in messages] == [
        Role.SYSTEM, Role.ASSISTANT, Role.USER, Role.ASSISTANT, Role.TOOL
    ]  # fmt: skip
    assert messages[0].content == AGENT_PROMPT
    assert messages[1].content == GREETING
    assert messages[2].content == "Hi."
    assert messages[3].tool_calls == (first,)
    assert messages[4].tool_call_id == first.id
    assert messages[4].name == "get_user_details"
    assert json.loads(messages[4].content or "")["user_id"] == USER_ID
    assert all(request.tools == TOOLS for request in agent.requests)


@pytest.mark.asyncio
async def test_the_seed_is_sent_with_every_completion(store):
    agent = Scripted("agent", [say(""), say("Hello."), act(lookup()), act(end())])
    user = user_says("Hi.", "Hmm.")
    await converse(store, agent, user, seed=626729)
    assert [r.seed for r in agent.requests + user.requests] == [626729] * 6


# -- the result -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_the_result_is_frozen_and_json_round_trips(store):
    agent = Scripted("agent", [act(lookup(), unknown()), say("Done."), act(end())])
    result = await converse(store, agent, user_says("Hi.", "Bye ###STOP###"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.stop_reason = StopReason.TIMEOUT  # type: ignore[misc]
    data = result.to_json()
    assert json.loads(json.dumps(data)) == data
    assert data["stop_reason"] == "agent_exit"
    assert [codec.decode_value(Message, m) for m in data["messages"]] == list(result.messages)
    assert [m["timestamp"] for m in data["messages"]] == list(result.timestamps)
    assert data["tool_errors"] == 1
    assert data["steps"] == result.steps


@pytest.mark.asyncio
async def test_usage_is_summed_per_role_and_latency_recorded_per_turn(store):
    agent = Scripted(
        "agent",
        [
            AssistantTurn(
                content="Hello.", usage=Usage(n_calls=1, prompt=100, completion=5),
                latency_seconds=0.5,
            ),
            AssistantTurn(
                content=None, tool_calls=(end(),),
                usage=Usage(n_calls=1, prompt=130, completion=9), latency_seconds=0.25,
            ),
        ],
    )  # fmt: skip
    user = Scripted(
        "user",
        [
            say("Hi.", latency=0.125, usage=Usage(n_calls=1, prompt=40, completion=2)),
            say("Bye.", latency=0.0625, usage=Usage(n_calls=1, prompt=50, completion=3)),
        ],
    )
    result = await converse(store, agent, user)
    assert result.usage == {
        "agent": Usage(n_calls=2, prompt=230, completion=14),
        "user": Usage(n_calls=2, prompt=90, completion=5),
    }
    assert result.latencies == (
        ("user", 0.125), ("agent", 0.5), ("user", 0.0625), ("agent", 0.25)
    )  # fmt: skip


@pytest.mark.asyncio
async def test_each_message_records_the_usage_of_its_completion(store):
    """Per-message usage (upstream's results.json has it per message): the greeting and tool
    results have none; an empty reply asked again adds its tokens to the next message."""
    agent = Scripted(
        "agent",
        [
            say(None, usage=Usage(n_calls=1, prompt=7, completion=1)),  # empty: asked again
            say("Hello.", usage=Usage(n_calls=1, prompt=100, completion=5)),
            AssistantTurn(
                content=None,
                tool_calls=(lookup(),),
                usage=Usage(n_calls=1, prompt=130, completion=9),
            ),
            AssistantTurn(
                content=None, tool_calls=(end(),), usage=Usage(n_calls=1, prompt=140, completion=3)
            ),
        ],
    )
    user = Scripted(
        "user",
        [
            say("Hi.", usage=Usage(n_calls=1, prompt=40, completion=2)),
            say("Bye.", usage=Usage(n_calls=1, prompt=50, completion=3)),
        ],
    )
    result = await converse(store, agent, user)
    roles = [m.role.value for m in result.messages]
    assert roles == [
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert result.usages == (
        None,
        Usage(n_calls=1, prompt=40, completion=2),
        Usage(n_calls=2, prompt=107, completion=6),
        Usage(n_calls=1, prompt=50, completion=3),
        Usage(n_calls=1, prompt=130, completion=9),
        None,
        Usage(n_calls=1, prompt=140, completion=3),
        None,
    )
    # the per-message usages add up to the per-role totals
    assert (
        sum((u for u in result.usages if u), Usage())
        == result.usage["agent"] + result.usage["user"]
    )
    data = result.to_json()
    assert "usage" not in data["messages"][0]
    assert data["messages"][2]["usage"] == {"n_calls": 2, "prompt": 107, "completion": 6}
    again = ConversationResult.from_json(data, store)
    assert again.usages == result.usages


def test_a_message_without_usage_reads_as_none(store):
    """The greeting and tool results carry no ``usage``: it reads as None."""
    old = {
        "format_version": 1,
        "messages": [
            {"role": "assistant", "content": "Hi!", "timestamp": 1.0},
            {"role": "user", "content": "Bye ###STOP###", "timestamp": 2.0},
        ],
        "stop_reason": "user_stop",
        "detail": "",
        "actions": [],
        "usage": {"agent": {"n_calls": 0, "prompt": 0, "completion": 0}},
        "latencies": [],
        "started_at": 1.0,
        "duration_seconds": 1.0,
        "steps": 1,
        "tool_errors": 0,
    }
    result = ConversationResult.from_json(old, store)
    assert result.usages == (None, None)
    assert [m["timestamp"] for m in result.to_json()["messages"]] == [1.0, 2.0]


@pytest.mark.asyncio
async def test_timestamps_and_duration_come_from_the_clock(store):
    clock = FakeClock(start=50.0)
    agent = Scripted("agent", [act(end())], clock=clock, seconds_per_call=2.0)
    user = Scripted("user", [say("Hi.")], clock=clock, seconds_per_call=1.0)
    result = await converse(store, agent, user, clock=clock)
    assert result.started_at == 50.0
    assert result.timestamps == (50.0, 51.0, 53.0, 53.0)
    assert result.duration_seconds == 3.0


def test_the_system_clock_reads_real_time():
    clock = SystemClock()
    assert abs(clock.wall() - time.time()) < 5
    assert clock.monotonic() <= time.monotonic()


# -- through the wire: the real OpenAIChatModel against the loopback server ---------------------


@pytest.fixture
def agent_server() -> Iterator[LoopbackOpenAIServer]:
    with LoopbackOpenAIServer() as server:
        yield server


@pytest.fixture
def user_server() -> Iterator[LoopbackOpenAIServer]:
    with LoopbackOpenAIServer() as server:
        yield server


@pytest.fixture
def sleeps() -> RecordedSleeps:
    return RecordedSleeps()


@pytest.fixture
def wire(sleeps) -> Callable[..., OpenAIChatModel]:
    def make(server: LoopbackOpenAIServer, model: str, max_retries: int = 2) -> OpenAIChatModel:
        return loopback_model(
            server,
            model=model,
            api_key_env=KEY_ENV,
            max_retries=max_retries,
            environ={},
            sleep=sleeps,
        )

    return make


@pytest_asyncio.fixture
async def wire_agent(wire, agent_server) -> AsyncIterator[OpenAIChatModel]:
    async with wire(agent_server, "agent-model") as model:
        yield model


@pytest_asyncio.fixture
async def wire_user(wire, user_server) -> AsyncIterator[OpenAIChatModel]:
    async with wire(user_server, "user-model") as model:
        yield model


def bodies(server: LoopbackOpenAIServer) -> list[dict[str, Any]]:
    return [request.body for request in server.requests]


def wire_end(id: str = "call_end") -> Completion:
    return Completion(tool_calls=(ReplyToolCall(id=id, name="end_conversation"),))


@pytest.mark.asyncio
async def test_wire_parallel_tool_calls_run_in_order_and_usage_is_summed(
    store, wire_agent, wire_user, agent_server, user_server
):
    agent_server.enqueue(
        Completion(
            tool_calls=(
                ReplyToolCall(id="c1", name="find_user_id_by_email",
                              arguments='{"email": "nobody@example.com"}'),
                ReplyToolCall(id="c2", name="get_user_details",
                              arguments=json.dumps({"user_id": USER_ID})),
            ),
            prompt_tokens=100, completion_tokens=20,
        ),
        Completion(content="You are Yusuf.", prompt_tokens=300, completion_tokens=7),
        Completion(tool_calls=(ReplyToolCall(id="c3", name="end_conversation"),),
                   prompt_tokens=320, completion_tokens=4),
    )  # fmt: skip
    user_server.enqueue(
        Completion(content="Who am I?", prompt_tokens=30, completion_tokens=5),
        Completion(content="Right. ###STOP###", prompt_tokens=40, completion_tokens=6),
    )
    result = await converse(store, wire_agent, wire_user)
    assert result.stop_reason is StopReason.AGENT_EXIT
    results = [m for m in result.messages if m.role is Role.TOOL]
    assert [(m.tool_call_id, m.error) for m in results] == [
        ("c1", True), ("c2", False), ("c3", False)
    ]  # fmt: skip
    assert results[0].content == "Error: User not found"
    # The agent's second request carries both calls and both results, in order.
    second = bodies(agent_server)[1]["messages"]
    roles = ["system", "assistant", "user", "assistant", "tool", "tool"]
    assert [m["role"] for m in second] == roles
    assert [c["id"] for c in second[3]["tool_calls"]] == ["c1", "c2"]
    assert [m["tool_call_id"] for m in second[4:]] == ["c1", "c2"]
    assert result.usage == {
        "agent": Usage(n_calls=3, prompt=720, completion=31),
        "user": Usage(n_calls=2, prompt=70, completion=11),
    }
    assert [role for role, _ in result.latencies] == ["user", "agent", "agent", "user", "agent"]
    assert all(seconds >= 0 for _, seconds in result.latencies)


@pytest.mark.asyncio
async def test_wire_empty_and_invalid_arguments(store, wire_agent, agent_server):
    agent_server.enqueue(
        Completion(tool_calls=(ReplyToolCall(id="c1", name="list_all_product_types",
                                             arguments=""),)),
        Completion(tool_calls=(ReplyToolCall(id="c2", name="get_order_details",
                                             arguments='{"order_id": "#W23'),)),
        Completion(tool_calls=(ReplyToolCall(id="c3", name="x"),)),
        wire_end(),
    )  # fmt: skip
    result = await converse(store, wire_agent, user_says("Hi."))
    assert result.stop_reason is StopReason.AGENT_EXIT
    calls = [c for m in result.messages for c in m.tool_calls]
    assert calls[0].arguments == "{}"
    listed, invalid, missing, ended = tool_results(result)
    assert "Mechanical Keyboard" in json.loads(listed)
    assert invalid.startswith("Error: Invalid JSON in the arguments of get_order_details: ")
    assert missing == "Error: Tool 'x' not found."
    assert ended == END_CONVERSATION_RESULT
    # The agent saw the error result as the tool message of its call.
    third = bodies(agent_server)[2]["messages"]
    assert third[-1] == {"role": "tool", "tool_call_id": "c2", "content": invalid}


@pytest.mark.asyncio
async def test_wire_text_with_tool_calls_is_not_shown_to_the_user_and_seed_everywhere(
    store, wire_agent, wire_user, agent_server, user_server
):
    secret = "Internal note: checking the account first."
    agent_server.enqueue(
        Completion(content=secret, tool_calls=(ReplyToolCall(
            id="c1", name="get_user_details", arguments=json.dumps({"user_id": USER_ID})),)),
        Completion(content="Found your account."),
        wire_end(),
    )  # fmt: skip
    user_server.enqueue(Completion(content="I am Yusuf."), Completion(content="Great. ###STOP###"))
    result = await converse(store, wire_agent, wire_user, seed=361454)
    assert result.stop_reason is StopReason.AGENT_EXIT
    assert result.messages[2].content == secret
    user_bodies = bodies(user_server)
    assert secret not in json.dumps(user_bodies)
    assert user_bodies[1]["messages"] == [
        {"role": "system", "content": USER_PROMPT},
        {"role": "user", "content": GREETING},
        {"role": "assistant", "content": "I am Yusuf."},
        {"role": "user", "content": "Found your account."},
    ]
    assert all("tools" not in body for body in user_bodies)
    assert all(len(body["tools"]) == len(TOOLS) for body in bodies(agent_server))
    seeds = [body.get("seed") for body in bodies(agent_server) + user_bodies]
    assert seeds == [361454] * 5


@pytest.mark.asyncio
async def test_wire_transient_faults_are_retried_and_the_run_goes_on(
    store, wire_agent, agent_server, sleeps
):
    agent_server.enqueue(
        HttpError.server_error(503),
        HttpError.rate_limited(retry_after="2"),
        Completion(content="Hello after the storm."),
        Drop(),
        wire_end(),
    )
    result = await converse(store, wire_agent, user_says("Hi.", "Bye ###STOP###"))
    assert result.stop_reason is StopReason.AGENT_EXIT
    assert ("assistant", "Hello after the storm.") in shape(result)
    assert len(agent_server.requests) == 5
    assert sleeps.calls == [1.0, 2.0, 1.0]
    assert result.usage["agent"].n_calls == 2  # failed attempts are not completions


@pytest.mark.asyncio
async def test_wire_agent_endpoint_failure_after_retries_is_infra_error(
    store, wire_agent, agent_server, sleeps
):
    agent_server.enqueue(*[HttpError.server_error(502)] * 3)
    result = await converse(store, wire_agent, user_says("Hi."))
    assert result.stop_reason is StopReason.INFRA_ERROR
    assert result.detail.startswith("agent: model 'agent-model' at ")
    assert "failed after 3 attempt(s)" in result.detail
    assert len(agent_server.requests) == 3
    assert len(sleeps.calls) == 2
    assert shape(result) == [("assistant", GREETING), ("user", "Hi.")]


@pytest.mark.asyncio
async def test_wire_user_endpoint_failure_after_retries_is_infra_error(
    store, wire_user, user_server
):
    user_server.enqueue(Drop(), Drop(), Drop())
    agent = Scripted("agent", [])
    result = await converse(store, agent, wire_user)
    assert result.stop_reason is StopReason.INFRA_ERROR
    assert result.detail.startswith("user: model 'user-model' at ")
    assert "connection failed" in result.detail
    assert agent.requests == []


@pytest.mark.asyncio
async def test_wire_agent_context_window_exceeded(store, wire_agent, agent_server):
    agent_server.enqueue(HttpError.context_length_exceeded())
    result = await converse(store, wire_agent, user_says("Hi."))
    assert result.stop_reason is StopReason.CONTEXT_WINDOW_EXCEEDED
    assert result.detail.startswith("agent: ")
    assert len(agent_server.requests) == 1  # not retried


@pytest.mark.asyncio
async def test_wire_user_context_window_exceeded_is_the_customers_infra_error(
    store, wire_user, user_server
):
    # the customer's endpoint is infrastructure: its small context window was scored as the
    # agent's failure (and a resume never ran the scenario again)
    user_server.enqueue(Completion(content="Hi."), HttpError.context_length_exceeded())
    agent = Scripted("agent", [say("Hello, what do you need?")])
    result = await converse(store, agent, wire_user)
    assert result.stop_reason is StopReason.INFRA_ERROR
    assert result.ending.failed_role == "user"
    assert result.detail.startswith("user: ")
    assert len(user_server.requests) == 2


@pytest.mark.asyncio
async def test_wire_empty_agent_message_twice_is_agent_error(store, wire_agent, agent_server):
    agent_server.enqueue(Completion(content=""), Completion(content=None))
    result = await converse(store, wire_agent, user_says("Hi."))
    assert result.stop_reason is StopReason.AGENT_ERROR
    assert len(agent_server.requests) == 2


# -- scripted exceptions map to the same endings ---------------------------------------------------

MODEL_ERRORS = pytest.mark.parametrize(
    ("error", "reasons"),
    [
        (EndpointError("boom"), {"agent": StopReason.INFRA_ERROR, "user": StopReason.INFRA_ERROR}),
        (
            ContextWindowExceeded("too long"),
            {"agent": StopReason.CONTEXT_WINDOW_EXCEEDED, "user": StopReason.INFRA_ERROR},
        ),
    ],
)


async def fail_on(side: str, error: Exception, store: Store) -> ConversationResult:
    """A conversation whose ``side`` model raises ``error`` (the user first says hi)."""
    agent = Scripted("agent", [error] if side == "agent" else [])
    user = Scripted("user", [say("Hi.")] if side == "agent" else [error])
    return await converse(store, agent, user)


@MODEL_ERRORS
@pytest.mark.asyncio
async def test_model_errors_map_to_endings_on_both_sides(seed_db, error, reasons):
    for side in ("agent", "user"):
        result = await fail_on(side, error, Store(seed_db))
        assert result.stop_reason is reasons[side]
        assert result.detail == f"{side}: {error}"


@MODEL_ERRORS
@pytest.mark.asyncio
async def test_the_failed_role_is_typed_where_the_conversation_ends(seed_db, error, reasons):
    # issue 20: the role is decided where the model failed, never read back out of the text
    for side in ("agent", "user"):
        store = Store(seed_db)
        result = await fail_on(side, error, store)
        reason = reasons[side]
        assert result.ending == Ending(reason=reason, detail=f"{side}: {error}", failed_role=side)
        # the transcript records the reason and the text only; read back, the ending is whole
        again = ConversationResult.from_json(json.loads(json.dumps(result.to_json())), store)
        assert again.ending == result.ending


@pytest.mark.asyncio
async def test_limits_and_stops_have_no_failed_role_and_empty_agents_fail_the_agent(store):
    ended = await converse(store, Scripted("agent", [act(end())]), user_says("Hi."))
    assert ended.ending == Ending(reason=StopReason.AGENT_EXIT)
    capped = await converse(
        store, Scripted("agent", [say("a")] * 3), user_says("u", "u"), limits=Limits(max_steps=3)
    )
    assert (capped.stop_reason, capped.ending.failed_role) == (StopReason.MAX_STEPS, None)
    empty = await converse(store, Scripted("agent", [say(""), say("")]), user_says("Hi."))
    assert empty.ending == Ending(
        reason=StopReason.AGENT_ERROR,
        detail="the agent returned an empty message twice",
        failed_role="agent",
    )


@pytest.mark.parametrize(
    ("reason", "detail", "failed_role"),
    [
        ("infra_error", "agent: model 'm' at http://127.0.0.1:1/v1 failed", "agent"),
        ("infra_error", "user: the simulator returned an empty message twice", "user"),
        ("infra_error", "agent: x; agent: the agent's close() raised", "agent"),
        ("infra_error", "connection failed", "agent"),  # once recorded without the role
        ("context_window_exceeded", "user: too long", "user"),
        ("context_window_exceeded", "the conversation grew to 2,000,001 characters", None),
        ("agent_error", "the agent returned an empty message twice", "agent"),
        ("agent_error", "agent: ValueError: no", "agent"),
        ("max_steps", "200 routed messages", None),
        ("user_stop", "grace turn cut short: 3 tool errors", None),
        ("agent_exit", "", None),
    ],
)
def test_a_recorded_ending_reads_back_typed(
    reason: str, detail: str, failed_role: str | None
) -> None:
    ending = Ending.from_record(reason, detail)
    assert ending == Ending(reason=StopReason(reason), detail=detail, failed_role=failed_role)


@pytest.mark.asyncio
async def test_our_own_bugs_are_not_turned_into_endings(store):
    agent = Scripted("agent", [RuntimeError("a bug")])
    with pytest.raises(RuntimeError, match="a bug"):
        await converse(store, agent, user_says("Hi."))


# -- issue 12: hostile sizes, request accounting, error bodies ---------------------------------


@pytest.mark.asyncio
async def test_history_growth_ends_as_the_agents_context_window_failure(store):
    # An agent writing megabytes every turn would grow every request until some endpoint gives
    # up: the conversation stops first, as the agent's failure, naming why.
    huge = "x" * 600_000
    agent = Scripted("agent", [say(huge)] * 5)
    user = user_says(*["Go on."] * 5)
    result = await converse(store, agent, user, limits=Limits(max_history_chars=1_000_000))
    assert result.stop_reason is StopReason.CONTEXT_WINDOW_EXCEEDED
    assert "beyond the 1,000,000-character limit" in result.detail
    assert len(user.requests) == 2  # the second agent message is never sent on


@pytest.mark.asyncio
async def test_request_stats_count_attempts_failures_and_waits(store):
    agent = Scripted(
        "agent",
        [
            dataclasses.replace(say("Hello."), attempts=3, wait_seconds=1.5),
            EndpointError("down", attempts=5, wait_seconds=10.0),
        ],
    )
    result = await converse(store, agent, user_says("Hi.", "More."))
    assert result.stop_reason is StopReason.INFRA_ERROR
    assert codec.encode(result.requests["agent"]) == {
        "requests": 2,
        "attempts": 8,
        "retries": 6,
        "failed": 1,
        "wait_seconds": 11.5,
    }
    assert codec.encode(result.requests["user"])["attempts"] == 2
    assert result.to_json()["requests"]["agent"]["failed"] == 1


@pytest.mark.asyncio
async def test_output_the_server_could_not_parse_is_the_agents_error_and_others_infra(seed_db):
    # issue 29: the agent's malformed output is scored, never excluded as an outage; the
    # customer's and the judge's models are not what is measured: their failure stays infra
    body = '{"error": {"message": "Failed to parse input at pos 3: <tool_call>"}}'
    error = UnparsedModelOutput("llama.cpp says no", server="llama.cpp", full_body=body)
    agent_side = await fail_on("agent", error, Store(seed_db))
    assert agent_side.ending == Ending(
        reason=StopReason.AGENT_ERROR, detail="agent: llama.cpp says no", failed_role="agent"
    )
    assert agent_side.error_body == body  # the server's text, for endpoint_error.txt
    assert agent_side.requests["agent"].failed == 1
    user_side = await fail_on("user", error, Store(seed_db))
    assert user_side.ending.reason is StopReason.INFRA_ERROR
    assert user_side.ending.failed_role == "user"


class _Stalls:
    """An endpoint-like model that makes ``attempts`` attempts, then hangs (as a request to a
    slow server does), telling the conversation's progress record as the client does."""

    name = "stalls"

    def __init__(self, attempts: int) -> None:
        self.attempts = attempts

    async def complete(self, messages, *, tools=None, seed=None):
        progress = current_progress()
        assert progress is not None
        progress.attempts, progress.wait_seconds = self.attempts, 2.5
        await asyncio.sleep(60)
        raise AssertionError("not reached")


@pytest.mark.asyncio
async def test_a_request_cut_at_the_deadline_is_counted_as_failed(store):
    # issue 29: 45 requests sent, 45 counted (the last as failed), not 44 and 0 failed
    user = user_says("Hi.")
    result = await run_conversation(
        agent=_Stalls(attempts=3),
        user=user,
        prompts=PROMPTS,
        store=store,
        limits=Limits(max_duration_seconds=0.05),
    )
    assert result.stop_reason is StopReason.TIMEOUT
    assert (
        result.detail == "the agent request in flight (counted as failed) outlived the 0.05 s limit"
    )
    assert codec.encode(result.requests["agent"]) == {
        "requests": 1,
        "attempts": 3,
        "retries": 2,
        "failed": 1,
        "wait_seconds": 2.5,
    }
    assert result.usage["agent"] == Usage()  # its tokens are unknown: nothing is made up
    assert result.requests["user"].requests == 1


@pytest.mark.parametrize("role", ["agent", "user"])
@pytest.mark.asyncio
async def test_a_request_retrying_a_failing_endpoint_at_the_deadline_is_that_roles_infra_error(
    store, wire, agent_server, user_server, role
):
    """The endpoint answered 503, and its retry hangs: the scenario's deadline cut a request
    that was retrying a failing endpoint. It was ``timeout``, the agent's failure, also when
    the customer's endpoint failed (a customer's endpoint that went dark 285 s into a
    scenario made the agent fail under the default settings)."""
    server = agent_server if role == "agent" else user_server
    server.enqueue(HttpError.server_error(503), Hang())
    user_server.enqueue(Completion(content="Hi, I need help."))  # the agent's case
    async with wire(agent_server, "agent-model") as agent, wire(user_server, "user-model") as user:
        result = await run_conversation(
            agent=agent,
            user=user,
            prompts=PROMPTS,
            store=store,
            limits=Limits(max_duration_seconds=0.5),
        )
    assert result.stop_reason is StopReason.INFRA_ERROR
    assert result.failed_role == role
    assert result.detail.startswith(
        f"{role}: model '{role}-model' at {server.base_url}: the request was still being "
        "retried after 1 failed attempt(s) (last: HTTP 503"
    )
    assert result.detail.endswith("when the scenario reached its 0.5 s limit (counted as failed)")
    stats = result.requests[role]
    assert (stats.requests, stats.attempts, stats.failed) == (1, 2, 1)


@pytest.mark.asyncio
async def test_a_request_cut_after_a_timed_out_attempt_names_the_request_timeout(
    store, user_server
):
    """Its first attempt got no reply within 0.3 s; the deadline (1 s) cut its backoff (1 s)."""
    user_server.enqueue(Hang(), Hang())
    user = loopback_model(user_server, model="user-model", timeout_seconds=0.3, sleep=asyncio.sleep)
    async with user:
        result = await run_conversation(
            agent=Scripted("agent", []),
            user=user,
            prompts=PROMPTS,
            store=store,
            limits=Limits(max_duration_seconds=1.0),
        )
    assert result.stop_reason is StopReason.INFRA_ERROR
    assert "(last: no complete reply within the 0.3 s timeout)" in result.detail
    assert result.request_timeout == 0.3  # the run says which option raises it


@pytest.mark.asyncio
async def test_an_endpoint_errors_whole_body_is_kept(store):
    body = "validation error: " + "y" * 2000
    agent = Scripted("agent", [EndpointError("rejected", body=body[:300], full_body=body)])
    result = await converse(store, agent, user_says("Hi."))
    assert result.error_body == body


@pytest.mark.asyncio
async def test_a_transcript_round_trips(store):
    agent = Scripted("agent", [act(call("calculate", {"expression": "1+1"})), act(end())])
    result = await converse(store, agent, user_says("Hi."))
    again = ConversationResult.from_json(json.loads(json.dumps(result.to_json())), store)
    assert again.to_json() == result.to_json()


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param('{"expression": ' + "[" * 1000 + "]" * 1000 + "}", id="nested-1000"),
        pytest.param('{"order_id": "\\ud83d"}', id="escaped-lone-surrogate"),
    ],
)
@pytest.mark.asyncio
async def test_hostile_tool_arguments_become_tool_results(store, arguments):
    agent = Scripted("agent", [act(call("get_order_details", arguments)), act(end())])
    result = await converse(store, agent, user_says("Hi."))
    assert result.stop_reason is StopReason.AGENT_EXIT
    tool = next(m for m in result.messages if m.role is Role.TOOL)
    assert tool.error
    json.dumps(result.to_json(), ensure_ascii=False).encode("utf-8")


@pytest.mark.asyncio
async def test_a_llamacpp_server_as_the_agent_sees_the_tools_and_accepts_the_history(store, wire):
    # llama.cpp's dialect: content null beside tool calls is an HTTP 500, and tools sent
    # without tool_choice never reach the model. Our requests pass both.
    replies = [
        Completion(
            tool_calls=(ReplyToolCall(name="calculate", arguments='{"expression": "1+1"}'),)
        ),
        Completion(content="It is 2."),
        Completion(tool_calls=(ReplyToolCall(name="end_conversation"),)),
    ]
    with LoopbackOpenAIServer(replies=replies, dialect="llamacpp") as server:
        async with wire(server, "llama", max_retries=0) as agent:
            result = await converse(store, agent, user_says("What is 1+1?", "Thanks ###STOP###"))
        requests = server.requests
    assert result.stop_reason is StopReason.AGENT_EXIT, result.detail
    assert len(requests) == 3
    assert all(request.tools_seen for request in requests)


@pytest.mark.asyncio
async def test_a_turn_of_many_calls_lets_others_run_and_keeps_the_deadline(store):
    """Where every call of a turn runs (the tau2 profile), 100,000 calls in one turn ran
    without letting the event loop turn: the other scenarios in flight waited seconds, and the
    scenario ran past its deadline (11 s of 5). Others now run between calls, and the
    deadline lands within the turn."""
    rules = ConversationRules(tool_calls_are_steps=False)
    calls = 20_000
    agent = Scripted("agent", [act(*(lookup() for _ in range(calls)))])
    turns = 0

    async def another_scenario() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    other = asyncio.create_task(another_scenario())
    try:
        result = await converse(
            store, agent, user_says("hi"), rules=rules, clock=SystemClock(),
            limits=Limits(max_duration_seconds=0.05),
        )  # fmt: skip
    finally:
        other.cancel()
    assert result.stop_reason is StopReason.TIMEOUT
    assert 0 < len(tool_results(result)) < calls
    assert turns > len(tool_results(result)) // CALLS_PER_YIELD // 2
