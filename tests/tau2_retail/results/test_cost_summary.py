"""The cost, the replies from the response cache, the scenarios not run (budget) and what the
scenarios stopped unscored had spent in the run summary; summaries and metrics written before
them still read."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tau2_retail import codec
from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.errors import ArtifactError
from tau2_retail.models.messages import Usage
from tau2_retail.models.prices import RoleCosts
from tau2_retail.results import summary as summary_module
from tau2_retail.results.records import RunSummary
from tau2_retail.results.stopped_spending import (
    STOPPED_SPENDING_FILE,
    StopCause,
    StoppedSpending,
    record_stopped_spending,
)
from tau2_retail.results.summary import build_summary, cost_lines, render_summary_text, summarize
from tau2_retail.results.summary import write_run_summary as write_summary
from tests.tau2_retail.results.test_summary import CONFIGURATION, VERSIONS, metric


def priced(task_id: str, agent: float, user: float, judge: float | None) -> ScenarioMetrics:
    return dataclasses.replace(metric(task_id), cost=RoleCosts(agent=agent, user=user, judge=judge))


def test_the_run_cost_is_the_sum_of_its_scenarios_by_role() -> None:
    summary = build_summary(
        [priced("0", 0.25, 0.125, 0.0), priced("1", 0.5, 0.25, 0.0)],
        expected=None,
        trials=1,
        configuration=CONFIGURATION,
        versions=VERSIONS,
    )
    assert codec.encode(summary)["cost"] == {
        "agent": 0.75,
        "user": 0.375,
        "judge": 0.0,
        "total": 1.125,
        "currency": "USD",
        "unpriced_models": [],
    }
    assert [row.cost for row in summary.scenarios] == [0.375, 0.75]
    text = render_summary_text(summary)
    assert "  Cost (USD): $1.1250 total (agent $0.7500, user $0.3750, judge $0.0000)" in text
    assert "cost       stop reason" in text
    assert codec.decode_value(RunSummary, codec.encode(summary)) == summary


def test_a_role_without_a_price_is_unknown_and_named() -> None:
    summary = build_summary(
        [priced("0", 0.25, 0.125, None)],
        expected=None,
        trials=1,
        configuration=CONFIGURATION,
        versions=VERSIONS,
    )
    cost = codec.encode(summary)["cost"]
    assert (cost["judge"], cost["total"], cost["unpriced_models"]) == (None, None, ["gpt-judge"])
    assert "no price for model(s) gpt-judge: add them to --tau2-prices" in render_summary_text(
        summary
    )


def test_a_scenario_recorded_without_a_cost_makes_the_run_cost_unknown() -> None:
    # resumed with prices after a first session without them: a partial sum would mislead
    summary = build_summary(
        [priced("0", 0.25, 0.125, 0.0), metric("1")],
        expected=None,
        trials=1,
        configuration=CONFIGURATION,
        versions=VERSIONS,
    )
    assert summary.cost is not None
    assert summary.cost.total is None


def test_a_run_without_prices_keeps_the_old_shape() -> None:
    data = codec.encode(
        build_summary(
            [metric("0")], expected=None, trials=1, configuration=CONFIGURATION, versions=VERSIONS
        )
    )
    assert "cost" not in data
    assert "not_run" not in data
    assert "interrupted_cost" not in data
    assert "interrupted_by" not in data
    assert "not_run" not in data["counts"]
    assert "cost" not in data["scenarios"][0]
    assert set(data["token_usage"]["agent"]) == {"n_calls", "prompt", "completion"}


def test_scenarios_not_run_are_listed_and_left_out_of_the_rates_and_the_lost() -> None:
    summary = build_summary(
        [metric("0"), metric("1", db=False)],
        expected=[f"tau2_retail__{n}" for n in range(4)],
        trials=1,
        configuration=CONFIGURATION,
        versions=VERSIONS,
        not_run=["tau2_retail__2", "tau2_retail__3"],
    )
    counts = summary.counts
    assert (counts.expected, counts.scored, counts.lost, counts.not_run) == (4, 2, 0, 2)
    assert summary.not_run == ("tau2_retail__2", "tau2_retail__3")
    assert summary.success_rate.total == 2
    text = render_summary_text(summary)
    assert "4 expected, 2 scored (1 succeeded, 1 failed), 0 infra errors, 0 lost, 2 not run" in (
        text
    )
    assert "Not run (budget; excluded from rates, resumable): 2\n  tau2_retail__2\n" in text


def test_cache_hits_are_counted_per_role() -> None:
    hits = Usage(n_calls=3, prompt=300, completion=30, cache_hits=2, hit_prompt=200)
    records = [dataclasses.replace(metric(n), token_usage={"agent": hits}) for n in "01"]
    back = codec.decode_value(ScenarioMetrics, codec.encode(records[0]))
    assert back.token_usage["agent"] == hits
    summary = build_summary(records, expected=None, trials=1, configuration=None, versions={})
    assert codec.encode(summary)["token_usage"]["agent"] == {
        "n_calls": 6,
        "prompt": 600,
        "completion": 60,
        "cache_hits": 4,
        "hit_prompt": 400,
    }
    assert "6 calls, 600 prompt, 60 completion tokens, 4 from the cache" in render_summary_text(
        summary
    )


def _run_with_a_summary(
    tmp_path: Path,
    *,
    expected: Sequence[str] = ("tau2_retail__0", "tau2_retail__1"),
    **stopped: Any,
) -> Path:
    """A run folder with one priced record (scenario 0: $0.2) and its summary, ``stopped``
    (``lost``, ``not_run``, ``stopped``) given to ``write_run_summary``."""
    run = tmp_path / "run"
    record = priced("0", 0.1, 0.1, 0.0)
    folder = run / record.scenario_name
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(codec.encode(record)))
    write_summary(
        run,
        [record],
        expected=expected,
        trials=1,
        configuration=CONFIGURATION,
        versions=VERSIONS,
        **stopped,
    )
    return run


@pytest.mark.parametrize(
    ("stopped", "field", "by"),
    [
        (
            {"not_run": ["tau2_retail__1"], "stopped": StoppedSpending(budget=0.0421)},
            "not_run_cost",
            "the budget",
        ),
        (
            {
                "lost": {"tau2_retail__1": "not run (interrupted)"},
                "stopped": StoppedSpending.of(interrupted=0.0421, by=[StopCause.INTERRUPT]),
            },
            "interrupted_cost",
            "the interrupt",
        ),
        (
            {
                "lost": {"tau2_retail__1": "not run (interrupted)"},
                "stopped": StoppedSpending.of(interrupted=0.0421, by=[StopCause.MAXFAIL]),
            },
            "interrupted_cost",
            "-x/--maxfail",
        ),
    ],
)
def test_summarize_keeps_what_the_stopped_scenarios_spent(
    tmp_path: Path, stopped: dict[str, Any], field: str, by: str
) -> None:
    run = _run_with_a_summary(tmp_path, **stopped)
    assert json.loads((run / "summary.json").read_text())[field] == 0.0421

    rebuilt = summarize(run)

    assert getattr(rebuilt, field) == 0.0421
    assert rebuilt.not_run == tuple(stopped.get("not_run", ()))
    assert rebuilt.cost is not None
    assert rebuilt.cost.total == pytest.approx(0.2)
    text = (run / "all_summary.txt").read_text()
    assert "Cost (USD): $0.2000 total (agent $0.1000, user $0.1000, judge $0.0000)\n" in text
    assert (
        f"  and $0.0421 spent by the scenarios {by} stopped unscored (no record: not in "
        "the total)\n"
    ) in text


#: the runs without a Cost total, and how the first stopped amount's line opens there
WITHOUT_A_COST_TOTAL = pytest.mark.parametrize(
    ("scored", "lead"),
    [
        ([], "no scenario scored"),
        # an earlier invocation scored without --tau2-prices, the resume's budget stopped the
        # rest: the run has no Cost line, but it scored a scenario ('no scenario scored' was
        # false)
        (["0"], "n/a (no scored scenario's record has a cost)"),
    ],
)


@WITHOUT_A_COST_TOTAL
def test_what_stopped_scenarios_spent_is_said_without_a_cost_total(
    scored: list[str], lead: str
) -> None:
    summary = build_summary(
        [metric(task) for task in scored],
        expected=["tau2_retail__0", "tau2_retail__1"],
        trials=1,
        configuration=CONFIGURATION,
        versions=VERSIONS,
        not_run=["tau2_retail__1"] if scored else ["tau2_retail__0", "tau2_retail__1"],
        stopped=StoppedSpending(budget=0.5),
    )
    assert summary.cost is None
    assert summary.counts.scored == len(scored)
    # no total to be left out of: no "(no record: not in the total)"
    assert cost_lines(summary) == [
        f"Cost (USD): {lead}; $0.5000 spent by the scenarios the budget stopped unscored"
    ]


@WITHOUT_A_COST_TOTAL
def test_what_interrupted_scenarios_spent_follows_what_the_budget_stopped(
    scored: list[str], lead: str
) -> None:
    """Both amounts without a Cost total: the first line leads, the second joins it."""
    first = f"Cost (USD): {lead}; "
    summary = build_summary(
        [metric(task) for task in scored],
        expected=["tau2_retail__0", "tau2_retail__1", "tau2_retail__2"],
        trials=1,
        configuration=CONFIGURATION,
        versions=VERSIONS,
        not_run=["tau2_retail__1"],
        stopped=StoppedSpending.of(budget=0.5, interrupted=0.25, by=[StopCause.INTERRUPT]),
    )
    assert cost_lines(summary, indent="  ") == [
        f"  {first}$0.5000 spent by the scenarios the budget stopped unscored",
        "    and $0.2500 spent by the scenarios the interrupt stopped unscored",
    ]
    alone = dataclasses.replace(summary, not_run_cost=None)
    assert cost_lines(alone) == [
        f"{first}$0.2500 spent by the scenarios the interrupt stopped unscored"
    ]


def test_summarize_adds_what_a_killed_invocation_left_in_the_interrupted_ledger(
    tmp_path: Path,
) -> None:
    """A run killed while it stopped (a third Ctrl-C, SIGKILL) has no summary of that
    invocation: its interrupted scenarios' amounts are in the ledger only, and ``summarize``
    (the documented way to write the summaries then) must count them, once."""
    run = _run_with_a_summary(  # an earlier invocation's summary, with what its interrupt stopped
        tmp_path,
        expected=["tau2_retail__0", "tau2_retail__1", "tau2_retail__2"],
        stopped=StoppedSpending.of(interrupted=0.0421, by=[StopCause.INTERRUPT]),
    )
    record_stopped_spending(run, "tau2_retail__1", 0.0125, StopCause.MAXFAIL)
    record_stopped_spending(run, "tau2_retail__2", 0.002, StopCause.MAXFAIL)

    rebuilt = summarize(run)

    assert rebuilt.interrupted_cost == pytest.approx(0.0566)
    assert rebuilt.interrupted_by == (StopCause.INTERRUPT, StopCause.MAXFAIL)
    ledger = run / STOPPED_SPENDING_FILE
    assert rebuilt.stopped_spending_counted == ledger.stat().st_size  # in the summary now
    assert summarize(run).interrupted_cost == pytest.approx(0.0566)  # counted once
    assert ledger.read_text(encoding="utf-8").count("\n") == 2  # left as it was


def test_summarize_lists_a_scenario_the_ledger_says_the_budget_stopped_as_not_run(
    tmp_path: Path,
) -> None:
    """The budget stopped scenario 1 ahead of its test, which -x then kept from running: no
    report said so, and the summary listed it as lost ("not run") beside a Cost line saying
    the budget had stopped it."""
    run = _run_with_a_summary(tmp_path, expected=["tau2_retail__0", "tau2_retail__1"])
    record_stopped_spending(run, "tau2_retail__1", 0.0125, StopCause.BUDGET)

    rebuilt = summarize(run)

    assert rebuilt.not_run == ("tau2_retail__1",)
    assert rebuilt.lost == ()
    assert rebuilt.not_run_cost == 0.0125
    assert summarize(run).not_run == ("tau2_retail__1",)  # kept by the next summary


def _summarized_run(tmp_path: Path) -> Path:
    """A run folder with one priced record and an earlier invocation's summary, in which an
    interrupt stopped scenarios that had spent $0.0421, and a ledger line of $0.0125 that
    summary does not hold (an invocation that stopped since)."""
    run = _run_with_a_summary(
        tmp_path, stopped=StoppedSpending.of(interrupted=0.0421, by=[StopCause.INTERRUPT])
    )
    record_stopped_spending(run, "tau2_retail__1", 0.0125, StopCause.TIMEOUT)
    return run


class Crash(BaseException):
    """The process dies here (SIGKILL, a power loss): nothing after it runs."""


def _counted(run: Path) -> Any:
    return json.loads((run / "summary.json").read_text()).get("stopped_spending_counted")


def test_a_crash_before_summary_json_is_written_leaves_the_ledger_for_the_next_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed before summary.json is written, the earlier summary's offset stands: the next
    summary must still count the ledger's new line, once."""
    run = _summarized_run(tmp_path)
    written = summary_module.write_json_atomic

    def crash_at_summary_json(path: Path, value: Any) -> None:
        if path.name == "summary.json":
            raise Crash
        written(path, value)

    monkeypatch.setattr(summary_module, "write_json_atomic", crash_at_summary_json)
    with pytest.raises(Crash):
        summarize(run)
    monkeypatch.undo()
    assert json.loads((run / "summary.json").read_text())["interrupted_cost"] == 0.0421
    assert _counted(run) is None  # the earlier summary counted no ledger

    rebuilt = summarize(run)

    assert rebuilt.interrupted_cost == pytest.approx(0.0546)
    assert rebuilt.interrupted_by == (StopCause.INTERRUPT, StopCause.TIMEOUT)
    assert _counted(run) == (run / STOPPED_SPENDING_FILE).stat().st_size
    assert summarize(run).interrupted_cost == pytest.approx(0.0546)


