"""Issue 22: what a run costs, a budget it cannot exceed, and re-runs that cost nothing.

The loopback endpoint plays the agent (gold actions), the customer and the judge, each under its
own model name and price; every request it receives is counted there. A second identical run
with the response cache must send it nothing and score the same; a replay must reproduce the run
with the server stopped; a budget must keep new scenarios from starting.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tau2_retail.data.tasks import Task, load_user_guidelines
from tau2_retail.testing.bench import error_lines, read_only
from tau2_retail.testing.run_files import edit_cache_replies, files_under
from tau2_retail.testing.scripted_endpoint import END, ScriptedEndpoint

from .conftest import Bench, in_one_process_and_two_workers

PRICES = {
    "price-agent": {"input": 2.0, "output": 8.0},
    "price-user": {"input": 0.5, "output": 1.5},
    "price-judge": {"input": 3.0, "output": 12.0, "cached_input": 1.0},
}
ROLES = ("agent", "user", "judge")
# task 4 has an NL assertion (a judge request); 0 and 1 have none
TASKS = "--tau2-tasks=0,1,4"
SCENARIOS = ("tau2_retail__0", "tau2_retail__1", "tau2_retail__4")
# what must not change between a run and its cached or replayed twin
SCORED = (
    "stop_reason",
    "db_state_match",
    "db_state_actual_hash",
    "clean_exit",
    "is_action_match",
    "nl_assertion_pass_rate",
    "judge_score",
    "is_successful",
    "total_turns",
    "success_breakdown",
)


@pytest.fixture
def three_roles(tasks: Mapping[str, Task], data_dir: Path) -> Iterator[ScriptedEndpoint]:
    """A started loopback endpoint answering for a gold-acting agent, the customer and a judge."""
    scripted = ScriptedEndpoint(tasks, load_user_guidelines(data_dir))
    with scripted.server:
        yield scripted


def _args(endpoint: ScriptedEndpoint, cache: Path | None, *extra: str) -> list[str]:
    args = [
        "-rA",  # the short summary gives each scenario's outcome (Run.outcomes)
        *endpoint.args("agent", model="price-agent"),
        *endpoint.args("user", model="price-user"),
        *endpoint.args("judge", model="price-judge"),
        f"--tau2-prices={json.dumps(PRICES)}",
        TASKS,
        *extra,
    ]
    if cache is not None:
        args.append(f"--tau2-cache={cache}")
    return args


def _scored(bench: Bench, run_id: str, scenario: str) -> dict[str, Any]:
    metrics = bench.metrics(run_id, scenario)
    return {key: metrics.get(key) for key in SCORED}


def _usd(usage: Mapping[str, int], price: Mapping[str, float]) -> float:
    billed_prompt = usage["prompt"] - usage.get("hit_prompt", 0)
    cached = usage.get("cached_prompt", 0)
    cached_price = price.get("cached_input", price["input"])
    billed_completion = usage["completion"] - usage.get("hit_completion", 0)
    return (
        (billed_prompt - cached) * price["input"]
        + cached * cached_price
        + billed_completion * price["output"]
    ) / 1_000_000


def test_a_second_identical_run_sends_nothing_and_scores_the_same(
    bench: Bench, three_roles: ScriptedEndpoint, xdist: tuple[str, ...], tmp_path: Path
) -> None:
    cache = tmp_path / "responses.sqlite"
    first = bench.run(*xdist, *_args(three_roles, cache), "--tau2-run-id=first")
    assert first.ret == 0, first.output
    sent = len(three_roles.log)
    assert sent > 0
    assert {r.role for r in three_roles.log} == {"agent", "user", "judge"}
    assert f"tau2: response cache {cache} (read-write" in first.stdout

    three_roles.reset()
    second = bench.run(*xdist, *_args(three_roles, cache), "--tau2-run-id=second")

    assert second.ret == 0, second.output
    assert len(three_roles.log) == 0  # counted at the loopback server
    for scenario in SCENARIOS:
        assert _scored(bench, "second", scenario) == _scored(bench, "first", scenario)
    before, after = bench.summary("first"), bench.summary("second")
    for key in ("success_rate", "signals", "counts", "stop_reasons"):
        assert after[key] == before[key]
    for role in ("agent", "user", "judge"):
        tokens, cached = before["token_usage"][role], after["token_usage"][role]
        assert (cached["prompt"], cached["completion"]) == (tokens["prompt"], tokens["completion"])
        assert cached["cache_hits"] == cached["n_calls"] == tokens["n_calls"] > 0
        assert "cache_hits" not in tokens
        assert after["cost"][role] == 0.0
    assert after["cost"]["total"] == 0.0
    assert f"response cache: {sent} of {sent} completion(s) served from the cache" in (
        second.stdout
    )


def test_the_summary_cost_equals_tokens_times_prices(
    bench: Bench, three_roles: ScriptedEndpoint, tmp_path: Path
) -> None:
    run = bench.run("-n", "0", *_args(three_roles, None), "--tau2-run-id=priced")

    assert run.ret == 0, run.output
    summary = bench.summary("priced")
    cost = summary["cost"]
    assert cost["currency"] == "USD"
    assert cost["unpriced_models"] == []
    for role in ("agent", "user", "judge"):
        usage = summary["token_usage"][role]
        assert cost[role] == pytest.approx(_usd(usage, PRICES[f"price-{role}"]), abs=1e-6)
        assert cost[role] > 0
    assert cost["total"] == pytest.approx(sum(cost[r] for r in ("agent", "user", "judge")))
    # each scenario's metrics has its cost, and the rows of the summary and the text show it
    rows = {row["scenario_id"]: row for row in summary["scenarios"]}
    total = 0.0
    for scenario in SCENARIOS:
        metrics = bench.metrics("priced", scenario)
        scenario_cost = metrics["cost"]
        for role in ("agent", "user", "judge"):
            usage = metrics["token_usage"][role]
            expected = _usd(usage, PRICES[f"price-{role}"])
            assert scenario_cost[role] == pytest.approx(expected, abs=1e-6)
        assert rows[scenario]["cost"] == scenario_cost["total"]
        total += scenario_cost["total"]
    assert cost["total"] == pytest.approx(total, abs=1e-5)
    text = (bench.run_dir("priced") / "all_summary.txt").read_text(encoding="utf-8")
    assert f"Cost (USD): ${cost['total']:,.4f} total (agent ${cost['agent']:,.4f}" in text
    assert f"Cost (USD): ${cost['total']:,.4f} total" in run.stdout


def test_a_model_without_a_price_has_no_cost_and_the_run_names_it(
    bench: Bench, three_roles: ScriptedEndpoint
) -> None:
    prices = {"price-agent": PRICES["price-agent"], "price-user": PRICES["price-user"]}
    args = [a for a in _args(three_roles, None) if not a.startswith("--tau2-prices")]
    run = bench.run(
        "-n", "0", *args, f"--tau2-prices={json.dumps(prices)}", "--tau2-run-id=partial"
    )

    assert run.ret == 0, run.output
    cost = bench.summary("partial")["cost"]
    assert cost["judge"] is None
    assert cost["total"] is None
    assert cost["agent"] > 0
    assert cost["unpriced_models"] == ["price-judge"]
    assert "no price for model(s) price-judge: add them to --tau2-prices" in run.stdout


def test_replay_reproduces_the_run_with_the_endpoint_down(
    bench: Bench, three_roles: ScriptedEndpoint, tmp_path: Path
) -> None:
    cache = tmp_path / "ci-artifact.sqlite"
    recorded = bench.run("-n", "0", *_args(three_roles, cache), "--tau2-run-id=ci")
    assert recorded.ret == 0, recorded.output
    args = _args(three_roles, cache, "--tau2-cache-mode=replay")
    three_roles.server.stop()

    replayed = bench.run("-n", "0", *args, "--tau2-run-id=laptop")

    assert replayed.ret == 0, replayed.output
    assert "(replay: no endpoint is contacted" in replayed.stdout
    for scenario in SCENARIOS:
        assert _scored(bench, "laptop", scenario) == _scored(bench, "ci", scenario)

    # a request the cache has not seen (another seed) is an infra error naming its digest
    missed = bench.run("-n", "0", *args, "--tau2-seed=301", "--tau2-run-id=other-seed")
    assert missed.ret != 0
    assert missed.outcomes() == dict.fromkeys(SCENARIOS, "error"), missed.output
    detail = bench.summary("other-seed")["infra_errors"][0]["detail"]
    assert detail.startswith("user: replay from the response cache")  # the customer opens
    assert "no reply for request " in detail


def test_two_runs_at_once_share_one_cache_file(
    bench: Bench, three_roles: ScriptedEndpoint, tmp_path: Path
) -> None:
    cache = tmp_path / "shared.sqlite"
    one = bench.start("-n", "2", *_args(three_roles, cache), "--tau2-run-id=one")
    two = bench.start("-n", "2", *_args(three_roles, cache), "--tau2-run-id=two")
    first, second = one.wait(), two.wait()

    assert first.ret == 0, first.output
    assert second.ret == 0, second.output
    assert "unusable" not in first.output + second.output
    for scenario in SCENARIOS:
        assert _scored(bench, "two", scenario) == _scored(bench, "one", scenario)
    # the file holds each distinct request once, whoever stored it
    with closing(sqlite3.connect(cache)) as db:
        entries = db.execute("SELECT count(*) FROM responses").fetchone()[0]
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    three_roles.reset()
    third = bench.run("-n", "2", *_args(three_roles, cache), "--tau2-run-id=three")
    assert third.ret == 0, third.output
    assert len(three_roles.log) == 0
    assert entries == sum(bench.summary("three")["token_usage"][r]["n_calls"] for r in ROLES)


def _warnings(output: str) -> list[str]:
    return [line for line in output.splitlines() if "response cache" in line and "unusable" in line]


def test_a_corrupted_cache_file_degrades_to_no_cache_with_one_line(
    bench: Bench, three_roles: ScriptedEndpoint, xdist: tuple[str, ...], tmp_path: Path
) -> None:
    cache = tmp_path / "corrupted.sqlite"
    cache.write_bytes(b"this is not a database, it was cut by a full disk" * 100)

    run = bench.run(*xdist, *_args(three_roles, cache), "--tau2-run-id=corrupted")

    assert run.ret == 0, run.output
    assert run.outcomes() == dict.fromkeys(SCENARIOS, "passed")
    lines = _warnings(run.stdout)
    assert len(lines) == 1, run.output
    assert lines[0].startswith(f"tau2: response cache {cache} unusable (DatabaseError: ")
    assert lines[0].endswith("continuing without the cache (every request goes to its endpoint)")
    assert len(three_roles.log) > 0


def test_a_locked_cache_file_degrades_to_no_cache_with_one_line(
    bench: Bench, three_roles: ScriptedEndpoint, tmp_path: Path
) -> None:
    cache = tmp_path / "locked.sqlite"
    writer = sqlite3.connect(cache, isolation_level=None, check_same_thread=False)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE held (x)")
    writer.execute("BEGIN IMMEDIATE")  # another process's write lock, held for the whole run
    writer.execute("INSERT INTO held VALUES (1)")
    try:
        run = bench.run("-n", "0", *_args(three_roles, cache), "--tau2-run-id=locked")
    finally:
        writer.execute("ROLLBACK")
        writer.close()

    assert run.ret == 0, run.output
    assert run.outcomes() == dict.fromkeys(SCENARIOS, "passed")
    lines = _warnings(run.stdout)
    assert len(lines) == 1, run.output
    assert "database is locked" in lines[0]


# Appended to the project's conftest: every connection to the cache file may hold 3 pages more
# than it has (SQLite's own "database or disk is full" when a write needs more).
_FULL_CACHE = """

