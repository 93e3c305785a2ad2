"""What asking an unreadable judge again costs (issue 18, item 2): prints a table.

Run: ``python benchmarks/bench_judge_retry.py``. One judgement of three assertions through the
real client against the loopback server (127.0.0.1), for a judge that answers JSON, JSON in a
fence, prose once then JSON, and prose twice; median of 50 each. Timings, never assertions.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time

import _checkout  # noqa: F401  (this checkout's tau2_retail, or a clear stop)

from tau2_retail.engine.judge import judge_scenario
from tau2_retail.models import EndpointConfig, OpenAIChatModel
from tau2_retail.models.messages import Message, Role
from tau2_retail.testing.loopback_server import Completion, LoopbackOpenAIServer

ASSERTIONS = ("The agent states the refund.", "The agent apologizes.", "No order is cancelled.")
MESSAGES = (
    Message(role=Role.ASSISTANT, content="Hi! How can I help you today?"),
    Message(role=Role.USER, content="I want a refund. ###STOP###"),
)
VERDICTS = [{"index": n, "passed": True, "reason": "seen"} for n in (1, 2, 3)]
JSON = json.dumps({"score": 1, "reason": "ok", "nl_assertion_verdicts": VERDICTS})
PROSE = "The agent met every assertion; well done."
CASES = {
    "JSON": [JSON],
    "JSON in a fence": [f"```json\n{JSON}\n```"],
    "prose once, then JSON": [PROSE, JSON],
    "prose twice (judge's infra error)": [PROSE, PROSE],
}
REPEATS = 50


async def measure(server: LoopbackOpenAIServer, replies: list[str]) -> tuple[float, int]:
    config = EndpointConfig(model="judge", base_url=server.base_url, max_retries=0)
    times = []
    requests = 0
    async with OpenAIChatModel(config) as model:
        for _ in range(REPEATS):
            server.enqueue(*(Completion(content=text) for text in replies))
            before = len(server.requests)
            started = time.perf_counter()
            await judge_scenario(
                model,
                assertions=ASSERTIONS,
                messages=MESSAGES,
                reference_actions=(),
                recorded_actions=(),
                seed=1,
            )
            times.append(time.perf_counter() - started)
            requests = len(server.requests) - before
    return statistics.median(times), requests


def main() -> None:
    print(f"median of {REPEATS}, loopback server")
    print("| judge answers | requests | judgement (ms) |\n| --- | ---: | ---: |")
    with LoopbackOpenAIServer() as server:
        for name, replies in CASES.items():
            seconds, requests = asyncio.run(measure(server, replies))
            print(f"| {name} | {requests} | {seconds * 1000:.2f} |")


if __name__ == "__main__":
    main()