@pytest.mark.parametrize("failure", ["crash", "all_summary.txt in the way"])
def test_a_ledger_summary_json_holds_is_not_counted_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    """summary.json holds the ledger's amounts, and how far it counted, once it is written: a
    crash or a failure after it (all_summary.txt not written: a folder in its place, a full
    disk) must not leave the ledger's lines for the next summary ($0.0671 where $0.0546 was
    spent)."""
    run = _summarized_run(tmp_path)
    if failure == "crash":

        def crash(*args: Any) -> None:
            raise Crash

        monkeypatch.setattr(summary_module, "write_text_atomic", crash)
        with pytest.raises(Crash):
            summarize(run)
        monkeypatch.undo()
    else:
        (run / "all_summary.txt").unlink()
        (run / "all_summary.txt" / "in-the-way").mkdir(parents=True)
        with pytest.raises(ArtifactError):
            summarize(run)
        shutil.rmtree(run / "all_summary.txt")
    held = json.loads((run / "summary.json").read_text())
    assert held["interrupted_cost"] == pytest.approx(0.0546)
    assert held["stopped_spending_counted"] == (run / STOPPED_SPENDING_FILE).stat().st_size

    rebuilt = summarize(run)

    assert rebuilt.interrupted_cost == pytest.approx(0.0546)  # not 0.0671
    assert summarize(run).interrupted_cost == pytest.approx(0.0546)


