"""``python -m tau2_retail merge RUN_DIR... --into RUN_DIR``: shards' runs merged into one.

Copies the scenario folders, writes the merged ``run_args.json``, summaries and report, prints
the summary, and exits with the gate of the shards' configuration (``--tau2-min-pass-rate``,
``--tau2-max-infra-errors``, ``--tau2-baseline``): 0 when it passes, 1 when it does not, 2 when
the shards cannot be merged, 4 when a shard's run is still live (its pid is named; nothing is
written). A shard of the recorded count that was not given is named, and fails the gate unless
``--allow-missing-shards``. See ``tau2_retail.results.merge``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from tau2_retail.cli.common import Argument, Command
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
from tau2_retail.results.records import RunSummary
from tau2_retail.results.summary import (
    read_summary,
    render_summary_text,
    write_run_args,
    write_run_summary,
)

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
    baseline: RunSummary | None = None
    if gate.baseline:
        baseline = read_summary(Path(gate.baseline))
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
    return 0 if verdict.passed else 1


COMMAND = Command(
    name="merge",
    help="merge the run directories of shards (--tau2-shard I/N) into one run",
    description="Copy the scenario folders of shard runs into one run directory and write "
    "its summaries and report, equal to those of a single run of the same scenarios; "
    "shards of different configurations or with a scenario in common are refused.",
    epilog="exit status: 0 the gate passes, 1 it fails (also when a shard is missing), 2 the "
    "shards cannot be merged, 4 a shard's run is still live",
    arguments=(
        Argument("run_dirs", metavar="RUN_DIR", nargs="+", help="a shard's run directory"),
        Argument(
            "--into",
            required=True,
            metavar="RUN_DIR",
            help="the merged run directory (new or empty)",
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
