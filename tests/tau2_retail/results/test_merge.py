"""The pure merge of shard runs: what may differ, what is refused, what the merged run holds."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.errors import ArtifactError
from tau2_retail.results.merge import (
    GateSettings,
    ShardRun,
    merge_shards,
    merged_gate,
    missing_shards,
    missing_shards_problem,
    read_shard,
)
from tau2_retail.results.records import RunArgs, RunConfiguration, RunSummary
from tau2_retail.results.stopped_spending import (
    STOPPED_SPENDING_FILE,
    StopCause,
    StoppedSpending,
    record_stopped_spending,
    with_ledger,
)
from tau2_retail.results.summary import (
    build_summary,
    summary_inputs,
    write_run_args,
    write_run_summary,
)

from .test_summary import metric

ARGV = ("python", "-m", "tau2_retail", "merge")


def shard(name: str, tasks: list[str], **settings: Any) -> ShardRun:
    values = {"seed": 300, "shard": [1, 2], "concurrency": 1, "output_dir": "x", **settings}
    scenarios = [metric(task) for task in tasks]
    return ShardRun(
        run_dir=Path(name),
        args=RunArgs(
            argv=("pytest",),
            configuration=RunConfiguration.of_models(agent="a", run_id=name, settings=values),
            trials=1,
            expected=tuple(m.scenario_id for m in scenarios),
            versions={"python": "3.11"},
        ),
        metrics=tuple(scenarios),
        incomplete={},
    )


def summary_of(metrics: Sequence[ScenarioMetrics], **options: Any) -> RunSummary:
    """The summary of these metrics: one trial, no configuration, every scenario expected."""
    defaults = {"expected": None, "trials": 1, "configuration": None, "versions": {}}
    return build_summary(metrics, **{**defaults, **options})


def gate_of(settings: dict[str, Any]) -> GateSettings:
    """The gate settings of a run made with these settings."""
    return GateSettings.of(RunConfiguration.of_models(agent="a", settings=settings))


def test_where_and_how_a_shard_ran_may_differ() -> None:
    merged = merge_shards(
        [
            shard("a", ["1", "2"]),
            shard("b", ["3"], shard=[2, 2], concurrency=64, output_dir="elsewhere"),
        ],
        run_id="all",
        argv=ARGV,
    )

    ids = ["tau2_retail__1", "tau2_retail__2", "tau2_retail__3"]
    assert list(merged.args.expected) == ids
    assert [m.scenario_id for m in merged.metrics] == ids
    assert merged.args.configuration.settings["shard"] is None
    assert merged.args.configuration.sources["shard"] == "merge"  # was the shards' "--tau2-shard"
    assert merged.args.configuration.run_id == "all"
    assert merged.args.argv == ARGV


def test_a_scenario_lost_by_a_shard_stays_expected() -> None:
    # the shard expected 3 and 4; 3 has no metrics.json, 4 an unreadable one
    lost = dataclasses.replace(
        shard("b", ["3", "4"]),
        metrics=(),
        incomplete={"tau2_retail__4": "metrics.json: not valid JSON"},
    )

    merged = merge_shards([shard("a", ["1"]), lost], run_id="all", argv=ARGV)

    assert list(merged.args.expected) == ["tau2_retail__1", "tau2_retail__3", "tau2_retail__4"]
    assert merged.lost == {"tau2_retail__4": "b: metrics.json: not valid JSON"}


def test_a_scenario_in_two_shards_is_refused() -> None:
    with pytest.raises(ArtifactError, match="scenario tau2_retail__2 is in both a and b"):
        merge_shards([shard("a", ["1", "2"]), shard("b", ["2"])], run_id="all", argv=ARGV)


def test_a_different_measuring_setting_is_refused() -> None:
    with pytest.raises(ArtifactError, match=r"differ in settings\.seed"):
        merge_shards([shard("a", ["1"]), shard("b", ["2"], seed=1)], run_id="all", argv=ARGV)


def test_shards_scored_by_two_versions_of_the_package_are_refused() -> None:
    """The mixing a resume refuses: the merged files named only the first shard's version."""
    older = shard("a", ["1"])
    older = dataclasses.replace(
        older, args=dataclasses.replace(older.args, versions={"tau2-retail-pytest": "0.1.0"})
    )
    newer = shard("b", ["2"])
    newer = dataclasses.replace(
        newer, args=dataclasses.replace(newer.args, versions={"tau2-retail-pytest": "0.1.1"})
    )
    with pytest.raises(
        ArtifactError,
        match=r"the tau2-retail-pytest version that scored them "
        r"\(0\.1\.0 and 0\.1\.1\)",
    ):
        merge_shards([older, newer], run_id="all", argv=ARGV)


