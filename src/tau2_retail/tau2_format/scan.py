"""What an export of a run folder will hold, decided before a byte is written.

:func:`scan_run` reads each scenario's ``metrics.json`` once, keeping a few facts of it (one
record in memory at a time), and finds every reason the run cannot become upstream's
``results.json``: a profile whose policy refuses (the default profile), expected scenarios
without a complete record, scored scenarios without a tau2 reward (an NL basis and no judge).
The caller refuses with those reasons (:class:`~tau2_retail.errors.ExportRefused`, one line
each), or with ``--allow-incomplete`` leaves the scenarios out and says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.engine.profiles import policy_for
from tau2_retail.errors import ArtifactError, ExportRefused
from tau2_retail.results.artifacts import scan_run_metrics
from tau2_retail.results.records import RunArgs
from tau2_retail.results.summary import RUN_ARGS_FILE, read_run_args, read_summary

__all__ = ["Entry", "ExportScan", "Shortfall", "scan_run"]

_SHOWN_IDS = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """A scenario the export writes: where it is and how it sorts."""

    folder: Path
    scenario_id: str
    sort_key: tuple[float, str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class Shortfall:
    """Scenarios the export cannot write as they are: ``what`` they lack, ``fix`` the way out."""

    what: str
    ids: tuple[str, ...]
    fix: str
    #: what ``--allow-incomplete`` does with them
    escape: str = "to export the others"

    def _ids(self) -> str:
        shown = ", ".join(self.ids[:_SHOWN_IDS])
        more = len(self.ids) - _SHOWN_IDS
        return shown + (f" and {more} more" if more > 0 else "")

    def refusal(self) -> str:
        return (
            f"{len(self.ids)} scenario(s) {self.what}: {self._ids()}; {self.fix}, or pass "
            f"--allow-incomplete {self.escape}"
        )

    def note(self) -> str:
        return f"left out {len(self.ids)} scenario(s) that {self.what}: {self._ids()}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportScan:
    """The run's ``run_args.json``, the scenarios to write (sorted), and the shortfalls."""

    run_args: RunArgs
    entries: tuple[Entry, ...]
    shortfalls: tuple[Shortfall, ...]


def _run_args(run_dir: Path) -> RunArgs:
    """``run_args.json``; for a run written before it existed, what its ``summary.json``
    says (the configuration, the trials, the scenarios it reported or lost)."""
    if not Path(run_dir).is_dir():
        raise ArtifactError(f"{run_dir} is not a directory")
    run_args = read_run_args(run_dir)
    if run_args is not None:
        return run_args
    summary = read_summary(run_dir)
    if summary is None or summary.configuration is None:
        raise ArtifactError(
            f"{Path(run_dir) / RUN_ARGS_FILE} is missing: is {run_dir} a run directory of this "
            "suite?"
        )
    expected = (*(row.scenario_id for row in summary.scenarios), *summary.lost)
    return RunArgs(
        argv=(),
        configuration=summary.configuration,
        trials=summary.trials,
        expected=tuple(expected),
        versions=summary.versions,
    )


def _refuse_profiles(profiles: set[str]) -> None:
    for profile in sorted(profiles):
        refusal = policy_for(profile).upstream_export_problem()
        if refusal is not None:
            raise ExportRefused([refusal])


def _shortfalls(missing: Sequence[str], unscored: Sequence[str], run_id: str) -> list[Shortfall]:
    out = []
    if missing:
        out.append(
            Shortfall(
                what="have no complete record in the run (lost, interrupted or not run)",
                ids=tuple(missing),
                fix=f"finish the run first (pytest ... --tau2-resume={run_id})",
            )
        )
    if unscored:
        out.append(
            Shortfall(
                what="have no tau2 reward (their reward_basis has NL_ASSERTION and the run had "
                "no judge)",
                ids=tuple(unscored),
                fix="run them with a judge (--tau2-judge-model)",
            )
        )
    return out


def scan_run(run_dir: Path) -> ExportScan:
    """Read the run folder's records once; raise :class:`ExportRefused` for a profile that
    cannot be exported, :class:`ArtifactError` for a folder that is not a run."""
    run_args = _run_args(run_dir)
    configured = run_args.configuration.profile
    profiles = {configured} if configured else set()
    entries: list[Entry] = []
    complete: set[str] = set()
    unscored: list[str] = []
    for found in scan_run_metrics(run_dir):
        record: ScenarioMetrics | None = found.record
        if record is None:
            continue
        profiles.add(record.profile)
        complete.add(record.scenario_id)
        if not record.infra_error and record.tau2_reward is None:
            unscored.append(record.scenario_id)
            continue
        entries.append(
            Entry(folder=found.folder, scenario_id=record.scenario_id, sort_key=record.sort_key())
        )
    _refuse_profiles(profiles)
    missing = sorted(set(run_args.expected) - complete, key=_id_order)
    entries.sort(key=lambda entry: entry.sort_key)
    return ExportScan(
        run_args=run_args,
        entries=tuple(entries),
        shortfalls=tuple(
            _shortfalls(missing, sorted(unscored, key=_id_order), run_args.configuration.run_id)
        ),
    )


def _id_order(scenario_id: str) -> tuple[int, str]:
    number = scenario_id.removeprefix("tau2_retail__").partition("-")[0]
    return (int(number) if number.isdigit() else 1 << 30), scenario_id