import tau2_retail.models.cache as _cache

_real_connect = _cache._connect


def _full(path, **kwargs):
    connection = _real_connect(path, **kwargs)
    pages = connection.execute("PRAGMA page_count").fetchone()[0]
    connection.execute(f"PRAGMA max_page_count = {pages + 3}")
    return connection


_cache._connect = _full
"""


def test_a_full_cache_file_degrades_to_no_cache_with_one_line(
    bench: Bench, three_roles: ScriptedEndpoint, tmp_path: Path
) -> None:
    conftest = bench.path / "conftest.py"
    conftest.write_text(
        (conftest.read_text() if conftest.exists() else "") + _FULL_CACHE, encoding="utf-8"
    )
    cache = tmp_path / "full.sqlite"

    run = bench.run("-n", "0", *_args(three_roles, cache), "--tau2-run-id=full")

    assert run.ret == 0, run.output
    assert run.outcomes() == dict.fromkeys(SCENARIOS, "passed")
    lines = _warnings(run.stdout)
    assert len(lines) == 1, run.output
    assert "database or disk is full" in lines[0]


def test_a_budget_too_small_for_a_request_sends_nothing_and_a_higher_one_resumes(
    bench: Bench, three_roles: ScriptedEndpoint
) -> None:
    args = _args(three_roles, None)
    stopped = bench.run("-n", "0", *args, "--tau2-max-cost=0.000001", "--tau2-run-id=budget")

    assert stopped.ret == pytest.ExitCode.TESTS_FAILED, stopped.output
    # every request's estimate passes the budget: nothing is sent, nothing is spent
    assert three_roles.log == []
    summary = bench.summary("budget")
    assert summary["not_run"] == list(SCENARIOS)
    assert summary["counts"]["not_run"] == 3
    assert summary["counts"]["lost"] == 0
    budget_lines = [line for line in stopped.stdout.splitlines() if "budget reached" in line]
    assert budget_lines == [
        "tau2: budget reached: spent $0.0000 of --tau2-max-cost $0.0000 (a request is sent only "
        "while its estimated cost fits); 3 scenario(s) not run or stopped unscored (resume with "
        "a higher --tau2-max-cost to run them)"
    ]
    assert "NOT RUN (budget) tau2_retail__1" in stopped.stdout
    text = (bench.run_dir("budget") / "all_summary.txt").read_text(encoding="utf-8")
    assert "Not run (budget; excluded from rates, resumable): 3" in text

    resumed = bench.run("-n", "0", *args, "--tau2-max-cost=10", "--tau2-resume=budget")

    assert resumed.ret == 0, resumed.output
    summary = bench.summary("budget")
    assert summary["counts"]["scored"] == 3
    assert "not_run" not in summary


TWENTY = "--tau2-tasks=" + ",".join(str(task) for task in range(20))


@in_one_process_and_two_workers(conversations=20)
def test_the_budget_is_a_cap_with_every_scenario_in_flight(
    bench: Bench, three_roles: ScriptedEndpoint, workers: tuple[str, ...]
) -> None:
    """Issue 30, item 5: ``--tau2-max-cost 0.5`` with 114 scenarios in flight spent $79.64
    (each scenario checked the budget only when it started). Spending, as the loopback
    endpoint bills it, stays within one request per conversation in flight of the cap."""
    full = bench.run("-n", "0", *_args(three_roles, None, TWENTY), "--tau2-run-id=full")
    assert full.ret == 0, full.output
    whole = three_roles.server.billed_usd(PRICES)
    budget = whole / 5
    before = len(three_roles.server.completion_costs(PRICES))

    run = bench.run(
        *workers, *_args(three_roles, None, TWENTY), f"--tau2-max-cost={budget!r}",
        "--tau2-run-id=capped",
    )  # fmt: skip

    assert run.ret == pytest.ExitCode.TESTS_FAILED, run.output
    costs = three_roles.server.completion_costs(PRICES)[before:]
    in_flight = 20  # conversations in flight at once, in all processes
    assert sum(costs) <= budget + in_flight * max(costs), (sum(costs), budget)
    summary = bench.summary("capped")
    counts = summary["counts"]
    assert counts["not_run"] > 0
    assert counts["lost"] == counts["infra_errors"] == 0
    assert counts["scored"] + counts["not_run"] == counts["expected"] == 20
    assert [line for line in run.stdout.splitlines() if "tau2: budget reached: spent $" in line]
    # the run's own accounting of what it spent never exceeds what was billed; it has none
    # when the cap came before any scenario ended (all 20 in flight at once: a matter of timing)
    assert ("cost" in summary) == (counts["scored"] > 0)
    recorded = summary["cost"]["total"] if counts["scored"] else 0.0
    assert recorded <= sum(costs) + 1e-6
    # what the scenarios it stopped unscored had spent is in the summary too (they have no
    # record): with it, the run accounts for every request the endpoint billed
    stopped = summary.get("not_run_cost", 0.0)
    assert stopped > 0
    assert recorded + stopped == pytest.approx(sum(costs), abs=1e-5)
    text = (bench.run_dir("capped") / "all_summary.txt").read_text(encoding="utf-8")
    assert f"${stopped:,.4f} spent by the scenarios the budget stopped unscored" in text


def test_what_a_stopped_scenario_spent_stays_in_the_summary_once_a_resume_scores_it(
    bench: Bench, three_roles: ScriptedEndpoint
) -> None:
    """A resume wrote the summary with its own invocation's stopped spending only: what the
    first invocation's stopped scenarios had spent left the folder's summary (the Cost total
    still sums every invocation's records), so the two no longer added up to the bill."""
    args = _args(three_roles, None)
    full = bench.run("-n", "0", *args, "--tau2-run-id=full")
    assert full.ret == 0, full.output
    before = three_roles.server.billed_usd(PRICES)

    stopped = bench.run("-n", "0", *args, f"--tau2-max-cost={before / 2!r}", "--tau2-run-id=r")
    assert stopped.ret == pytest.ExitCode.TESTS_FAILED, stopped.output
    first = bench.summary("r").get("not_run_cost", 0.0)
    assert first > 0  # a scenario was stopped after its first requests were billed

    resumed = bench.run("-n", "0", *args, "--tau2-max-cost=10", "--tau2-resume=r")
    assert resumed.ret == 0, resumed.output
    summary = bench.summary("r")
    assert summary["counts"]["scored"] == 3
    assert summary["not_run_cost"] == first
    billed = three_roles.server.billed_usd(PRICES) - before  # both invocations
    assert summary["cost"]["total"] + summary["not_run_cost"] == pytest.approx(billed, abs=1e-5)
    text = (bench.run_dir("r") / "all_summary.txt").read_text(encoding="utf-8")
    assert f"  and ${first:,.4f} spent by the scenarios the budget stopped unscored" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            (
                "--tau2-agent-model=some-agent",
                "--tau2-agent-base-url=http://127.0.0.1:9/v1",
                "--tau2-max-cost=5",
                '--tau2-prices={"other": {"input": 1, "output": 1}}',
            ),
            "--tau2-max-cost: --tau2-max-cost needs a price for every model, and 'some-agent' "
            "has none; add it to --tau2-prices",
        ),
        (
            (
                "--tau2-agent-model=mock-agent",
                "--tau2-agent-base-url=http://127.0.0.1:9/v1",
                "--tau2-judge-model=mock-judge",
                "--tau2-judge-base-url=http://127.0.0.1:9/v1",
                "--tau2-max-cost=5",
                '--tau2-prices={"other": {"input": 1, "output": 1}}',
            ),
            "--tau2-max-cost: --tau2-max-cost needs a price for every model, and 'mock-agent', "
            "'mock-judge' have none; add them to --tau2-prices",
        ),
        (
            ("--tau2-prices={not json",),
            "--tau2-prices: '{not json' is not valid for --tau2-prices; expected JSON prices",
        ),
        (
            ('--tau2-prices={"m": {"input": -1, "output": 1}}',),
            "'input' must be a number >= 0",
        ),
        (
            ("--tau2-cache-mode=replay", "--tau2-cache=missing.sqlite"),
            "--tau2-cache: 'missing.sqlite' is not valid for --tau2-cache with "
            "--tau2-cache-mode replay; expected an existing cache file",
        ),
        (
            ("--tau2-cache-mode=replay",),
            "--tau2-cache-mode: --tau2-cache-mode replay needs a cache file",
        ),
        (("--tau2-cache-mode=sometimes",), "expected one of read-write, replay, off"),
    ],
    ids=[
        "budget-without-price",
        "budget-two-models-without-prices",
        "prices-not-json",
        "negative-price",
        "replay-no-file",
        "replay-no-path",
        "bad-mode",
    ],
)
def test_bad_cost_and_cache_options_fail_at_start_up(
    bench: Bench, args: tuple[str, ...], message: str
) -> None:
    result = bench.run_inprocess(*args, "--tau2-user-model=builtin:customer")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_a_price_beyond_the_bound_is_refused_at_start_up(bench: Bench) -> None:
    """Issue 30, item 6: a price of 1e308 made the cost ``inf``; writing metrics.json then
    failed and every scenario was lost."""
    prices = '{"m": {"input": 1e308, "output": 1}}'

    result = bench.run_inprocess("--co", "--tau2-tasks=0", f"--tau2-prices={prices}")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = error_lines(result.stderr)
    assert len(errors) == 1, result.stderr.str()
    assert (
        "prices: model 'm': 'input' must be a number >= 0 and <= 100,000 (USD per million "
        "tokens), got 1e+308"
    ) in errors[0]