def test_without_a_threshold_the_merged_gate_is_pytests_rule() -> None:
    gate = gate_of({})
    passing = summary_of([metric("1")])
    failing = summary_of([metric("1"), metric("2", db=False)])

    assert merged_gate(passing, gate, baseline=None).passed
    verdict = merged_gate(failing, gate, baseline=None)
    assert not verdict.passed
    assert (
        verdict.line
        == "tau2 gate: profile default, no threshold: 1 failed, 0 infra errors or lost: FAIL"
    )


def test_with_a_threshold_the_merged_gate_is_the_runs_gate() -> None:
    gate = gate_of({"min_pass_rate": 0.5, "max_infra_errors": 0})
    summary = summary_of([metric("1"), metric("2", db=False)])

    verdict = merged_gate(summary, gate, baseline=None)

    assert verdict.passed
    assert verdict.line == (
        "tau2 gate: profile default, success rate 50.00% [9.5, 90.5] (threshold 50.00%), "
        "infra errors 0 (max 0): PASS"
    )


def test_with_a_baseline_the_merged_gate_compares_against_it() -> None:
    gate = gate_of({"baseline": "earlier", "max_infra_errors": 0})
    baseline = summary_of([metric("1"), metric("2")])
    summary = summary_of([metric("1"), metric("2", db=False)])

    verdict = merged_gate(summary, gate, baseline=baseline)

    assert not verdict.passed
    assert verdict.flipped == ("tau2_retail__2",)


def test_a_shards_cache_and_budget_may_differ_and_its_scenarios_not_run_stay_not_run() -> None:
    stopped = dataclasses.replace(
        shard("b", ["3"], cache="b.sqlite", cache_mode="replay", max_cost=2.5),
        not_run=("tau2_retail__4", "tau2_retail__5"),
        stopped=StoppedSpending(budget=0.75),
    )
    also = dataclasses.replace(
        shard("a", ["1"], cache="a.sqlite", max_cost=1.0), stopped=StoppedSpending(budget=0.25)
    )
    merged = merge_shards([also, stopped], run_id="all", argv=ARGV)

    assert merged.not_run == ("tau2_retail__4", "tau2_retail__5")
    assert merged.stopped.budget == 1.0  # what each shard's stopped scenarios spent
    summary = summary_of(
        merged.metrics,
        expected=[*merged.args.expected, *merged.not_run],
        lost=merged.lost,
        not_run=merged.not_run,
    )
    assert (summary.counts.lost, summary.counts.not_run) == (0, 2)
    gate = gate_of({})
    verdict = merged_gate(summary, gate, baseline=None)
    assert not verdict.passed
    assert verdict.line == (
        "tau2 gate: profile default, no threshold: 0 failed, 0 infra errors or lost, "
        "2 not run (budget): FAIL"
    )
    threshold = dataclasses.replace(gate, min_pass_rate=0.5)
    verdict = merged_gate(summary, threshold, baseline=None)
    assert not verdict.passed
    assert verdict.line.endswith("infra errors 0 (max 0), 2 not run (budget): FAIL")


def test_the_shards_not_given_are_named() -> None:
    first = shard("s1", ["0"], shard=[1, 3])
    second = shard("s2", ["1"], shard=[2, 3])
    merged = merge_shards([first, second], run_id="m", argv=ARGV)
    assert merged.missing_shards == ("3/3",)
    assert missing_shards([first, second, shard("s3", ["2"], shard=[3, 3])]) == ()
    assert missing_shards([shard("whole", ["0"], shard=None)]) == ()


def test_shards_of_different_counts_are_refused() -> None:
    with pytest.raises(ArtifactError, match="refusing to merge shards of different counts"):
        missing_shards([shard("s1", ["0"], shard=[1, 2]), shard("s2", ["1"], shard=[2, 3])])


def test_a_missing_shard_fails_the_merged_gate_unless_allowed() -> None:
    passing = summary_of([metric("10")])
    problems = missing_shards_problem(("3/3",), allowed=False)
    for gate in (gate_of({}), gate_of({"min_pass_rate": 0.5})):
        verdict = merged_gate(passing, gate, baseline=None, problems=problems)
        assert not verdict.passed
        assert "shard(s) 3/3 missing from the merge" in verdict.line
    assert missing_shards_problem(("3/3",), allowed=True) == []
    assert merged_gate(passing, gate_of({}), baseline=None).passed


