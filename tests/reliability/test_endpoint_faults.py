"""The endpoint fault matrix, end to end: one pytest run (``-n 2``) against the loopback server,
each fault injected into its own scenario, every outcome and the summary counts checked.

The agent, the customer simulator and the judge sit at a real aiohttp server on 127.0.0.1
that plays them by script (the agent reaches the gold database in three requests), except
where a fault replaces a reply. "Once" faults hit the scenario's first request of that role
only (the client's retry then gets the scripted reply); the others hit every request. The
README's "Failure behaviour" table is this matrix.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from tau2_retail.testing.bench import Bench
from tau2_retail.testing.loopback_server import (
    Completion,
    Drop,
    Hang,
    HttpError,
    InvalidJson,
    NoChoices,
    ReplyToolCall,
    SlowDrip,
)
from tau2_retail.testing.run_files import temp_files
from tau2_retail.testing.scripted_endpoint import Fault, ScriptedEndpoint, always, once

RETRIES = 1
TIMEOUT = 3.0  # seconds: far beyond a loopback reply, even on a loaded machine
SCRIPTED_AGENT_REQUESTS = 3  # gold actions, report, end_conversation


def _call(name: str, arguments: str, call_id: str) -> Completion:
    return Completion(tool_calls=(ReplyToolCall(name=name, arguments=arguments, id=call_id),))


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One fault, the task it is injected into, and the documented outcome."""

    fault: str
    task: str
    inject: Fault
    outcome: str  # the scenario's pytest outcome
    stop_reason: str
    agent_requests: int | None = None  # what reached the server (retries included)


PASSED, FAILED, ERROR = "passed", "failed", "error"
DRIP = SlowDrip(interval=0.5)  # a ~200-byte body would take ~100 s; the deadline is TIMEOUT
NESTED = '{"order_id": ' + "[" * 1000 + "]" * 1000 + "}"
INVALID = HttpError.openai(
    422,
    "validation failed: "
    + "; ".join(f"error {n}: messages.{n}.content should be a valid string" for n in range(1, 8)),
)
RETRIED = SCRIPTED_AGENT_REQUESTS + 1  # one failed attempt, then the script

