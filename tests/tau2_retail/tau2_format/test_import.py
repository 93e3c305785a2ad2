"""An upstream results.json read as a run: the shared example file (written by upstream
itself) reads back as upstream wrote it, and our own export round-trips to the same rewards,
signals and pass^k."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.errors import ArtifactError
from tau2_retail.results.artifacts import load_run_metrics
from tau2_retail.results.summary import read_summary
from tau2_retail.tau2_format.export import export_run
from tau2_retail.tau2_format.importer import read_results
from tau2_retail.tau2_format.schema import ResultsRecord
from tau2_retail.tau2_format.terms import from_upstream, to_upstream
from tau2_retail.tau2_format.upstream_run import (
    import_results,
    read_baseline,
    upstream_run,
    upstream_summary,
)
from tau2_retail.testing.run_files import unversioned_json


def _upstream_pass_hat_k(simulations: list[dict[str, Any]], k: int) -> float:
    """pass^k as upstream computes it, from the file alone."""
    outcomes: dict[str, list[bool]] = defaultdict(list)
    for sim in simulations:
        if sim["termination_reason"] != "infrastructure_error":
            outcomes[sim["task_id"]].append(abs(sim["reward_info"]["reward"] - 1) <= 1e-6)
    values = [math.comb(sum(f), k) / math.comb(len(f), k) for f in outcomes.values()]
    return sum(values) / len(values)


def test_upstreams_own_file_reads_back_as_upstream_wrote_it(
    upstream_example: Path, data_dir: Path
) -> None:
    written = json.loads(upstream_example.read_bytes())
    run = upstream_run(upstream_example, data_dir=data_dir)
    by_key = {(m.metrics.task_id, m.metrics.trial - 1): m for m in run.scenarios}
    assert len(by_key) == len(written["simulations"]) == 6
    for sim in written["simulations"]:
        imported = by_key[(sim["task_id"], sim["trial"])]
        metrics = imported.metrics
        assert metrics.tau2_reward == sim["reward_info"]["reward"]
        assert to_upstream(metrics.stop_reason) == sim["termination_reason"]
        assert metrics.seed == sim["seed"]
        assert metrics.duration_seconds == sim["duration"]
        assert metrics.db_state_match == sim["reward_info"]["db_check"]["db_match"]
        checks = sim["reward_info"]["nl_assertions"] or []
        judged = imported.judge
        assert [v.passed for v in judged.verdicts] if judged else [c["met"] for c in checks] == []
        assert len(imported.transcript.messages) == len(sim["messages"])
    summary = upstream_summary(upstream_example, data_dir=data_dir)
    assert summary.profile == "tau2"
    assert summary.trials == written["info"]["num_trials"]
    for entry in summary.pass_hat_k:
        assert entry.value == pytest.approx(_upstream_pass_hat_k(written["simulations"], entry.k))
    assert summary.stop_reasons == {"user_stop": 6}
    assert summary.counts.lost == 0
    assert summary.scenarios[0].scenario_id == "tau2_retail__0-trial1"


def test_an_imported_folder_reads_like_our_runs(
    upstream_example: Path, data_dir: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "upstream"
    summary = import_results(upstream_example, run_dir, data_dir=data_dir)
    assert read_summary(run_dir) == summary
    loaded = load_run_metrics(run_dir)
    assert not loaded.incomplete
    assert [m.scenario_id for m in loaded.records] == [
        f"tau2_retail__{task}-trial{trial}" for task in ("0", "5", "24") for trial in (1, 2)
    ]
    folder = run_dir / "tau2_retail__24" / "trial-1"
    assert json.loads((folder / "judge_result.json").read_bytes())["nl_assertion_pass_count"] == 1
    transcript = json.loads((folder / "transcript.json").read_bytes())
    assert transcript["stop_reason"] == "user_stop"
    assert "agent:" in (folder / "conversation_log.txt").read_text()
    # every record states its format, as a run's own folder does
    assert unversioned_json(run_dir) == []
    with pytest.raises(ArtifactError, match="expected a new or empty directory"):
        import_results(upstream_example, run_dir, data_dir=data_dir)


def _facts(metrics: ScenarioMetrics) -> tuple[Any, ...]:
    return (
        metrics.tau2_reward,
        metrics.stop_reason,
        metrics.infra_error,
        metrics.db_state_match,
        metrics.is_action_match,
        metrics.nl_assertion_total,
        metrics.nl_assertion_pass_count,
        metrics.is_successful,
        metrics.is_task_successful,
        metrics.seed,
        metrics.split,
        metrics.persona_name,
        metrics.token_usage["agent"].prompt,
        metrics.token_usage["user"].completion,
    )


def test_an_export_round_trips_to_the_same_rewards_signals_and_pass_hat_k(
    mixed_run: Path, exported: Path, data_dir: Path
) -> None:
    ours = {m.scenario_id: m for m in load_run_metrics(mixed_run).records}
    back = {
        s.metrics.scenario_id: s.metrics
        for s in upstream_run(exported, data_dir=data_dir).scenarios
    }
    assert back.keys() == ours.keys()
    for scenario_id, metrics in ours.items():
        assert _facts(back[scenario_id]) == _facts(metrics), scenario_id
    original = read_summary(mixed_run)
    summary = upstream_summary(exported, data_dir=data_dir)
    assert original is not None
    assert summary.pass_hat_k == original.pass_hat_k
    assert summary.success_rate == original.success_rate
    assert summary.db_state_match == original.db_state_match
    assert summary.nl_assertion == original.nl_assertion
    assert summary.counts == original.counts
    assert summary.stop_reasons == original.stop_reasons


def test_an_imported_run_exports_naming_its_players_as_upstream_did(
    upstream_example: Path, data_dir: Path, tmp_path: Path
) -> None:
    """Import then export wrote ``implementation: 'openai/m', llm: None``: to upstream, custom
    code with no model. The model through upstream's scaffold, with its ``llm_args``, stays."""
    run_dir = tmp_path / "upstream"
    import_results(upstream_example, run_dir, data_dir=data_dir)
    again = tmp_path / "again.json"
    export_run(run_dir, again, data_dir=data_dir, allow_incomplete=True)
    original = json.loads(upstream_example.read_text(encoding="utf-8"))["info"]
    info = json.loads(again.read_text(encoding="utf-8"))["info"]
    for role in ("agent_info", "user_info"):
        wanted = {key: original[role][key] for key in ("implementation", "llm", "llm_args")}
        assert {key: info[role][key] for key in wanted} == wanted, role


