"""A minimal turn-style agent: one chat completion per turn, with the ``openai`` client.

The harness gives ``respond`` the conversation (system prompt, customer and agent turns, tool
calls and results) and the tools, exactly as it would send them to a model endpoint; the
completion's message goes back as the next turn and the harness runs its tool calls.

Run it (from the folder that holds ``examples/``; ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``
configure the client as usual, ``AGENT_MODEL`` names the model)::

    python -m pytest --pyargs tests_tau2_retail --tau2-agent=examples.turn_agent:SupportAgent \\
        --tau2-user-model=gpt-4o --tau2-judge-model=gpt-4o
"""

from __future__ import annotations

import os
from typing import Any

from openai import OpenAI


class SupportAgent:
    """Our support agent: the model behind ``client`` answers each turn."""

    name = "example-turn-agent"
    version = "1"
    #: the model id (what ``--tau2-prices`` prices): a class attribute, which a run naming
    #: this class with ``--tau2-agent`` reads before it makes an agent
    model = os.environ.get("AGENT_MODEL", "gpt-4o-mini")

    def __init__(self, client: OpenAI | None = None, model: str | None = None) -> None:
        self.client = client or OpenAI()
        self.owns_client = client is None
        if model is not None:
            self.model = model

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        completion = self.client.chat.completions.create(
            model=self.model,
            messages=messages,  # type: ignore[arg-type]
            tools=tools,  # type: ignore[arg-type]
        )
        return completion.choices[0].message

    def close(self) -> None:
        """Called by the harness when the scenario's conversation is over."""
        if self.owns_client:
            self.client.close()