MATRIX = (
    Row(fault="none (control)", task="0", inject=lambda r: None, outcome=PASSED,
        stop_reason="agent_exit", agent_requests=SCRIPTED_AGENT_REQUESTS),
    Row(fault="429 with Retry-After: 1, once", task="1",
        inject=once(HttpError.rate_limited(retry_after="1")), outcome=PASSED,
        stop_reason="agent_exit", agent_requests=RETRIED),
    Row(fault="429 without Retry-After, once", task="5",
        inject=once(HttpError.rate_limited()), outcome=PASSED, stop_reason="agent_exit",
        agent_requests=RETRIED),
    Row(fault="429 on every attempt", task="6",
        inject=always(HttpError.rate_limited(retry_after="0")), outcome=ERROR,
        stop_reason="infra_error", agent_requests=RETRIES + 1),
    Row(fault="500, once", task="7", inject=once(HttpError.server_error(500)), outcome=PASSED,
        stop_reason="agent_exit", agent_requests=RETRIED),
    Row(fault="502, once", task="8", inject=once(HttpError.server_error(502)), outcome=PASSED,
        stop_reason="agent_exit", agent_requests=RETRIED),
    Row(fault="503, once", task="9", inject=once(HttpError.server_error(503)), outcome=PASSED,
        stop_reason="agent_exit", agent_requests=RETRIED),
    Row(fault="503 on every attempt", task="11", inject=always(HttpError.server_error(503)),
        outcome=ERROR, stop_reason="infra_error", agent_requests=RETRIES + 1),
    Row(fault="401 (bad key)", task="13",
        inject=always(HttpError.openai(401, "Incorrect API key provided.")), outcome=ERROR,
        stop_reason="infra_error", agent_requests=1),
    Row(fault="hang past the timeout, once", task="14", inject=once(Hang()), outcome=PASSED,
        stop_reason="agent_exit", agent_requests=RETRIED),
    Row(fault="hang past the timeout on every attempt", task="17", inject=always(Hang()),
        outcome=ERROR, stop_reason="infra_error", agent_requests=RETRIES + 1),
    Row(fault="dropped connection, once", task="18", inject=once(Drop()), outcome=PASSED,
        stop_reason="agent_exit", agent_requests=RETRIED),
    Row(fault="dropped connection on every attempt", task="25", inject=always(Drop()),
        outcome=ERROR, stop_reason="infra_error", agent_requests=RETRIES + 1),
    Row(fault="invalid JSON body, once", task="27", inject=once(InvalidJson()), outcome=PASSED,
        stop_reason="agent_exit", agent_requests=RETRIED),
    Row(fault="reply with no choices, once", task="33", inject=once(NoChoices()),
        outcome=PASSED, stop_reason="agent_exit", agent_requests=RETRIED),
    Row(fault="malformed tool-call arguments", task="34",
        inject=once(_call("get_user_details", '{"user_id": ', "bad-1")), outcome=PASSED,
        stop_reason="agent_exit", agent_requests=RETRIED),
    Row(fault="unknown tool", task="48", inject=once(_call("delete_all_orders", "{}", "bad-1")),
        outcome=PASSED, stop_reason="agent_exit", agent_requests=RETRIED),
    Row(fault="half a surrogate pair in the reply text", task="61",
        inject=once(Completion(content="One moment \ud83d")), outcome=PASSED,
        stop_reason="agent_exit", agent_requests=RETRIED),
    Row(fault="half a surrogate pair in a tool name", task="65",
        inject=once(_call("get_order_details\ud83d", "{}", "bad-1")), outcome=PASSED,
        stop_reason="agent_exit", agent_requests=RETRIED),
    Row(fault="half a surrogate pair escaped in tool-call arguments", task="66",
        inject=once(_call("get_user_details", '{"user_id": "x", "\\ud83d": 1}', "bad-1")),
        outcome=PASSED, stop_reason="agent_exit", agent_requests=RETRIED),
    Row(fault="empty assistant message, once", task="51", inject=once(Completion(content="")),
        outcome=PASSED, stop_reason="agent_exit", agent_requests=RETRIED),
    Row(fault="empty assistant message, twice", task="52",
        inject=always(Completion(content="")), outcome=FAILED, stop_reason="agent_error",
        agent_requests=2),
    Row(fault="endless tool-call loop", task="53",
        inject=always(_call("calculate", '{"expression": "2 + 2"}', "loop")), outcome=FAILED,
        stop_reason="max_steps"),
    Row(fault="endless failing tool calls", task="57",
        inject=always(_call("get_order_details", '{"order_id": "#W0000000"}', "loop")),
        outcome=FAILED, stop_reason="too_many_errors", agent_requests=10),
    Row(fault="context-length 400", task="58",
        inject=always(HttpError.context_length_exceeded()), outcome=FAILED,
        stop_reason="context_window_exceeded", agent_requests=1),
    Row(fault="customer simulator: 503 on every attempt", task="69",
        inject=always(HttpError.server_error(503), role="user"), outcome=ERROR,
        stop_reason="infra_error", agent_requests=0),
    Row(fault="customer simulator: empty message twice", task="71",
        inject=always(Completion(content=""), role="user"), outcome=ERROR,
        stop_reason="infra_error", agent_requests=0),
    # issue 18: an unreadable judge reply is asked again once; still unreadable, the judge failed
    Row(fault="judge answers prose", task="40",
        inject=always(Completion(content="The agent did a great job overall."), role="judge"),
        outcome=ERROR, stop_reason="agent_exit", agent_requests=SCRIPTED_AGENT_REQUESTS),
    Row(fault="judge answers prose once, then JSON", task="36",
        inject=once(Completion(content="The agent did a great job overall."), role="judge"),
        outcome=PASSED, stop_reason="agent_exit", agent_requests=SCRIPTED_AGENT_REQUESTS),
    Row(fault="judge endpoint down (503 on every attempt)", task="38",
        inject=always(HttpError.server_error(503), role="judge"), outcome=ERROR,
        stop_reason="agent_exit", agent_requests=SCRIPTED_AGENT_REQUESTS),
    # issue 12: a slow drip (headers, then one byte per interval) never trips a per-read timeout
    Row(fault="slow drip past the deadline, once", task="10", inject=once(DRIP), outcome=PASSED,
        stop_reason="agent_exit"),
    Row(fault="slow drip on every attempt", task="12", inject=always(DRIP), outcome=ERROR,
        stop_reason="infra_error", agent_requests=RETRIES + 1),
    Row(fault="customer simulator: slow drip on every attempt", task="15",
        inject=always(DRIP, role="user"), outcome=ERROR, stop_reason="infra_error",
        agent_requests=0),
    Row(fault="customer simulator: hang on every attempt", task="20",
        inject=always(Hang(), role="user"), outcome=ERROR, stop_reason="infra_error",
        agent_requests=0),
    Row(fault="judge: slow drip on every attempt", task="2", inject=always(DRIP, role="judge"),
        outcome=ERROR, stop_reason="agent_exit", agent_requests=SCRIPTED_AGENT_REQUESTS),
    Row(fault="judge: hang on every attempt", task="3", inject=always(Hang(), role="judge"),
        outcome=ERROR, stop_reason="agent_exit", agent_requests=SCRIPTED_AGENT_REQUESTS),
    Row(fault="judge: refused (401)", task="4",
        inject=always(HttpError.openai(401, "Incorrect API key provided."), role="judge"),
        outcome=ERROR, stop_reason="agent_exit", agent_requests=SCRIPTED_AGENT_REQUESTS),
    Row(fault="judge answers 100,000 '['", task="16",
        inject=always(Completion(content="[" * 100_000), role="judge"), outcome=ERROR,
        stop_reason="agent_exit", agent_requests=SCRIPTED_AGENT_REQUESTS),
    Row(fault="422 invalid request", task="22", inject=always(INVALID), outcome=ERROR,
        stop_reason="infra_error", agent_requests=1),
    Row(fault="429 with Retry-After: 3600", task="23",
        inject=always(HttpError.rate_limited(retry_after="3600")), outcome=ERROR,
        stop_reason="infra_error", agent_requests=1),
    Row(fault="customer simulator: 401 (bad key)", task="30",
        inject=always(HttpError.openai(401, "Incorrect API key provided."), role="user"),
        outcome=ERROR, stop_reason="infra_error", agent_requests=0),
    Row(fault="customer simulator: dropped connection on every attempt", task="31",
        inject=always(Drop(), role="user"), outcome=ERROR, stop_reason="infra_error",
        agent_requests=0),
    Row(fault="customer simulator: 429 with Retry-After: 3600", task="32",
        inject=always(HttpError.rate_limited(retry_after="3600"), role="user"), outcome=ERROR,
        stop_reason="infra_error", agent_requests=0),
    Row(fault="customer simulator: invalid JSON body on every attempt", task="35",
        inject=always(InvalidJson(), role="user"), outcome=ERROR, stop_reason="infra_error",
        agent_requests=0),
    Row(fault="judge: dropped connection on every attempt", task="21",
        inject=always(Drop(), role="judge"), outcome=ERROR, stop_reason="agent_exit",
        agent_requests=SCRIPTED_AGENT_REQUESTS),
    Row(fault="judge: 429 with Retry-After: 3600", task="24",
        inject=always(HttpError.rate_limited(retry_after="3600"), role="judge"), outcome=ERROR,
        stop_reason="agent_exit"),
    Row(fault="judge: invalid JSON body on every attempt", task="28",
        inject=always(InvalidJson(), role="judge"), outcome=ERROR, stop_reason="agent_exit",
        agent_requests=SCRIPTED_AGENT_REQUESTS),
    Row(fault="judge: context-length 400", task="29",
        inject=always(HttpError.context_length_exceeded(), role="judge"), outcome=ERROR,
        stop_reason="agent_exit", agent_requests=SCRIPTED_AGENT_REQUESTS),
    Row(fault="tool arguments nested 1000 deep", task="26",
        inject=once(_call("get_order_details", NESTED, "bad-1")), outcome=PASSED,
        stop_reason="agent_exit"),
    Row(fault="escaped lone surrogate in tool arguments (judged)", task="19",
        inject=once(_call("get_order_details", '{"order_id": "\\ud83d"}', "bad-1")),
        outcome=PASSED, stop_reason="agent_exit", agent_requests=RETRIED),
)  # fmt: skip

