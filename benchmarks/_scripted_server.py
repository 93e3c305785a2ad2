"""The scripted model server of ``bench_server.py`` and ``bench_concurrency.py``.

``ScriptedDialogue`` answers as a fixed agent and customer (20 completions per scenario, every
scenario a success: see ``bench_server.py``); ``ServerProcess`` runs it behind
``tau2_retail.testing.loopback_server`` in a process of its own (this file run as a script), so
that its thread does not compete for the GIL of the process that measures; ``run_args`` are the
pytest options of a run whose agent and user are its models.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import _checkout  # noqa: F401  (this checkout's tau2_retail first)
from _measure import ROOT

AGENT_MODEL = "bench-agent"
USER_MODEL = "bench-user"
AGENT_TOOL_TURNS = 16
COMPLETIONS_PER_SCENARIO = AGENT_TOOL_TURNS + 2 + 2
BACKLOG = 2048
ANYTHING_ELSE = "Is there anything else I can help you with?"


class ScriptedDialogue:
    """The responder: a fixed agent and customer, finding the task from the request itself."""

    def __init__(self, data_dir: Path) -> None:
        from tau2_retail.data.seed import load_seed
        from tau2_retail.data.tasks import load_tasks, load_user_guidelines
        from tau2_retail.engine.prompts import user_system_prompt
        from tau2_retail.models.builtin import ScriptedCustomer

        tasks = load_tasks(data_dir)
        guidelines = load_user_guidelines(data_dir)
        self.opening_of = {task.id: ScriptedCustomer(task).opening() for task in tasks.values()}
        self.task_by_opening = {text: tasks[task_id] for task_id, text in self.opening_of.items()}
        self.task_by_user_prompt = {
            user_system_prompt(guidelines, task): task for task in tasks.values()
        }
        products = list(load_seed(data_dir).tables["products"])
        self.padding = [
            ("get_product_details", {"product_id": products[i % len(products)]})
            for i in range(AGENT_TOOL_TURNS)
        ]
        self._calls: dict[str, list[tuple[str, str]]] = {}
        self.counts: Counter[str] = Counter()
        self.first: float | None = None
        self.last: float | None = None
        self.cpu_at_reset = 0.0

    def __call__(self, body: Any) -> Any:
        from tau2_retail.testing.loopback_server import Completion, HttpError

        now = time.monotonic()
        if self.first is None:
            self.first = now
        self.last = now
        model = body.get("model")
        self.counts[str(model)] += 1
        messages = body["messages"]
        if model == USER_MODEL:
            return Completion(content=self.user_reply(messages))
        if model == AGENT_MODEL:
            return self.agent_reply(messages)
        return HttpError.openai(404, f"unknown model {model!r}")

    def user_reply(self, messages: list[dict[str, Any]]) -> str:
        # The simulator's own past turns are 'assistant' in its view, the agent's text 'user'.
        if not any(m["role"] == "assistant" for m in messages):
            task = self.task_by_user_prompt[messages[0]["content"]]
            return self.opening_of[task.id]
        if "anything else" in (messages[-1].get("content") or "").lower():
            return "No, that's all I needed. Thank you! ###STOP###"
        return "Yes, please go ahead."

    def agent_reply(self, messages: list[dict[str, Any]]) -> Any:
        from tau2_retail.testing.loopback_server import Completion, ReplyToolCall

        opening = next(m["content"] for m in messages if m["role"] == "user")
        task = self.task_by_opening[opening]
        made = sum(len(m.get("tool_calls") or ()) for m in messages if m["role"] == "assistant")
        calls = self.calls_of(task)
        if made < len(calls):
            name, arguments = calls[made]
            return Completion(tool_calls=(ReplyToolCall(name=name, arguments=arguments),))
        last = messages[-1]
        if last["role"] == "user" and "###STOP###" in (last.get("content") or ""):
            return Completion(tool_calls=(ReplyToolCall(name="end_conversation"),))
        return Completion(content=f"I have taken care of your request. {ANYTHING_ELSE}")

    def calls_of(self, task: Any) -> list[tuple[str, str]]:
        """The agent's tool calls for ``task`` (name, JSON arguments), computed once."""
        calls = self._calls.get(task.id)
        if calls is None:
            calls = [(a.name, json.dumps(a.plain_arguments())) for a in task.actions]
            padding = self.padding[: max(0, AGENT_TOOL_TURNS - len(calls))]
            calls += [(name, json.dumps(arguments)) for name, arguments in padding]
            self._calls[task.id] = calls
        return calls

    def stats(self) -> dict[str, Any]:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "requests": dict(self.counts),
            "first_request": self.first,
            "last_request": self.last,
            "cpu_s": usage.ru_utime + usage.ru_stime - self.cpu_at_reset,
            "maxrss_mb": usage.ru_maxrss / 1024,
        }

    def reset(self) -> None:
        self.counts.clear()
        self.first = self.last = None
        usage = resource.getrusage(resource.RUSAGE_SELF)
        self.cpu_at_reset = usage.ru_utime + usage.ru_stime


def serve(latency: float) -> int:
    """Server mode: print the base URL, then answer ``stats``/``reset`` lines until stdin ends."""
    from tau2_retail.data.files import resolve_data_dir
    from tau2_retail.testing.loopback_server import LoopbackOpenAIServer

    dialogue = ScriptedDialogue(resolve_data_dir())
    # a listen backlog as uvicorn's (vLLM's server) and the kernel's default cap: 912
    # conversations connect within milliseconds
    with LoopbackOpenAIServer(
        responder=dialogue, latency=latency, record=False, backlog=BACKLOG
    ) as server:
        print(json.dumps({"base_url": server.base_url}), flush=True)
        for line in sys.stdin:
            command = line.strip()
            if command == "stats":
                print(json.dumps(dialogue.stats()), flush=True)
            elif command == "reset":
                dialogue.reset()
                print("{}", flush=True)
    return 0


class ServerProcess:
    """The benchmark's handle on the server process."""

    def __init__(self, latency: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--latency", str(latency)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.base_url: str = self._read()["base_url"]

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the server process ended before answering")
        value: dict[str, Any] = json.loads(line)
        return value

    def command(self, text: str) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)


def run_args(server: ServerProcess, out: Path, label: str) -> list[str]:
    """The pytest options of a run whose agent and user are the server's scripted models."""
    return [
        f"--tau2-output-dir={out}",
        f"--tau2-run-id={label}",
        f"--tau2-agent-model={AGENT_MODEL}",
        f"--tau2-agent-base-url={server.base_url}",
        f"--tau2-user-model={USER_MODEL}",
        f"--tau2-user-base-url={server.base_url}",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.1)
    return serve(parser.parse_args().latency)


if __name__ == "__main__":
    sys.exit(main())
