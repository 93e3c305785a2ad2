"""Shards merged: the same summaries, report and gate as one run of the same scenarios."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from .conftest import Bench

# two tasks the no-op agent fails, four whose gold database is the seed (it passes them)
COMMON = (
    "--tau2-tasks=0,1,10,12,24,25",
    "--tau2-trials=2",
    "--tau2-agent-model=builtin:noop",
    "--tau2-min-pass-rate=0.7",
)


def _merge(bench: Bench, *run_ids: str, into: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tau2_retail",
            "merge",
            *(str(bench.run_dir(run_id)) for run_id in run_ids),
            "--into",
            str(bench.run_dir(into)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _figures(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary without what says where and when it ran."""
    kept = {k: v for k, v in summary.items() if k not in ("configuration", "versions")}
    kept["scenarios"] = [
        {k: v for k, v in row.items() if k != "duration_seconds"} for row in summary["scenarios"]
    ]
    return kept


def test_merged_shards_equal_a_single_run(bench: Bench) -> None:
    single = bench.run(*COMMON, "--tau2-run-id=single")
    shards = [bench.run(*COMMON, f"--tau2-shard={i}/2", f"--tau2-run-id=s{i}") for i in (1, 2)]

    merged = _merge(bench, "s1", "s2", into="merged")

    assert single.ret == 1  # 8 of 12 succeed: 66.67% < 70%
    assert all(shard.ret in (0, 1) for shard in shards)
    assert merged.returncode == 1, merged.stderr
    assert (
        # two trials per task: the interval is the bootstrap over the 6 tasks (4 pass both)
        "tau2 gate: profile default, success rate 66.67% [33.3, 100.0] (threshold 70.00%), "
        "infra errors 0 (max 0): FAIL"
    ) in merged.stdout
    assert _figures(bench.summary("merged")) == _figures(bench.summary("single"))
    assert bench.summary("merged")["pass_hat_k"] == bench.summary("single")["pass_hat_k"]
    assert (bench.run_dir("merged") / "report.html").is_file()
    assert (bench.run_dir("merged") / "tau2_retail__0" / "trial-2" / "metrics.json").is_file()
    run_args = json.loads((bench.run_dir("merged") / "run_args.json").read_text())
    assert run_args["configuration"]["settings"]["shard"] is None


def test_shards_of_different_configurations_are_refused(bench: Bench) -> None:
    bench.run(*COMMON, "--tau2-shard=1/2", "--tau2-run-id=s1")
    bench.run(*COMMON, "--tau2-shard=2/2", "--tau2-seed=7", "--tau2-run-id=s2")

    merged = _merge(bench, "s1", "s2", into="merged")

    assert merged.returncode == 2
    assert "their configurations differ in settings.seed" in merged.stderr
    assert not bench.run_dir("merged").exists()