def test_a_line_written_after_the_summary_read_the_ledger_goes_to_the_next_summary(
    tmp_path: Path,
) -> None:
    """A process opened the ledger before the summary read it and writes its line after (an
    xdist worker stopped late): the next summary counts it. The code before lost it: the line
    went to the batch the summary had renamed, read, and then removed."""
    run = _summarized_run(tmp_path)
    late = os.open(run / STOPPED_SPENDING_FILE, os.O_WRONLY | os.O_APPEND)
    try:
        first = summarize(run)
        os.write(late, b"tau2_retail__2 0.002 interrupt\n")
    finally:
        os.close(late)
    assert first.interrupted_cost == pytest.approx(0.0546)

    rebuilt = summarize(run)

    assert rebuilt.interrupted_cost == pytest.approx(0.0566)
    assert summarize(run).interrupted_cost == pytest.approx(0.0566)


def test_a_ledger_shorter_than_the_counted_offset_is_counted_from_its_start(
    tmp_path: Path,
) -> None:
    """The ledger summary.json counted was removed and a new one started (by hand): what the
    summary holds stays, and the new file's lines are added from its first."""
    run = _summarized_run(tmp_path)
    assert summarize(run).interrupted_cost == pytest.approx(0.0546)
    (run / STOPPED_SPENDING_FILE).unlink()
    record_stopped_spending(run, "tau2_retail__1", 0.002, StopCause.MAXFAIL)
    assert (run / STOPPED_SPENDING_FILE).stat().st_size < _counted(run)

    rebuilt = summarize(run)

    assert rebuilt.interrupted_cost == pytest.approx(0.0566)
    assert rebuilt.interrupted_by == (StopCause.INTERRUPT, StopCause.MAXFAIL, StopCause.TIMEOUT)


