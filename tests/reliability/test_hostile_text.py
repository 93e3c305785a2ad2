"""Hostile text from an endpoint (issue 21, items 3 and 5): every artifact is still written and
is strict JSON, the terminal shows model and judge text with control characters escaped, the
API key an endpoint echoes is masked everywhere, and each turn records its ``finish_reason``.

One run (``-n 2``) against the loopback server on 127.0.0.1, one fault per scenario.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from tau2_retail.data.tasks import Task
from tau2_retail.testing.bench import Bench
from tau2_retail.testing.loopback_server import Completion, HttpError
from tau2_retail.testing.scripted_endpoint import ScriptedEndpoint, once

KEY_ENV = "HOSTILE_TAU2_API_KEY"
KEY = "hostile-tau2-key-5e0c2b7d9a1f4c36"
# The judge's JSON spells half a surrogate pair, an ANSI colour and a newline in a reason.
HOSTILE_REASON = "\\ud83d cut \\u001b[31mRED\\u001b[0m\\nFAKE LINE \\u202eesrever"


def _strict(name: str) -> Any:
    raise AssertionError(f"{name} in an artifact: not JSON")


def _strings(value: Any) -> str:
    """Every string inside a JSON value, joined (to search the text, not its JSON spelling)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, list):
        return "\n".join(_strings(item) for item in value)
    return ""


def _judge_reply(task: Task, *, score: str = "0.2") -> Completion:
    verdicts = ", ".join(
        f'{{"index": {index}, "passed": {"false" if index == 1 else "true"}, '
        f'"reason": "{HOSTILE_REASON if index == 1 else "said"}"}}'
        for index in range(1, len(task.nl_assertions) + 1)
    )
    return Completion(
        content=f'{{"score": {score}, "reason": "x", "nl_assertion_verdicts": [{verdicts}]}}'
    )


def test_hostile_text_is_written_strict_masked_and_printed_escaped(
    bench: Bench, endpoint: ScriptedEndpoint, tasks: Mapping[str, Task]
) -> None:
    nl_tasks = sorted((t for t in tasks.values() if t.nl_assertions), key=lambda t: int(t.id))
    surrogate, nan_score = nl_tasks[0], nl_tasks[1]
    retry_nan, echo = "1", "5"

    def judge(task: Task, **kwargs: str) -> Any:
        reply = _judge_reply(task, **kwargs)
        return lambda request: reply if request.role == "judge" else None

    endpoint.faults[surrogate.id] = judge(surrogate)
    endpoint.faults[nan_score.id] = judge(nan_score, score="NaN")
    endpoint.faults[retry_nan] = once(HttpError.rate_limited(retry_after="nan"))
    endpoint.faults[echo] = once(Completion(content=f"Your key is {KEY}, keep it safe"))
    bench.env[KEY_ENV] = KEY
    selected = ",".join([surrogate.id, nan_score.id, retry_nan, echo])

    run = bench.run(
        "-n", "2", f"--tau2-tasks={selected}", "--tau2-run-id=hostile",
        *endpoint.args("agent", max_retries=1, api_key_env=KEY_ENV),
        *endpoint.args("judge", api_key_env=KEY_ENV),
    )  # fmt: skip

    assert "Traceback" not in run.output
    outcomes = run.outcomes()
    assert len(outcomes) == 4, run.output
    assert outcomes[f"tau2_retail__{retry_nan}"] == "passed", run.output
    assert outcomes[f"tau2_retail__{echo}"] == "passed", run.output
    # the lone surrogate no longer loses the scenario: judged, recorded, failed on its NL
    assert outcomes[f"tau2_retail__{surrogate.id}"] == "failed", run.output
    run_dir = bench.run_dir("hostile")
    judged = json.loads(
        (run_dir / f"tau2_retail__{surrogate.id}" / "judge_result.json").read_text()
    )
    assert "\ufffd cut \x1b[31mRED\x1b[0m\nFAKE LINE" in _strings(judged)  # kept as sent
    summary = bench.summary("hostile")
    assert summary["counts"]["lost"] == 0
    assert summary["counts"]["reported"] == 4

    # terminal: escaped, one line per reason
    assert "\x1b" not in run.stdout
    assert "\u202e" not in run.stdout
    assert "\ufffd cut \\x1b[31mRED\\x1b[0m\\nFAKE LINE \\u202eesrever" in run.stdout
    assert not [line for line in run.stdout.splitlines() if line.startswith("FAKE LINE")]

    # Retry-After: nan is no wait at all, not a NaN in the record
    metrics = bench.metrics("hostile", f"tau2_retail__{retry_nan}")
    agent_requests = metrics["requests"]["agent"]
    assert agent_requests["retries"] == 1
    assert agent_requests["wait_seconds"] == pytest.approx(agent_requests["wait_seconds"])

    # strict JSON everywhere, the key nowhere
    written = [path for path in run_dir.rglob("*") if path.is_file()]
    for path in written:
        if path.suffix == ".json":
            json.loads(path.read_text(encoding="utf-8"), parse_constant=_strict)
        assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in run.output
    transcript = json.loads((run_dir / f"tau2_retail__{echo}" / "transcript.json").read_text())
    said = [m for m in transcript["messages"] if m["role"] == "assistant" and m.get("content")]
    assert any("Your key is ***, keep it safe" in m["content"] for m in said)

    # finish_reason per turn, as the server said it
    finishes = [m.get("finish_reason") for m in transcript["messages"] if m["role"] == "assistant"]
    assert finishes[0] is None  # the harness's greeting: no endpoint said it
    assert set(finishes[1:]) == {"stop", "tool_calls"}
