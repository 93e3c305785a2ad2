"""Merging the run directories of shards (``--tau2-shard I/N``) into one run.

Each shard ran a disjoint share of the same scenarios with the same configuration. The merged
run holds every shard's scenario folders, and its summaries, report and gate are those a single
run of the same scenarios would have: they are rebuilt from the scenarios' metrics, with the
scenarios each shard expected (so a scenario a shard lost stays lost). Shards whose
configurations differ (models, endpoints, sampling, trials, seed, tasks, split, limits, gate)
are refused: their scores do not add up. Settings that only say how or where a shard ran
(``shard``, ``concurrency``, ``run_id``, ``resume``, ``output_dir``, ``data_dir``; the data is
verified by digest wherever it lives) may differ.

A merge knows the shard count each shard recorded (``--tau2-shard I/N``): the shards not given
are named (:attr:`MergedRun.missing_shards`) and the gate fails on them unless the merge is told
``--allow-missing-shards`` (their scenarios are in no summary: a merge of 2 of 3 shards must
not pass as the whole run). Shards of different counts are refused.

Every record read and written is typed (:class:`~tau2_retail.results.records.RunArgs`,
:class:`~tau2_retail.engine.metrics.ScenarioMetrics`); the gate is
:func:`tau2_retail.results.gate.evaluate_gate` with the shards' gate settings.
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tau2_retail import codec
from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.errors import ArtifactError
from tau2_retail.results.artifacts import load_run_metrics, scenario_dir
from tau2_retail.results.gate import GateVerdict, evaluate_gate
from tau2_retail.results.records import PACKAGE, RunArgs, RunConfiguration, RunSummary
from tau2_retail.results.stopped_spending import StoppedSpending, with_ledger
from tau2_retail.results.summary import (
    RUN_ARGS_FILE,
    SummaryInputs,
    read_run_args,
    read_summary,
    stopped_of,
    summary_inputs,
)

__all__ = [
    "GateSettings",
    "MergedRun",
    "ShardRun",
    "copy_scenarios",
    "merge_shards",
    "merged_gate",
    "missing_shards",
    "missing_shards_problem",
    "read_shard",
]

# how or where a shard ran, not what it measured
_PLACE_SETTINGS = frozenset(
    {
        "shard",
        "concurrency",
        "run_id",
        "resume",
        "output_dir",
        "data_dir",
        # where the merged run's upstream results.json goes
        "export_tau2",
        # how a shard saved money: its cache file and its budget are its own
        "cache",
        "cache_mode",
        "max_cost",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardRun:
    """What merging needs of one shard's run directory."""

    run_dir: Path
    args: RunArgs
    metrics: tuple[ScenarioMetrics, ...]
    #: scenario id -> why its ``metrics.json`` is unusable (the shard lost it)
    incomplete: Mapping[str, str]
    #: scenarios the shard's budget kept from starting (from its ``summary.json``)
    not_run: tuple[str, ...] = ()
    #: what those its budget stopped unscored, and those stopped in flight, had spent, USD,
    #: and what stopped the latter (from its ``summary.json``, and the ledger of an invocation
    #: killed while it stopped)
    stopped: StoppedSpending = field(default_factory=StoppedSpending)


@dataclass(frozen=True, slots=True, kw_only=True)
class MergedRun:
    """The merged run's ``run_args.json``, its scenarios' records, its lost scenarios and
    those not run (budget)."""

    args: RunArgs
    metrics: tuple[ScenarioMetrics, ...]
    lost: Mapping[str, str]
    not_run: tuple[str, ...] = ()
    stopped: StoppedSpending = field(default_factory=StoppedSpending)
    #: the shards of the count the shards recorded that were not given (``"3/3"``)
    missing_shards: tuple[str, ...] = ()

    def summary_inputs(self) -> SummaryInputs:
        """What the merged run's summary is built from, beside its records."""
        return summary_inputs(
            self.args,
            lost=self.lost,
            not_run=self.not_run,
            stopped=self.stopped,
        )