def test_a_huge_token_count_never_loses_the_scenario(
    bench: Bench, endpoint: ScriptedEndpoint
) -> None:
    """An endpoint may report any integer: 10**400 prompt tokens at the highest price made the
    cost overflow and the scenario was lost. The cost stays a finite number and the scenario
    is scored."""
    endpoint.agent["10"] = dataclasses.replace(END, prompt_tokens=10**400)
    prices = {"test-agent": {"input": 100_000, "output": 100_000}}

    run = bench.run(
        "-n", "0", "-rA", "--tau2-tasks=10", *endpoint.agent_args(),
        f"--tau2-prices={json.dumps(prices)}",
        "--tau2-run-id=huge",
    )  # fmt: skip

    assert run.ret == pytest.ExitCode.OK, run.output
    assert run.outcomes() == {"tau2_retail__10": "passed"}
    cost = bench.metrics("huge", "tau2_retail__10")["cost"]
    assert cost["agent"] == pytest.approx(100_000 * 10**12 / 1_000_000, rel=1e-3)
    assert bench.summary("huge")["cost"]["total"] == cost["total"]


def test_prices_from_the_ini_file(bench: Bench) -> None:
    bench.add_ini(tau2_prices=json.dumps({"m": {"input": 1, "output": 2}}))
    result = bench.run_inprocess("--co", "--tau2-tasks=0")
    assert result.ret == 0, result.stdout.str()
    assert "tau2: prices for 1 model(s)" in result.stdout.str()


