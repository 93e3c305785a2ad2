"""Readers of a run directory's files, for tests and benchmarks that ran the benchmark (and
a hand-editor of the response cache file, as a hostile user edits it)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from tau2_retail.results.atomic import TEMP_PREFIX

__all__ = [
    "METRICS_KEYS",
    "RunFiles",
    "edit_cache_replies",
    "file_digests",
    "files_under",
    "temp_files",
    "unversioned_json",
]

# JSON data files whose shape the spec fixes (a diff keyed by table, ``{}`` on a match; the tool
# list as the agent's requests carried it): their format is their folder's, stated by the
# records beside them (conversation_and_scoring.md §6, docs/artifacts.md)
SHAPED_DATA = frozenset({"db_diff.json", "tools.json"})

# the keys every scenario's metrics.json holds (the artifact format; more may follow)
METRICS_KEYS = frozenset(
    {
        "scenario_name",
        "trial",
        "seed",
        "split",
        "persona_name",
        "total_turns",
        "turns",
        "duration_seconds",
        "latency_stats",
        "stop_reason",
        "clean_exit",
        "db_state_expected_hash",
        "db_state_actual_hash",
        "db_state_match",
        "is_action_match",
        "token_usage",
        "success_breakdown",
        "is_successful",
        "is_task_successful",
        "tau2_reward",
    }
)


class RunFiles:
    """Readers of ``<output_dir>/<run id>/``; a subclass provides ``output_dir``."""

    __slots__ = ()
    output_dir: Path

    def run_dir(self, run_id: str) -> Path:
        return self.output_dir / run_id

    def read_json(self, run_id: str, name: str) -> Any:
        return json.loads((self.run_dir(run_id) / name).read_text(encoding="utf-8"))

    def summary(self, run_id: str) -> dict[str, Any]:
        summary: dict[str, Any] = self.read_json(run_id, "summary.json")
        return summary

    def metrics(self, run_id: str, scenario: str) -> dict[str, Any]:
        metrics: dict[str, Any] = self.read_json(run_id, f"{scenario}/metrics.json")
        return metrics


def files_under(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file())


def temp_files(folder: Path) -> list[Path]:
    """Half-written files (the atomic writer's temporaries) under ``folder``."""
    return [path for path in files_under(folder) if path.name.startswith(TEMP_PREFIX)]


def file_digests(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder``, by relative path."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in files_under(folder)
    }


def unversioned_json(folder: Path) -> list[str]:
    """The JSON files under ``folder`` whose objects do not state ``format_version`` as their
    first key (a list's objects each), the spec-shaped data files left aside."""
    missing = []
    for path in files_under(folder):
        if path.suffix != ".json" or path.name in SHAPED_DATA:
            continue
        parsed = json.loads(path.read_text(encoding="utf-8"))
        objects = parsed if isinstance(parsed, list) else [parsed]
        if not objects or any(next(iter(o), None) != "format_version" for o in objects):
            missing.append(str(path.relative_to(folder)))
    return missing


def edit_cache_replies(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Apply ``edit`` to every reply stored in the response cache file at ``path`` (its JSON
    value, changed in place), as someone editing the file by hand would."""
    # closed, not only committed: Python 3.13 warns (ResourceWarning) of a connection left open
    with closing(sqlite3.connect(path)) as db, db:
        for digest, text in db.execute("SELECT digest, reply FROM responses").fetchall():
            reply = json.loads(text)
            edit(reply)
            db.execute(
                "UPDATE responses SET reply = ? WHERE digest = ?", (json.dumps(reply), digest)
            )
