"""``python -m tau2_retail run ID`` through ``cli.main``: built-in runs, the loopback endpoint,
exit statuses and the readable and JSON outputs."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from tau2_retail import codec
from tau2_retail.cli.main import build_parser, main
from tau2_retail.cli.run import (
    EXIT_FAILED,
    EXIT_INFRA_ERROR,
    EXIT_SUCCESS,
    MAX_SHOWN_CHARS,
    render_transcript,
    resolve_run_settings,
)
from tau2_retail.data.tasks import Task, trial_seeds
from tau2_retail.models.messages import Message, Role, ToolCall
from tau2_retail.settings import OPTIONS
from tau2_retail.testing.loopback_server import (
    Completion,
    HttpError,
    LoopbackOpenAIServer,
    ReplyToolCall,
)

KEY_ENV = "TAU2_TEST_RUN_ONE_KEY"


@pytest.fixture
def server(monkeypatch) -> Iterator[LoopbackOpenAIServer]:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with LoopbackOpenAIServer() as started:
        yield started


def run(data_dir, *args: str) -> int:
    return main(["run", *args, "--data-dir", str(data_dir)])


def endpoint(role: str, server: LoopbackOpenAIServer, model: str) -> list[str]:
    return [
        f"--{role}-model",
        model,
        f"--{role}-base-url",
        server.base_url,
        f"--{role}-api-key-env",
        KEY_ENV,
    ]


def gold_calls(task: Task) -> list[Completion]:
    return [
        Completion(
            tool_calls=(
                ReplyToolCall(id=f"c{n}", name=a.name, arguments=json.dumps(a.plain_arguments())),
            )
        )
        for n, a in enumerate(task.actions)
    ]


# -- built-in models ------------------------------------------------------------------------------


def test_default_run_is_the_oracle_and_succeeds(data_dir, capsys):
    assert run(data_dir, "0") == EXIT_SUCCESS
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == (
        "scenario tau2_retail__0 (split train, persona lisa_brenner, "
        "seed 626729 = trial 1 of base seed 300, profile default)"
    )
    assert lines[1] == "agent: builtin:oracle; user: builtin:customer; judge: none"
    assert "agent: Hi! How can I help you today?" in lines
    assert "agent -> end_conversation({})" in lines
    assert "tool: Conversation ended." in lines
    assert "ending: agent_exit" in lines
    assert any(line.startswith("DB match: yes (hash ") for line in lines)
    assert (
        "signals: passed DB_STATE_MATCH, CLEAN_EXIT; not_applicable NL_ASSERTION; "
        "excluded ACTION_MATCH"
    ) in lines
    assert lines[-1] == "result: success, tau2 reward 1"


def test_the_json_output_holds_metrics_and_transcript(data_dir, capsys):
    assert run(data_dir, "0", "--json", "--seed", "300") == EXIT_SUCCESS
    document = json.loads(capsys.readouterr().out)
    metrics = document["metrics"]
    assert metrics["scenario_name"] == "tau2_retail__0"
    assert metrics["seed"] == 626729
    assert metrics["stop_reason"] == "agent_exit"
    assert metrics["db_state_match"] is True
    assert metrics["is_successful"] is True
    transcript = document["transcript"]
    assert transcript[0]["role"] == "assistant"
    assert transcript[0]["content"] == "Hi! How can I help you today?"
    assert transcript[-1]["content"] == "Conversation ended."
    assert [codec.decode_value(Message, m).role for m in transcript][-2:] == [
        Role.ASSISTANT,
        Role.TOOL,
    ]
    assert [a["name"] for a in document["actions"]] == ["exchange_delivered_order_items"]
    assert "judge" not in document


def test_noop_on_a_task_that_changes_the_database_fails(data_dir, capsys):
    assert run(data_dir, "0", "--agent-model", "builtin:noop") == EXIT_FAILED
    out = capsys.readouterr().out
    assert "ending: agent_exit" in out
    assert "DB match: no (expected hash " in out
    assert "  orders['#W2378156'].status: actual 'delivered', expected 'exchange requested'" in out
    assert "failed DB_STATE_MATCH" in out
    assert out.rstrip().endswith("result: failure, tau2 reward 0")


def test_noop_on_a_task_whose_gold_is_the_seed_succeeds(data_dir, capsys):
    assert run(data_dir, "10", "--agent-model", "builtin:noop") == EXIT_SUCCESS
    assert "DB match: yes" in capsys.readouterr().out


def test_max_steps_is_a_failed_ending(data_dir, capsys):
    assert run(data_dir, "0", "--max-steps", "4") == EXIT_FAILED
    out = capsys.readouterr().out
    assert "ending: max_steps (4 routed messages)" in out  # greeting, user, call, result
    assert "failed DB_STATE_MATCH, CLEAN_EXIT" in out


def test_a_task_with_assertions_and_no_judge_says_how_to_configure_one(data_dir, capsys):
    assert run(data_dir, "2") == EXIT_SUCCESS
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == (
        "no judge configured: NL assertions are not applicable "
        "(set --judge-model and --judge-base-url to judge them)"
    )


# -- errors ---------------------------------------------------------------------------------------


def test_unknown_task_id_exits_2(data_dir, capsys):
    assert run(data_dir, "114") == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "error: unknown task id(s) 114; valid ids are 0..113 "
        "(list them with: python -m tau2_retail tasks)\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--agent-base-url", "http://127.0.0.1:9/v1"],
            "error: --agent-base-url given with the built-in model 'builtin:oracle'; built-in "
            "models run locally: drop the option or name an endpoint model",
        ),
        (
            ["--user-temperature", "0.5"],
            "error: --user-temperature given with the built-in model 'builtin:customer'; "
            "built-in models run locally: drop the option or name an endpoint model",
        ),
        (
            ["--user-model", "builtin:oracle"],
            "error: --user-model: 'builtin:oracle' is not a built-in user model; "
            "accepted built-ins: builtin:customer",
        ),
        (
            ["--judge-model", "builtin:oracle"],
            "error: --judge-model: 'builtin:oracle' is not a built-in judge model; "
            "accepted built-ins: none (the judge must be an endpoint)",
        ),
        (
            ["--judge-timeout", "5"],
            "error: --judge-timeout given without --judge-model: name the judge model",
        ),
        (
            ["--agent-model", "m", "--agent-base-url", "ftp://x"],
            "error: --agent-base-url: 'ftp://x' is not valid for --agent-base-url; "
            "expected an http:// or https:// URL",
        ),
        (
            ["--agent-model", "m", "--agent-top-p", "0"],
            "error: --agent-top-p: '0' is not valid for --agent-top-p; "
            "expected a number > 0 and <= 1",
        ),
        (
            ["--max-duration", "0"],
            "error: --max-duration: '0' is not valid for --max-duration; expected a number > 0",
        ),
    ],
)
def test_bad_settings_exit_2_naming_the_option(data_dir, capsys, args, message):
    assert run(data_dir, "0", *args) == 2
    assert capsys.readouterr().err == message + "\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--max-steps", "0"],
            "error: --max-steps: '0' is not valid for --max-steps; expected an integer >= 1",
        ),
        (
            ["--agent-model", "m", "--agent-extra-body", "[1]"],
            # not echoed: an extra body may hold a credential
            "error: --agent-extra-body: the value given is not valid for --agent-extra-body; "
            "expected a JSON object",
        ),
        (
            ["--breaker-failures", "0"],
            "error: --breaker-failures: '0' is not valid for --breaker-failures; "
            "expected an integer >= 1",
        ),
    ],
)
def test_malformed_values_are_refused_with_the_plugins_message(data_dir, capsys, args, message):
    # the settings schema parses the values of both: the message is --tau2-*'s without tau2-
    assert run(data_dir, "0", *args) == 2
    assert capsys.readouterr().err == message + "\n"


def test_no_client_is_built_when_a_setting_is_bad(data_dir, server, closed, capsys):
    args = [*endpoint("agent", server, "test-model"), "--user-model", "builtin:noop"]
    assert run(data_dir, "0", *args) == 2
    assert "is not a built-in user model" in capsys.readouterr().err
    assert closed == []
    assert server.requests == ()


# -- against the loopback endpoint ----------------------------------------------------------------


def test_scripted_endpoint_agent_end_to_end(data_dir, tasks, server, closed, capsys):
    task = tasks["0"]
    server.enqueue(
        *gold_calls(task),
        Completion(content="Your exchange is requested. Is there anything else?"),
        Completion(tool_calls=(ReplyToolCall(id="end", name="end_conversation"),)),
    )
    status = run(data_dir, "0", *endpoint("agent", server, "test-model"), "--seed", "7")
    seed = trial_seeds(7, 1)[0]
    out = capsys.readouterr().out
    assert status == EXIT_SUCCESS, out
    assert f"agent: test-model at {server.base_url}; user: builtin:customer" in out
    assert "agent -> exchange_delivered_order_items({" in out
    assert "agent: Your exchange is requested. Is there anything else?" in out
    assert "user: No, that's all I needed. Thank you! ###STOP###" in out
    assert "ending: agent_exit" in out
    bodies = [request.body for request in server.requests]
    assert len(bodies) == len(task.actions) + 2
    assert {body["model"] for body in bodies} == {"test-model"}
    assert {body["seed"] for body in bodies} == {seed}
    assert f"seed {seed} = trial 1 of base seed 7, profile default)" in out
    assert all(len(body["tools"]) == 17 for body in bodies)
    assert bodies[0]["messages"][0]["role"] == "system"
    assert bodies[0]["messages"][0]["content"].endswith(
        "claiming success."
    )  # the notes are on by default
    assert closed == ["test-model"]


def test_the_conversation_is_printed_as_it_happens(data_dir, tasks, server, capsys):
    """Each message is on stdout before the next model call, the report only at the end."""
    task = tasks["0"]
    seen_before_last_call: list[str] = []

    def respond(body: Mapping[str, Any]) -> Completion:
        calls = sum(len(m.get("tool_calls") or ()) for m in body["messages"])
        if calls < len(task.actions):
            return gold_calls(task)[calls]
        said = [m for m in body["messages"] if m["role"] == "assistant" and m.get("content")]
        if not any("anything else" in m["content"] for m in said):
            return Completion(content="Done. Is there anything else?")
        # the model is still working: what the user sees so far
        seen_before_last_call.append(capsys.readouterr().out)
        return Completion(tool_calls=(ReplyToolCall(id="end", name="end_conversation"),))

    server.responder = respond
    assert run(data_dir, "0", *endpoint("agent", server, "test-model")) == EXIT_SUCCESS
    [so_far] = seen_before_last_call
    assert so_far.startswith("scenario tau2_retail__0 ")
    assert "agent: Hi! How can I help you today?" in so_far
    assert so_far.count("agent -> ") == len(task.actions)
    assert so_far.rstrip().endswith("user: No, that's all I needed. Thank you! ###STOP###")
    assert "result:" not in so_far
    rest = capsys.readouterr().out
    assert rest.startswith("agent -> end_conversation({})\ntool: Conversation ended.\n")
    assert rest.rstrip().endswith("result: success, tau2 reward 1")


def test_request_options_and_limits_reach_the_endpoint(data_dir, server, capsys):
    server.enqueue(Completion(tool_calls=(ReplyToolCall(name="end_conversation"),)))
    args = [
        *endpoint("agent", server, "test-model"),
        "--agent-temperature=0.25",
        "--agent-top-p=0.5",
        "--agent-max-tokens=64",
        '--agent-extra-body={"chat_template_kwargs": {"enable_thinking": false}}',
        "--agent-timeout=30",
        "--agent-max-retries=0",
        "--max-duration=60",
        "--max-errors=3",
    ]
    assert run(data_dir, "10", *args, "--json") == EXIT_SUCCESS
    [request] = server.requests
    body = request.body
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.25, 0.5, 64)
    assert body["chat_template_kwargs"] == {"enable_thinking": False}


def test_output_dir_gets_the_scenario_artifacts(data_dir, tmp_path, capsys):
    assert run(data_dir, "3", "--output-dir", str(tmp_path), "--json") == EXIT_SUCCESS
    metrics = json.loads((tmp_path / "tau2_retail__3" / "metrics.json").read_text())
    assert metrics == json.loads(capsys.readouterr().out)["metrics"]
    assert (tmp_path / "tau2_retail__3" / "conversation_log.txt").is_file()


def test_no_agent_notes_sends_the_policy_alone(data_dir, server, capsys):
    server.enqueue(Completion(tool_calls=(ReplyToolCall(name="end_conversation"),)))
    args = endpoint("agent", server, "test-model")
    assert run(data_dir, "10", *args, "--no-agent-notes") == EXIT_SUCCESS
    prompt = server.requests[0].body["messages"][0]["content"]
    assert "## Additional Notes to Follow" not in prompt


def test_endpoint_user_and_judge(data_dir, tasks, server, closed, capsys):
    task = tasks["2"]
    verdicts = [
        {"index": n, "passed": True, "reason": "said so"}
        for n in range(1, len(task.nl_assertions) + 1)
    ]
    judgement = json.dumps({"score": 0.9, "reason": "fine", "nl_assertion_verdicts": verdicts})

    def respond(body: Mapping[str, Any]) -> Completion:
        if body["model"] == "judge-model":
            return Completion(content=judgement)
        assert body["model"] == "user-model"
        assert "tools" not in body
        said = sum(m["role"] == "assistant" for m in body["messages"])
        if said == 0:
            return Completion(content=task.reason_for_call)
        return Completion(content="Yes, please." if said < 3 else "Thanks! ###STOP###")

    server.responder = respond
    args = [*endpoint("user", server, "user-model"), *endpoint("judge", server, "judge-model")]
    status = run(data_dir, "2", *args)
    out = capsys.readouterr().out
    assert status == EXIT_SUCCESS, out
    assert f"judge: judge-model at {server.base_url}" in out
    assert "passed DB_STATE_MATCH, CLEAN_EXIT, NL_ASSERTION" in out
    assert "  NL 1 passed: " in out
    assert sorted(closed) == ["judge-model", "user-model"]


def test_endpoint_failure_is_infra_error_exit_3(data_dir, server, closed, capsys):
    server.enqueue(HttpError.openai(401, "Incorrect API key provided"))
    status = run(data_dir, "0", *endpoint("agent", server, "test-model"), "--json")
    assert status == EXIT_INFRA_ERROR
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    assert metrics["stop_reason"] == "infra_error"
    assert metrics["infra_error"] is True
    assert "HTTP 401" in metrics["stop_detail"]
    assert closed == ["test-model"]


def test_infra_error_readable_result_line(data_dir, server, capsys):
    server.enqueue(HttpError.openai(404, "no such model"))
    assert run(data_dir, "0", *endpoint("user", server, "who")) == EXIT_INFRA_ERROR
    out = capsys.readouterr().out
    assert "ending: infra_error (user: model 'who' at " in out
    assert "result: infra_error (the user endpoint failed; not scored)" in out


def test_judge_outage_is_an_infra_error_of_the_judge(data_dir, tasks, server, capsys):
    # the conversation finishes (built-in agent and customer); the judge refuses every request
    server.enqueue(*[HttpError.openai(503, "overloaded")] * 2)
    args = [*endpoint("judge", server, "judge-model"), "--judge-max-retries", "1"]
    assert run(data_dir, "2", *args) == EXIT_INFRA_ERROR
    out = capsys.readouterr().out
    assert "ending: agent_exit (judge: " in out
    assert "result: infra_error (the judge endpoint failed; not scored)" in out


# -- rendering ------------------------------------------------------------------------------------


def test_render_transcript_lines_and_truncation():
    long = "x" * (MAX_SHOWN_CHARS + 10)
    messages = [
        Message(role=Role.SYSTEM, content="not shown"),
        Message(role=Role.ASSISTANT, content="Hello."),
        Message(role=Role.USER, content="Hi."),
        Message(
            role=Role.ASSISTANT,
            content="Checking.",
            tool_calls=(ToolCall(id="1", name="calculate", arguments='{"expression": "1+1"}'),),
        ),
        Message(role=Role.TOOL, content=long, tool_call_id="1", name="calculate"),
        Message(role=Role.TOOL, content="Error: nope", tool_call_id="2", name="x", error=True),
    ]
    assert render_transcript(messages) == [
        "agent: Hello.",
        "user: Hi.",
        "agent: Checking.",
        'agent -> calculate({"expression": "1+1"})',
        f"tool: {'x' * MAX_SHOWN_CHARS}… [10 more characters]",
        "tool (error): Error: nope",
    ]


# -- the tau2 profile ------------------------------------------------------------------------------


def test_tau2_profile_run_ends_by_the_users_stop_without_end_conversation(data_dir, capsys):
    assert run(data_dir, "0", "--profile", "tau2") == EXIT_SUCCESS
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("seed 626729 = trial 1 of base seed 300, profile tau2)")
    assert not [line for line in lines if "end_conversation" in line]
    assert "ending: user_stop" in lines
    assert lines[-1] == "result: success, tau2 reward 1"


def test_tau2_profile_sends_upstreams_request_parameters(data_dir, openai_server, capsys):
    openai_server.enqueue(
        Completion(content="Hello, I need help."), Completion(content="###STOP###")
    )
    code = run(data_dir, "0", "--profile", "tau2", *endpoint("user", openai_server, "sim"))
    assert code in (EXIT_SUCCESS, EXIT_FAILED)
    bodies = [request.body for request in openai_server.requests]
    assert [(b["temperature"], "tool_choice" in b, "tools" in b) for b in bodies] == [
        (0.0, False, False),
        (0.0, False, False),
    ]
    assert "ending: user_stop" in capsys.readouterr().out


def test_no_agent_notes_with_the_tau2_profile_is_refused(data_dir, capsys):
    assert run(data_dir, "0", "--profile", "tau2", "--no-agent-notes") == 2
    assert "--agent-notes applies to the default profile only" in capsys.readouterr().err


def test_a_prose_judge_is_an_infra_error_of_the_judge(data_dir, tasks, server, capsys):
    # issue 18, item 2: asked again once, prose again: the judge failed, not the agent
    server.enqueue(*[Completion(content="The agent did well.")] * 2)
    args = [*endpoint("judge", server, "judge-model")]
    assert run(data_dir, "2", *args) == EXIT_INFRA_ERROR
    out = capsys.readouterr().out
    assert (
        "ending: agent_exit (judge: unreadable reply, also when asked again: no JSON object in "
        "the reply: The agent did well.)"
    ) in out
    assert len(server.requests) == 2


# -- one settings schema --------------------------------------------------------------------------


def test_every_setting_of_one_scenario_is_a_flag_of_run(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    shown = capsys.readouterr().out
    flags = [setting.cli_flag for setting in OPTIONS if setting.cli]
    assert {"--agent-max-connections", "--breaker-failures", "--max-reply-bytes"} <= set(flags)
    assert [flag for flag in flags if flag not in shown] == []


def test_connection_options_and_the_environment_reach_the_endpoint(monkeypatch):
    monkeypatch.setenv("TAU2_AGENT_MODEL", "env-model")
    monkeypatch.setenv("TAU2_AGENT_BASE_URL", "http://127.0.0.1:9/v1")
    args = build_parser().parse_args(
        [
            "run",
            "0",
            "--agent-base-url=http://127.0.0.1:8/v1",  # the flag wins over the environment
            "--agent-max-connections=3",
            "--breaker-failures=2",
            "--breaker-probe-seconds=0.5",
            "--max-reply-bytes=2048",
        ]
    )
    settings = resolve_run_settings(args)
    endpoint = settings.roles.agent.endpoint
    assert endpoint is not None
    assert (endpoint.model, endpoint.base_url) == ("env-model", "http://127.0.0.1:8/v1")
    assert (endpoint.max_connections, endpoint.breaker_failures) == (3, 2)
    assert (endpoint.breaker_probe_seconds, endpoint.max_reply_bytes) == (0.5, 2048)
    assert settings.sources["agent_model"] == "TAU2_AGENT_MODEL"
    assert settings.sources["agent_base_url"] == "--agent-base-url"
    # settings that one scenario has not are never read, not even from the environment
    monkeypatch.setenv("TAU2_REGRESSION_ALPHA", "2")
    assert resolve_run_settings(args).regression_alpha is None
