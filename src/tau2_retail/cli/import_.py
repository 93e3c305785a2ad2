"""``python -m tau2_retail import results.json RUN_DIR``: an upstream run as a run folder of
this suite (see :mod:`tau2_retail.tau2_format.upstream_run`), with its summaries and report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tau2_retail.cli.common import DATA_DIR, Argument, Command
from tau2_retail.report.page import ReportError, write_report
from tau2_retail.results.summary import render_summary_text
from tau2_retail.tau2_format.upstream_run import import_results

__all__ = ["COMMAND", "import_command"]


def import_command(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir)
    summary = import_results(
        Path(args.results),
        run_dir,
        data_dir=args.data_dir,
    )
    try:
        write_report(run_dir)
    except ReportError as error:  # the run is written; the page is a convenience
        print(f"tau2: report.html not written: {error}", file=sys.stderr)
    sys.stdout.write(render_summary_text(summary))
    print(f"imported {summary.counts.reported} simulations of {args.results} into {run_dir}")
    return 0


COMMAND = Command(
    name="import",
    help="import upstream tau2-bench's results.json as a run directory",
    description="Write the simulations of an upstream tau2-bench results.json (retail) into a "
    "new run directory of this suite, read as upstream wrote them (rewards, endings, NL "
    "verdicts; nothing is re-scored), with its summaries and report.html, so `report` and "
    "`report --against` treat it like one of our tau2-profile runs.",
    epilog="exit status: 0 imported, 2 not an upstream retail results.json, a run directory "
    "that is not new or empty, or missing data",
    arguments=(
        Argument("results", metavar="RESULTS_JSON", help="upstream's results.json"),
        Argument("run_dir", metavar="RUN_DIR", help="the run directory to create (new or empty)"),
        DATA_DIR,
    ),
    handler=import_command,
)
