"""Example agents written against the agent contract of ``tau2_retail`` (see docs/agents.md).

Each runs in the suite's CI against the loopback server that plays the gold script
(``tests/examples``)."""
