"""Issue 29: what a run against a local model server (llama.cpp's ``llama-server``, vLLM,
Ollama) must get right, through the real plugin against the loopback server.

- A placeholder key (``anything``) changes no reply, tool call or artifact; a key the server
  echoes is masked in every file and on the terminal, and only there (the conversation goes on
  with what the model said).
- The server's "the model's output could not be parsed" is the agent's malformed output
  (scored, ``agent_error``); a plain 500 stays an infra error; the customer's stays infra.
- A request in flight at the scenario's deadline is counted; the limit that was hit is named
  once, with the option that raises it.
- vLLM's context replies (its own bodies): a prompt over or exactly at ``--max-model-len`` is the
  agent's ``context_window_exceeded`` (the customer's, infra); a ``max_tokens`` over the window
  is the run's configuration, an infra error.
- transformers serve's (its own bodies): its context 400 is the agent's overflow (the
  customer's, infra); its 400s on an unreadable tool call are the agent's ``agent_error``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tau2_retail.data.tasks import Task, load_user_guidelines
from tau2_retail.testing.loopback_server import (
    Completion,
    Hang,
    HttpError,
    Reply,
    ReplyToolCall,
)
from tau2_retail.testing.run_files import files_under
from tau2_retail.testing.scripted_endpoint import END, Request, ScriptedEndpoint
from tau2_retail.testing.unparsed_replies import GENERIC_500, UNPARSED_REPLIES

from .conftest import Bench, run_expecting

PLACEHOLDER_ENV, PLACEHOLDER = "TAU2_LOCAL_SERVER_KEY", "anything"
ECHO_ENV, ECHO = "TAU2_ECHOED_KEY", "sk-echoed-7c1d9e2a4b6f8a0c"
LOOKUP = '{"email": "anything@example.com"}'


@pytest.fixture
def scripted(tasks: Mapping[str, Task], data_dir: Path) -> Iterator[ScriptedEndpoint]:
    """A started loopback endpoint playing the agent, the customer and the judge."""
    endpoint = ScriptedEndpoint(tasks, load_user_guidelines(data_dir))
    with endpoint.server:
        yield endpoint


def _customer_echoes_the_key(request: Request) -> Reply | None:
    """Task 0's customer: done (echoing its own key) once the agent asks "anything else"."""
    if request.role != "user" or request.attempt == 0:
        return None
    last = request.body["messages"][-1]["content"]
    if "Is there anything else" in last:
        return Completion(content=f"No, that is all. My key is {ECHO}. ###STOP###")
    return Completion(content="Yes, go on.")


def _agent_looks_up_anything(request: Request) -> Reply | None:
    """Task 10's agent: one lookup whose argument holds the placeholder's word, then the end."""
    if request.role != "agent":
        return None
    if request.attempt == 0:
        call = ReplyToolCall(name="find_user_id_by_email", arguments=LOOKUP, id="lookup")
        return Completion(tool_calls=(call,))
    return END


def _judge_quotes_the_key(request: Request) -> Reply | None:
    if request.role != "judge":
        return None
    verdict = {"index": 1, "passed": False, "reason": f"the agent read out {ECHO}"}
    reply = {"score": 0.1, "reason": "no", "nl_assertion_verdicts": [verdict]}
    return Completion(content=json.dumps(reply))


