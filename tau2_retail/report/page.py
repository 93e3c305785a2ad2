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

import argparse
import base64
import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from tau2_retail.errors import ArtifactError
from tau2_retail.report.compare import compare_summaries, comparison_lines
from tau2_retail.report.scenario import StringTable, scenario_detail
from tau2_retail.results.artifacts import METRICS_FILE, load_run_metrics
from tau2_retail.results.atomic import write_text_atomic
from tau2_retail.results.summary import ALL_METRICS_FILE, SUMMARY_JSON_FILE

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
    "report_command",
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
)

_REQUIRED_SUMMARY_KEYS: dict[str, type] = {
    "counts": dict,
    "success_rate": dict,
    "task_success_rate": dict,
    "signals": dict,
    "scenarios": list,
    "trials": int,
    "models": dict,
    "stop_reasons": dict,
    "token_usage": dict,
    "by_split": dict,
    "by_persona": dict,
    "pass_hat_k": list,
    "tau2_reward": dict,
    "judge_score": dict,
    "infra_errors": list,
    "lost": list,
}


class ReportError(ArtifactError):
    """The report cannot be built or written: a run file is missing or malformed, or the output
    cannot be written. The message names the file."""


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


def _load_summary(run_dir: Path) -> dict[str, Any]:
    path = run_dir / SUMMARY_JSON_FILE
    if not path.is_file():
        raise ReportError(
            f"{path} not found: the report is built from a run's summary; rebuild it with "
            f"`python -m tau2_retail summarize {run_dir}`"
        )
    summary = _read_json(path)
    if not isinstance(summary, dict):
        raise ReportError(f"{path}: expected a JSON object, got {type(summary).__name__}")
    for key, kind in _REQUIRED_SUMMARY_KEYS.items():
        value = summary.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ReportError(
                f"{path}: {key!r} must be a JSON {_json_kind(kind)} (is it a summary.json of "
                "this suite? `python -m tau2_retail summarize RUN_DIR` rebuilds it)"
            )
    if not all(isinstance(row, dict) and "scenario_id" in row for row in summary["scenarios"]):
        raise ReportError(f"{path}: every entry of 'scenarios' must be an object with scenario_id")
    return summary


def _json_kind(kind: type) -> str:
    return {dict: "object", list: "array", int: "integer"}.get(kind, kind.__name__)


