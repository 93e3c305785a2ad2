"""An async agent timed out by the scenario's deadline is closed, through the real plugin (pytest
in a subprocess, ``filterwarnings = error``): its client against a model that does not answer
is closed by its ``aclose()`` and the scenario keeps its ``timeout``."""

from __future__ import annotations

import pytest

from tau2_retail.testing.loopback_server import Hang, LoopbackOpenAIServer

from .conftest import Bench

AGENTS = """\
import os

from openai import AsyncOpenAI


class SlowModelAgent:
    def __init__(self):
        self.client = AsyncOpenAI(
            base_url=os.environ["SLOW_MODEL_URL"], api_key="x", max_retries=0
        )

    async def respond(self, messages, tools):
        return await self.client.chat.completions.create(
            model="m", messages=messages, tools=tools
        )

    async def aclose(self):
        await self.client.close()
        with open("closed.txt", "a") as out:
            out.write("closed\\n")
"""


@pytest.mark.tau2_subprocess
def test_an_async_agent_timed_out_on_a_slow_model_is_closed(
    bench: Bench, openai_server: LoopbackOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    openai_server.enqueue(Hang(), Hang())
    (bench.path / "my_agents.py").write_text(AGENTS, encoding="utf-8")
    monkeypatch.setenv("SLOW_MODEL_URL", openai_server.base_url)
    result = bench.run(
        "-n", "0", "-rA", "--tau2-tasks=10,12", "--tau2-concurrency=2",
        "--tau2-agent=my_agents:SlowModelAgent", "--tau2-max-duration=1", "--tau2-run-id=slow",
    )  # fmt: skip
    assert result.outcomes() == {
        "tau2_retail__10": "failed",
        "tau2_retail__12": "failed",
    }, result.output
    for task in ("10", "12"):
        metrics = bench.metrics("slow", f"tau2_retail__{task}")
        assert metrics["stop_reason"] == "timeout"
        assert "close()" not in metrics["stop_detail"]
        assert metrics["is_successful"] is False
    assert (bench.path / "closed.txt").read_text(encoding="utf-8") == "closed\n" * 2
