"""A stored run (``data/stored_run``) reads, summarizes and merges, and every record
re-encodes to the same bytes.

The folder is a trimmed copy of a real run (scripted agent and judge at a loopback endpoint,
prices, a response cache, 2 trials of tasks 0, 1, 3 and 10) written by commit 877ba10, with
prose, tool arguments and machine paths replaced (the formatting is the writer's own), and
``"format_version": 1`` added as the first key of each record (issue 27 item 5: nothing else
changed, as these tests show). Its transcripts are those of tasks 1 and 3 only (``summarize``
and ``merge`` read no transcript).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tau2_retail import codec
from tau2_retail.cli.main import main
from tau2_retail.engine.judge_result import JudgeResult, Verdict
from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.engine.transcript import ConversationResult
from tau2_retail.results.artifacts import read_metrics
from tau2_retail.results.atomic import dumps_json
from tau2_retail.results.summary import read_run_args, read_summary, summarize
from tau2_retail.tools.database import SeedDatabase
from tau2_retail.tools.store import Store

OLD_RUN = Path(__file__).parent / "data" / "stored_run"


def _files(name: str) -> list[Path]:
    return sorted(OLD_RUN.rglob(name))


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "path", _files("metrics.json"), ids=lambda p: str(p.parent.relative_to(OLD_RUN))
)
def test_metrics_reencode_byte_identically(path: Path) -> None:
    assert dumps_json(codec.encode(read_metrics(path))) == _text(path)


def test_all_metrics_reencode_byte_identically() -> None:
    path = OLD_RUN / "all_metrics.json"
    records = [read_metrics(p) for p in _files("metrics.json")]
    records.sort(key=lambda m: m.sort_key())
    assert dumps_json(codec.encode(records, list[ScenarioMetrics])) == _text(path)


def test_run_files_reencode_byte_identically() -> None:
    run_args = read_run_args(OLD_RUN)
    summary = read_summary(OLD_RUN)
    assert run_args is not None
    assert summary is not None
    assert dumps_json(codec.encode(run_args)) == _text(OLD_RUN / "run_args.json")
    assert dumps_json(codec.encode(summary)) == _text(OLD_RUN / "summary.json")


@pytest.mark.parametrize(
    "path", _files("transcript.json"), ids=lambda p: str(p.parent.relative_to(OLD_RUN))
)
def test_transcripts_reencode_byte_identically(path: Path) -> None:
    store = Store(SeedDatabase.from_json('{"orders": {}, "products": {}, "users": {}}'))
    conversation = ConversationResult.from_json(json.loads(_text(path)), store)
    assert dumps_json(conversation.to_json()) == _text(path)


def test_summarize_rebuilds_the_old_summary(tmp_path: Path) -> None:
    run_dir = tmp_path / "old"
    shutil.copytree(OLD_RUN, run_dir)
    (run_dir / "summary.json").unlink()
    (run_dir / "all_metrics.json").unlink()
    summarize(run_dir)
    assert _text(run_dir / "summary.json") == _text(OLD_RUN / "summary.json")
    assert _text(run_dir / "all_metrics.json") == _text(OLD_RUN / "all_metrics.json")


@pytest.mark.parametrize(
    "path", _files("judge_result.json"), ids=lambda p: str(p.parent.relative_to(OLD_RUN))
)
def test_judge_results_are_written_as_before(path: Path) -> None:
    """``judge_result.json`` is only written: the judgement it records writes the same bytes."""
    saved = json.loads(_text(path))
    judgement = JudgeResult(
        format_version=saved["format_version"],
        score=saved["score"],
        reason=saved["reason"],
        system_prompt=saved["judge_input"]["system_prompt"],
        user_content=saved["judge_input"]["user_content"],
        verdicts=tuple(Verdict(**verdict) for verdict in saved["nl_assertion_verdicts"]),
        raw_reply=saved["raw_reply"],
    )
    assert dumps_json(codec.encode(judgement)) == _text(path)


def test_all_metrics_read_as_one_list() -> None:
    records = codec.read(list[ScenarioMetrics], OLD_RUN / "all_metrics.json")
    assert [m.scenario_id for m in records] == sorted(
        (m.scenario_id for m in records), key=lambda i: (int(i.split("__")[1].split("-")[0]), i)
    )
    assert dumps_json(codec.encode(records, list[ScenarioMetrics])) == _text(
        OLD_RUN / "all_metrics.json"
    )


def test_the_old_run_merges_as_one_shard(tmp_path: Path) -> None:
    shard = tmp_path / "old"
    shutil.copytree(OLD_RUN, shard)
    into = tmp_path / "merged"
    assert main(["merge", str(shard), "--into", str(into)]) == 1  # 2 scenarios failed
    assert _text(into / "all_metrics.json") == _text(OLD_RUN / "all_metrics.json")
    merged, old = read_summary(into), read_summary(OLD_RUN)
    assert merged is not None
    assert old is not None
    assert merged.scenarios == old.scenarios
    assert (merged.counts, merged.success_rate, merged.cost) == (
        old.counts,
        old.success_rate,
        old.cost,
    )
