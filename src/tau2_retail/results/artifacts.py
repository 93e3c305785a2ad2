"""Per-scenario artifacts (spec: conversation_and_scoring.md §6).

The process that ran a scenario writes its folder ``<run dir>/<scenario>[/trial-<k>]/``:

- ``transcript.json``: every message with tool calls and results, and the run facts;
- ``conversation_log.txt``: the same conversation, readable;
- ``final_agent_response.json``: ``[{"format_version", "actions": [{name, arguments}, ...]}]``
  recorded;
- ``reference_answer.json``: ``{"actions": [...]}`` of the gold replay;
- ``db_diff.json``: ``{table: {key: {actual, expected}}}``, ``{}`` on a match;
- ``judge_result.json``: only when a judge ran;
- ``scenario_config/``: ``agent_system_prompt.txt``, ``user_system_prompt.txt``,
  ``tools.json``, ``scenario.json`` (task id, trial, seed, split, persona, assertions, config);
- ``metrics.json`` (:class:`tau2_retail.engine.metrics.ScenarioMetrics`), written last: a
  whole, readable record marks the scenario complete (resume and ``summarize`` rely on it); an
  empty or truncated one means "not complete, re-run it".

Every file is written atomically but not fsynced (:mod:`tau2_retail.results.atomic` says why).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tau2_retail import codec
from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.errors import ArtifactError, ArtifactFormatError
from tau2_retail.models.messages import Message, Role
from tau2_retail.results import atomic
from tau2_retail.results.long_text import cut_long_text, cut_long_texts
from tau2_retail.results.scenario_folder import (
    FileContent,
    JsonDocument,
    ScenarioFiles,
    put_scenario_files,
)

if TYPE_CHECKING:
    from tau2_retail.engine.harness import ScenarioPrompts
    from tau2_retail.engine.scenario import ScenarioOutcome
    from tau2_retail.tools.dispatch import Action

__all__ = [
    "CONFIG_DIR",
    "JUDGE_FILE",
    "MAX_NAME_CHARS",
    "METRICS_FILE",
    "TRANSCRIPT_FILE",
    "FolderRecord",
    "PendingJudgement",
    "RunMetrics",
    "folder_of_scenario_id",
    "is_complete",
    "load_pending_judgement",
    "load_run_metrics",
    "outcome_files",
    "read_metrics",
    "recorded_actions",
    "reference_answer",
    "render_conversation_log",
    "scan_run_metrics",
    "scenario_dir",
    "scenario_files",
    "scenario_id_of_folder",
    "set_aside_metrics",
    "validate_name",
    "write_outcome",
]

METRICS_FILE = "metrics.json"
TRANSCRIPT_FILE = "transcript.json"
ENDPOINT_ERROR_FILE = "endpoint_error.txt"
AGENT_TRACEBACK_FILE = "agent_traceback.txt"
JUDGE_FILE = "judge_result.json"
#: a record that does not count (its test errored: ``set_aside_metrics``), and why
SET_ASIDE_FILE = "metrics.set-aside.json"
TEST_ERROR_FILE = "test_error.txt"
CONFIG_DIR = "scenario_config"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
MAX_NAME_CHARS = 100
"""The longest run id or scenario name (one path component; temporary files add to it)."""


def write_text_atomic(path: Path, text: str) -> None:
    """A per-scenario file: atomic rename, no fsync (see :mod:`tau2_retail.results.atomic`)."""
    atomic.write_text_atomic(path, text, durable=False)


def write_json_atomic(path: Path, value: Any) -> None:
    """A per-scenario JSON file: atomic rename, no fsync (see :mod:`tau2_retail.results.atomic`)."""
    atomic.write_json_atomic(path, value, durable=False)


# tools object's id -> (the object, kept so that its id stays its own; its file's text)
_tools_texts: dict[int, tuple[Sequence[Mapping[str, Any]], str]] = {}


def _tools_text(tools: Sequence[Mapping[str, Any]]) -> str:
    """``tools.json``'s text. Every scenario of a run writes the same 17 schemas, one object
    (the profile's): their artifact form (indented, so the pure-Python encoder, ~0.8 ms) is
    made once per object; keying it by its compact encoding cost 0.1 ms a scenario."""
    known = _tools_texts.get(id(tools))
    if known is not None and known[0] is tools:
        return known[1]
    text = atomic.dumps_json(json.loads(json.dumps([dict(schema) for schema in tools])))
    if len(_tools_texts) >= 4:
        _tools_texts.clear()
    _tools_texts[id(tools)] = (tools, text)
    return text


def validate_name(kind: str, value: str) -> str:
    """Return ``value`` if it is safe as one path component, else raise :class:`ArtifactError`.

    Accepted: a letter or digit, then letters, digits, ``_``, ``.``, ``-`` (so no ``/``, no
    ``..`` at the start, nothing that escapes the output folder). ``kind`` names the value in
    the message, e.g. ``"run id"``.
    """
    if _NAME.fullmatch(value) is None:
        raise ArtifactError(
            f"invalid {kind} {value!r}: use a letter or digit followed by letters, digits, "
            "'_', '.' or '-' (it names a folder inside the output directory)"
        )
    if len(value) > MAX_NAME_CHARS:
        raise ArtifactError(
            f"invalid {kind} {value[:20]!r}... ({len(value)} characters): at most "
            f"{MAX_NAME_CHARS} characters (it names a folder; file systems allow 255 bytes)"
        )
    return value


def scenario_dir(run_dir: Path, scenario_name: str, trial: int, trials: int) -> Path:
    """The artifact folder of one scenario trial.

    ``trial`` is 0-based, as in :class:`tau2_retail.engine.scenario.Scenario`; the folder is
    ``<run_dir>/<scenario_name>`` for a single-trial run, else
    ``<run_dir>/<scenario_name>/trial-<trial + 1>``.
    """
    validate_name("scenario name", scenario_name)
    if trials < 1 or not 0 <= trial < trials:
        raise ValueError(f"trial must be in 0..{trials - 1} (trials={trials}), got {trial}")
    base = Path(run_dir) / scenario_name
    return base if trials == 1 else base / f"trial-{trial + 1}"


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="milliseconds")


def _ending(outcome: ScenarioOutcome) -> str:
    metrics = outcome.metrics
    detail = metrics.stop_detail
    text = metrics.stop_reason + (f" ({detail})" if detail else "")
    if metrics.infra_error:
        text += f"; infra error of the {metrics.infra_role or 'agent'} endpoint"
    return text


def render_conversation_log(
    messages: Sequence[Message],
    timestamps: Sequence[float],
    *,
    ending: str | None = None,
    cut: Callable[[str], str] = str,
) -> str:
    """The conversation as readable text: one block per message, blank line between blocks.

    ``[time] agent:`` / ``[time] user:`` with the text below, ``[time] agent -> name(args)``
    for each tool call, ``[time] tool name:`` (``(error)`` for failures) with the result below;
    then, when ``ending`` is given, a last line ``=== ended: <ending>``. ``cut`` shortens
    each text and argument string (the log written beside the transcript cuts huge ones).
    """
    blocks: list[str] = []
    for message, seconds in zip(messages, timestamps, strict=True):
        stamp = f"[{_timestamp(seconds)}]"
        text = cut(message.content or "")
        if message.role is Role.ASSISTANT:
            lines = [f"{stamp} agent:\n{text}"] if text.strip() else []
            lines += [
                f"{stamp} agent -> {call.name}({cut(call.arguments)})"
                for call in message.tool_calls
            ]
            blocks.append("\n".join(lines) if lines else f"{stamp} agent: (empty)")
        elif message.role is Role.TOOL:
            marker = " (error)" if message.error else ""
            blocks.append(f"{stamp} tool {message.name}{marker}:\n{text}")
        else:
            blocks.append(f"{stamp} {message.role.value}:\n{text}")
    if ending is not None:
        blocks.append(f"=== ended: {ending}")
    return "\n\n".join(blocks) + "\n"


def recorded_actions(actions: Sequence[Action]) -> list[dict[str, Any]]:
    """``final_agent_response.json``: the agent's write actions, the spec's one-object list."""
    return [codec.versioned({"actions": [action.to_json() for action in actions]})]


def reference_answer(actions: Sequence[Action]) -> dict[str, Any]:
    """``reference_answer.json``: the gold replay's write actions."""
    return codec.versioned({"actions": [action.to_json() for action in actions]})


def _scenario_metadata(outcome: ScenarioOutcome, config: Mapping[str, Any]) -> dict[str, Any]:
    scenario = outcome.scenario
    task = scenario.task
    return codec.versioned(
        {
            "scenario_name": scenario.name,
            "scenario_id": scenario.id,
            "task_id": task.id,
            "trial": scenario.trial + 1,
            "trials": scenario.trials,
            "seed": scenario.seed,
            "split": task.split,
            "persona_name": task.persona_name,
            "nl_assertions": list(task.nl_assertions),
            "config": dict(config),
        }
    )


def _stale_names(outcome: ScenarioOutcome) -> tuple[str, ...]:
    """An earlier attempt's record, and the files this attempt does not write."""
    names = [METRICS_FILE, SET_ASIDE_FILE, TEST_ERROR_FILE]
    if outcome.judge is None:
        names.append(JUDGE_FILE)
    if not outcome.error_body:
        names.append(ENDPOINT_ERROR_FILE)
    if not outcome.conversation.agent_traceback:
        names.append(AGENT_TRACEBACK_FILE)
    return tuple(names)


def scenario_files(
    directory: Path,
    outcome: ScenarioOutcome,
    *,
    agent_prompt: str,
    user_prompt: str,
    tools: Sequence[Mapping[str, Any]],
    config: Mapping[str, Any],
) -> ScenarioFiles:
    """Every artifact of ``outcome`` as the content of its file in ``directory`` (texts and JSON
    documents, encoded where they are written), ``metrics.json`` last; nothing is written
    (:func:`put_scenario_files` writes them: an earlier attempt's
    ``metrics.json`` goes first, so the folder reads as incomplete until this attempt has
    written everything; a stale ``judge_result.json`` goes when no judge ran this time, and so
    do the temporary files of an attempt killed mid-write).

    ``config`` is the run configuration as it should be recorded (secrets already redacted
    by the caller)."""
    files = _conversation_files(outcome)

    def text(name: str, value: str) -> None:
        files.append((name, value))

    def json_file(name: str, value: Any, *, cut: bool = False) -> None:
        files.append((name, JsonDocument(value, cut=cut)))

    json_file("reference_answer.json", reference_answer(outcome.gold.actions))
    json_file("db_diff.json", outcome.db_diff)
    if outcome.judge is not None:
        judged = codec.encode(outcome.judge)
        # its prompt holds the conversation (whole in the transcript); its replies stay whole
        judged["judge_input"] = cut_long_texts(judged["judge_input"])
        json_file(JUDGE_FILE, judged)
    text(f"{CONFIG_DIR}/agent_system_prompt.txt", agent_prompt)
    text(f"{CONFIG_DIR}/user_system_prompt.txt", user_prompt)
    text(f"{CONFIG_DIR}/tools.json", _tools_text(tools))
    json_file(f"{CONFIG_DIR}/scenario.json", _scenario_metadata(outcome, config))
    # the transcript is the one full copy of a huge text; the metrics cut it with a marker
    json_file(METRICS_FILE, codec.encode(outcome.metrics), cut=True)
    return ScenarioFiles(directory=Path(directory), files=tuple(files), stale=_stale_names(outcome))


def _conversation_files(outcome: ScenarioOutcome) -> list[tuple[str, FileContent]]:
    """The files of the conversation itself: its transcript, the endpoint's whole error reply
    (the conversation's or the judge's) or the agent's traceback that ended it, its log, and
    the agent's actions."""
    conversation = outcome.conversation
    files: list[tuple[str, FileContent]] = [(TRANSCRIPT_FILE, JsonDocument(conversation.to_json()))]
    if outcome.error_body:
        # The whole error reply of the endpoint that failed the scenario (the metrics hold 300
        # characters of it): e.g. the seventh of seven validation errors.
        files.append((ENDPOINT_ERROR_FILE, outcome.error_body + "\n"))
    if conversation.agent_traceback:
        # the traceback of the agent's own code that ended the run (agent_error)
        files.append((AGENT_TRACEBACK_FILE, conversation.agent_traceback))
    log = render_conversation_log(
        conversation.messages, conversation.timestamps, ending=_ending(outcome), cut=cut_long_text
    )
    files.append(("conversation_log.txt", log))
    files.append(
        ("final_agent_response.json", JsonDocument(recorded_actions(conversation.actions)))
    )
    return files


def outcome_files(
    run_dir: Path,
    outcome: ScenarioOutcome,
    *,
    prompts: ScenarioPrompts,
    config: Mapping[str, Any],
) -> ScenarioFiles:
    """``outcome``'s artifacts in its folder under ``run_dir``, as contents (not written)."""
    scenario = outcome.scenario
    return scenario_files(
        scenario_dir(run_dir, scenario.name, scenario.trial, scenario.trials),
        outcome,
        agent_prompt=prompts.agent,
        user_prompt=prompts.user,
        tools=prompts.tools,
        config=config,
    )


def write_outcome(
    run_dir: Path,
    outcome: ScenarioOutcome,
    *,
    prompts: ScenarioPrompts,
    config: Mapping[str, Any],
) -> Path:
    """Write ``outcome``'s artifacts into its folder under ``run_dir``; return the folder.

    The writer that goes with :class:`tau2_retail.engine.harness.Harness`: ``prompts`` is
    ``harness.prompts(outcome.scenario.task)``.
    """
    return put_scenario_files(outcome_files(run_dir, outcome, prompts=prompts, config=config))


def read_metrics(path: Path) -> ScenarioMetrics:
    """Parse one ``metrics.json``; :class:`ArtifactError` naming the file when it is unusable
    (unreadable, empty, truncated, or a key missing or of the wrong type)."""
    return codec.read(ScenarioMetrics, path)


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingJudgement:
    """A finished conversation whose judge was down: its saved transcript and final DB hash."""

    transcript: dict[str, Any]
    db_hash: str


def load_pending_judgement(directory: Path) -> PendingJudgement | None:
    """The saved conversation of a scenario marked ``needs_judging``, or None (not marked, or
    its files cannot be read: the scenario then runs again from the start)."""
    directory = Path(directory)
    try:
        metrics = read_metrics(directory / METRICS_FILE)
        if not metrics.needs_judging:
            return None
        transcript = json.loads((directory / TRANSCRIPT_FILE).read_bytes())
    except (ArtifactError, OSError, ValueError):
        return None
    if not isinstance(transcript, dict):
        return None
    return PendingJudgement(transcript=transcript, db_hash=metrics.db_state_actual_hash)


def set_aside_metrics(directory: Path, reason: str) -> None:
    """Make a scenario's record not count: ``metrics.json`` becomes ``metrics.set-aside.json``
    beside ``test_error.txt`` saying why (its test errored after the record was written). The
    folder then reads as incomplete: summaries count the scenario as lost, resume runs it
    again (and its next attempt removes both files). ``ArtifactError`` when that fails."""
    directory = Path(directory)
    if not (directory / METRICS_FILE).is_file():
        return
    write_text_atomic(directory / TEST_ERROR_FILE, reason + "\n")
    try:
        os.replace(directory / METRICS_FILE, directory / SET_ASIDE_FILE)
    except OSError as error:
        raise ArtifactError(f"cannot set aside {directory / METRICS_FILE}: {error}") from error


def is_complete(directory: Path) -> bool:
    """True when ``directory`` holds a ``metrics.json`` that reads as a whole record."""
    path = Path(directory) / METRICS_FILE
    if not path.is_file():
        return False
    try:
        read_metrics(path)
    except ArtifactError:
        return False
    return True


def scenario_id_of_folder(run_dir: Path, folder: Path) -> str:
    """``tau2_retail__5`` for ``RUN/tau2_retail__5``, ``tau2_retail__5-trial2`` for
    ``RUN/tau2_retail__5/trial-2``: the scenario id an artifact folder belongs to."""
    parts = folder.relative_to(run_dir).parts
    if len(parts) == 2 and parts[1].startswith("trial-"):
        return f"{parts[0]}-trial{parts[1].removeprefix('trial-')}"
    return parts[0]


def folder_of_scenario_id(run_dir: Path, scenario_id: str) -> Path:
    """The inverse of :func:`scenario_id_of_folder`: ``RUN/tau2_retail__5/trial-2`` for
    ``tau2_retail__5-trial2``."""
    name, separator, trial = scenario_id.partition("-trial")
    return Path(run_dir) / name / f"trial-{trial}" if separator else Path(run_dir) / name


@dataclass(frozen=True, slots=True, kw_only=True)
class RunMetrics:
    """The scenario records of a run directory, and the scenarios whose record is unusable.

    ``incomplete`` maps a scenario id to why its ``metrics.json`` cannot be used (empty after
    a power loss, truncated, foreign): such a scenario is not complete, resume re-runs it and
    the summary counts it as lost, naming the reason.
    """

    records: tuple[ScenarioMetrics, ...]
    incomplete: Mapping[str, str]
    #: ``metrics.json`` files whose record names another scenario than their folder (copied
    #: or moved by hand), each as one line; they are also ``incomplete`` (never counted)
    misplaced: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class FolderRecord:
    """One scenario folder of a run: its path, the scenario id its place names, and its
    record, or why it has none usable (``problem``; ``misplaced`` when the record names
    another scenario)."""

    folder: Path
    scenario_id: str
    record: ScenarioMetrics | None
    problem: str = ""
    misplaced: bool = False


def scan_run_metrics(run_dir: Path) -> Iterator[FolderRecord]:
    """Each scenario folder under ``run_dir`` that holds a ``metrics.json`` (single- and
    multi-trial layouts), in path order, read one at a time (a caller that keeps only what
    it needs holds one record at a time)."""
    run_dir = Path(run_dir)
    paths = [*run_dir.glob(f"*/{METRICS_FILE}"), *run_dir.glob(f"*/trial-*/{METRICS_FILE}")]
    for path in sorted(paths):
        folder_id = scenario_id_of_folder(run_dir, path.parent)
        try:
            record = read_metrics(path)
        except ArtifactFormatError:
            raise  # a record of another format: the folder is not this version's run
        except ArtifactError as error:
            yield FolderRecord(
                folder=path.parent, scenario_id=folder_id, record=None, problem=str(error)
            )
            continue
        if record.scenario_id != folder_id:
            # a record in the wrong folder would count twice, or for the wrong scenario
            problem = f"{path} records scenario {record.scenario_id}, not {folder_id}"
            yield FolderRecord(
                folder=path.parent,
                scenario_id=folder_id,
                record=None,
                problem=problem,
                misplaced=True,
            )
            continue
        yield FolderRecord(folder=path.parent, scenario_id=folder_id, record=record)


def load_run_metrics(run_dir: Path) -> RunMetrics:
    """Every scenario's metrics under ``run_dir`` (single- and multi-trial layouts), sorted."""
    records: list[ScenarioMetrics] = []
    incomplete: dict[str, str] = {}
    misplaced: list[str] = []
    for found in scan_run_metrics(run_dir):
        if found.record is not None:
            records.append(found.record)
            continue
        if found.misplaced:
            misplaced.append(found.problem)
            incomplete[found.scenario_id] = f"misplaced metrics.json: {found.problem}"
        else:
            incomplete[found.scenario_id] = found.problem
    records.sort(key=ScenarioMetrics.sort_key)
    return RunMetrics(records=tuple(records), incomplete=incomplete, misplaced=tuple(misplaced))