ROWS = {row.task: row for row in MATRIX}
RUN_ID = "faults"


def _scenario(task: str) -> str:
    return f"tau2_retail__{task}"


def test_fault_matrix(bench: Bench, endpoint: ScriptedEndpoint) -> None:
    assert len(ROWS) == len(MATRIX), "one task per fault"
    for row in MATRIX:
        judged = row.fault.startswith("judge") or "(judged)" in row.fault
        assert bool(endpoint.tasks[row.task].nl_assertions) == judged, row
        endpoint.faults[row.task] = row.inject
    run = bench.run(
        "-n",
        "2",
        f"--tau2-run-id={RUN_ID}",
        f"--tau2-tasks={','.join(ROWS)}",
        *endpoint.args("agent", timeout=TIMEOUT, max_retries=RETRIES),
        *endpoint.args("user", timeout=TIMEOUT, max_retries=RETRIES),
        *endpoint.args("judge", timeout=TIMEOUT, max_retries=RETRIES),
        # the breaker has its own test: here it must not let one row's failures end another's
        "--tau2-breaker-failures=1000",
        "--tau2-breaker-probe-seconds=0",
    )
    assert run.returncode == 1, run.output  # tests failed; the run itself completed
    assert "tau2 retail" in run.stdout

    # every scenario: its pytest outcome and its stop reason
    outcomes = run.outcomes()
    observed = {
        row.fault: (
            outcomes.get(_scenario(row.task)),
            bench.metrics(RUN_ID, _scenario(row.task))["stop_reason"],
        )
        for row in MATRIX
    }
    assert observed == {row.fault: (row.outcome, row.stop_reason) for row in MATRIX}

    # what reached the server: retried once, retried until the budget ran out, or not at all
    requests = {row.fault: len(endpoint.requests(row.task)) for row in MATRIX}
    assert requests == {
        row.fault: row.agent_requests if row.agent_requests is not None else requests[row.fault]
        for row in MATRIX
    }

    # the summary counts: infra errors excluded from the rates, nothing lost
    summary = bench.summary(RUN_ID)
    n_infra = sum(row.outcome == ERROR for row in MATRIX)
    n_passed = sum(row.outcome == PASSED for row in MATRIX)
    assert summary["counts"] == {
        "expected": len(MATRIX),
        "reported": len(MATRIX),
        "scored": len(MATRIX) - n_infra,
        "succeeded": n_passed,
        "failed": len(MATRIX) - n_infra - n_passed,
        "infra_errors": n_infra,
        "lost": 0,
    }
    rate = summary["success_rate"]
    assert {key: rate[key] for key in ("passed", "total", "rate")} == {
        "passed": n_passed,
        "total": len(MATRIX) - n_infra,
        "rate": n_passed / (len(MATRIX) - n_infra),
    }
    assert summary["stop_reasons"] == dict(Counter(row.stop_reason for row in MATRIX))
    infra_listed = {entry["scenario_id"] for entry in summary["infra_errors"]}
    assert infra_listed == {_scenario(row.task) for row in MATRIX if row.outcome == ERROR}
    assert not temp_files(bench.output_dir)
    # no NL subtest shows a traceback or a repr
    assert "assert verdict.passed" not in run.stdout

    _check_details(bench, endpoint)


