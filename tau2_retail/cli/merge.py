"""``python -m tau2_retail merge RUN_DIR... --into RUN_DIR``: shards' runs merged into one.

Copies the scenario folders, writes the merged ``run_args.json``, summaries and report, prints
the summary, and exits with the gate of the shards' configuration (``--tau2-min-pass-rate``,
``--tau2-max-infra-errors``): 0 when it passes, 1 when it does not, 2 when the shards cannot be
merged. See ``tau2_retail.results.merge``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tau2_retail.errors import ArtifactError
from tau2_retail.report.page import ReportError, write_report
from tau2_retail.results.artifacts import validate_name
from tau2_retail.results.gate import gate_verdict
from tau2_retail.results.merge import copy_scenarios, merge_shards, read_shard
from tau2_retail.results.summary import render_summary_text, write_run_args, write_run_summary

__all__ = ["merge_command"]


def merge_command(args: argparse.Namespace) -> int:
    into = Path(args.into)
    if into.exists() and (not into.is_dir() or any(into.iterdir())):
        raise ArtifactError(f"--into {into}: expected a new or empty directory")
    run_id = validate_name("run id", into.absolute().name)
    shards = [read_shard(Path(run_dir)) for run_dir in args.run_dirs]
    merged = merge_shards(shards, run_id=run_id)
    into.mkdir(parents=True, exist_ok=True)
    copy_scenarios(shards, into)
    write_run_args(
        into,
        {
            "argv": ["python", "-m", "tau2_retail", "merge", *args.run_dirs, "--into", args.into],
            "configuration": merged.configuration,
            "trials": merged.trials,
            "expected": merged.expected,
            "merged_from": [str(Path(run_dir).absolute()) for run_dir in args.run_dirs],
        },
    )
    summary = write_run_summary(
        into,
        merged.metrics,
        expected=merged.expected,
        trials=merged.trials,
        configuration=merged.configuration,
        versions=merged.versions,
    )
    try:
        write_report(into)
    except ReportError as error:  # the summaries are written; the page is a convenience
        print(f"tau2: report.html not written: {error}", file=sys.stderr)
    sys.stdout.write(render_summary_text(summary))
    settings = merged.configuration.get("settings") or {}
    verdict = gate_verdict(
        summary,
        min_pass_rate=settings.get("min_pass_rate"),
        max_infra_errors=int(settings.get("max_infra_errors") or 0),
    )
    print(verdict.line)
    return 0 if verdict.passed else 1