def test_a_placeholder_key_changes_nothing_and_an_echoed_key_is_masked_where_shown(
    bench: Bench,
    scripted: ScriptedEndpoint,
    tasks: Mapping[str, Task],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert len(tasks["4"].nl_assertions) == 1
    scripted.faults["0"] = _customer_echoes_the_key
    scripted.faults["10"] = _agent_looks_up_anything
    scripted.faults["4"] = _judge_quotes_the_key
    monkeypatch.setenv(PLACEHOLDER_ENV, PLACEHOLDER)
    monkeypatch.setenv(ECHO_ENV, ECHO)

    # the agent's "Is there anything else" reached the customer as said: it stopped
    run = run_expecting(
        bench, "keys", {"0": "passed", "4": "failed", "10": "passed"},
        *scripted.args("agent", api_key_env=PLACEHOLDER_ENV, max_retries=0),
        *scripted.args("user", api_key_env=ECHO_ENV),
        *scripted.args("judge", api_key_env=ECHO_ENV),
    )  # fmt: skip
    transcript = bench.read_json("keys", "tau2_retail__0/transcript.json")
    said = [m["content"] for m in transcript["messages"] if m["role"] == "assistant"]
    assert "Is there anything else I can help you with?" in " ".join(filter(None, said))
    # the echoed key went on in the conversation (the agent's grace turn saw it) ...
    grace = scripted.requests("0", "agent")[-1].body["messages"][-1]["content"]
    assert grace == f"No, that is all. My key is {ECHO}. ###STOP###"
    # ... and is masked where it is written
    heard = [m["content"] for m in transcript["messages"] if m["role"] == "user"]
    assert heard[-1] == "No, that is all. My key is ***. ###STOP###"
    # the tool call went to the tool, and into the artifacts, as the model wrote it
    looked_up = bench.read_json("keys", "tau2_retail__10/transcript.json")["messages"]
    calls = [c for m in looked_up for c in m.get("tool_calls", ())]
    assert [c["arguments"] for c in calls if c["id"] == "lookup"] == [LOOKUP]
    assert (
        scripted.requests("10", "agent")[1].body["messages"][-2]["tool_calls"][0]["function"][
            "arguments"
        ]
        == LOOKUP
    )
    log = (bench.run_dir("keys") / "tau2_retail__10" / "conversation_log.txt").read_text()
    assert f"find_user_id_by_email({LOOKUP})" in log
    # the judge's reason, on the terminal and in every file: masked
    assert "judged not met: the agent read out ***" in run.stdout
    assert ECHO not in run.output
    leaks = [str(path) for path in files_under(bench.path) if ECHO.encode() in path.read_bytes()]
    assert leaks == []
    turns = bench.metrics("keys", "tau2_retail__0")["turns"]
    assert any("Is there anything else" in turn["text"] for turn in turns)


def _scored_with_the_body(
    bench: Bench, run_id: str, task: str, stop_reason: str, reply: HttpError
) -> Any:
    """The metrics of a scenario scored (not infra) with ``stop_reason``, after asserting that
    its ``endpoint_error.txt`` holds the server's reply byte for byte."""
    scenario = f"tau2_retail__{task}"
    metrics = bench.metrics(run_id, scenario)
    assert metrics["stop_reason"] == stop_reason
    assert metrics["infra_error"] is False
    kept = (bench.run_dir(run_id) / scenario / "endpoint_error.txt").read_text()
    assert kept == reply.body + "\n"
    return metrics


def _first_agent_request(reply: Reply) -> Any:
    return lambda request: reply if request.role == "agent" and request.attempt == 0 else None


def test_output_the_server_cannot_parse_is_the_agents_failure_and_a_plain_500_is_infra(
    bench: Bench, scripted: ScriptedEndpoint
) -> None:
    llamacpp = UNPARSED_REPLIES["llama.cpp: output not in the expected format"]
    vllm = UNPARSED_REPLIES["vLLM: required tool call not a JSON list"]
    scripted.faults["0"] = _first_agent_request(llamacpp)
    scripted.faults["1"] = _first_agent_request(vllm)
    scripted.faults["5"] = lambda r: GENERIC_500 if r.role == "agent" else None
    # the customer's model failing to parse is not the agent's failure
    scripted.faults["6"] = lambda r: llamacpp if r.role == "user" and r.attempt == 1 else None

    run = run_expecting(
        bench, "parse", {"0": "failed", "1": "failed", "5": "error", "6": "error"},
        *scripted.args("agent", max_retries=2), *scripted.args("user", max_retries=2),
    )  # fmt: skip
    for task, reply in (("0", llamacpp), ("1", vllm)):
        metrics = _scored_with_the_body(bench, "parse", task, "agent_error", reply)
        assert "the server could not parse the model's output" in metrics["stop_detail"]
        assert metrics["requests"]["agent"]["attempts"] == 1  # not retried
    assert len(scripted.requests("5", "agent")) == 3  # a plain 500: retried, then infra
    summary = bench.summary("parse")
    infra = {row["scenario_id"]: row["detail"] for row in summary["infra_errors"]}
    assert set(infra) == {"tau2_retail__5", "tau2_retail__6"}
    assert infra["tau2_retail__6"].startswith("user: ")
    assert summary["counts"]["scored"] == 2
    assert "the conversation ended with agent_error (agent: model 'scripted-agent'" in run.stdout


def test_a_request_cut_by_the_deadline_counts_and_each_limit_is_named_once(
    bench: Bench, scripted: ScriptedEndpoint
) -> None:
    hang = Hang()
    for task in ("0", "1"):  # the agent's first request never ends: the scenario's limit
        scripted.faults[task] = _first_agent_request(hang)
    for task in ("5", "6"):  # the customer's second request times out
        scripted.faults[task] = lambda r: hang if r.role == "user" and r.attempt == 1 else None

    run = run_expecting(
        bench, "slow", {"0": "failed", "1": "failed", "5": "error", "6": "error"},
        "--tau2-max-duration=6",
        *scripted.args("agent", max_retries=0),
        *scripted.args("user", max_retries=0, timeout=1),
    )  # fmt: skip
    for task in ("0", "1"):
        metrics = bench.metrics("slow", f"tau2_retail__{task}")
        assert metrics["stop_reason"] == "timeout"
        sent = len(scripted.requests(task, "agent"))
        assert metrics["requests"]["agent"]["requests"] == sent == 1
        assert metrics["requests"]["agent"]["failed"] == 1
        assert "the agent request in flight (counted as failed)" in metrics["stop_detail"]
    lines = run.stdout.lines
    deadline = [line for line in lines if "wall-clock limit (--tau2-max-duration raises" in line]
    timeout = [line for line in lines if "(--tau2-user-timeout raises it" in line]
    assert len(deadline) == 1, run.stdout
    assert deadline[0].startswith("tau2: a scenario reached its 6 s wall-clock limit")
    assert len(timeout) == 1, run.stdout
    assert timeout[0].startswith("tau2: user requests timed out: no complete reply within 1 s")


def _vllm(message: str, param: str) -> HttpError:
    """vLLM 0.32's 400 (CPU build, ``--max-model-len 4096``), byte for byte."""
    body = (
        f'{{"error":{{"message":"{message}","type":"BadRequestError","param":"{param}",'
        '"code":400}}'
    )
    return HttpError(status=400, body=body)


VLLM_PROMPT_FILLS_THE_WINDOW = _vllm(
    "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)", "max_tokens"
)
VLLM_PROMPT_OVER_THE_WINDOW = _vllm(
    "This model's maximum context length is 4096 tokens. However, your prompt contains at least "
    "4097 input tokens, which exceeds this limit even without any output tokens. Please reduce "
    "the length of the input prompt. (parameter=input_tokens, value=4097)",
    "input_tokens",
)
VLLM_MAX_TOKENS_OVER_THE_WINDOW = _vllm(
    "max_tokens=5000 cannot be greater than max_model_len=4096. Please request fewer output "
    "tokens. (parameter=max_tokens, value=5000)",
    "max_tokens",
)


def test_vllms_full_window_is_the_agents_overflow_and_its_max_tokens_refusal_is_infra(
    bench: Bench, scripted: ScriptedEndpoint
) -> None:
    """A prompt of exactly --max-model-len tokens leaves vLLM no room for one output token: it
    says so as a max_tokens of 0 (was an infra error of the agent, excluded from the rates and
    met again by every resume)."""
    full, over = VLLM_PROMPT_FILLS_THE_WINDOW, VLLM_PROMPT_OVER_THE_WINDOW
    scripted.faults["0"] = lambda r: full if r.role == "agent" and r.attempt == 1 else None
    scripted.faults["1"] = _first_agent_request(over)
    scripted.faults["5"] = lambda r: full if r.role == "user" and r.attempt == 1 else None
    scripted.faults["6"] = _first_agent_request(VLLM_MAX_TOKENS_OVER_THE_WINDOW)

    run_expecting(
        bench, "vllm", {"0": "failed", "1": "failed", "5": "error", "6": "error"},
        *scripted.args("agent", max_retries=2), *scripted.args("user", max_retries=2),
    )  # fmt: skip
    for task, reply in (("0", full), ("1", over)):
        metrics = _scored_with_the_body(bench, "vllm", task, "context_window_exceeded", reply)
        assert metrics["requests"]["agent"]["retries"] == 0
    infra = {row["scenario_id"]: row["detail"] for row in bench.summary("vllm")["infra_errors"]}
    assert set(infra) == {"tau2_retail__5", "tau2_retail__6"}
    assert infra["tau2_retail__5"].startswith("user: ")
    assert "the prompt exceeds the model's context window" in infra["tau2_retail__5"]
    assert infra["tau2_retail__6"].startswith("agent: ")
    assert "max_tokens=5000 cannot be greater than max_model_len" in infra["tau2_retail__6"]


# transformers serve 5.25 (``transformers serve``, a Qwen2 model), byte for byte: FastAPI's
# {"detail": ...} of the ValueError it raised
TRANSFORMERS_PROMPT_OVER_THE_WINDOW = HttpError(
    status=400,
    body='{"detail":"The prompt has 6686 tokens, but the model takes at most 1024, prompt and '
    'answer (`--max-model-len`)."}',
)
TRANSFORMERS_PROMPT_FILLS_THE_WINDOW = HttpError(
    status=400,
    body='{"detail":"The prompt has 1024 tokens, but the model takes at most 1024, prompt and '
    'answer (`--max-model-len`)."}',
)
TRANSFORMERS_TOOL_CALL_CUT = HttpError(  # the agent's call cut at its max_tokens
    status=400,
    body=r"""{"detail":"json parser could not parse region as JSON.\nContent: '\\n{\"name\": """
    r"""\"get_user'\nError: Unterminated string starting at: line 2 column 10 (char 10)"}""",
)
TRANSFORMERS_ARGUMENTS_IN_THE_HISTORY = HttpError(
    status=400, body='{"detail":"Expecting value: line 1 column 13 (char 12)"}'
)
# the agent's call whose arguments the server then fails to parse in the history
MALFORMED_CALL = Completion(
    tool_calls=(ReplyToolCall(name="get_user_details", arguments='{"user_id": ', id="bad-1"),)
)


def _after_a_malformed_call(reply: HttpError) -> Any:
    """The agent's first request answered with a malformed call, its second with ``reply``."""
    replies = {0: MALFORMED_CALL, 1: reply}
    return lambda request: replies.get(request.attempt) if request.role == "agent" else None


def test_transformers_serves_overflow_and_unparsed_calls_are_the_agents_and_the_customers_infra(
    bench: Bench, scripted: ScriptedEndpoint
) -> None:
    """Its context 400 was an infra error of the agent (excluded from the rates, met again by
    every resume), and its parse failures were put down to vLLM."""
    scripted.faults["0"] = _first_agent_request(TRANSFORMERS_PROMPT_OVER_THE_WINDOW)
    scripted.faults["1"] = _first_agent_request(TRANSFORMERS_TOOL_CALL_CUT)
    history = TRANSFORMERS_ARGUMENTS_IN_THE_HISTORY
    scripted.faults["5"] = _after_a_malformed_call(history)
    full = TRANSFORMERS_PROMPT_FILLS_THE_WINDOW
    scripted.faults["6"] = lambda r: full if r.role == "user" and r.attempt == 1 else None

    run_expecting(
        bench, "transformers", {"0": "failed", "1": "failed", "5": "failed", "6": "error"},
        *scripted.args("agent", max_retries=2), *scripted.args("user", max_retries=2),
    )  # fmt: skip
    over = TRANSFORMERS_PROMPT_OVER_THE_WINDOW
    _scored_with_the_body(bench, "transformers", "0", "context_window_exceeded", over)
    for task, reply, server in (
        ("1", TRANSFORMERS_TOOL_CALL_CUT, "transformers serve"),
        ("5", history, "vLLM or transformers serve"),
    ):
        metrics = _scored_with_the_body(bench, "transformers", task, "agent_error", reply)
        assert f"could not parse the model's output ({server}, HTTP 400" in metrics["stop_detail"]
        assert metrics["requests"]["agent"]["retries"] == 0
    infra = [row["detail"] for row in bench.summary("transformers")["infra_errors"]]
    assert len(infra) == 1
    assert infra[0].startswith("user: ")
    assert "the prompt exceeds the model's context window (HTTP 400)" in infra[0]


def test_a_gateway_gets_the_key_in_its_header_and_its_own_headers_and_no_file_holds_them(
    bench: Bench, scripted: ScriptedEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Azure OpenAI's ``api-key`` and a gateway's second key (``Helicone-Auth``): sent with
    every request of the role that names them, never with another role's, and recorded by
    name only (run_args.json's command line and settings, summary.json)."""
    gateway_key = "hc-gateway-5e8a1f3c9d2b7a64"
    headers = json.dumps({"Helicone-Auth": f"Bearer {gateway_key}", "X-Title": "nightly"})
    monkeypatch.setenv(ECHO_ENV, ECHO)
    run = run_expecting(
        bench, "gateway", {"0": "passed"},
        *scripted.args(
            "agent", api_key_env=ECHO_ENV, key_header="api-key", headers=headers, max_retries=0
        ),
        *scripted.args("user", api_key_env=ECHO_ENV),
    )  # fmt: skip
    sent: dict[str, list[Any]] = {"scripted-agent": [], "scripted-user": []}
    for request in scripted.server.requests:
        sent[request.body["model"]].append(request)
    assert sent["scripted-agent"]
    assert sent["scripted-user"]
    for request in sent["scripted-agent"]:
        assert request.header("api-key") == ECHO
        assert request.header("authorization") is None
        assert request.header("helicone-auth") == f"Bearer {gateway_key}"
    for request in sent["scripted-user"]:
        assert request.header("authorization") == f"Bearer {ECHO}"
        assert request.header("api-key") is None
        assert request.header("helicone-auth") is None
    recorded = bench.read_json("gateway", "run_args.json")
    assert recorded["configuration"]["settings"]["agent_headers"] == {
        "Helicone-Auth": "[redacted]",
        "X-Title": "[redacted]",
    }
    assert recorded["configuration"]["settings"]["agent_key_header"] == "api-key"
    assert gateway_key not in run.output
    leaks = [
        str(path) for path in files_under(bench.path) if gateway_key.encode() in path.read_bytes()
    ]
    assert leaks == []
