"""tau2_retail: the 114 retail scenarios of tau2-bench as a pytest benchmark.

One folder per concept, imports pointing down (``tests/test_layers.py`` holds the order)::

    errors.py  the one error tree; codec.py  the one record codec (every run file)
    tools/     the retail domain: store, 16 tools + end_conversation, schemas, dispatch
               (the checkout's top-level ``tools/``, installed as ``tau2_retail.tools``)
    data/      pinned upstream files, tasks, seed database, gold replay
    models/    chat messages, the ChatModel protocol, OpenAI client, built-in models, agents
    engine/    profiles, prompts, conversation, judge, signals, one scenario end to end
    results/   atomic writes, artifacts, run summaries, the gate, statistics
    report/    the HTML report
    settings/  the settings schema and their resolution (pytest options and ``run`` flags)
    cli/       ``python -m tau2_retail``
    plugins/   the pytest plugin (top-level ``plugins/``, installed as ``tau2_retail.plugins``)
    testing/   loopback server and helpers for tests and benchmarks

The public surface for your own agent (docs/agents.md): the agent contract in two styles,
``TurnAgent`` (``respond(messages, tools)``) and ``LoopAgent`` (``converse(messages, toolbox)``
with a ``Toolbox``), and ``AgentInfraError`` for an outage of the agent's own backend.
"""

from __future__ import annotations

from tau2_retail.errors import AgentInfraError
from tau2_retail.models.agent import LoopAgent, Toolbox, TurnAgent

__all__ = ["AgentInfraError", "LoopAgent", "Toolbox", "TurnAgent"]
