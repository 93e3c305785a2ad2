"""``python -m tau2_retail data fetch|verify``: the pinned upstream data files (and sources).

``verify`` names the pinned upstream commit (the one to install tau2-bench at, to run its own
tools on an export), prints one sha256 over the data and the pinned sources, and derives the
tau2 profile from those sources (a construct a changed pin lacks is named).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tau2_retail.cli.common import Argument, Command
from tau2_retail.data.fetch import fetch
from tau2_retail.data.files import (
    CheckStatus,
    chosen_data_dir,
    combined_digest,
    format_checks,
    load_manifest,
    verify_folder,
)
from tau2_retail.data.upstream import load_upstream_texts
from tau2_retail.errors import DataError

__all__ = ["COMMAND", "FETCH_EPILOG", "fetch_command", "verify_command"]

FETCH_EPILOG = """\
examples:
  python -m tau2_retail data fetch
  python -m tau2_retail data fetch --from ~/src/tau2-bench
  python -m tau2_retail data fetch --from ~/src/tau2-bench/data/tau2/domains/retail
  python -m tau2_retail data fetch --base-url file:///srv/tau2-bench --dest ./tau2-data

The checkout must be at the pinned commit ({commit});
a file with another sha256 is refused, naming the file and both digests, and nothing is
written for it.

exit status: 0 all files present and verified, 2 a download or check failed"""


def _pinned_commit() -> str:
    try:
        manifest = load_manifest()
    except DataError:  # the fetch itself names the problem; the help still shows
        return "see fixtures/manifest.json"
    return f"{manifest.repository} {manifest.commit[:7]}"


def fetch_command(args: argparse.Namespace) -> int:
    # the folder runs read: with $TAU2_DATA_DIR already holding the verified files, nothing is
    # downloaded (a CI job that restored them, the README's first command on such a machine)
    dest, origin = chosen_data_dir(args.dest)
    source_dir = Path(args.source_dir).expanduser().absolute() if args.source_dir else None
    written = fetch(
        dest,
        source_dir=source_dir,
        base_url=args.base_url,
        progress=lambda message: print(message, file=sys.stderr),
    )
    total = len(load_manifest().files)
    where = "" if args.dest else f" ({origin})"
    print(
        f"{dest}{where}: {len(written)} written, {total - len(written)} already present, "
        "all verified"
    )
    return 0


def verify_command(args: argparse.Namespace) -> int:
    folder = chosen_data_dir(args.folder)[0]
    checks = verify_folder(folder)
    print(format_checks(folder, checks))
    manifest = load_manifest()
    print(f"pinned upstream: {manifest.repository} at commit {manifest.commit}")
    problems = [check for check in checks if check.status is not CheckStatus.OK]
    if problems:
        dest = "" if folder == chosen_data_dir()[0] else f" --dest {folder}"
        print(
            f"{len(problems)} of {len(checks)} files missing or different; run "
            f"`python -m tau2_retail data fetch{dest}` (add --from FOLDER to copy)"
        )
        return 1
    print(f"all {len(checks)} files match the manifest")
    print(f"sha256 of the data and the pinned sources: {combined_digest(checks)}")
    try:
        texts = load_upstream_texts(folder)
    except DataError as error:
        print(f"tau2 profile: {error}")
        return 1
    print(
        f"tau2 profile: derived from the pinned sources ({len(texts.tools)} tools, "
        f"{len(texts.user_system_prompts)} user prompts)"
    )
    return 0


COMMAND = Command(
    name="data",
    help="fetch or verify the pinned upstream data files",
    description="The upstream tau2 files this suite reads, pinned by sha256 in the manifest.",
    actions=(
        Command(
            name="fetch",
            help="download the pinned files into the cache and verify them",
            description="Download (or copy) the pinned files; each is checked against its "
            "sha256 before it is kept.",
            epilog=lambda: FETCH_EPILOG.format(commit=_pinned_commit()),
            raw_epilog=True,
            arguments=(
                Argument(
                    "--from",
                    dest="source_dir",
                    metavar="DIR",
                    help="copy from a local folder instead of downloading: a tau2-bench "
                    "checkout at the pinned commit (its root, or its data/tau2/domains/retail "
                    "folder), or a data folder such as $TAU2_DATA_DIR",
                ),
                Argument(
                    "--dest",
                    metavar="DIR",
                    help="target folder (default: $TAU2_DATA_DIR when set, else the data cache "
                    "$XDG_CACHE_HOME/tau2_retail, ~/.cache/tau2_retail when unset)",
                ),
                Argument(
                    "--base-url",
                    metavar="URL",
                    help="address prefix of the upstream paths instead of the pinned commit's: "
                    "an http(s):// mirror, or file:///PATH of a tau2-bench checkout",
                ),
            ),
            handler=fetch_command,
        ),
        Command(
            name="verify",
            help="check a folder against the manifest",
            description="Compare each file's sha256 with the manifest.",
            epilog="exit status: 0 every file matches, 1 a file is missing or different",
            arguments=(
                Argument(
                    "folder",
                    nargs="?",
                    help="folder to check (default: $TAU2_DATA_DIR, else the data cache)",
                ),
            ),
            handler=verify_command,
        ),
    ),
)
