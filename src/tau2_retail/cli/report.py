"""``python -m tau2_retail report RUN_DIR``: a run's self-contained HTML report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tau2_retail.cli.common import DATA_DIR, RUN_DIR, Argument, Command
from tau2_retail.report.compare import comparison_lines
from tau2_retail.report.page import write_report

__all__ = ["COMMAND", "report_command"]


def report_command(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir)
    against = Path(args.against) if args.against else None
    output = Path(args.output) if args.output else None
    path, data = write_report(
        run_dir,
        against=against,
        output=output,
        force=args.force,
        data_dir=args.data_dir,
    )
    size = path.stat().st_size
    print(f"wrote {path} ({len(data.details)} scenarios, {size / 1e6:.1f} MB)")
    comparison = data.main["comparison"]
    if comparison is not None:
        sys.stdout.write("\n".join(comparison_lines(comparison)) + "\n")
    return 0


COMMAND = Command(
    name="report",
    help="write a run's self-contained HTML report",
    description="Write one HTML file (no network needed to open it) with the run's rates, "
    "every scenario's conversation and signals, optionally compared with another run.",
    epilog="exit status: 0 written, 2 not a run directory or an unreadable artifact",
    arguments=(
        RUN_DIR,
        Argument(
            "--against",
            metavar="OTHER_RUN",
            help="compare with this run (a run directory, or upstream tau2-bench's "
            "results.json): flipped scenarios, rates, the paired comparison",
        ),
        Argument(
            "--force",
            action="store_true",
            help="compare with --against even when the two runs used different profiles",
        ),
        Argument(
            "--output",
            metavar="FILE",
            help="where to write (default: RUN_DIR/report.html, or RUN_DIR/report-vs-OTHER.html)",
        ),
        DATA_DIR,
    ),
    handler=report_command,
)
