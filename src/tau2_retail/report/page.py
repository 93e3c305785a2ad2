"""The run report: one self-contained HTML page built from a run's artifacts.

``report.html`` (written into the run directory at the end of a pytest run, or by
``python -m tau2_retail report RUN_DIR``) shows the overview of ``summary.json`` as numbers and
inline SVG charts, a sortable and filterable table of the scenarios, and for each scenario the
conversation, the database difference, the reference and recorded actions and the judge's
verdicts. ``--against OTHER_RUN`` adds which scenarios flipped and the rate differences.

The page needs no network: CSS, JavaScript and charts are inline, and a Content-Security-Policy
forbids every fetch and every script but the page's own (by hash). The data travels as JSON in
``<script type="application/json">`` blocks: the overview and the table rows in one block, each
scenario's details in its own block (parsed only when the scenario is opened), and long texts
that repeat across scenarios (tool results, mostly) once, in a shared string table. In those
blocks ``<``, ``>`` and ``&`` are written as ``\\u003c``, ``\\u003e`` and ``\\u0026``, so no
text can end the block (``</script>``) or open a comment (``<!--``). The page inserts every text
that came from a model with ``textContent``, never as markup.

Sources, per run: ``summary.json`` (required: the figures shown are its figures),
``all_metrics.json`` (else each ``metrics.json``); per scenario: ``transcript.json``,
``db_diff.json``, ``reference_answer.json``, ``final_agent_response.json``,
``judge_result.json`` and ``scenario_config/scenario.json``. A scenario file that is missing
or unreadable is named in that scenario's view; a missing or malformed ``summary.json`` raises
:class:`ReportError`.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from tau2_retail import codec
from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.engine.profiles import policy_for
from tau2_retail.errors import ArtifactError, ReportError
from tau2_retail.models.builtin import is_builtin
from tau2_retail.report.compare import compare_summaries
from tau2_retail.report.scenario_page import StringTable, scenario_detail
from tau2_retail.results.artifacts import METRICS_FILE, load_run_metrics
from tau2_retail.results.atomic import write_text_atomic
from tau2_retail.results.outputs import output_problem
from tau2_retail.results.records import RunSummary, ScenarioRow
from tau2_retail.results.summary import ALL_METRICS_FILE, SUMMARY_JSON_FILE
from tau2_retail.results.summary_text import interrupted_by_text
from tau2_retail.tau2_format.upstream_run import upstream_summary

__all__ = [
    "FORMAT_VERSION",
    "REPORT_FILE",
    "ROW_COLUMNS",
    "ReportData",
    "ReportError",
    "build_report_data",
    "default_output",
    "json_for_script",
    "render_report",
    "write_report",
]

REPORT_FILE = "report.html"
FORMAT_VERSION = 1

#: The fields of one table row, in the order of the row arrays embedded in the page.
ROW_COLUMNS = (
    "id",
    "task",
    "trial",
    "seed",
    "split",
    "persona",
    "status",
    "db",
    "exit",
    "nl_passed",
    "nl_total",
    "action",
    "stop",
    "turns",
    "duration",
    "tokens",
    "reward",
    "judge",
    "cost",
)


# -- JSON inside HTML ---------------------------------------------------------------------------

_SCRIPT_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def json_for_script(value: Any) -> str:
    """``value`` as compact JSON that is safe inside ``<script type="application/json">``.

    ``<``, ``>`` and ``&`` only occur inside JSON strings, where ``\\u003c`` (and so on) decode
    to the same characters: ``JSON.parse`` returns the original value, while the HTML parser
    never sees ``</script>`` or ``<!--`` in the block.
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.translate(_SCRIPT_ESCAPES)


# -- reading the run --------------------------------------------------------------------------


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except OSError as error:
        raise ReportError(f"cannot read {path}: {error}") from error
    except ValueError as error:
        raise ReportError(f"{path}: not valid JSON ({error})") from error