def _detail(bench: Bench, task: str) -> str:
    return str(bench.metrics(RUN_ID, _scenario(task))["stop_detail"])


def _tool_results(bench: Bench, task: str) -> list[dict[str, object]]:
    transcript = bench.read_json(RUN_ID, f"{_scenario(task)}/transcript.json")
    return [m for m in transcript["messages"] if m["role"] == "tool"]


def _check_details(bench: Bench, endpoint: ScriptedEndpoint) -> None:
    # Retry-After is honoured, and without it the client backs off (base 1 s)
    for task in ("1", "5"):
        first, second = endpoint.requests(task)[:2]
        assert second.at - first.at >= 0.95, (task, second.at - first.at)

    # infra errors say what failed, and how often it was tried
    expected_details = {
        "6": "HTTP 429",
        "11": "HTTP 503",
        "13": "HTTP 401 (not retried: check the base URL, model name and API key)",
        "17": f"no complete reply within the {TIMEOUT:g} s timeout",
        "25": "connection failed",
        "69": "user: model 'scripted-user'",
        "71": "user: the simulator returned an empty message twice",
        "12": f"no complete reply within the {TIMEOUT:g} s timeout",
        "15": "user: model 'scripted-user'",
        "20": f"no complete reply within the {TIMEOUT:g} s timeout",
        "2": "judge: model 'scripted-judge'",
        "3": f"no complete reply within the {TIMEOUT:g} s timeout",
        "22": "HTTP 422 (not retried: the server rejected the request as invalid",
        "23": "asks to wait 3600 s, more than the 30 s backoff cap",
    }
    for task, text in expected_details.items():
        detail = _detail(bench, task)
        assert text in detail, (task, detail)
        if task != "71":
            attempts = 1 if task in ("13", "22", "23") else RETRIES + 1
            assert f"after {attempts} attempt(s)" in detail, (task, detail)

    # malformed output is the model's fault: a tool error it can read, and the run goes on
    malformed = _tool_results(bench, "34")[0]
    assert malformed["error"] is True
    assert str(malformed["content"]).startswith(
        "Error: Invalid JSON in the arguments of get_user_details: "
    )
    assert _tool_results(bench, "48")[0]["content"] == "Error: Tool 'delete_all_orders' not found."
    # half a surrogate pair (no UTF-8 text can hold it) arrives as U+FFFD, and the run goes on
    turns = bench.metrics(RUN_ID, _scenario("61"))["turns"]
    assert {"role": "agent", "text": "One moment \ufffd"} in [
        {"role": t["role"], "text": t["text"]} for t in turns
    ]
    assert _tool_results(bench, "65")[0]["content"] == (
        "Error: Tool 'get_order_details\ufffd' not found."
    )
    assert _tool_results(bench, "66")[0]["content"] == (
        "Error: get_user_details got an unexpected argument '\ufffd'"
    )
    assert "empty message twice" in _detail(bench, "52")
    assert "context window" in _detail(bench, "58")
    assert bench.metrics(RUN_ID, _scenario("53"))["db_state_match"] is False
    assert bench.metrics(RUN_ID, _scenario("57"))["stop_detail"] == "10 tool errors"

    # the whole body of an invalid-request error is kept (the excerpt stops at 300 characters)
    kept = (bench.run_dir(RUN_ID) / _scenario("22") / "endpoint_error.txt").read_text()
    assert "error 7: messages.7.content should be a valid string" in kept
    assert "error 7" not in _detail(bench, "22")
    # retries are visible per role
    for task in ("7", "10"):
        assert bench.metrics(RUN_ID, _scenario(task))["requests"]["agent"]["retries"] == 1
    # hostile tool arguments become tool errors; U+FFFD reaches the transcript and judge prompt
    assert _tool_results(bench, "26")[0]["error"] is True
    judged = bench.read_json(RUN_ID, f"{_scenario('19')}/judge_result.json")
    assert '"order_id": "\ufffd"' in judged["judge_input"]["user_content"]
    # a judge outage is an infra error of the judge: conversation kept, marked for re-judging;
    # so is a prompt too long for the judge's model (29): its window, not the agent's failure
    assert "judge: model 'scripted-judge'" in _detail(bench, "29")
    assert "context window" in _detail(bench, "29")
    for task in ("38", "2", "3", "4", "21", "24", "28", "29"):
        metrics = bench.metrics(RUN_ID, _scenario(task))
        assert (metrics["infra_role"], metrics["needs_judging"]) == ("judge", True), task
        assert (metrics["db_state_match"], metrics["stop_reason"]) == (True, "agent_exit")
        assert not (bench.run_dir(RUN_ID) / _scenario(task) / "judge_result.json").exists()
        assert (
            "=== ended: agent_exit"
            in (bench.run_dir(RUN_ID) / _scenario(task) / "conversation_log.txt").read_text()
        )

    # a judge that answers prose or 100,000 '[' (twice): every verdict false, with the reason;
    # the judge's infra error, its replies kept whole and marked for re-judging
    for task, text in (("40", "no JSON object"), ("16", "no JSON object")):
        judged = bench.read_json(RUN_ID, f"{_scenario(task)}/judge_result.json")
        verdicts = judged["nl_assertion_verdicts"]
        assert len(verdicts) == len(endpoint.tasks[task].nl_assertions)
        assert all(v["passed"] is False for v in verdicts), verdicts
        assert all(v["reason"].startswith("Judge error: ") for v in verdicts), verdicts
        assert text in judged["error"], judged["error"]
        metrics = bench.metrics(RUN_ID, _scenario(task))
        assert json.dumps(judged).count("Judge error: ") >= len(verdicts)
        assert (metrics["infra_role"], metrics["needs_judging"]) == ("judge", True)
        assert metrics["judge_unreadable_replies"] == 2
        assert len(endpoint.requests(task, role="judge")) == 2  # asked again once
        assert judged["unreadable"] is True
        assert len(judged["unreadable_replies"]) == 2
        assert judged["raw_reply"] == judged["unreadable_replies"][-1]  # kept whole
    retried = bench.metrics(RUN_ID, _scenario("36"))
    assert (retried["judge_unreadable_replies"], retried["nl_assertion_pass_rate"]) == (1, 1.0)
    assert bench.summary(RUN_ID)["judge_replies"]["unreadable"] == 5


