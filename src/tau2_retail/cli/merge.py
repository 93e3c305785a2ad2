"""``python -m tau2_retail merge RUN_DIR... --into RUN_DIR``: shards' runs merged into one.

Copies the scenario folders, writes the merged ``run_args.json``, summaries and report, prints
the summary, writes the upstream ``results.json`` the shards were asked for
(``--tau2-export-tau2``), and exits with the gate of the shards' configuration
(``--tau2-min-pass-rate``, ``--tau2-max-infra-errors``, ``--tau2-baseline``): 0 when it passes,
1 when it does not, 2 when the shards cannot be merged, 4 when a shard's run is still live (its
pid is named; nothing is written) or the export was refused (the run is merged; the gate
passed). A shard of the recorded count that was not given is named, and fails the gate unless
``--allow-missing-shards``. See ``tau2_retail.results.merge``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

from tau2_retail.cli.common import Argument, Command
from tau2_retail.cli.export import EXIT_REFUSED
from tau2_retail.errors import ArtifactError
from tau2_retail.report.page import ReportError, write_report
from tau2_retail.results.artifacts import validate_name
from tau2_retail.results.lock import RunLock
from tau2_retail.results.merge import (
    GateSettings,
    copy_scenarios,
    merge_shards,
    merged_gate,
    missing_shards_problem,
    read_shard,
)
from tau2_retail.results.records import RunArgs, RunSummary
from tau2_retail.results.summary import (
    render_summary_text,
    write_run_args,
    write_run_summary,
)
from tau2_retail.tau2_format.after_run import AfterRun, export_after_run
from tau2_retail.tau2_format.upstream_run import read_baseline

__all__ = ["COMMAND", "merge_command"]


def merge_command(args: argparse.Namespace) -> int:
    into = Path(args.into)
    if into.exists() and (not into.is_dir() or any(into.iterdir())):
        raise ArtifactError(f"--into {into}: expected a new or empty directory")
    run_id = validate_name("run id", into.absolute().name)
    with contextlib.ExitStack() as held:
        # read only, never while a shard's run is live (RunInUse names its pid)
        for run_dir in args.run_dirs:
            lock = RunLock.hold(Path(run_dir), shared=True)
            if lock is not None:
                held.enter_context(lock)
        return _merge(args, into, run_id)


def _merge(args: argparse.Namespace, into: Path, run_id: str) -> int:
    shards = [read_shard(Path(run_dir)) for run_dir in args.run_dirs]
    merged = merge_shards(
        shards,
        run_id=run_id,
        argv=["python", "-m", "tau2_retail", "merge", *args.run_dirs, "--into", args.into],
    )
    gate = GateSettings.of(merged.args.configuration)
    if args.baseline is not None:
        gate = dataclasses.replace(gate, baseline=args.baseline)
    baseline: RunSummary | None = None
    if gate.baseline:
        baseline = _baseline(gate.baseline, given=args.baseline is not None, args=merged.args)
    into.mkdir(parents=True, exist_ok=True)
    copy_scenarios(shards, into)
    write_run_args(into, merged.args)
    summary = write_run_summary(into, merged.metrics, **merged.summary_inputs())
    try:
        write_report(into)
    except ReportError as error:  # the summaries are written; the page is a convenience
        print(f"tau2: report.html not written: {error}", file=sys.stderr)
    sys.stdout.write(render_summary_text(summary))
    missing = merged.missing_shards if not args.allow_missing_shards else ()
    exported = _export(into, merged.args, missing_shards=missing)
    if merged.missing_shards:
        print(
            f"tau2: shard(s) {', '.join(merged.missing_shards)} not given: their scenarios are "
            "in no summary"
        )
    verdict = merged_gate(
        summary,
        gate,
        baseline=baseline,
        problems=missing_shards_problem(merged.missing_shards, allowed=args.allow_missing_shards),
    )
    for scenario_id in verdict.flipped:
        print(f"flipped pass->fail against the baseline: {scenario_id}")
    print(verdict.line)
    if not verdict.passed:
        return 1
    return EXIT_REFUSED if exported.refused else 0


def _baseline(path: str, *, given: bool, args: RunArgs) -> RunSummary:
    """The gate's baseline: ``--baseline``, else the one the shards recorded, which the merge
    job may not have where the shards ran (a relative path was read from the merge's folder,
    and the message said the folder "has no summary.json" of a path that did not exist)."""
    where = "--baseline" if given else "the shards' --tau2-baseline (in their run_args.json)"
    fix = "" if given else "; give the baseline as this command sees it with --baseline PATH"
    if not Path(path).exists():
        raise ArtifactError(f"{where} {path}: no such file or directory here{fix}")
    baseline = read_baseline(Path(path), data_dir=_data_dir(args))
    if baseline is None:
        raise ArtifactError(f"{where} {path}: the folder has no summary.json{fix}")
    return baseline


def _data_dir(args: RunArgs) -> Path | None:
    recorded = args.configuration.settings.get("data_dir")
    return Path(recorded) if recorded else None


def _export(into: Path, args: RunArgs, *, missing_shards: Sequence[str]) -> AfterRun:
    """The merged run's upstream results.json, when the shards ran with --tau2-export-tau2
    (not while a shard is missing: the file would look whole)."""
    path = args.configuration.settings.get("export_tau2")
    if not path:
        return AfterRun(lines=())
    if missing_shards:
        exported = AfterRun(
            lines=(f"tau2: {path} not written: shard(s) {', '.join(missing_shards)} not given",),
            refused=True,
        )
    else:
        exported = export_after_run(into, Path(path), data_dir=_data_dir(args))
    for line in exported.lines:
        print(line)
    return exported


COMMAND = Command(
    name="merge",
    help="merge the run directories of shards (--tau2-shard I/N) into one run",
    description="Copy the scenario folders of shard runs into one run directory and write "
    "its summaries and report, equal to those of a single run of the same scenarios; "
    "shards of different configurations or with a scenario in common are refused.",
    epilog="exit status: 0 the gate passes, 1 it fails (also when a shard is missing), 2 the "
    f"shards cannot be merged, {EXIT_REFUSED} a shard's run is still live, or the shards' "
    "--tau2-export-tau2 was refused (the run is merged)",
    arguments=(
        Argument("run_dirs", metavar="RUN_DIR", nargs="+", help="a shard's run directory"),
        Argument(
            "--into",
            required=True,
            metavar="RUN_DIR",
            help="the merged run directory (new or empty)",
        ),
        Argument(
            "--baseline",
            metavar="PATH",
            help="the gate's baseline (a run directory or an upstream results.json) as this "
            "command sees it, in place of the one the shards recorded (their "
            "--tau2-baseline, read from their folder)",
        ),
        Argument(
            "--allow-missing-shards",
            action="store_true",
            help="gate the shards given even when some shards of their count are missing "
            "(they are still named)",
        ),
    ),
    handler=merge_command,
)
