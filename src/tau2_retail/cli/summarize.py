"""``python -m tau2_retail summarize RUN_DIR``: rebuild a run's summaries from its artifacts."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from tau2_retail.cli.common import RUN_DIR, Command
from tau2_retail.errors import ArtifactError
from tau2_retail.results.lock import RunLock
from tau2_retail.results.summary import render_summary_text, summarize

__all__ = ["COMMAND", "summarize_command"]


def summarize_command(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise ArtifactError(f"{run_dir} is not a directory")
    # it writes into the folder: never while a run is live there (RunInUse names its pid)
    with RunLock.hold(run_dir, shared=False) or contextlib.nullcontext():
        summary = summarize(run_dir)
    sys.stdout.write(render_summary_text(summary))
    return 0


COMMAND = Command(
    name="summarize",
    help="rebuild a run's summaries from its artifacts",
    description="Rewrite all_metrics.json, summary.json and all_summary.txt of a run "
    "directory from its scenarios' metrics.json files, and print the summary.",
    epilog="exit status: 0 written, 2 not a run directory or an unreadable artifact, 4 a live "
    "run holds the folder (its pid is named)",
    arguments=(RUN_DIR,),
    handler=summarize_command,
)
