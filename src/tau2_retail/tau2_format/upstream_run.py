"""An upstream ``results.json`` as a run: in memory (a baseline to compare with), or written as
a run folder of this suite (``python -m tau2_retail import``) that ``summarize`` and ``report``
read like one of our own runs.

The folder holds, per scenario, what a run writes (``transcript.json``,
``conversation_log.txt``, the recorded and reference actions, ``judge_result.json`` when its
assertions were judged, ``scenario_config/scenario.json`` and ``metrics.json`` last), then
``run_args.json`` and the summaries. No ``db_diff.json``: upstream records whether the
database matched, not how it differed.
"""

from __future__ import annotations

from pathlib import Path

from tau2_retail import codec
from tau2_retail.data.files import resolve_data_dir
from tau2_retail.data.gold import GoldBook
from tau2_retail.data.seed import load_seed
from tau2_retail.data.tasks import load_tasks
from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.errors import ArtifactError
from tau2_retail.results.artifacts import (
    CONFIG_DIR,
    JUDGE_FILE,
    METRICS_FILE,
    TRANSCRIPT_FILE,
    recorded_actions,
    reference_answer,
    render_conversation_log,
    scenario_dir,
    validate_name,
    write_json_atomic,
    write_text_atomic,
)
from tau2_retail.results.long_text import cut_long_text, cut_long_texts
from tau2_retail.results.records import RunSummary
from tau2_retail.results.summary import (
    build_summary,
    read_summary,
    summary_inputs,
    write_run_args,
    write_run_summary,
)
from tau2_retail.tau2_format.importer import (
    ImportedRun,
    ImportedScenario,
    embedded_references,
    imported_run,
    read_results,
)
from tau2_retail.tau2_format.schema import TaskRecord
from tau2_retail.tools.dispatch import Action

__all__ = ["import_results", "read_baseline", "upstream_run", "upstream_summary"]


def upstream_run(
    path: Path, *, data_dir: Path | None = None, run_id: str = "upstream"
) -> ImportedRun:
    """The run of an upstream ``results.json`` (see :mod:`tau2_retail.tau2_format.importer`);
    ACTION_MATCH against the gold replay's writes, as our runs score it."""
    data = resolve_data_dir(data_dir)
    tasks = load_tasks(data)
    book = GoldBook(seed=load_seed(data), tasks=tasks)

    def references(task: TaskRecord) -> tuple[Action, ...]:
        return book[task.id].actions if task.id in tasks else embedded_references(task)

    results = read_results(path)
    return imported_run(
        results, tasks=tasks, run_id=run_id, source=str(path), references=references
    )


def _metrics(imported: ImportedRun) -> list[ScenarioMetrics]:
    return [scenario.metrics for scenario in imported.scenarios]


def upstream_summary(path: Path, *, data_dir: Path | None = None) -> RunSummary:
    """The summary an upstream ``results.json`` reads as (nothing is written)."""
    imported = upstream_run(path, data_dir=data_dir, run_id=Path(path).stem or "upstream")
    return build_summary(
        _metrics(imported), **summary_inputs(imported.run_args, lost=imported.lost)
    )


def read_baseline(path: Path, *, data_dir: Path | None = None) -> RunSummary | None:
    """A baseline of the CI gate: a run folder's ``summary.json`` (None without one), or an
    upstream ``results.json`` read as a run of the tau2 profile."""
    if Path(path).is_file():
        return upstream_summary(Path(path), data_dir=data_dir)
    return read_summary(Path(path))


def _write_scenario(run_dir: Path, scenario: ImportedScenario, trials: int) -> None:
    metrics = scenario.metrics
    folder = scenario_dir(run_dir, metrics.scenario_name, metrics.trial - 1, trials)
    transcript = scenario.transcript
    write_json_atomic(folder / TRANSCRIPT_FILE, codec.versioned(codec.encode(transcript)))
    ending = transcript.stop_reason.value + (f" ({transcript.detail})" if transcript.detail else "")
    write_text_atomic(
        folder / "conversation_log.txt",
        render_conversation_log(
            transcript.messages,
            [m.timestamp for m in transcript.messages],
            ending=ending,
            cut=cut_long_text,
        ),
    )
    write_json_atomic(folder / "final_agent_response.json", recorded_actions(transcript.actions))
    write_json_atomic(folder / "reference_answer.json", reference_answer(scenario.reference))
    if scenario.judge is not None:
        write_json_atomic(folder / JUDGE_FILE, codec.encode(scenario.judge))
    write_json_atomic(
        folder / CONFIG_DIR / "scenario.json",
        codec.versioned(
            {
                "scenario_name": metrics.scenario_name,
                "scenario_id": metrics.scenario_id,
                "task_id": metrics.task_id,
                "trial": metrics.trial,
                "seed": metrics.seed,
                "split": metrics.split,
                "persona_name": metrics.persona_name,
                "nl_assertions": list(scenario.nl_assertions),
            }
        ),
    )
    write_json_atomic(folder / METRICS_FILE, cut_long_texts(codec.encode(metrics)))


def import_results(path: Path, run_dir: Path, *, data_dir: Path | None = None) -> RunSummary:
    """Write the run of an upstream ``results.json`` into ``run_dir`` (new or empty) and
    return its summary; :class:`ArtifactError` when ``run_dir`` holds anything."""
    run_dir = Path(run_dir)
    if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
        raise ArtifactError(f"{run_dir}: expected a new or empty directory to import into")
    run_id = validate_name("run id", run_dir.absolute().name)
    imported = upstream_run(Path(path), data_dir=data_dir, run_id=run_id)
    args = imported.run_args
    for scenario in imported.scenarios:
        _write_scenario(run_dir, scenario, args.trials)
    write_run_args(run_dir, args)
    return write_run_summary(
        run_dir, _metrics(imported), **summary_inputs(args, lost=imported.lost)
    )