def _load_metrics(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Every scenario's metrics by scenario id: ``all_metrics.json``, else the folders."""
    path = run_dir / ALL_METRICS_FILE
    records: list[Any]
    if path.is_file():
        loaded = _read_json(path)
        if not isinstance(loaded, list):
            raise ReportError(f"{path}: expected a JSON array, got {type(loaded).__name__}")
        records = loaded
    else:
        try:
            records = list(load_run_metrics(run_dir))
        except ArtifactError as error:
            raise ReportError(str(error)) from error
    return {
        str(record["scenario_id"]): record
        for record in records
        if isinstance(record, dict) and "scenario_id" in record
    }


def _scenario_folder(run_dir: Path, metrics: Mapping[str, Any]) -> Path | None:
    """The folder holding this scenario's artifacts (single- or multi-trial layout)."""
    name = metrics.get("scenario_name")
    trial = metrics.get("trial")
    if not isinstance(name, str) or "/" in name or "\\" in name or name in ("", ".", ".."):
        return None
    candidates = [run_dir / name]
    if isinstance(trial, int) and not isinstance(trial, bool) and trial >= 0:
        candidates.insert(0, run_dir / name / f"trial-{trial + 1}")
    for folder in candidates:
        if (folder / METRICS_FILE).is_file():
            return folder
    return None


def _tokens(metrics: Mapping[str, Any]) -> int:
    usage = metrics.get("token_usage")
    total = 0
    if isinstance(usage, dict):
        for counts in usage.values():
            if isinstance(counts, dict):
                for field in ("prompt", "completion"):
                    value = counts.get(field)
                    if isinstance(value, int) and not isinstance(value, bool):
                        total += value
    return total


def _row(summary_row: Mapping[str, Any], metrics: Mapping[str, Any]) -> list[Any]:
    infra = summary_row.get("status") == "INFRA"

    def flag(key: str) -> int | None:
        return None if infra else int(bool(summary_row.get(key)))

    values = {
        "id": str(summary_row.get("scenario_id")),
        "task": summary_row.get("task_id"),
        "trial": summary_row.get("trial"),
        "seed": metrics.get("seed"),
        "split": metrics.get("split"),
        "persona": metrics.get("persona_name"),
        "status": summary_row.get("status"),
        "db": flag("db_state_match"),
        "exit": flag("clean_exit"),
        "nl_passed": None if infra else summary_row.get("nl_assertion_pass_count"),
        "nl_total": summary_row.get("nl_assertion_total"),
        "action": flag("is_action_match"),
        "stop": summary_row.get("stop_reason"),
        "turns": summary_row.get("total_turns"),
        "duration": summary_row.get("duration_seconds"),
        "tokens": _tokens(metrics),
        "reward": summary_row.get("tau2_reward"),
        "judge": summary_row.get("judge_score"),
    }
    return [values[column] for column in ROW_COLUMNS]


def _profile_of(summary: Mapping[str, Any]) -> str:
    """The run's profile (``default`` for runs written before profiles existed)."""
    return str(summary.get("profile") or "default")


def _configuration_rows(summary: Mapping[str, Any], seeds: Sequence[Any]) -> list[list[str]]:
    """``[label, value]`` pairs for the header: models, endpoints, trials, seeds, limits."""
    configuration = summary.get("configuration")
    settings = configuration.get("settings") if isinstance(configuration, dict) else None
    settings = settings if isinstance(settings, dict) else {}
    models = summary["models"]
    rows: list[list[str]] = [["Profile", _profile_of(summary)]]
    for role in ("agent", "user", "judge"):
        model = models.get(role)
        shown = (
            str(model)
            if model
            else ("none (NL assertions not judged)" if role == "judge" else "not recorded")
        )
        base_url = settings.get(f"{role}_base_url")
        if model and base_url:
            shown += f" at {base_url}"
        rows.append([role.capitalize(), shown])
    rows.append(["Trials", str(summary["trials"])])
    if settings.get("seed") is not None:
        rows.append(["Base seed", str(settings["seed"])])
    distinct = sorted({s for s in seeds if isinstance(s, int) and not isinstance(s, bool)})
    if distinct:
        rows.append(["Trial seeds", ", ".join(str(s) for s in distinct)])
    for key, label in (
        ("split", "Split"),
        ("tasks", "Tasks"),
        ("max_steps", "Max steps"),
        ("max_errors", "Max tool errors"),
        ("max_duration", "Max duration (s)"),
        ("agent_notes", "Agent notes"),
    ):
        value = settings.get(key)
        if isinstance(value, bool):
            rows.append([label, "on" if value else "off"])
        elif value is not None:
            rows.append(
                [label, ", ".join(map(str, value)) if isinstance(value, list) else str(value)]
            )
    versions = summary.get("versions")
    if isinstance(versions, dict) and versions:
        rows.append(["Versions", ", ".join(f"{k} {v}" for k, v in versions.items())])
    return rows


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportData:
    """Everything the page embeds: the main block, one detail per row, the string table."""

    main: dict[str, Any]
    details: list[dict[str, Any]]
    strings: list[str]


def _overview(summary: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: value for key, value in summary.items() if key not in ("scenarios", "configuration")
    }


def build_report_data(
    run_dir: Path,
    *,
    against: Path | None = None,
    now: datetime | None = None,
    force: bool = False,
) -> ReportData:
    """Read a run directory (and a baseline run, with ``against``) into the page's data.

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
    for summary_row in summary["scenarios"]:
        scenario_id = str(summary_row["scenario_id"])
        record = metrics.get(scenario_id, {})
        rows.append(_row(summary_row, record))
        folder = _scenario_folder(run_dir, record) if record else None
        details.append(scenario_detail(folder, record, run_dir, strings))
    comparison = None
    if against is not None:
        against = Path(against)
        if not against.is_dir():
            raise ReportError(f"{against} is not a directory")
        baseline = _load_summary(against)
        ours, theirs = _profile_of(summary), _profile_of(baseline)
        if ours != theirs and not force:
            raise ReportError(
                f"{run_dir} used profile {ours!r} and {against} profile {theirs!r}: their "
                "prompts, tools, endings and success rules differ, so their rates are not "
                "comparable; compare runs of one profile, or pass --force to compare anyway"
            )
        comparison = {
            "name": against.resolve().name,
            "models": baseline["models"],
            "trials": baseline["trials"],
            **compare_summaries(summary, baseline),
        }
    generated = (now or datetime.now(tz=UTC)).isoformat(timespec="seconds")
    main = {
        "format": FORMAT_VERSION,
        "run": {"name": run_dir.resolve().name},
        "generated": generated,
        "configuration": _configuration_rows(summary, [row[3] for row in rows]),
        "summary": _overview(summary),
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
) -> tuple[Path, ReportData]:
    """Build the page of ``run_dir`` and write it atomically; returns the path and the data.

    ``output`` defaults to :func:`default_output`. Raises :class:`ReportError` (also for an
    ``against`` run of another profile, unless ``force``).
    """
    data = build_report_data(run_dir, against=against, force=force)
    page = render_report(data)
    path = Path(output) if output is not None else default_output(Path(run_dir), against)
    try:
        write_text_atomic(path, page)
    except ArtifactError as error:
        raise ReportError(str(error)) from error
    return path, data


def report_command(args: argparse.Namespace) -> int:
    """``report RUN_DIR [--against OTHER [--force]] [--output FILE]``: write the page."""
    run_dir = Path(args.run_dir)
    against = Path(args.against) if args.against else None
    output = Path(args.output) if args.output else None
    force = bool(getattr(args, "force", False))
    path, data = write_report(run_dir, against=against, output=output, force=force)
    size = path.stat().st_size
    print(f"wrote {path} ({len(data.details)} scenarios, {size / 1e6:.1f} MB)")
    comparison = data.main["comparison"]
    if comparison is not None:
        sys.stdout.write("\n".join(comparison_lines(comparison)) + "\n")
    return 0
