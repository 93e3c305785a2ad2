"""Export a run folder to upstream tau2-bench's ``results.json`` (``spec/tau2_results.md``).

One document that upstream's ``Results`` model loads: ``timestamp``, ``info``
(:mod:`~tau2_retail.tau2_format.info`), ``tasks`` (every task of the run's split, upstream's
own bytes: :mod:`~tau2_retail.tau2_format.tasks`) and one ``SimulationRun`` per scenario and
trial, sorted by task and trial: a stable ``id`` (from the run id and the scenario), ``task_id``,
0-based ``trial``, ``seed``, ISO ``start_time``/``end_time`` (UTC), ``duration`` (the
conversation's seconds), ``termination_reason`` in upstream's words
(:mod:`~tau2_retail.tau2_format.terms`), ``messages``
(:mod:`~tau2_retail.tau2_format.messages`), ``agent_cost``/``user_cost`` when the run has
prices, ``reward_info`` from our own scoring (:mod:`~tau2_retail.tau2_format.reward`), so
upstream's ``view`` and ``submit prepare`` need no re-score, and ``info`` with our scenario id,
the ending's detail and DB_STATE_MATCH (which upstream's ``reward_info`` of an ending it does
not evaluate leaves out).

It streams: the scenarios are read and written one at a time (memory bounded by one
simulation), into a temporary file renamed over the target at the end; a refusal found on the
way (tool-call arguments upstream cannot hold) removes it, and nothing is written.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Final

from tau2_retail import codec
from tau2_retail.data.files import resolve_data_dir
from tau2_retail.data.tasks import Task, load_tasks
from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.engine.transcript import Transcript
from tau2_retail.errors import ExportRefused
from tau2_retail.models.prices import PriceTable
from tau2_retail.results.artifacts import JUDGE_FILE, METRICS_FILE, TRANSCRIPT_FILE, read_metrics
from tau2_retail.results.atomic import atomic_file
from tau2_retail.results.outputs import output_problem
from tau2_retail.results.records import RunConfiguration
from tau2_retail.tau2_format.info import run_info
from tau2_retail.tau2_format.messages import (
    ArgumentsNotAnObject,
    Pricing,
    iso_time,
    upstream_messages,
)
from tau2_retail.tau2_format.reward import nl_checks, reward_info
from tau2_retail.tau2_format.scan import Entry, ExportScan, Shortfall, scan_run
from tau2_retail.tau2_format.schema import NLAssertionCheck, RewardInfo, SimulationRecord
from tau2_retail.tau2_format.tasks import task_texts
from tau2_retail.tau2_format.terms import (
    HALF_DUPLEX,
    INFRA,
    SCORED,
    premature_note,
    to_upstream,
)

__all__ = ["ExportResult", "export_run"]

_IDS: Final = uuid.UUID("6f0d3c9e-1c2b-4c55-9a57-2b1e0f7a9c41")
"""The namespace of the simulations' ids (uuid5 of the run id and the scenario id)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportResult:
    """What was written: ``simulations`` and ``tasks`` counts, and ``notes`` (one line each)
    on what ``--allow-incomplete`` left out or wrote as upstream would have recorded it."""

    path: Path
    simulations: int
    tasks: int
    notes: tuple[str, ...] = ()


def _pricing(configuration: RunConfiguration) -> Pricing:
    raw = configuration.settings.get("prices")
    if not raw:
        return lambda role, usage: None
    table = PriceTable.parse(raw)
    models = {
        role: (record.endpoint or {}).get("model") if record.endpoint else None
        for role, record in (("agent", configuration.agent), ("user", configuration.user))
    }
    return lambda role, usage: table.cost(models[role], usage)


def _split_tasks(tasks: Mapping[str, Task], split: str) -> list[str]:
    return [task.id for task in tasks.values() if split in ("base", task.split)]


def _judge(folder: Path) -> Mapping[str, Any] | None:
    path = folder / JUDGE_FILE
    if not path.is_file():
        return None
    judged: dict[str, Any] = codec.read(dict[str, Any], path)
    return judged


class _Writer:
    """One export in progress: reads a scenario, writes its simulation."""

    def __init__(self, scan: ExportScan, tasks: Mapping[str, Task]) -> None:
        self.run_id = scan.run_args.configuration.run_id
        self.tasks = tasks
        self.cost = _pricing(scan.run_args.configuration)
        self.unholdable: list[str] = []
        self.placeholders: list[str] = []

    def simulation(self, entry: Entry, *, allow_incomplete: bool) -> SimulationRecord | None:
        metrics = read_metrics(entry.folder / METRICS_FILE)
        transcript = codec.read(Transcript, entry.folder / TRANSCRIPT_FILE)
        termination = to_upstream(metrics.stop_reason, infra_error=metrics.infra_error)
        judge = _judge(entry.folder)
        start = transcript.started_at
        cost = metrics.cost
        record = SimulationRecord(
            id=str(uuid.uuid5(_IDS, f"{self.run_id}/{metrics.scenario_id}")),
            task_id=metrics.task_id,
            timestamp=iso_time(start + metrics.duration_seconds),
            start_time=iso_time(start),
            end_time=iso_time(start + metrics.duration_seconds),
            duration=metrics.duration_seconds,
            termination_reason=termination,
            agent_cost=cost.agent if cost is not None else None,
            user_cost=cost.user if cost is not None else None,
            trial=metrics.trial - 1,
            seed=metrics.seed,
            mode=HALF_DUPLEX,
            info=_info(metrics, judge, termination),
        )
        try:
            messages = upstream_messages(transcript.messages, cost=self.cost)
        except ArgumentsNotAnObject as problem:
            self.unholdable.append(f"{metrics.scenario_id} ({problem})")
            if not allow_incomplete:
                return None
            self.placeholders.append(metrics.scenario_id)
            return _as_upstream_failure(record, str(problem))
        task = self.tasks[metrics.task_id]
        judged = reward_info(metrics=metrics, task=task, judge=judge, termination=termination)
        return dataclasses.replace(record, messages=messages, reward_info=judged)