def _load_summary(run_dir: Path) -> RunSummary:
    path = run_dir / SUMMARY_JSON_FILE
    if not path.is_file():
        raise ReportError(
            f"{path} not found: the report is built from a run's summary; rebuild it with "
            f"`python -m tau2_retail summarize {run_dir}`"
        )
    try:
        return codec.read(RunSummary, path)
    except ArtifactError as error:
        raise ReportError(
            f"{error} (is it a summary.json of this suite? "
            "`python -m tau2_retail summarize RUN_DIR` rebuilds it)"
        ) from None


def _load_metrics(run_dir: Path) -> dict[str, ScenarioMetrics]:
    """Every scenario's metrics by scenario id: ``all_metrics.json``, else the folders."""
    path = run_dir / ALL_METRICS_FILE
    if path.is_file():
        try:
            records = codec.read(list[ScenarioMetrics], path)
        except ArtifactError as error:
            raise ReportError(str(error)) from None
    else:
        records = list(load_run_metrics(run_dir).records)
    return {record.scenario_id: record for record in records}


def _scenario_folder(run_dir: Path, metrics: ScenarioMetrics) -> Path | None:
    """The folder holding this scenario's artifacts (single- or multi-trial layout)."""
    name = metrics.scenario_name
    if "/" in name or "\\" in name or name in ("", ".", ".."):
        return None
    for folder in (run_dir / name / f"trial-{metrics.trial}", run_dir / name):
        if (folder / METRICS_FILE).is_file():
            return folder
    return None


def _row(summary_row: ScenarioRow, metrics: ScenarioMetrics | None) -> list[Any]:
    infra = summary_row.status == "INFRA"

    def flag(value: bool | None) -> int | None:
        return None if infra or value is None else int(value)

    values = {
        "id": summary_row.scenario_id,
        "task": summary_row.task_id,
        "trial": summary_row.trial,
        "seed": metrics.seed if metrics else None,
        "split": metrics.split if metrics else None,
        "persona": metrics.persona_name if metrics else None,
        "status": summary_row.status,
        "db": flag(summary_row.db_state_match),
        "exit": flag(summary_row.clean_exit),
        "nl_passed": None if infra else summary_row.nl_assertion_pass_count,
        "nl_total": summary_row.nl_assertion_total,
        "action": flag(summary_row.is_action_match),
        "stop": summary_row.stop_reason,
        "turns": summary_row.total_turns,
        "duration": summary_row.duration_seconds,
        "tokens": metrics.total_tokens if metrics else 0,
        "reward": summary_row.tau2_reward,
        "judge": summary_row.judge_score,
        "cost": summary_row.cost,
    }
    return [values[column] for column in ROW_COLUMNS]


def _request_settings(settings: Mapping[str, Any], role: str) -> str:
    """One line of an endpoint role's request settings (the extra body is already redacted)."""
    parts = []
    for key, label in (
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("max_tokens", "max tokens"),
        ("timeout", "timeout (s)"),
        ("max_retries", "retries"),
    ):
        value = settings.get(f"{role}_{key}")
        parts.append(f"{label} {'default' if value is None else value}")
    extra = settings.get(f"{role}_extra_body")
    if extra:
        parts.append(f"extra body {json.dumps(extra, ensure_ascii=False, sort_keys=True)}")
    breaker = settings.get("breaker_failures")
    if breaker is not None:
        window = settings.get("breaker_window_seconds")
        over = f" over {window} s without a success" if window is not None else ""
        parts.append(
            f"down after {breaker} failed attempts{over}, probed every "
            f"{settings.get('breaker_probe_seconds')} s"
        )
    return "; ".join(parts)


