"""``python -m tau2_retail replay``: call sequences on fresh databases, JSON out."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tau2_retail.cli.main import main
from tau2_retail.data.seed import load_seed
from tau2_retail.testing.timeouts import scaled_timeout
from tau2_retail.tools.canonical import canonical_value
from tau2_retail.tools.record_shapes import order_view

ROOT = Path(__file__).resolve().parents[3]

CANCEL = {
    "name": "cancel_pending_order",
    "arguments": {"order_id": "w6750959", "reason": "no longer needed"},
}


def reference_hash(data_dir: Path, diff: dict[str, dict[str, Any]]) -> str:
    """The canonical hash computed from scratch: seed with the diff's records substituted."""
    database = json.loads((data_dir / "db.json").read_text(encoding="utf-8"))
    for table, records in diff.items():
        database[table].update(records)
    database["orders"] = {key: order_view(order) for key, order in database["orders"].items()}
    text = json.dumps(canonical_value(database), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    code = main(args)
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None


def test_one_sequence(data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    calls = [
        {"name": "get_order_details", "arguments": {"order_id": "#W0000000"}},
        CANCEL,
        {"name": "cancel_pending_order", "arguments": '{"order_id": "#W6750959", "reason": "x"}'},
        {"name": "nope", "arguments": {}},
    ]
    file = tmp_path / "calls.json"
    file.write_text(json.dumps(calls), encoding="utf-8")
    code, result = run(["replay", "--data-dir", str(data_dir), str(file)], capsys)
    assert code == 0
    assert [o["error"] for o in result["outputs"]] == [True, False, True, True]
    assert result["outputs"][0]["content"] == "Error: Order not found"
    assert result["outputs"][1]["content"].startswith('{"order_id": "#W6750959", "user_id": ')
    assert result["outputs"][2]["content"] == "Error: Non-pending order cannot be cancelled"
    assert result["outputs"][3]["content"] == "Error: Tool 'nope' not found."
    order = result["db_diff"]["orders"]["#W6750959"]
    assert order["status"] == "cancelled"
    assert order["cancel_reason"] == "no longer needed"
    assert "exchange_items" not in order  # unset optional fields are omitted
    assert result["db_hash"] == reference_hash(data_dir, result["db_diff"])


def test_many_sequences_each_on_a_fresh_database(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "sequences.json"
    file.write_text(json.dumps({"sequences": [[CANCEL], [], [CANCEL, CANCEL]]}), encoding="utf-8")
    code, results = run(["replay", "--data-dir", str(data_dir), str(file)], capsys)
    assert code == 0
    first, empty, twice = results
    assert empty == {"outputs": [], "db_diff": {}, "db_hash": load_seed(data_dir).hash}
    assert first["db_hash"] == twice["db_hash"] != empty["db_hash"]
    assert twice["outputs"][1]["error"] is True


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ('{"calls": []}', "expected a list of calls or an object with a 'sequences' list"),
        ("[1]", "each call must be an object with a string 'name'"),
        ('{"sequences": [1]}', "sequences[0] is not a list of calls"),
        ("[", "is not valid JSON"),
    ],
)
def test_bad_input_is_a_clear_error(
    data_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    document: str,
    message: str,
) -> None:
    file = tmp_path / "bad.json"
    file.write_text(document, encoding="utf-8")
    assert main(["replay", "--data-dir", str(data_dir), str(file)]) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.out == ""


def test_works_without_pytest_from_stdin(data_dir: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "tau2_retail", "replay", "--data-dir", str(data_dir), "-"],
        input=json.dumps([CANCEL]),
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
        timeout=scaled_timeout(60),
    )
    result = json.loads(completed.stdout)
    assert result["outputs"][0]["error"] is False
    assert "#W6750959" in result["db_diff"]["orders"]
