"""``python -m tau2_retail export RUN_DIR --format tau2 -o results.json``: a run as upstream's
``results.json`` (see :mod:`tau2_retail.tau2_format.export`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Final

from tau2_retail.cli.common import DATA_DIR, RUN_DIR, Argument, Command
from tau2_retail.errors import ExportRefused
from tau2_retail.tau2_format.after_run import export_lines
from tau2_retail.tau2_format.export import export_run

__all__ = ["COMMAND", "EXIT_REFUSED", "export_command"]

EXIT_REFUSED: Final = 4
"""The run cannot be exported as asked (one line per reason on stderr); nothing was written."""

FORMATS: Final = ("tau2",)


def export_command(args: argparse.Namespace) -> int:
    try:
        result = export_run(
            Path(args.run_dir),
            Path(args.output),
            data_dir=args.data_dir,
            allow_incomplete=args.allow_incomplete,
        )
    except ExportRefused as refused:
        for reason in refused.reasons:
            print(f"error: export refused: {reason}", file=sys.stderr)
        return EXIT_REFUSED
    sys.stdout.write("\n".join(export_lines(result)) + "\n")
    return 0


COMMAND = Command(
    name="export",
    help="export a run to upstream tau2-bench's results.json",
    description="Write a tau2-profile run as one results.json that upstream tau2-bench's own "
    "tools read: `tau2 view`, `tau2 evaluate-trajs` (re-scores it), `tau2 submit prepare` and "
    "`tau2 submit verify-trajs` (leaderboard). Every task of the run's split is embedded as in "
    "the pinned tasks.json; each scenario and trial is one simulation with our reward.",
    epilog=(
        "exit status: 0 written, 2 not a run directory, unreadable artifact or data, "
        f"{EXIT_REFUSED} refused (a default-profile run, scenarios missing or without a reward, "
        "a tool call upstream cannot hold; one line each, nothing written)"
    ),
    arguments=(
        RUN_DIR,
        Argument(
            "--format",
            required=True,
            choices=FORMATS,
            help="tau2: upstream tau2-bench's results.json (the pinned commit's data model)",
        ),
        Argument("-o", "--output", required=True, metavar="FILE", help="the file to write"),
        Argument(
            "--allow-incomplete",
            action="store_true",
            help="export what is there: leave out scenarios without a complete record or a "
            "reward, write a conversation upstream cannot hold as upstream records it; each "
            "is said",
        ),
        DATA_DIR,
    ),
    handler=export_command,
)