def test_a_down_endpoint_fails_fast_and_resume_completes_the_run(
    bench: Bench, endpoint: ScriptedEndpoint
) -> None:
    """Item 6 of issue 12: after K failed attempts the agent endpoint counts as down; the other
    scenarios of the process end at once, naming it; resume runs them once it is back."""
    tasks = ("0", "1", "5", "6", "7")
    endpoint.default_fault = always(HttpError.server_error(503))
    args = (
        "-n", "0", "--tau2-run-id=down", f"--tau2-tasks={','.join(tasks)}",
        *endpoint.args("agent", timeout=TIMEOUT, max_retries=1),
        "--tau2-breaker-failures=2", "--tau2-breaker-window-seconds=0",
        "--tau2-breaker-probe-seconds=3600",
    )  # fmt: skip
    run = bench.run(*args)
    assert run.returncode == 1, run.output
    assert set(run.outcomes().values()) == {ERROR}
    assert sum(len(endpoint.requests(task)) for task in tasks) == 2  # then nothing was sent
    details = [_detail_of(bench, "down", task) for task in tasks]
    assert "failed after 2 attempt(s)" in details[0] or "is down since" in details[0]
    for detail in details[1:]:
        assert "is down since" in detail
        assert "(2 consecutive failures: HTTP 503" in detail
        assert "scripted-agent" in detail  # the endpoint is named
    # a request the open breaker refused sent nothing: no attempt, no retry (was -1)
    refused = bench.metrics("down", _scenario(tasks[-1]))["requests"]["agent"]
    assert refused == {
        "requests": 1, "attempts": 0, "retries": 0, "failed": 1, "unsent": 1, "wait_seconds": 0.0
    }  # fmt: skip
    listed = bench.summary("down")["infra_errors"]
    assert len(listed) == len(tasks)
    assert "is down since" in (bench.run_dir("down") / "all_summary.txt").read_text()

    endpoint.default_fault = None
    resumed = bench.run("-n", "0", "--tau2-resume=down", *args[3:])
    assert resumed.outcomes() == dict.fromkeys(map(_scenario, tasks), PASSED), resumed.output
    assert bench.summary("down")["counts"]["infra_errors"] == 0