def _one_priced_scenario(*, stopped: StoppedSpending) -> RunSummary:
    """The summary of one priced scenario ($0.2) and of what ``stopped`` scenarios spent."""
    return build_summary(
        [priced("0", 0.1, 0.1, 0.0)],
        expected=None,
        trials=1,
        configuration=CONFIGURATION,
        versions=VERSIONS,
        stopped=stopped,
    )


def test_an_amount_that_rounds_to_nothing_is_omitted_as_nothing_is() -> None:
    """summary.json writes micro-dollars: a stopped scenario's $0.0000001 is 0 there, and a 0
    is omitted (a run that spent nothing unscored writes what it wrote before)."""
    summary = _one_priced_scenario(stopped=StoppedSpending(budget=2e-7, interrupted=1e-7))
    written = codec.encode(summary)
    assert "not_run_cost" not in written
    assert "interrupted_cost" not in written


@pytest.mark.parametrize(
    ("causes", "scenarios", "written"),
    [
        ([StopCause.INTERRUPT], "the scenarios the interrupt stopped unscored", ["interrupt"]),
        ([StopCause.MAXFAIL], "the scenarios -x/--maxfail stopped unscored", ["maxfail"]),
        ([StopCause.TIMEOUT], "the scenarios a timeout stopped unscored", ["timeout"]),
        (
            [StopCause.SESSION_END, StopCause.TIMEOUT, StopCause.INTERRUPT, StopCause.TIMEOUT],
            "the scenarios the interrupt, a timeout and the session's end stopped unscored",
            ["interrupt", "timeout", "session_end"],
        ),
        ([], "the scenarios stopped in flight unscored", None),  # a summary that does not say
    ],
)
def test_the_line_names_what_stopped_the_scenarios_in_flight(
    causes: list[StopCause], scenarios: str, written: list[str] | None
) -> None:
    """-x and a timeout's cancellations are counted with the interrupt's, and the line said
    "the interrupt" for them too."""
    summary = _one_priced_scenario(stopped=StoppedSpending.of(interrupted=0.0421, by=causes))
    assert cost_lines(summary)[1:] == [
        f"  and $0.0421 spent by {scenarios} (no record: not in the total)"
    ]
    assert codec.encode(summary).get("interrupted_by") == written
    assert codec.decode_value(RunSummary, codec.encode(summary)) == summary
