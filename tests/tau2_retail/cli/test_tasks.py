"""``python -m tau2_retail tasks``: the table, the JSON listing, a missing data folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tau2_retail.cli.main import main
from tau2_retail.data.files import DATA_DIR_ENV
from tau2_retail.data.tasks import load_tasks


def test_tasks_command_lists_every_task_with_totals(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tasks", "--data-dir", str(data_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["id", "split", "persona", "actions", "nl_assertions"]
    assert lines[1].split() == ["0", "train", "lisa_brenner", "5", "0"]
    assert len(lines) == 1 + 114 + 1
    assert lines[-1] == "114 tasks (train 74, test 40); 40 with NL assertions, 61 assertions in all"


def test_tasks_command_json(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(data_dir))
    assert main(["tasks", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["totals"] == {
        "tasks": 114,
        "train": 74,
        "test": 40,
        "with_nl_assertions": 40,
        "nl_assertions": 61,
    }
    assert listing["tasks"][24] == {
        "id": "24",
        "split": "train",
        "persona": load_tasks(data_dir)["24"].persona_name,
        "actions": 0,
        "nl_assertions": 1,
    }


def test_tasks_command_without_data_exits_2_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tasks", "--data-dir", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert "nowhere" in err
    assert "python -m tau2_retail data fetch" in err
