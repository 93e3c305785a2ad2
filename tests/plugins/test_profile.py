"""``--tau2-profile=tau2`` through pytest: the run records and headlines the profile, and a
broken upstream source stops it at start-up with the file, the digests and the fix."""

from __future__ import annotations

import hashlib
import shutil
import stat
from pathlib import Path

import pytest

from tau2_retail.data import files as datafiles
from tau2_retail.testing.bench import Bench

SOURCE = "upstream/src/tau2/domains/retail/tools.py"


def test_an_offline_tau2_profile_run_records_and_headlines_the_profile(bench: Bench) -> None:
    result = bench.run("-n", "0", "--tau2-profile=tau2", "--tau2-tasks=0,10", "--tau2-run-id=t")

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    summary = bench.summary("t")
    assert summary["profile"] == "tau2"
    assert summary["tau2_reward"] == {"mean": 1.0, "n": 2, "not_scorable": 0}
    assert summary["configuration"]["settings"]["profile"] == "tau2"
    metrics = bench.metrics("t", "tau2_retail__0")
    assert (metrics["profile"], metrics["stop_reason"]) == ("tau2", "user_stop")
    assert "CLEAN_EXIT" in metrics["success_breakdown"]["not_applicable"]
    text = (bench.run_dir("t") / "all_summary.txt").read_text(encoding="utf-8")
    assert "Profile:     tau2\n" in text
    assert "tau2 reward (upstream): mean 1.0000 over 2 scenarios" in result.stdout.str()
    assert "pass^1: 1.0000 [0.3424, 1.0000] (2 tasks)" in result.stdout.str()


def test_an_altered_upstream_source_stops_a_tau2_run_with_the_fix(
    bench: Bench, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    shutil.copytree(data_dir, data)
    path = data / SOURCE
    path.chmod(path.stat().st_mode | stat.S_IWUSR)
    path.write_bytes(path.read_bytes() + b"\n# changed\n")
    monkeypatch.setenv("TAU2_DATA_DIR", str(data))

    result = bench.run("-n", "0", "--tau2-profile=tau2", "--tau2-tasks=0")

    pinned = datafiles.load_manifest().file(SOURCE).sha256
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    output = result.stdout.str()
    assert f"{path}: sha256 mismatch (expected {pinned}, got {actual})" in output
    assert "re-fetch it with `python -m tau2_retail data fetch`" in output
    assert "Traceback" not in output
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "ERROR collecting test_scenarios.py" in output
    assert " passed" not in output
    assert not bench.output_dir.exists()
