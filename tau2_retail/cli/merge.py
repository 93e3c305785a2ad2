"""``python -m tau2_retail merge RUN_DIR... --into RUN_DIR``: shards' runs merged into one.

Copies the scenario folders, writes the merged ``run_args.json``, summaries and report, prints
the summary, writes the upstream ``results.json`` the shards were asked for
(``--tau2-export-tau2``), and exits with the gate of the shards' configuration
(``--tau2-min-pass-rate``, ``--tau2-max-infra-errors``, ``--tau2-baseline``): 0 when it passes,
1 when it does not, 2 when the shards cannot be merged, 4 when the export was refused (and the
gate passed). See ``tau2_retail.results.merge``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tau2_retail.cli.common import Argument, Command
from tau2_retail.cli.export import EXIT_REFUSED
from tau2_retail.errors import ArtifactError
from tau2_retail.report.page import ReportError, write_report
from tau2_retail.results.artifacts import validate_name
from tau2_retail.results.merge import (
    GateSettings,
    copy_scenarios,
    merge_shards,
    merged_gate,
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
    shards = [read_shard(Path(run_dir)) for run_dir in args.run_dirs]
    merged = merge_shards(
        shards,
        run_id=run_id,
        argv=["python", "-m", "tau2_retail", "merge", *args.run_dirs, "--into", args.into],
    )
    gate = GateSettings.of(merged.args.configuration)
    baseline: RunSummary | None = None
    if gate.baseline:
        baseline = read_baseline(Path(gate.baseline), data_dir=_data_dir(merged.args))
        if baseline is None:
            raise ArtifactError(f"baseline {gate.baseline} has no summary.json")
    into.mkdir(parents=True, exist_ok=True)
    copy_scenarios(shards, into)
    write_run_args(into, merged.args)
    summary = write_run_summary(
        into,
        merged.metrics,
        expected=merged.args.expected,
        trials=merged.args.trials,
        configuration=merged.args.configuration,
        versions=merged.args.versions,
        lost=merged.lost,
        not_run=merged.not_run,
    )
    try:
        write_report(into)
    except ReportError as error:  # the summaries are written; the page is a convenience
        print(f"tau2: report.html not written: {error}", file=sys.stderr)
    sys.stdout.write(render_summary_text(summary))
    exported = _export(into, merged.args)
    verdict = merged_gate(summary, gate, baseline=baseline)
    for scenario_id in verdict.flipped:
        print(f"flipped pass->fail against the baseline: {scenario_id}")
    print(verdict.line)
    if not verdict.passed:
        return 1
    return EXIT_REFUSED if exported.refused else 0


def _data_dir(args: RunArgs) -> Path | None:
    recorded = args.configuration.settings.get("data_dir")
    return Path(recorded) if recorded else None


def _export(into: Path, args: RunArgs) -> AfterRun:
    """The merged run's upstream results.json, when the shards ran with --tau2-export-tau2."""
    path = args.configuration.settings.get("export_tau2")
    if not path:
        return AfterRun(lines=())
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
    epilog="exit status: 0 the gate passes, 1 it fails, 2 the shards cannot be merged, "
    f"{EXIT_REFUSED} the shards' --tau2-export-tau2 was refused (the run is merged)",
    arguments=(
        Argument("run_dirs", metavar="RUN_DIR", nargs="+", help="a shard's run directory"),
        Argument(
            "--into",
            required=True,
            metavar="RUN_DIR",
            help="the merged run directory (new or empty)",
        ),
    ),
    handler=merge_command,
)