def test_resume_re_judges_a_judge_outage_without_running_the_conversation(
    bench: Bench, endpoint: ScriptedEndpoint
) -> None:
    tasks = ("2", "3")
    endpoint.default_fault = always(HttpError.server_error(503), role="judge")
    args = (
        "-n", "0", "--tau2-run-id=judge-down", f"--tau2-tasks={','.join(tasks)}",
        *endpoint.args("agent", timeout=TIMEOUT, max_retries=0),
        *endpoint.args("user", timeout=TIMEOUT, max_retries=0),
        *endpoint.args("judge", timeout=TIMEOUT, max_retries=0),
    )  # fmt: skip
    run = bench.run(*args)
    assert set(run.outcomes().values()) == {ERROR}, run.output
    summary = bench.summary("judge-down")
    assert summary["counts"]["infra_errors"] == 2
    assert summary["success_rate"]["total"] == 0  # excluded from the rates, not failed
    conversation = {t: len(endpoint.requests(t)) + len(endpoint.requests(t, "user")) for t in tasks}

    endpoint.default_fault = None
    resumed = bench.run("-n", "0", "--tau2-resume=judge-down", *args[3:])
    assert resumed.outcomes() == dict.fromkeys(map(_scenario, tasks), PASSED), resumed.output
    again = {t: len(endpoint.requests(t)) + len(endpoint.requests(t, "user")) for t in tasks}
    assert again == conversation  # the conversations were not run again
    assert all(len(endpoint.requests(t, "judge")) == 2 for t in tasks)  # judged again, once
    for task in tasks:
        metrics = bench.metrics("judge-down", _scenario(task))
        assert (metrics["is_successful"], metrics.get("needs_judging")) == (True, None)


def _detail_of(bench: Bench, run_id: str, task: str) -> str:
    return str(bench.metrics(run_id, _scenario(task))["stop_detail"])