def read_shard(run_dir: Path) -> ShardRun:
    """A shard's ``run_args.json`` and scenario records; ``ArtifactError`` when unusable."""
    if not run_dir.is_dir():
        raise ArtifactError(f"{run_dir} is not a directory")
    args = read_run_args(run_dir)
    if args is None:
        raise ArtifactError(
            f"{run_dir / RUN_ARGS_FILE} is missing: is {run_dir} a finished run directory of a "
            "shard?"
        )
    loaded = load_run_metrics(run_dir)
    try:
        summary = read_summary(run_dir)
    except ArtifactError:
        summary = None  # only its list of scenarios not run is read; they then count as lost
    # and what its stopped scenarios had spent when it was killed while it stopped (in the
    # ledger only, past what its summary counted: that is an earlier invocation's, or none),
    # and which of them the budget stopped
    stopped = with_ledger(run_dir, stopped_of(summary))
    return ShardRun(
        run_dir=run_dir,
        args=args,
        metrics=loaded.records,
        incomplete=loaded.incomplete,
        not_run=tuple(
            sorted({*(summary.not_run if summary is not None else ()), *stopped.budget_stopped})
        ),
        stopped=stopped,
    )


def _comparable(configuration: RunConfiguration) -> dict[str, Any]:
    """The part of a configuration that must agree between shards."""
    settings = {
        key: value for key, value in configuration.settings.items() if key not in _PLACE_SETTINGS
    }
    return {
        "settings": settings,
        "agent": codec.encode(configuration.agent),
        "user": codec.encode(configuration.user),
        "judge": codec.encode(configuration.judge) if configuration.judge else None,
    }


def _differences(first: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    keys = []
    for section in sorted(first.keys() | other.keys()):
        a, b = first.get(section), other.get(section)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            keys += [
                f"{section}.{key}"
                for key in sorted(a.keys() | b.keys())
                if a.get(key) != b.get(key)
            ]
        elif a != b:
            keys.append(section)
    return keys


def _shard_of(shard: ShardRun) -> tuple[int, int] | None:
    value = shard.args.configuration.settings.get("shard")
    if (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) for n in value)
    ):
        return int(value[0]), int(value[1])
    return None


def missing_shards(shards: Sequence[ShardRun]) -> tuple[str, ...]:
    """The shards (``I/N``) of the recorded count N that none of ``shards`` ran; shards of
    different counts are refused (``ArtifactError``): their shares overlap."""
    recorded = {shard.run_dir: found for shard in shards if (found := _shard_of(shard))}
    counts = {count for _, count in recorded.values()}
    if len(counts) > 1:
        shown = ", ".join(f"{path} ({i}/{n})" for path, (i, n) in recorded.items())
        raise ArtifactError(
            f"refusing to merge shards of different counts: {shown}; the shards of one run "
            "split it the same way (--tau2-shard I/N with one N)"
        )
    if not counts:
        return ()
    count = counts.pop()
    given = {index for index, _ in recorded.values()}
    return tuple(f"{index}/{count}" for index in range(1, count + 1) if index not in given)


def _refuse_different(first: ShardRun, others: Sequence[ShardRun]) -> None:
    """``ArtifactError`` unless every shard of ``others`` ran as ``first`` did."""
    reference = _comparable(first.args.configuration)
    for shard in others:
        different = _differences(reference, _comparable(shard.args.configuration))
        if shard.args.trials != first.args.trials:
            different.append("trials")
        if shard.args.scored_by != first.args.scored_by:
            different.append(
                f"the {PACKAGE} version that scored them "
                f"({first.args.scored_by} and {shard.args.scored_by})"
            )
        if different:
            raise ArtifactError(
                f"refusing to merge {shard.run_dir} with {first.run_dir}: their configurations "
                f"differ in {', '.join(sorted(set(different)))}; shards of one run must share "
                "every setting but --tau2-shard (and where and how they ran)"
            )


