"""``python -m tau2_retail import results.json RUN_DIR``: an upstream run as a run folder that
``summarize`` and ``report`` read like ours."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tau2_retail.cli.main import main
from tau2_retail.report.page import REPORT_FILE
from tau2_retail.results.summary import SUMMARY_JSON_FILE


def test_import_writes_a_run_folder_with_summary_and_report(
    upstream_example: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "upstream-run"
    assert main(["import", str(upstream_example), str(run)]) == 0
    out = capsys.readouterr().out
    assert "Profile:     tau2" in out
    assert "pass^2: 1.0000" in out
    assert out.endswith(f"imported 6 simulations of {upstream_example} into {run}\n")
    assert (run / REPORT_FILE).is_file()
    summary = json.loads((run / SUMMARY_JSON_FILE).read_bytes())
    assert summary["configuration"]["settings"]["imported_from"] == str(upstream_example)
    # the imported run summarizes again like one of ours
    assert main(["summarize", str(run)]) == 0
    assert json.loads((run / SUMMARY_JSON_FILE).read_bytes()) == summary


def test_import_refuses_a_folder_in_use_and_a_file_that_is_not_upstreams(
    upstream_example: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    assert main(["import", str(upstream_example), str(tmp_path / "full")]) == 2
    assert "expected a new or empty directory" in capsys.readouterr().err
    not_ours = tmp_path / "summary.json"
    not_ours.write_text('{"profile": "tau2"}')
    assert main(["import", str(not_ours), str(tmp_path / "new")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {not_ours}")
    assert "info" in err