def test_prices_from_a_toml_table_in_pyproject(bench: Bench) -> None:
    (bench.path / "pytest.ini").unlink()
    (bench.path / "pyproject.toml").write_text(
        """\
[tool.pytest.ini_options]
testpaths = ["test_scenarios.py"]
asyncio_mode = "strict"
asyncio_default_fixture_loop_scope = "function"
filterwarnings = [
    "error",
    "ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning",
]
tau2_prices = {"m" = {input = 1, output = 2}, "n" = {input = 0.5, output = 1, cached_input = 0.1}}
""",
        encoding="utf-8",
    )
    result = bench.run_inprocess("--co", "--tau2-tasks=0")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    assert "tau2: prices for 2 model(s)" in result.stdout.str()


def test_replay_needs_no_api_key(bench: Bench, tmp_path: Path) -> None:
    cache = tmp_path / "from-ci.sqlite"
    cache.write_bytes(b"")  # any existing file: --co never opens it
    remote = (
        "--tau2-agent-model=gpt-remote",
        "--tau2-agent-base-url=https://llm.example.com/v1",
        "--tau2-user-model=builtin:customer",
    )
    without_key = bench.run_inprocess("--co", "--tau2-tasks=0", *remote)
    assert without_key.ret == pytest.ExitCode.USAGE_ERROR  # a live run needs the key

    replay = bench.run_inprocess(
        "--co", "--tau2-tasks=0", *remote, f"--tau2-cache={cache}", "--tau2-cache-mode=replay"
    )
    assert replay.ret == 0, replay.stdout.str() + replay.stderr.str()
    assert "(replay: no endpoint is contacted" in replay.stdout.str()


