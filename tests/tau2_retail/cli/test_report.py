"""``python -m tau2_retail report RUN_DIR [--against OTHER [--force]] [--output FILE]``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tau2_retail.cli.main import main
from tau2_retail.engine.harness import DataBundle
from tau2_retail.report.page import REPORT_FILE, build_report_data
from tau2_retail.testing.loopback_server import Completion
from tau2_retail.testing.scripted_endpoint import REPORT, ScriptedEndpoint
from tau2_retail.testing.tau2_runs import write_tau2_run
from tests.report.runs import write_run


@pytest.fixture(scope="module")
def runs(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two small real runs: task 0's second trial passes in ``baseline``, fails in ``mixed``."""
    root = tmp_path_factory.mktemp("runs")
    write_run(root / "mixed", data_dir, {"0": ["oracle", "noop"], "10": ["noop", "oracle"]})
    write_run(
        root / "baseline",
        data_dir,
        {"0": ["oracle", "oracle"], "10": ["noop", "oracle"]},
        judge=False,
    )
    return {"mixed": root / "mixed", "baseline": root / "baseline"}


def test_report_command_writes_the_page(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = runs["mixed"]
    assert main(["report", str(run)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"wrote {run / REPORT_FILE} (4 scenarios, ")
    assert (run / REPORT_FILE).read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_report_command_against_a_baseline(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "out" / "cmp.html"
    code = main(
        ["report", str(runs["mixed"]), "--against", str(runs["baseline"]), "--output", str(output)]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert f"wrote {output}" in out
    assert "against baseline:" in out
    assert "tau2_retail__0-trial2: PASS -> FAIL" in out
    # the scenarios paired by task and trial: one pass->fail flip of four pairs
    assert (
        "paired by task and trial: 4 pairs, 1 pass->fail, 0 fail->pass, one-sided exact McNemar "
        "p=0.5; difference -25.00 pp ["
    ) in out
    assert output.is_file()


def test_report_command_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path)]) == 2
    assert "summary.json not found" in capsys.readouterr().err


def test_report_against_a_run_of_another_profile_is_refused_unless_forced(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "tau2-run"
    shutil.copytree(runs["baseline"], other)
    summary_path = other / "summary.json"
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    summary["profile"] = "tau2"
    summary_path.write_text(json.dumps(summary), encoding="utf-8")
    output = tmp_path / "cmp.html"
    command = ["report", str(runs["mixed"]), "--against", str(other), "--output", str(output)]

    assert main(command) == 2
    err = capsys.readouterr().err
    assert "used profile 'default'" in err
    assert "profile 'tau2'" in err
    assert "not comparable" in err
    assert "--force" in err
    assert not output.exists()

    assert main([*command, "--force"]) == 0
    assert "against tau2-run:" in capsys.readouterr().out
    assert output.is_file()


# -- against an upstream results.json ---------------------------------------------------------


def test_report_against_an_upstream_run_prints_the_paired_comparison(
    upstream_example: Path,
    export_bundle: DataBundle,
    export_endpoint: ScriptedEndpoint,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Our tau2-profile run of the configuration upstream's file holds (tasks 0, 5 and 24, two
    trials), compared with it as with one of our runs: paired by task and trial."""
    run = tmp_path / "ours"
    export_endpoint.agent["5"] = Completion(content=REPORT)  # ours fails task 5: two flips
    try:
        write_tau2_run(run, export_bundle, export_endpoint, task_ids=("0", "5", "24"), trials=2)
    finally:
        del export_endpoint.agent["5"]
    assert main(["report", str(run), "--against", str(upstream_example)]) == 0
    out = capsys.readouterr().out
    assert "against upstream_results_example.json:" in out
    assert (
        "paired by task and trial: 6 pairs, 2 pass->fail, 0 fail->pass, one-sided exact McNemar "
        "p=0.25; difference -33.33 pp ["
    ) in out
    assert "  tau2_retail__5-trial1: PASS -> FAIL" in out
    assert (run / "report-vs-upstream_results_example.json.html").is_file()
    # the setting is on by default, but this profile sends upstream's prompt: no notes
    configuration = dict(build_report_data(run).main["configuration"])
    assert configuration["Agent notes"] == "off (the tau2 profile sends upstream's agent prompt)"


def test_report_against_an_upstream_run_needs_force_for_a_default_profile_run(
    runs: dict[str, Path], upstream_example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(runs["baseline"]), "--against", str(upstream_example)]) == 2
    assert "profile 'default'" in capsys.readouterr().err
    assert (
        main(["report", str(runs["baseline"]), "--against", str(upstream_example), "--force"]) == 0
    )
    assert "paired by task and trial: 2 pairs" in capsys.readouterr().out


@pytest.mark.parametrize(
    "target", ["run_args.json", "summary.json", "all_metrics.json", "tau2_retail__0/trial-1/x.html"]
)
def test_the_report_never_writes_over_the_runs_records(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str], target: str
) -> None:
    """``--output RUN/run_args.json`` replaced it: the run could no longer be resumed or
    summarized (it cannot be rebuilt)."""
    run = runs["mixed"]
    path = run / target
    before = path.read_bytes() if path.exists() else None
    assert main(["report", str(run), "--output", str(path)]) == 2
    assert "write the file elsewhere" in capsys.readouterr().err
    assert (path.read_bytes() if path.exists() else None) == before


def test_an_against_that_does_not_exist_is_named_as_missing(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "results.json"
    assert main(["report", str(runs["mixed"]), "--against", str(missing)]) == 2
    assert f"{missing}: no such file or directory" in capsys.readouterr().err
