"""Parse the command line and hand off to the command's module."""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Sequence
from typing import Final

from tau2_retail.cli import (
    cache,
    data,
    export,
    gold,
    import_,
    merge,
    replay,
    report,
    run,
    summarize,
    tasks,
)
from tau2_retail.cli.common import Handler, ParserSource
from tau2_retail.errors import RunInUse, Tau2Error

__all__ = ["EXIT_BAD_INPUT", "EXIT_IN_USE", "EXIT_PIPE_CLOSED", "build_parser", "main"]

EXIT_BAD_INPUT: Final = 2
EXIT_IN_USE: Final = 4
"""A live run holds the run folder (summarize, merge): as pytest's start-up refusal of it."""
EXIT_PIPE_CLOSED: Final = 141
"""128 + SIGPIPE, what a shell reports for a program stopped by a closed pipe."""

DESCRIPTION: Final = """\
The tau2-bench retail scenarios without pytest: fetch and check the upstream data, list the
tasks and their expected outcomes, run one scenario and watch its conversation, and rebuild,
merge (shards) or report a pytest run's results, and exchange runs with upstream tau2-bench
(export to and import from its results.json). The benchmark itself runs under pytest:
`pytest --pyargs tests_tau2_retail` (or `pytest -k tau2_retail` in the checkout).
"""

EPILOG: Final = f"""\
exit status:
  0    success
  1    the command's check failed (run: the scenario failed; data verify: a file differs)
  {EXIT_BAD_INPUT}    bad input: unknown option or task id, missing or altered data, unreadable run
  3    run: infra_error (an endpoint failed; not the model's fault)
  {EXIT_IN_USE}    summarize, merge: a live run holds the run folder (its pid is named);
       export: refused (the run cannot become upstream's results.json as asked)
  {EXIT_PIPE_CLOSED}  the output pipe was closed early (e.g. piped into head)

`python -m tau2_retail COMMAND --help` describes each command's options.
"""

COMMANDS: Final[Sequence[ParserSource]] = (
    data.COMMAND,
    tasks.COMMAND,
    gold.COMMAND,
    replay.COMMAND,
    run,  # builds its own sub-parser until it declares a Command
    summarize.COMMAND,
    merge.COMMAND,
    report.COMMAND,
    export.COMMAND,
    import_.COMMAND,
    cache.COMMAND,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tau2_retail",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def _tolerate_unencodable_output() -> None:
    """Print what the terminal's encoding cannot hold as escapes instead of crashing.

    Under ``PYTHONIOENCODING=ascii``, ``LC_ALL=C`` or a latin-1 locale, a transcript's ``…`` or
    a non-ASCII run path raised UnicodeEncodeError, which exited 1: a status that means "the
    scenario failed" or "the gate fails".
    """
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    _tolerate_unencodable_output()
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except RunInUse as error:
        print(
            f"error: {error}; wait for it to end (a live run writes its own summaries), then "
            "run this command again",
            file=sys.stderr,
        )
        return EXIT_IN_USE
    except Tau2Error as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        # The reader went away (`... | head`): stop quietly. Point stdout at devnull so the
        # interpreter's final flush does not raise again (Python's documented recipe).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_PIPE_CLOSED
