"""What every command shares: its declaration (:class:`Command`) and the common arguments.

A command module declares ``COMMAND = Command(...)``: its name, help, description, epilog,
arguments, handler and, for ``data`` and ``cache``, its actions (each a ``Command`` too);
:func:`tau2_retail.cli.main.build_parser` turns the declarations into sub-parsers, so the
``add_parser`` / ``add_argument`` / ``set_defaults`` calls are written once, here.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeAlias, TypeVar

__all__ = [
    "DATA_DIR",
    "RUN_DIR",
    "Argument",
    "Command",
    "Handler",
    "ParserSource",
    "SubParsers",
    "add_data_dir",
    "at_least",
    "print_json",
]

SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Handler: TypeAlias = Callable[[argparse.Namespace], int]
Number = TypeVar("Number", int, float)


class Argument:
    """One ``add_argument`` call, declared: the flags (or the positional name) and keywords."""

    def __init__(self, *flags: str, **options: Any) -> None:
        self.flags = flags
        self.options = options

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(*self.flags, **self.options)


@dataclass(frozen=True, kw_only=True)
class Command:
    """A sub-command: its texts, its arguments, and either a handler or actions.

    ``epilog`` may be a function, called when the parser is built (``data fetch`` names the
    pinned commit read from the manifest); ``raw_epilog`` keeps its line breaks.
    """

    name: str
    help: str
    description: str
    epilog: str | Callable[[], str] | None = None
    raw_epilog: bool = False
    arguments: Sequence[Argument] = ()
    handler: Handler | None = None
    actions: Sequence[Command] = ()

    def add_parser(self, commands: SubParsers) -> argparse.ArgumentParser:
        parser = commands.add_parser(
            self.name,
            help=self.help,
            description=self.description,
            epilog=self.epilog() if callable(self.epilog) else self.epilog,
            formatter_class=(
                argparse.RawDescriptionHelpFormatter if self.raw_epilog else argparse.HelpFormatter
            ),
        )
        for argument in self.arguments:
            argument.add_to(parser)
        if self.actions:
            actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
            for action in self.actions:
                action.add_parser(actions)
        if self.handler is not None:
            parser.set_defaults(handler=self.handler)
        return parser


class ParserSource(Protocol):
    """What ``build_parser`` asks of a command: a :class:`Command`, or a module that still
    builds its sub-parser by hand (``cli/run.py``)."""

    def add_parser(self, commands: SubParsers, /) -> object: ...


def _folder(text: str) -> Path | None:
    """An argparse ``type``: a folder, or None for an empty value (the default applies)."""
    return Path(text) if text else None


DATA_DIR = Argument(
    "--data-dir",
    metavar="DIR",
    type=_folder,
    help="folder holding the upstream files (default: $TAU2_DATA_DIR, else the data cache "
    "that `data fetch` fills: $XDG_CACHE_HOME/tau2_retail, ~/.cache/tau2_retail when unset)",
)
RUN_DIR = Argument("run_dir", metavar="RUN_DIR", help="a run directory, e.g. tau2_runs/<run id>")


def at_least(
    minimum: Number, what: str, convert: Callable[[str], Number]
) -> Callable[[str], Number]:
    """An argparse ``type``: ``convert`` the text, refusing a value below ``minimum``
    (``at_least(0, "a number of days", float)``; ``what`` names the value in the messages)."""

    def parse(raw: str) -> Number:
        try:
            value = convert(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{raw!r} is not {what}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"got {value:g}; expected {what} >= {minimum:g}")
        return value

    return parse


def add_data_dir(parser: argparse.ArgumentParser) -> None:
    DATA_DIR.add_to(parser)


def print_json(document: Any, *, indent: int | None = None) -> None:
    """Write ``document`` to stdout as JSON and end the line."""
    json.dump(document, sys.stdout, indent=indent)
    sys.stdout.write("\n")
