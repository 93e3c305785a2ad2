"""Merging the run directories of shards (``--tau2-shard I/N``) into one run.

Each shard ran a disjoint share of the same scenarios with the same configuration. The merged
run holds every shard's scenario folders, and its summaries, report and gate are those a single
run of the same scenarios would have: they are rebuilt from the scenarios' metrics, with the
scenarios each shard expected (so a scenario a shard lost stays lost). Shards whose
configurations differ (models, endpoints, sampling, trials, seed, tasks, split, limits, gate)
are refused: their scores do not add up. Settings that only say how or where a shard ran
(``shard``, ``concurrency``, ``run_id``, ``resume``, ``output_dir``, ``data_dir``; the data is
verified by digest wherever it lives) may differ.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tau2_retail.errors import ArtifactError
from tau2_retail.results.artifacts import load_run_metrics, scenario_dir
from tau2_retail.results.summary import RUN_ARGS_FILE, SUMMARY_JSON_FILE

__all__ = ["MergedRun", "ShardRun", "copy_scenarios", "merge_shards", "read_shard"]

# how or where a shard ran, not what it measured
_PLACE_SETTINGS = frozenset({"shard", "concurrency", "run_id", "resume", "output_dir", "data_dir"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardRun:
    """What merging needs of one shard's run directory."""

    run_dir: Path
    configuration: Mapping[str, Any]
    trials: int
    expected: Sequence[str]
    metrics: Sequence[Mapping[str, Any]]
    versions: Mapping[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class MergedRun:
    """The inputs of the merged run's summaries (see ``results.summary.write_run_summary``)."""

    configuration: dict[str, Any]
    trials: int
    expected: list[str]
    metrics: list[Mapping[str, Any]]
    versions: dict[str, str]


def _read_object(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise ArtifactError(
            f"{path} is missing: is {path.parent} a finished run directory of a shard?"
        ) from None
    except (OSError, ValueError) as error:
        raise ArtifactError(f"cannot read {path}: {error}") from error
    if not isinstance(value, dict):
        raise ArtifactError(f"{path}: expected a JSON object")
    return value


def read_shard(run_dir: Path) -> ShardRun:
    """A shard's configuration, trials, expected scenarios, metrics and versions."""
    if not run_dir.is_dir():
        raise ArtifactError(f"{run_dir} is not a directory")
    run_args = _read_object(run_dir / RUN_ARGS_FILE)
    summary = _read_object(run_dir / SUMMARY_JSON_FILE)
    configuration = run_args.get("configuration")
    trials = run_args.get("trials")
    expected = run_args.get("expected")
    if not isinstance(configuration, dict) or not isinstance(trials, int):
        raise ArtifactError(f"{run_dir / RUN_ARGS_FILE}: no 'configuration' or 'trials'")
    if not isinstance(expected, list):
        raise ArtifactError(f"{run_dir / RUN_ARGS_FILE}: no 'expected' list of scenario ids")
    return ShardRun(
        run_dir=run_dir,
        configuration=configuration,
        trials=trials,
        expected=[str(scenario) for scenario in expected],
        metrics=load_run_metrics(run_dir),
        versions=dict(summary.get("versions") or {}),
    )


def _comparable(configuration: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a configuration that must agree between shards."""
    settings = {
        key: value
        for key, value in (configuration.get("settings") or {}).items()
        if key not in _PLACE_SETTINGS
    }
    return {
        "settings": settings,
        **{role: configuration.get(role) for role in ("agent", "user", "judge")},
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


def merge_shards(shards: Sequence[ShardRun], *, run_id: str) -> MergedRun:
    """The merged run of ``shards``; ``ArtifactError`` when they cannot be one run."""
    if not shards:
        raise ArtifactError("merge needs at least one shard run directory")
    first = shards[0]
    reference = _comparable(first.configuration)
    for shard in shards[1:]:
        different = _differences(reference, _comparable(shard.configuration))
        if shard.trials != first.trials:
            different.append("trials")
        if different:
            raise ArtifactError(
                f"refusing to merge {shard.run_dir} with {first.run_dir}: their configurations "
                f"differ in {', '.join(sorted(set(different)))}; shards of one run must share "
                "every setting but --tau2-shard (and where and how they ran)"
            )
    owner: dict[str, Path] = {}
    metrics: list[Mapping[str, Any]] = []
    for shard in shards:
        for record in shard.metrics:
            scenario = str(record["scenario_id"])
            if scenario in owner:
                raise ArtifactError(
                    f"refusing to merge: scenario {scenario} is in both {owner[scenario]} and "
                    f"{shard.run_dir} (shards of one run are disjoint; was a shard given twice?)"
                )
            owner[scenario] = shard.run_dir
            metrics.append(record)
    expected = sorted({scenario for shard in shards for scenario in shard.expected} | set(owner))
    configuration = json.loads(json.dumps(first.configuration))
    configuration["run_id"] = run_id
    settings = configuration.get("settings")
    if isinstance(settings, dict):
        settings["shard"] = None
        settings["run_id"] = run_id
    return MergedRun(
        configuration=configuration,
        trials=first.trials,
        expected=expected,
        metrics=metrics,
        versions=dict(first.versions),
    )


def copy_scenarios(shards: Sequence[ShardRun], into: Path) -> None:
    """Copy every shard's scenario folders into ``into`` (which holds none of them yet)."""
    for shard in shards:
        for record in shard.metrics:
            name = str(record["scenario_name"])
            trial, trials = int(record["trial"]), shard.trials
            source = scenario_dir(shard.run_dir, name, trial, trials)
            target = scenario_dir(into, name, trial, trials)
            if target.exists():
                raise ArtifactError(f"{target} exists already: merge into a new directory")
            try:
                shutil.copytree(source, target)
            except OSError as error:
                raise ArtifactError(f"cannot copy {source} to {target}: {error}") from error