def _configuration_rows(
    summary: RunSummary, seeds: Sequence[tuple[int, int | None]]
) -> list[list[str]]:
    """``[label, value]`` pairs for the header: models, endpoints, trials, seeds, limits.

    ``seeds`` are ``(trial, seed)`` pairs; the trial seeds are listed by trial.
    """
    configuration = summary.configuration
    settings = configuration.settings if configuration else {}
    rows: list[list[str]] = [["Profile", summary.profile]]
    for role in ("agent", "user", "judge"):
        model = summary.model(role)
        shown = (
            model
            if model
            else ("none (NL assertions not judged)" if role == "judge" else "not recorded")
        )
        played = getattr(configuration, role) if configuration else None
        endpoint = played.endpoint if played and played.endpoint else {}
        base_url = endpoint.get("base_url") or settings.get(f"{role}_base_url")
        if model and base_url and not is_builtin(model):  # a built-in model runs here
            shown += f" at {base_url}"
        rows.append([role.capitalize(), shown])
        if model and not is_builtin(model):
            rows.append([f"{role.capitalize()} requests", _request_settings(settings, role)])
    rows.append(["Trials", str(summary.trials)])
    if settings.get("seed") is not None:
        rows.append(["Base seed", str(settings["seed"])])
    by_trial = dict(sorted((trial, seed) for trial, seed in seeds if seed is not None))
    if by_trial:
        rows.append(
            ["Trial seeds", ", ".join(f"trial {trial}: {seed}" for trial, seed in by_trial.items())]
        )
    for key, label in (
        ("split", "Split"),
        ("tasks", "Tasks"),
        ("max_steps", "Max steps"),
        ("max_errors", "Max tool errors"),
        ("max_duration", "Max duration (s)"),
        ("agent_notes", "Agent notes"),
    ):
        value = settings.get(key)
        unused = policy_for(summary.profile).agent_notes_problem() if key == "agent_notes" else None
        if unused is not None:  # the setting says on, the profile sends no notes
            rows.append([label, f"off ({unused})"])
        elif isinstance(value, bool):
            rows.append([label, "on" if value else "off"])
        elif value:
            rows.append(
                [label, ", ".join(map(str, value)) if isinstance(value, list) else str(value)]
            )
    if summary.versions:
        rows.append(["Versions", ", ".join(f"{k} {v}" for k, v in summary.versions.items())])
    return rows


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportData:
    """Everything the page embeds: the main block, one detail per row, the string table."""

    main: dict[str, Any]
    details: list[dict[str, Any]]
    strings: list[str]


def _overview(summary: RunSummary) -> dict[str, Any]:
    return {
        key: value
        for key, value in codec.encode(summary).items()
        if key not in ("scenarios", "configuration")
    }


def _load_baseline(against: Path, data_dir: Path | None) -> RunSummary:
    """The run to compare with: a run folder, or an upstream ``results.json`` (a tau2-profile
    run as upstream wrote it; ``data_dir`` gives its tasks' splits and personas)."""
    if against.is_file():
        return upstream_summary(against, data_dir=data_dir)
    if not against.exists():
        raise ReportError(f"{against}: no such file or directory")
    if not against.is_dir():
        raise ReportError(
            f"{against} is not a run directory or an upstream tau2-bench results.json"
        )
    return _load_summary(against)