# -- issue 30, items 14 and 15: replay from a read-only copy; a cached reply is held to the
# bounds and the masking of a live one

KEY_ENV = "TAU2_CACHED_KEY"
KEY = "sk-cached-5b3e9d1f7a2c4e6b"
BOUNDS_TASKS = ("0", "5", "7")


def _two_roles(endpoint: ScriptedEndpoint, cache: Path, *extra: str) -> list[str]:
    return [
        "-n", "0", "-rA", f"--tau2-tasks={','.join(BOUNDS_TASKS)}", f"--tau2-cache={cache}",
        *endpoint.args("agent", api_key_env=KEY_ENV), *endpoint.args("user"), *extra,
    ]  # fmt: skip


def test_replay_works_from_a_read_only_folder(
    bench: Bench, three_roles: ScriptedEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    folder = tmp_path / "mounted"
    folder.mkdir()
    cache = folder / "responses.sqlite"
    recorded = bench.run(*_two_roles(three_roles, cache), "--tau2-run-id=rw")
    assert recorded.ret == 0, recorded.output
    replay = _two_roles(three_roles, cache, "--tau2-cache-mode=replay", "--tau2-run-id=ro")
    three_roles.server.stop()

    with read_only(folder, bench):
        replayed = bench.run(*replay)

    assert replayed.ret == 0, replayed.output
    assert "unusable" not in replayed.output
    for task in BOUNDS_TASKS:
        scenario = f"tau2_retail__{task}"
        assert _scored(bench, "ro", scenario) == _scored(bench, "rw", scenario)
    assert sorted(path.name for path in folder.iterdir()) == ["responses.sqlite"]


def _hostile(reply: dict[str, Any]) -> None:
    """Task 0's last reply speaks the key; task 5's counts negative tokens; task 7's is huge."""
    arguments = " ".join(call["arguments"] for call in reply["tool_calls"])
    if any(call["name"] == "end_conversation" for call in reply["tool_calls"]):
        reply["content"] = f"Goodbye. For the record, my key is {KEY}."
    elif "8538875209" in arguments:
        reply["usage"]["completion"] = -40
    elif "1569765161" in arguments:
        reply["content"] = "x" * 300_000


def test_a_hand_edited_cache_entry_is_masked_and_bounded_like_a_live_reply(
    bench: Bench, three_roles: ScriptedEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    cache = tmp_path / "edited.sqlite"
    recorded = bench.run(*_two_roles(three_roles, cache), "--tau2-run-id=recorded")
    assert recorded.ret == 0, recorded.output
    edit_cache_replies(cache, _hostile)
    replay = _two_roles(three_roles, cache, "--tau2-cache-mode=replay", "--tau2-run-id=edited")
    three_roles.server.stop()

    replayed = bench.run(*replay, "--tau2-max-reply-bytes=65536")

    assert replayed.outcomes() == {
        "tau2_retail__0": "passed",
        "tau2_retail__5": "error",
        "tau2_retail__7": "error",
    }, replayed.output
    infra = {row["scenario_id"]: row["detail"] for row in bench.summary("edited")["infra_errors"]}
    assert "no usable reply" in infra["tau2_retail__5"]
    assert "a negative token count" in infra["tau2_retail__5"]
    assert "over the 65,536-byte limit" in infra["tau2_retail__7"]
    # the key the entry holds: masked in every file and on the terminal
    transcript = bench.read_json("edited", "tau2_retail__0/transcript.json")
    said = [m.get("content") for m in transcript["messages"] if m["role"] == "assistant"]
    assert "Goodbye. For the record, my key is ***." in said
    run_dir = bench.run_dir("edited")
    leaks = [str(path) for path in files_under(run_dir) if KEY.encode() in path.read_bytes()]
    assert leaks == []
    assert KEY not in replayed.output