def _info(
    metrics: ScenarioMetrics, judge: Mapping[str, Any] | None, termination: str
) -> dict[str, Any]:
    """The simulation's ``info``: our scenario id and ending's detail, and the signals the
    ``reward_info`` of an ending upstream does not evaluate leaves out (DB_STATE_MATCH, the
    judge's verdicts), so the file reads back to the same signals."""
    info: dict[str, Any] = {
        "scenario_id": metrics.scenario_id,
        "stop_detail": metrics.stop_detail,
        "db_state_match": metrics.db_state_match,
    }
    if termination not in SCORED and judge is not None:
        info["nl_assertions"] = codec.encode(nl_checks(judge), tuple[NLAssertionCheck, ...])
    return info


def _as_upstream_failure(record: SimulationRecord, problem: str) -> SimulationRecord:
    """The simulation as upstream records one whose model reply it could not parse."""
    return dataclasses.replace(
        record,
        termination_reason=INFRA,
        messages=(),
        reward_info=RewardInfo(reward=0.0, info={"note": premature_note(INFRA)}),
        info={
            **(record.info or {}),
            "error": f"tool-call arguments are not a JSON object: {problem}",
        },
    )


def _dump(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")


def _write_head(handle: IO[bytes], head: Mapping[str, Any], task_texts: list[str]) -> None:
    handle.write(b'{"timestamp": ' + _dump(head["timestamp"]))
    handle.write(b',\n"info": ' + _dump(head["info"]))
    handle.write(b',\n"tasks": [\n')
    handle.write(",\n".join(task_texts).encode("utf-8"))
    handle.write(b'\n],\n"simulations": [')


def _unholdable_refusal(scenarios: list[str]) -> str:
    return Shortfall(
        what="have a tool call whose arguments are not a JSON object (upstream's model layer "
        "cannot parse such a reply: it retries the simulation and records it as "
        "infrastructure_error without messages)",
        ids=tuple(scenarios),
        fix="no upstream run could hold these conversations",
        escape="to write them as upstream records such a simulation",
    ).refusal()


def export_run(
    run_dir: Path,
    output: Path,
    *,
    data_dir: Path | None = None,
    allow_incomplete: bool = False,
    now: datetime | None = None,
) -> ExportResult:
    """Write ``run_dir``'s export to ``output`` (see the module docstring).

    Raises :class:`ExportRefused` (nothing written) for a run that cannot be exported, or,
    unless ``allow_incomplete``, one with scenarios missing, without a reward, or with a
    conversation upstream cannot hold; :class:`ArtifactError` for an unreadable run folder
    or an unwritable ``output``; :class:`DataError` for missing or altered data.
    """
    problem = output_problem(Path(run_dir), Path(output))
    if problem is not None:
        raise ExportRefused([problem])
    scan = scan_run(Path(run_dir))
    if scan.shortfalls and not allow_incomplete:
        raise ExportRefused([shortfall.refusal() for shortfall in scan.shortfalls], partial=True)
    data = resolve_data_dir(data_dir)
    tasks = load_tasks(data)
    split = str(scan.run_args.configuration.settings.get("split") or "base")
    texts = task_texts(data, _split_tasks(tasks, split))
    head = {
        "timestamp": (now or datetime.now(tz=UTC)).isoformat(timespec="microseconds"),
        "info": codec.encode(run_info(scan.run_args, data)),
    }
    writer = _Writer(scan, tasks)
    written = 0
    with atomic_file(Path(output)) as handle:
        _write_head(handle, head, texts)
        for entry in scan.entries:
            simulation = writer.simulation(entry, allow_incomplete=allow_incomplete)
            if simulation is None:
                continue
            handle.write(b"\n" if not written else b",\n")
            handle.write(_dump(codec.encode(simulation)))
            written += 1
        if writer.unholdable and not allow_incomplete:
            raise ExportRefused([_unholdable_refusal(writer.unholdable)], partial=True)
        handle.write(b"\n]}\n")
    notes = [shortfall.note() for shortfall in scan.shortfalls]
    if writer.placeholders:
        shown = ", ".join(writer.placeholders)
        notes.append(
            f"wrote {len(writer.placeholders)} scenario(s) as infrastructure_error without "
            f"messages, as upstream records a reply it cannot parse: {shown}"
        )
    return ExportResult(
        path=Path(output), simulations=written, tasks=len(texts), notes=tuple(notes)
    )
