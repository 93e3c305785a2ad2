"""The pure merge of shard runs: what may differ, what is refused, what the merged run holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tau2_retail.errors import ArtifactError
from tau2_retail.results.merge import ShardRun, merge_shards


def shard(name: str, scenarios: list[str], **settings: Any) -> ShardRun:
    values = {"seed": 300, "shard": [1, 2], "concurrency": 1, "output_dir": "x", **settings}
    return ShardRun(
        run_dir=Path(name),
        configuration={"settings": values, "agent": {"model": "a"}, "user": None, "judge": None},
        trials=1,
        expected=scenarios,
        metrics=[{"scenario_id": scenario} for scenario in scenarios],
        versions={"python": "3.11"},
    )


def test_where_and_how_a_shard_ran_may_differ() -> None:
    merged = merge_shards(
        [
            shard("a", ["s1", "s2"]),
            shard("b", ["s3"], shard=[2, 2], concurrency=64, output_dir="elsewhere"),
        ],
        run_id="all",
    )

    assert merged.expected == ["s1", "s2", "s3"]
    assert [m["scenario_id"] for m in merged.metrics] == ["s1", "s2", "s3"]
    assert merged.configuration["settings"]["shard"] is None
    assert merged.configuration["run_id"] == "all"


def test_a_scenario_lost_by_a_shard_stays_expected() -> None:
    lost = ShardRun(**{**_fields(shard("b", [])), "expected": ["s3"]})

    assert merge_shards([shard("a", ["s1"]), lost], run_id="all").expected == ["s1", "s3"]


def test_a_scenario_in_two_shards_is_refused() -> None:
    with pytest.raises(ArtifactError, match="scenario s2 is in both a and b"):
        merge_shards([shard("a", ["s1", "s2"]), shard("b", ["s2"])], run_id="all")


def test_a_different_measuring_setting_is_refused() -> None:
    with pytest.raises(ArtifactError, match=r"differ in settings\.seed"):
        merge_shards([shard("a", ["s1"]), shard("b", ["s2"], seed=1)], run_id="all")


def _fields(run: ShardRun) -> dict[str, Any]:
    return {name: getattr(run, name) for name in ShardRun.__dataclass_fields__}