def test_what_each_shards_interrupted_scenarios_spent_is_added_up(tmp_path: Path) -> None:
    """A shard interrupted (its CI job's time limit, SIGTERM) states what its interrupted
    scenarios had spent; the merged run holds the shards' sum."""
    shards = []
    stopped = (("1", 0.125, StopCause.TIMEOUT), ("2", 0.0625, StopCause.INTERRUPT))
    for index, (task, spent, cause) in enumerate(stopped):
        made = shard(f"s{index}", [task], shard=[index + 1, 2])
        run_dir = tmp_path / f"s{index}"
        write_run_args(run_dir, made.args)
        inputs = summary_inputs(
            made.args, stopped=StoppedSpending.of(interrupted=spent, by=[cause])
        )
        write_run_summary(run_dir, made.metrics, **inputs)
        shards.append(read_shard(run_dir))
    assert [s.stopped.interrupted for s in shards] == [0.125, 0.0625]

    merged = merge_shards(shards, run_id="all", argv=ARGV)

    assert merged.stopped.interrupted == 0.1875
    summary = build_summary(merged.metrics, **merged.summary_inputs())
    assert summary.interrupted_cost == 0.1875
    assert summary.interrupted_by == (StopCause.INTERRUPT, StopCause.TIMEOUT)


def test_a_shard_killed_while_it_stopped_adds_what_its_ledger_holds(tmp_path: Path) -> None:
    """A shard killed while it stopped (its CI job's SIGKILL after the grace period) left what
    its interrupted scenarios had spent in its ledger, not in its summary: the merge counts
    it (read only: the shard's folder is not changed)."""
    made = shard("s0", ["1"], shard=[1, 1])
    run_dir = tmp_path / "s0"
    write_run_args(run_dir, made.args)
    stopped = StoppedSpending(budget=0.5, interrupted=0.125)
    write_run_summary(run_dir, made.metrics, **summary_inputs(made.args, stopped=stopped))
    record_stopped_spending(run_dir, "tau2_retail__2", 0.0625, StopCause.TIMEOUT)

    ledger = run_dir / STOPPED_SPENDING_FILE
    before = ledger.read_bytes()

    assert read_shard(run_dir).stopped == StoppedSpending(
        budget=0.5, interrupted=0.1875, interrupted_by=(StopCause.TIMEOUT,), counted=len(before)
    )
    assert ledger.read_bytes() == before
    written = json.loads((run_dir / "summary.json").read_text())
    assert "stopped_spending_counted" not in written  # it counted no ledger: omitted


def test_a_scenario_a_shards_ledger_says_the_budget_stopped_is_not_run(tmp_path: Path) -> None:
    """A shard killed while it stopped: its ledger names the scenario its budget stopped,
    which the merged run lists as not run (budget), not lost."""
    made = shard("s0", ["1"], shard=[1, 1])
    run_dir = tmp_path / "s0"
    args = dataclasses.replace(made.args, expected=("tau2_retail__1", "tau2_retail__2"))
    write_run_args(run_dir, args)
    write_run_summary(run_dir, made.metrics, **summary_inputs(args))
    record_stopped_spending(run_dir, "tau2_retail__2", 0.0625, StopCause.BUDGET)

    merged = merge_shards([read_shard(run_dir)], run_id="all", argv=ARGV)

    assert merged.not_run == ("tau2_retail__2",)
    summary = build_summary(merged.metrics, **merged.summary_inputs())
    assert summary.not_run == ("tau2_retail__2",)
    assert "tau2_retail__2" not in summary.lost
    assert summary.not_run_cost == 0.0625


def test_a_ledger_a_shards_summary_counts_is_not_counted_again(tmp_path: Path) -> None:
    """The merge adds only the lines past the offset the shard's summary counted (the rest
    are in its amounts); the merged run's summary counts no ledger of its own."""
    made = shard("s0", ["1"], shard=[1, 1])
    run_dir = tmp_path / "s0"
    write_run_args(run_dir, made.args)
    record_stopped_spending(run_dir, "tau2_retail__2", 0.0625, StopCause.TIMEOUT)
    counted = with_ledger(run_dir, StoppedSpending())
    write_run_summary(run_dir, made.metrics, **summary_inputs(made.args, stopped=counted))
    record_stopped_spending(run_dir, "tau2_retail__3", 0.125, StopCause.INTERRUPT)  # after it

    read = read_shard(run_dir)

    assert read.stopped.interrupted == 0.1875  # not 0.25
    merged = merge_shards([read], run_id="all", argv=ARGV)
    summary = build_summary(merged.metrics, **merged.summary_inputs())
    assert summary.interrupted_cost == 0.1875
    assert summary.stopped_spending_counted == 0  # not the shard's: summary.json omits it