def test_a_baseline_is_a_run_folder_or_an_upstream_file(
    mixed_run: Path, exported: Path, data_dir: Path
) -> None:
    assert read_baseline(mixed_run, data_dir=data_dir) == read_summary(mixed_run)
    from_file = read_baseline(exported, data_dir=data_dir)
    assert from_file is not None
    assert from_file.profile == "tau2"


def test_every_ending_maps_one_to_one() -> None:
    from tau2_retail.engine.ending import StopReason

    upstream = {to_upstream(reason.value) for reason in StopReason}
    assert len(upstream) == len(StopReason)
    assert {"agent_stop", "infrastructure_error", "user_error"} <= upstream
    assert all(from_upstream(to_upstream(r.value)) is r for r in StopReason)
    assert to_upstream("user_stop", infra_error=True) == "infrastructure_error"
    with pytest.raises(ValueError, match="not one of upstream's"):
        from_upstream("stopped")


def _write(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["info"]["environment_info"].update(domain_name="airline"), "'airline' run"),
        (lambda d: d["simulations"][1].update(trial=0, task_id="24"), "are both task 24 trial 0"),
        (lambda d: d["simulations"][0].update(task_id="99"), "of task '99', not embedded"),
        (
            lambda d: d["simulations"][1]["messages"][2]["tool_calls"][0].update(arguments="{}"),
            "arguments",
        ),
        (lambda d: d["simulations"][0].pop("start_time"), "start_time"),
    ],
)
def test_a_file_that_is_not_an_upstream_retail_run_is_named(
    upstream_example: Path, data_dir: Path, tmp_path: Path, change: Any, message: str
) -> None:
    document = json.loads(upstream_example.read_bytes())
    change(document)
    with pytest.raises(ArtifactError, match=message):
        upstream_run(_write(tmp_path, document), data_dir=data_dir)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["simulations"].append(dict(d["simulations"][0])),
            "simulation .* appears more than once",
        ),
        (
            lambda d: d["simulations"][0].update(termination_reason="weird"),
            "termination_reason 'weird' is not one of upstream's",
        ),
    ],
)
def test_a_file_every_reader_would_fail_on_is_refused_where_it_is_read(
    upstream_example: Path, data_dir: Path, tmp_path: Path, change: Any, message: str
) -> None:
    """Each was a ValueError traceback: in ``import`` (leaving a half-written folder), in
    ``report --against``, and at the end of a run whose baseline had passed the start-up check
    (which reads the file as :func:`read_results` does)."""
    document = json.loads(upstream_example.read_bytes())
    change(document)
    path = _write(tmp_path, document)
    with pytest.raises(ArtifactError, match=message):
        read_results(path)
    with pytest.raises(ArtifactError, match=message):
        upstream_run(path, data_dir=data_dir)


def test_an_upstream_infra_errors_multi_line_error_reads_as_one_line(
    upstream_example: Path, data_dir: Path, tmp_path: Path
) -> None:
    # as upstream's tau2 run records an empty agent message after its retries
    document = json.loads(upstream_example.read_bytes())
    document["simulations"][0].update(
        termination_reason="infrastructure_error",
        messages=[],
        reward_info=None,
        info={
            "error": "AssistantMessage must have either content or tool_calls. Got "
            "AssistantMessage\nis_final_chunk: True\n",
            "error_type": "ValueError",
            "failed_after_attempts": 4,
        },
    )
    summary = upstream_summary(_write(tmp_path, document), data_dir=data_dir)
    assert summary.counts.infra_errors == 1
    assert [e.detail for e in summary.infra_errors] == [
        "AssistantMessage must have either content or tool_calls. Got AssistantMessage "
        "is_final_chunk: True"
    ]


def test_the_record_of_the_file_is_upstreams_shape(upstream_example: Path) -> None:
    from tau2_retail import codec

    record = codec.read(ResultsRecord, upstream_example)
    assert [task.id for task in record.tasks] == ["0", "5", "24"]
    assert record.info.num_trials == 2