def merge_shards(shards: Sequence[ShardRun], *, run_id: str, argv: Sequence[str]) -> MergedRun:
    """The merged run of ``shards``; ``ArtifactError`` when they cannot be one run."""
    if not shards:
        raise ArtifactError("merge needs at least one shard run directory")
    first = shards[0]
    _refuse_different(first, shards[1:])
    owner: dict[str, Path] = {}
    metrics: list[ScenarioMetrics] = []
    lost: dict[str, str] = {}
    for shard in shards:
        for record in shard.metrics:
            if record.scenario_id in owner:
                raise ArtifactError(
                    f"refusing to merge: scenario {record.scenario_id} is in both "
                    f"{owner[record.scenario_id]} and {shard.run_dir} (shards of one run are "
                    "disjoint; was a shard given twice?)"
                )
            owner[record.scenario_id] = shard.run_dir
            metrics.append(record)
        for scenario_id, reason in shard.incomplete.items():
            lost[scenario_id] = f"{shard.run_dir}: {reason}"
    expected = {scenario for shard in shards for scenario in shard.args.expected}
    configuration = first.args.configuration
    merged = dataclasses.replace(
        configuration,
        run_id=run_id,
        settings={**configuration.settings, "shard": None, "run_id": run_id},
        # the values the merge sets are its own (shard null, it said "--tau2-shard")
        sources={**configuration.sources, "shard": "merge", "run_id": "merge"},
    )
    return MergedRun(
        args=RunArgs(
            argv=tuple(argv),
            configuration=merged,
            trials=first.args.trials,
            expected=tuple(sorted(expected | owner.keys() | lost.keys())),
            versions=dict(first.args.versions),
        ),
        metrics=tuple(sorted(metrics, key=ScenarioMetrics.sort_key)),
        lost={key: reason for key, reason in lost.items() if key not in owner},
        not_run=tuple(
            sorted({s for shard in shards for s in shard.not_run} - owner.keys() - lost.keys())
        ),
        stopped=functools.reduce(
            StoppedSpending.plus, (shard.stopped for shard in shards), StoppedSpending()
        ),
        missing_shards=missing_shards(shards),
    )


def copy_scenarios(shards: Sequence[ShardRun], into: Path) -> None:
    """Copy every shard's scenario folders into ``into`` (which holds none of them yet)."""
    for shard in shards:
        trials = shard.args.trials
        for record in shard.metrics:
            trial = record.trial - 1  # metrics.json numbers trials from 1, the folders' API from 0
            source = scenario_dir(shard.run_dir, record.scenario_name, trial, trials)
            target = scenario_dir(into, record.scenario_name, trial, trials)
            if target.exists():
                raise ArtifactError(f"{target} exists already: merge into a new directory")
            try:
                shutil.copytree(source, target)
            except OSError as error:
                raise ArtifactError(f"cannot copy {source} to {target}: {error}") from error


@dataclass(frozen=True, slots=True, kw_only=True)
class GateSettings:
    """The gate options a run recorded (``--tau2-min-pass-rate`` and the like)."""

    min_pass_rate: float | None = None
    max_infra_errors: int = 0
    baseline: str = ""
    max_regression: float | None = None
    regression_alpha: float | None = None

    @classmethod
    def of(cls, configuration: RunConfiguration) -> GateSettings:
        """The recorded gate settings (an unset one reads as its default); ``ArtifactError`` for
        a ``regression_alpha`` outside 0 < A < 1."""
        where = f"{RUN_ARGS_FILE}: configuration.settings"
        settings = {k: v for k, v in configuration.settings.items() if v is not None}
        gate = codec.decode_value(cls, settings, where)
        alpha = gate.regression_alpha
        if alpha is not None and not 0 < alpha < 1:
            raise ArtifactError(
                f"{where}: regression_alpha {alpha!r} is not valid for --tau2-regression-alpha; "
                "expected a number > 0 and < 1, e.g. 0.05"
            )
        return gate


def missing_shards_problem(missing: Sequence[str], *, allowed: bool) -> list[str]:
    """The gate's words for the shards a merge lacks (none when allowed or none missing)."""
    if not missing or allowed:
        return []
    return [
        f"shard(s) {', '.join(missing)} missing from the merge (merge every shard, or pass "
        "--allow-missing-shards to gate the shards given)"
    ]


def merged_gate(
    summary: RunSummary,
    gate: GateSettings,
    *,
    baseline: RunSummary | None,
    problems: Sequence[str] = (),
) -> GateVerdict:
    """The gate of the merged run, as the plugin applies it to a single run.

    With a threshold or a baseline it is :func:`evaluate_gate`; without, pytest's own rule
    for a run: every scored scenario succeeded and none was an infra error or lost.
    ``problems`` (missing shards) fail it either way, each named.
    """
    verdict = evaluate_gate(summary, gate, baseline=baseline, problems=problems)
    if verdict is not None:
        return verdict
    counts = summary.counts
    infra = counts.infra_errors + counts.lost
    passed = counts.failed == 0 and infra == 0 and counts.not_run == 0 and not problems
    not_run = f", {counts.not_run} not run (budget)" if counts.not_run else ""
    more = "".join(f", {problem}" for problem in problems)
    return GateVerdict(
        passed=passed,
        line=(
            f"tau2 gate: profile {summary.profile}, no threshold: {counts.failed} failed, "
            f"{infra} infra errors or lost{not_run}{more}: {'PASS' if passed else 'FAIL'}"
        ),
        rate=summary.success_rate.rate,
    )