def build_report_data(
    run_dir: Path,
    *,
    against: Path | None = None,
    now: datetime | None = None,
    force: bool = False,
    data_dir: Path | None = None,
) -> ReportData:
    """Read a run directory (and a baseline, with ``against``: a run directory or an upstream
    ``results.json``) into the page's data.

    Runs of different profiles are not compared unless ``force``: their rates measure
    different things (prompts, tools, endings and success rule differ).
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ReportError(f"{run_dir} is not a directory")
    summary = _load_summary(run_dir)
    metrics = _load_metrics(run_dir)
    strings = StringTable()
    rows: list[list[Any]] = []
    details: list[dict[str, Any]] = []
    seeds: list[tuple[int, int | None]] = []
    for summary_row in summary.scenarios:
        record = metrics.get(summary_row.scenario_id)
        rows.append(_row(summary_row, record))
        seeds.append((summary_row.trial, record.seed if record else None))
        folder = _scenario_folder(run_dir, record) if record else None
        details.append(
            scenario_detail(folder, record, run_dir, strings, scenario_id=summary_row.scenario_id)
        )
    comparison = None
    if against is not None:
        against = Path(against)
        baseline = _load_baseline(against, data_dir)
        ours, theirs = summary.profile, baseline.profile
        if ours != theirs and not force:
            raise ReportError(
                f"{run_dir} used profile {ours!r} and {against} profile {theirs!r}: their "
                "prompts, tools, endings and success rules differ, so their rates are not "
                "comparable; compare runs of one profile, or pass --force to compare anyway"
            )
        comparison = {
            "name": against.resolve().name,
            "models": {role: baseline.model(role) for role in ("agent", "user", "judge")},
            "trials": baseline.trials,
            **compare_summaries(summary, baseline),
        }
    main = {
        "format": FORMAT_VERSION,
        "run": {"name": run_dir.resolve().name},
        "generated": (now or datetime.now(tz=UTC)).isoformat(timespec="seconds"),
        "configuration": _configuration_rows(summary, seeds),
        "summary": _overview(summary),
        "interrupted_by": interrupted_by_text(summary),  # as all_summary.txt words it
        "columns": list(ROW_COLUMNS),
        "rows": rows,
        "comparison": comparison,
    }
    return ReportData(main=main, details=details, strings=strings.values)


# -- the page -----------------------------------------------------------------------------------


def _asset(name: str) -> str:
    return (
        resources.files("tau2_retail.report").joinpath("assets", name).read_text(encoding="utf-8")
    )


def _csp_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def _html_text(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def _data_block(element_id: str, value: Any) -> str:
    return f'<script type="application/json" id="{element_id}">{json_for_script(value)}</script>'


def render_report(data: ReportData) -> str:
    """The HTML page: the template with its CSS, JavaScript and data blocks inlined."""
    template = _asset("report.html")
    css = _asset("report.css")
    script = _asset("report.js")
    csp = (
        "default-src 'none'; "
        f"script-src {_csp_hash(script)}; "
        f"style-src {_csp_hash(css)}; "
        "img-src 'none'; connect-src 'none'; form-action 'none'; base-uri 'none'"
    )
    blocks = [
        _data_block("tau2-data", data.main),
        _data_block("tau2-strings", data.strings),
    ]
    blocks.extend(
        _data_block(f"tau2-d{index}", detail) for index, detail in enumerate(data.details)
    )
    title = f"tau2 retail report: {data.main['run']['name']}"
    parts = {
        "{{CSP}}": _html_text(csp),
        "{{TITLE}}": _html_text(title),
        "{{CSS}}": css,
        "{{DATA}}": "\n".join(blocks),
        "{{JS}}": script,
    }
    out = template
    for placeholder, value in parts.items():
        before, found, after = out.partition(placeholder)
        if not found:  # a broken template is our bug, not the run's
            raise RuntimeError(f"assets/report.html lacks the placeholder {placeholder}")
        out = before + value + after
    return out


def default_output(run_dir: Path, against: Path | None) -> Path:
    """``RUN_DIR/report.html``; with a baseline ``RUN_DIR/report-vs-<baseline name>.html``."""
    if against is None:
        return Path(run_dir) / REPORT_FILE
    name = "".join(c if c.isalnum() or c in "._-" else "_" for c in Path(against).resolve().name)
    return Path(run_dir) / f"report-vs-{name or 'baseline'}.html"


def write_report(
    run_dir: Path,
    *,
    against: Path | None = None,
    output: Path | None = None,
    force: bool = False,
    data_dir: Path | None = None,
) -> tuple[Path, ReportData]:
    """Build the page of ``run_dir`` and write it atomically; returns the path and the data.

    ``output`` defaults to :func:`default_output`. Raises :class:`ReportError` (also for an
    ``against`` run of another profile, unless ``force``); an ``against`` upstream file that
    cannot be read raises :class:`ArtifactError` or :class:`DataError` naming it.
    """
    path = Path(output) if output is not None else default_output(Path(run_dir), against)
    problem = output_problem(Path(run_dir), path)
    if problem is not None:
        raise ReportError(problem)
    data = build_report_data(run_dir, against=against, force=force, data_dir=data_dir)
    page = render_report(data)
    try:
        write_text_atomic(path, page)
    except ArtifactError as error:
        raise ReportError(str(error)) from error
    return path, data
