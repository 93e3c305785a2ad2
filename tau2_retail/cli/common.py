"""What every command shares: the sub-parser type and the ``--data-dir`` option."""

from __future__ import annotations

import argparse
from typing import TypeAlias

__all__ = ["SubParsers", "add_data_dir"]

SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help="folder holding the upstream files (default: $TAU2_DATA_DIR, else the data cache "
        "that `data fetch` fills: fixtures/cache in a checkout, ~/.cache/tau2_retail when "
        "installed)",
    )
