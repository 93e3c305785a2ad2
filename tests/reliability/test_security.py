"""The suite cannot be turned against its host: ``calculate`` runs no code and refuses
exhausting input in bounded time; API keys reach the endpoint and nothing else; run ids and
task filters cannot name a folder outside the output directory; any tool call a model can
send gives a result, through the conversation, the artifacts and the xdist boundary; and no
scenario changes the shared seed data or another scenario's database.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import execnet
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tau2_retail import codec
from tau2_retail.data.gold import GoldBook, replay_calls
from tau2_retail.data.seed import load_seed
from tau2_retail.data.tasks import Task, load_policy, load_user_guidelines
from tau2_retail.engine.conversation_setup import Limits
from tau2_retail.engine.judge import JUDGE_SYSTEM_PROMPT
from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.engine.profiles import ProfileName, load_profile
from tau2_retail.engine.prompts import agent_system_prompt, user_system_prompt
from tau2_retail.engine.scenario import Scenario, run_scenario
from tau2_retail.models.builtin import ScriptedCustomer
from tau2_retail.models.messages import AssistantTurn, ToolCall, Usage
from tau2_retail.results.artifacts import scenario_files
from tau2_retail.results.scenario_folder import put_scenario_files
from tau2_retail.testing.bench import Bench, error_lines
from tau2_retail.testing.fake_models import scripted_agent
from tau2_retail.testing.loopback_server import Completion, HttpError, Reply, ReplyToolCall
from tau2_retail.testing.run_files import file_digests, files_under
from tau2_retail.testing.scripted_endpoint import Request, ScriptedEndpoint, once
from tau2_retail.testing.timeouts import scaled_timeout
from tau2_retail.tools.database import SeedDatabase
from tau2_retail.tools.dispatch import dispatch_json
from tau2_retail.tools.registry import AGENT_TOOL_NAMES, TOOLS, ToolKind
from tau2_retail.tools.schemas import tool_schemas
from tau2_retail.tools.store import Store

# -- calculate -----------------------------------------------------------------------------

_CALCULATE = """
import json, resource, sys, time
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
resource.setrlimit(resource.RLIMIT_CPU, (60, 60))
from tau2_retail.tools.database import SeedDatabase
from tau2_retail.tools.dispatch import dispatch_json
from tau2_retail.tools.store import Store

store = Store(SeedDatabase.from_json('{"users": {}, "orders": {}, "products": {}}'))
for expression in json.load(sys.stdin):
    started = time.perf_counter()
    result = dispatch_json(store, "calculate", json.dumps({"expression": expression}))
    print(json.dumps([result.error, result.content[:120], time.perf_counter() - started]))
