"""``python -m tau2_retail cache stats|prune PATH``: look after a response cache file."""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path

from tau2_retail import codec
from tau2_retail.cli.common import Argument, Command, at_least, print_json
from tau2_retail.errors import ArtifactError
from tau2_retail.models.cache import cache_stats, prune_cache

__all__ = ["COMMAND", "cache_command"]


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


def cache_command(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if not path.is_file():
        raise ArtifactError(f"{path}: no such cache file")
    try:
        if args.action == "stats":
            stats = cache_stats(path)
            if args.json:
                print_json(codec.encode(stats), indent=2)
                return 0
            print(
                f"cache {path}: {_size(stats.size_bytes)}, {stats.entries} entries, "
                f"{stats.hits} hits"
            )
            for title, counts in (("role", stats.by_role), ("model", stats.by_model)):
                shown = ", ".join(f"{name} {n}" for name, n in counts.items()) or "none"
                print(f"  by {title}: {shown}")
            if stats.other_format:
                print(
                    f"  {stats.other_format} entries of another request format (never "
                    "served; `prune` removes them)"
                )
            return 0
        removed, before, after = prune_cache(path, older_than_days=args.older_than)
    except sqlite3.Error as error:
        raise ArtifactError(f"{path}: not a usable cache file ({error})") from error
    print(f"cache {path}: removed {removed} entries; {_size(before)} -> {_size(after)}")
    return 0


_PATH = Argument("path", metavar="PATH", help="the cache file")

COMMAND = Command(
    name="cache",
    help="size, entries and hits of a response cache file (--tau2-cache); prune it",
    description="Inspect or prune the SQLite file of the response cache a run wrote with "
    "--tau2-cache PATH.",
    epilog="exit status: 0 done, 2 no such file or not a cache file",
    actions=(
        Command(
            name="stats",
            help="size, entries (by role and model) and hits",
            description="Print the size, the entries (by role and by model) and the hits of a "
            "response cache file.",
            epilog="exit status: 0 printed, 2 no such file or not a cache file",
            arguments=(
                _PATH,
                Argument("--json", action="store_true", help="print JSON instead of text"),
            ),
        ),
        Command(
            name="prune",
            help="remove entries of other request formats (and, with --older-than, unused "
            "ones); compact the file",
            description="Remove the entries no run can be served from (another request format) "
            "and, with --older-than, those unused for that many days; then compact the file.",
            epilog="exit status: 0 pruned, 2 no such file or not a cache file",
            arguments=(
                _PATH,
                Argument(
                    "--older-than",
                    type=at_least(0, "a number of days", float),
                    metavar="DAYS",
                    help="also remove the entries not used for this many days (a replay, "
                    "which opens the file read-only, records no use)",
                ),
            ),
        ),
    ),
    handler=cache_command,
)
