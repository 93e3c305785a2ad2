"""``python -m tau2_retail gold [ID ...]``: each task's expected outcome as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tau2_retail.cli.main import main
from tau2_retail.data.gold import GoldBook


def test_gold_command_prints_diff_actions_and_hash(
    book: GoldBook, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["gold", "--data-dir", str(data_dir), "5", "57"]) == 0
    output = json.loads(capsys.readouterr().out)
    assert list(output) == ["5", "57"]
    assert output["57"] == {"db_diff": {}, "reference_actions": [], "db_hash": book.seed.hash}
    five = output["5"]
    assert five["db_hash"] == book["5"].db_hash
    assert five["reference_actions"] == [a.to_json() for a in book["5"].actions]
    assert five["db_diff"] == book["5"].store.diff_from_seed()
    for records in five["db_diff"].values():
        for record in records.values():
            assert "cancel_reason" not in record or record["cancel_reason"] is not None


def test_gold_command_without_ids_prints_all_tasks(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["gold", "--data-dir", str(data_dir)]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 114