"""
MEMORY_LIMIT = 1 << 30  # bytes: an exhausting input must be refused, not attempted


def _attacks(sentinel: Path) -> list[str]:
    return [
        f"__import__('os').system('touch {sentinel}')",
        f"open('{sentinel}', 'w').write('x')",
        "(1).__class__.__bases__[0].__subclasses__()",
        "exec('import os')",
        "lambda: 1",
        "[x for x in (1, 2)]",
        "9**9**9**9",
        "10**10**10",
        "2**2**2**2**2**2",
        "99999999999**99999999999",
        "((((2**64)**64)**64)**64)",
        "8" * 4000 + "**" + "8" * 4000,
        "-(2**4000)*-(2**4000)*-(2**4000)",
        "2.0**100000",
        "1e308*1e308",
        "9" * 4301,
        "(" * 5000 + "1" + ")" * 5000,
        "-" * 9999 + "1",
        "+".join(["1"] * 4999),
        "*".join(["99"] * 3333),
        "1" + "**1" * 4999,
        "(-8)**0.5",
        "1/0",
        "0**-1",
        "(1)(2)",
        "1" * 10_001,
    ]


def test_calculate_runs_no_code_and_refuses_exhaustion_in_bounded_time(
    tmp_path: Path, bench: Bench
) -> None:
    """Through the model's path (arguments as JSON text), in a process capped at 1 GiB of
    address space and 60 s of CPU: every attack is an ``Error:`` result within a second."""
    sentinel = tmp_path / "pwned"
    attacks = _attacks(sentinel)

    process = bench.python(
        "-c", _CALCULATE, str(MEMORY_LIMIT), input=json.dumps(attacks), timeout=120
    )
    assert process.returncode == 0, process.stderr
    results = [json.loads(line) for line in process.stdout.splitlines()]
    assert len(results) == len(attacks)
    slow = {
        attack[:40]: seconds for attack, (_, _, seconds) in zip(attacks, results, strict=True)
        if seconds >= 1.0
    }  # fmt: skip
    assert slow == {}
    accepted = {
        attack[:40]: content
        for attack, (error, content, _) in zip(attacks, results, strict=True)
        if not error or not content.startswith("Error: ")
    }
    assert accepted == {}
    assert not sentinel.exists()


_NUMBERS = st.integers(0, 10**6).map(str) | st.sampled_from(["0.5", "1e300", "9" * 300, "2"])
_EMPTY_DATABASE = '{"users": {}, "orders": {}, "products": {}}'


def _expressions() -> st.SearchStrategy[str]:
    return st.recursive(
        _NUMBERS,
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["**", "*", "+", "-", "/", "//"]), inner).map(
                lambda t: f"({t[0]}){t[1]}({t[2]})"
            ),
            inner.map(lambda e: f"-({e})"),
        ),
        max_leaves=12,
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=_expressions())
def test_generated_power_towers_end_in_bounded_time(expression: str) -> None:
    store = Store(SeedDatabase.from_json(_EMPTY_DATABASE))
    started = time.perf_counter()
    result = dispatch_json(store, "calculate", json.dumps({"expression": expression}))
    # a watchdog against runaway arithmetic, not a speed target (that is in benchmarks/)
    assert time.perf_counter() - started < scaled_timeout(10), expression
    assert isinstance(result.content, str)


# -- secrets -------------------------------------------------------------------------------

KEYS = {
    "agent": "sk-reliability-agent-0d1e2a3d4b5e6e7f8a9b",
    "user": "sk-reliability-user-5c4b3a29180f7e6d5c4b",
    "judge": "sk-reliability-judge-9f8e7d6c5b4a39281706",
}
# Secrets that are not keys: a password in a base URL, a credential in an extra body.
CANARIES = {
    "url password": "canary-url-password-4d7e1f",
    "extra body": "canary-extra-body-credential-8b2c9a",
}


def _role(body: Mapping[str, Any]) -> str:
    if "tools" in body:
        return "agent"
    return "judge" if body["messages"][0]["content"] == JUDGE_SYSTEM_PROMPT else "user"


def test_api_keys_reach_the_endpoint_and_nothing_else(
    bench: Bench, endpoint: ScriptedEndpoint
) -> None:
    """Three roles at the endpoint, each with its own key; debug logging to a file, pytest's
    debug trace, locals in tracebacks, captured logs in the junit XML; a 401 whose body
    echoes the key (as some proxies do) and a failing scenario. Then every byte written and
    printed is searched for each key."""
    for role, key in KEYS.items():
        bench.env[f"RELIABILITY_{role.upper()}_KEY"] = key
    endpoint.faults["5"] = once(
        HttpError.openai(401, f"Incorrect API key provided: {KEYS['agent']}.", code="bad_key")
    )
    endpoint.faults["52"] = lambda r: Completion(content="") if r.role == "agent" else None
    role_args = [
        arg.replace("http://", f"http://canary-user:{CANARIES['url password']}@")
        for role in KEYS
        for arg in endpoint.args(role, api_key_env=f"RELIABILITY_{role.upper()}_KEY", max_retries=0)
    ]
    extra_body = {"vendor_auth": CANARIES["extra body"], "top_k": 20}
    role_args.append(f"--tau2-user-extra-body={json.dumps(extra_body)}")
    run = bench.run(
        "-n", "2", "--tau2-run-id=secrets", "--tau2-tasks=0,5,38,52",
        "-l", "--tb=long", "--log-level=DEBUG", f"--log-file={bench.path / 'debug.log'}",
        f"--debug={bench.path / 'pytestdebug.log'}", "-o", "junit_logging=all",
        *role_args,
    )  # fmt: skip
    assert run.returncode == 1, run.output
    assert run.outcomes() == {
        "tau2_retail__0": "passed",
        "tau2_retail__5": "error",
        "tau2_retail__38": "passed",
        "tau2_retail__52": "failed",
    }

    # the keys were used: each role's requests carried its own key
    seen = {(_role(r.body), r.header("authorization")) for r in endpoint.server.requests}
    assert seen == {(role, f"Bearer {key}") for role, key in KEYS.items()}

    written = files_under(bench.path)
    assert bench.path / "debug.log" in written
    assert bench.run_dir("secrets") / "summary.json" in written
    assert bench.run_dir("secrets") / "report.html" in written
    assert run.junit in written
    secrets = KEYS | CANARIES
    # pytest's own --debug trace records its command line verbatim: the canaries given as
    # options are in it by the user's choice (the keys, from the environment, are not).
    leaks = [
        (path.name, role)
        for path in written
        for role, key in secrets.items()
        if key.encode() in path.read_bytes()
        and not (role in CANARIES and path.name == "pytestdebug.log")
    ]
    assert leaks == []
    printed = run.output
    assert [role for role, key in secrets.items() if key in printed] == []
    # the URL password was not sent either (no Basic auth: the key went as the bearer key)
    assert not any(CANARIES["url password"] in str(r.headers) for r in endpoint.server.requests)
    run_args = bench.read_json("secrets", "run_args.json")
    assert "[redacted]" in json.dumps(run_args["argv"])
    assert run_args["configuration"]["user"]["endpoint"]["extra_body"] == {
        "vendor_auth": "[redacted]",
        "top_k": 20,
    }
    assert "DEBUG" in (bench.path / "debug.log").read_text()  # the debug log did record
    configuration = bench.read_json("secrets", "run_args.json")["configuration"]
    assert configuration["agent"]["endpoint"]["api_key_env"] == "RELIABILITY_AGENT_KEY"


def test_a_key_pasted_as_the_variable_name_is_not_echoed(bench: Bench) -> None:
    run = bench.run("--tau2-agent-model=m", f"--tau2-agent-api-key-env={KEYS['agent']}")
    assert run.returncode == pytest.ExitCode.USAGE_ERROR
    assert "the NAME of an environment variable (the value is not shown)" in run.stderr
    assert KEYS["agent"] not in run.output
    assert not bench.output_dir.exists()


def test_headers_taking_the_keys_place_are_refused_without_their_value(bench: Bench) -> None:
    run = bench.run(
        "--tau2-agent-model=m",
        "--tau2-agent-base-url=http://127.0.0.1:9/v1",
        '--tau2-agent-headers={"Authorization": "Basic CANARY-H-1"}',
    )
    assert run.returncode == pytest.ExitCode.USAGE_ERROR
    assert "--tau2-agent-headers: Authorization carries the bearer key; send the key" in run.stderr
    assert "CANARY" not in run.output
    assert not bench.output_dir.exists()


# -- paths ---------------------------------------------------------------------------------

ESCAPES = [
    ("--tau2-run-id", "../escaped"),
    ("--tau2-run-id", ".."),
    ("--tau2-run-id", "a/../../escaped"),
    ("--tau2-run-id", "/tmp/tau2-reliability-escaped"),
    ("--tau2-run-id", ".hidden"),
    ("--tau2-run-id", "-rf"),
    ("--tau2-run-id", "a\\..\\..\\escaped"),
    ("--tau2-run-id", "ok\n../escaped"),
    ("--tau2-resume", "../escaped"),
    ("--tau2-resume", "/tmp"),
    ("--tau2-tasks", "../1"),
    ("--tau2-tasks", "1/../../escaped"),
    ("--tau2-tasks", "0;touch escaped"),
    ("-o tau2_run_id", "../escaped"),
]


@pytest.mark.parametrize(("option", "value"), ESCAPES, ids=[f"{o}={v!r}" for o, v in ESCAPES])
def test_run_ids_and_task_filters_cannot_leave_the_output_dir(
    bench: Bench, tmp_path: Path, option: str, value: str
) -> None:
    before = {p for p in tmp_path.rglob("*") if not p.name.startswith("junit-")}
    args = ["-o", f"tau2_run_id={value}"] if option.startswith("-o") else [f"{option}={value}"]
    run = bench.run("-n", "2", *args)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.output
    errors = error_lines(run.stderr)
    assert len(errors) == 1, run.stderr
    after = {p for p in tmp_path.rglob("*") if not p.name.startswith("junit-")}
    assert after == before
    assert not Path("/tmp/tau2-reliability-escaped").exists()


# -- any tool call, end to end ----------------------------------------------------------------


def _json_values(extra: Sequence[str]) -> st.SearchStrategy[Any]:
    return st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats()
        | st.text(max_size=12)
        | st.sampled_from(["#W2378156", "yusuf_rossi_9620", "9" * 5000, *extra]),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(
                st.text(max_size=8) | st.sampled_from(["order_id", "user_id"]), children
            )
        ),
        max_leaves=10,
    )


# What the wire can carry: any JSON, with half a surrogate pair only as an escape (the client
# replaces a decoded one; hypothesis' text has none).
ARGUMENT_TEXTS = st.one_of(
    _json_values(["\ud83d", "\udc00"]).map(json.dumps),
    _json_values([]).map(lambda v: json.dumps(v, ensure_ascii=False)),
    st.text(max_size=40),
    st.sampled_from(['{"order_id": "\\ud83d"}', "[" * 5000 + "]" * 5000, '{"a": NaN}', "{"]),
)
TOOL_NAMES = st.sampled_from(AGENT_TOOL_NAMES) | st.text(max_size=20)


@pytest.fixture(scope="module")
def engine(data_dir: Path, tasks: Mapping[str, Task]) -> dict[str, Any]:
    task = tasks["0"]
    return {
        "task": task,
        "gold": GoldBook(seed=load_seed(data_dir), tasks=tasks)["0"],
        "seed": load_seed(data_dir),
        "agent_prompt": agent_system_prompt(load_policy(data_dir)),
        "user_prompt": user_system_prompt(load_user_guidelines(data_dir), task),
        "tools": tool_schemas(),
        "profile": load_profile(ProfileName.DEFAULT, data_dir),
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    calls=st.lists(
        st.lists(st.tuples(TOOL_NAMES, ARGUMENT_TEXTS), min_size=1, max_size=3),
        min_size=1,
        max_size=3,
    )
)
def test_any_tool_call_gives_a_result_through_conversation_artifacts_and_xdist(
    engine: dict[str, Any], tmp_path_factory: pytest.TempPathFactory, calls: list[Any]
) -> None:
    turns = [
        AssistantTurn(
            content=None,
            tool_calls=tuple(
                ToolCall(id=f"c{i}-{j}", name=name, arguments=text)
                for j, (name, text) in enumerate(turn)
            ),
            usage=Usage(n_calls=1),
        )
        for i, turn in enumerate(calls)
    ]
    task = engine["task"]
    outcome = asyncio.run(
        run_scenario(
            Scenario(task=task, trial=0, trials=1, seed=1),
            agent=scripted_agent("scripted", turns),
            user=ScriptedCustomer(task),
            judge_model=None,
            gold=engine["gold"],
            store=Store(engine["seed"]),
            profile=engine["profile"],
            limits=Limits(max_errors=100),
        )
    )
    assert outcome.metrics.stop_reason == "agent_exit"
    tool_messages = [m for m in outcome.conversation.messages if m.role.value == "tool"]
    assert len(tool_messages) >= 1
    # the record is plain JSON values: it crosses any boundary (execnet, a file) intact
    record = codec.encode(outcome.metrics)
    assert (
        codec.decode_value(ScenarioMetrics, execnet.loads(execnet.dumps(record))) == outcome.metrics
    )
    folder = tmp_path_factory.mktemp("artifacts")
    put_scenario_files(
        scenario_files(
            folder,
            outcome,
            agent_prompt=engine["agent_prompt"],
            user_prompt=engine["user_prompt"],
            tools=engine["tools"],
            config={},
        )
    )
    transcript = json.loads((folder / "transcript.json").read_text(encoding="utf-8"))
    assert len(transcript["messages"]) == len(outcome.conversation.messages)


# -- isolation -----------------------------------------------------------------------------


def _writes(task: Task) -> list[tuple[str, dict[str, Any]]]:
    return [
        (a.name, a.plain_arguments()) for a in task.actions if TOOLS[a.name].kind is ToolKind.WRITE
    ]


def test_a_full_run_changes_neither_the_seed_data_nor_another_scenarios_database(
    bench: Bench, endpoint: ScriptedEndpoint, data_dir: Path, tasks: Mapping[str, Task]
) -> None:
    """All 114 scenarios at ``-n 2``. Every tenth agent also performs the next three tasks'
    writes after its own: in a shared database those scenarios would then fail. Only the
    vandals whose extra writes changed something fail; the data files are untouched."""
    ids = list(tasks)
    vandals = [
        task.id
        for task in tasks.values()
        if int(task.id) % 10 == 0
        and _writes(task)
        and "transfer_to_human_agents" not in {a.name for a in task.actions}
    ]
    foreign = {
        vandal: [
            call for other in ids[ids.index(vandal) + 1 : ids.index(vandal) + 4]
            for call in _writes(tasks[other])
        ]
        for vandal in vandals
    }  # fmt: skip

    def vandalize(request: Request) -> Reply | None:
        messages = request.body["messages"]
        if request.role != "agent" or messages[-1]["role"] != "tool":
            return None
        calls = [c for m in messages for c in m.get("tool_calls") or []]
        if any(str(c.get("id", "")).startswith("x-") for c in calls):
            return None
        return Completion(
            tool_calls=tuple(
                ReplyToolCall(name=name, arguments=json.dumps(arguments), id=f"x-{n}")
                for n, (name, arguments) in enumerate(foreign[request.task_id])
            )
        )

    for vandal in vandals:
        endpoint.faults[vandal] = vandalize
    seed = load_seed(data_dir)
    gold = GoldBook(seed=seed, tasks=tasks)
    damaged = set()
    for vandal in vandals:
        store, _ = replay_calls(
            seed,
            [*((a.name, a.plain_arguments()) for a in tasks[vandal].actions), *foreign[vandal]],
        )
        if store.hash() != gold[vandal].db_hash:
            damaged.add(f"tau2_retail__{vandal}")
    assert len(damaged) >= 8, "the vandals must really write"
    before = file_digests(data_dir)

    run = bench.run("-n", "2", "--tau2-run-id=isolation", *endpoint.args("agent"))

    assert file_digests(data_dir) == before
    outcomes = run.outcomes()
    assert len(outcomes) == len(tasks)
    failed = {scenario for scenario, outcome in outcomes.items() if outcome != "passed"}
    assert failed == damaged, run.stdout[-3000:]
    counts = bench.summary("isolation")["counts"]
    assert (counts["succeeded"], counts["failed"]) == (len(tasks) - len(damaged), len(damaged))
