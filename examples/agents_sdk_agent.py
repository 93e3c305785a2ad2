"""A loop-style agent on the OpenAI Agents SDK: the framework runs its own tool loop.

Its tools are the scenario's toolbox functions (``toolbox.functions``: plain Python callables
with the tools' signatures and docstrings, bound to the scenario's database); every call the
SDK makes through them is recorded in the transcript and scored as an endpoint's tool call
would be. The SDK keeps its own history across turns (``result.to_input_list()``); each turn
adds the customer's new messages. Calling ``end_conversation`` (or a transfer) stops the run
and ends the conversation. Each turn records the tokens the SDK's run spent
(``toolbox.record_usage``): they are the agent's ``token_usage`` in ``metrics.json``, priced by
``--tau2-prices`` when the agent names its model (``model``: a class attribute here, since a
class named by ``--tau2-agent`` is read before any agent is made).

Install the SDK with the optional dependency group ``agents-sdk`` (``pip install
openai-agents``). Run it::

    python -m pytest --pyargs tests_tau2_retail \\
        --tau2-agent=examples.agents_sdk_agent:SdkSupportAgent --tau2-user-model=gpt-4o
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable
from typing import Any

from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    Runner,
    StopAtTools,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from tau2_retail import Toolbox

ENDING_TOOLS = ["end_conversation", "transfer_to_human_agents"]


def _in_order(function: Callable[..., str]) -> Callable[..., Awaitable[str]]:
    """``function`` as an async tool, run on the agent's own event loop.

    The SDK runs a sync function tool in a worker thread (``asyncio.to_thread``), so the calls
    of one model turn reach the toolbox in whatever order those threads start: on Python 3.13
    almost never the model's (a transfer could end the conversation before the return the
    model asked for first). Async tools are started in the model's order.
    """

    @functools.wraps(function)
    async def in_order(*args: Any, **kwargs: Any) -> str:
        return function(*args, **kwargs)

    return in_order


class SdkSupportAgent:
    """One conversation's agent (a fresh one per scenario: it keeps the SDK's history)."""

    name = "example-agents-sdk"
    version = "1"
    #: the model id (what ``--tau2-prices`` prices): a class attribute, which a run naming
    #: this class with ``--tau2-agent`` reads before it makes an agent
    model = os.environ.get("AGENT_MODEL", "gpt-4o-mini")

    def __init__(self, client: AsyncOpenAI | None = None, model: str | None = None) -> None:
        # No traces leave the machine (the SDK would upload them to OpenAI by default).
        set_tracing_disabled(True)
        self.client = client or AsyncOpenAI()
        self.owns_client = client is None
        if model is not None:
            self.model = model
        self.agent: Agent[Any] | None = None
        self.history: list[Any] = []
        self.seen = 0

    def _build(self, instructions: str, toolbox: Toolbox) -> Agent[Any]:
        return Agent(
            name="support",
            instructions=instructions,
            model=OpenAIChatCompletionsModel(model=self.model, openai_client=self.client),
            tools=[
                function_tool(_in_order(f), strict_mode=False) for f in toolbox.functions.values()
            ],
            tool_use_behavior=StopAtTools(stop_at_tool_names=ENDING_TOOLS),
        )

    async def converse(self, messages: list[dict[str, Any]], toolbox: Toolbox) -> str:
        if self.agent is None:
            self.agent = self._build(messages[0]["content"], toolbox)
        new = messages[self.seen :]
        first = self.seen == 0
        self.seen = len(messages)
        for message in new:
            # the customer's words; on the first turn also the harness's fixed greeting (the
            # SDK's history already holds its own tool calls and answers)
            if message["role"] == "user" or (
                first and message["role"] == "assistant" and not message.get("tool_calls")
            ):
                self.history.append({"role": message["role"], "content": message["content"]})
        result = await Runner.run(self.agent, self.history, max_turns=50)
        self.history = result.to_input_list()
        # the suite never sees the SDK's requests: tell it what this turn's run spent
        usage = result.context_wrapper.usage
        toolbox.record_usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            requests=usage.requests,
            cached_tokens=usage.input_tokens_details.cached_tokens,
        )
        return "" if toolbox.ended else str(result.final_output or "")

    async def aclose(self) -> None:
        """Called by the harness when the scenario's conversation is over."""
        if self.owns_client:
            await self.client.close()
