"""``python -m tau2_retail replay FILE``: tool-call sequences applied to fresh databases.

Input: a JSON list of calls ``[{"name", "arguments"}]`` (arguments as an object, or as the
JSON text a model would send), or ``{"sequences": [[...], ...]}`` for several independent
sequences. Output per sequence: ``{"outputs": [{"content", "error"}], "db_diff", "db_hash"}``
(a list of those for ``sequences``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tau2_retail.cli.common import DATA_DIR, Argument, Command, print_json
from tau2_retail.data.files import resolve_data_dir
from tau2_retail.data.seed import load_seed
from tau2_retail.errors import DataError
from tau2_retail.tools.database import SeedDatabase
from tau2_retail.tools.dispatch import ToolResult, dispatch, dispatch_json
from tau2_retail.tools.store import Store

__all__ = ["COMMAND", "replay_command", "replay_sequence"]


def _call(store: Store, call: Any, where: str) -> ToolResult:
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise DataError(f"{where}: each call must be an object with a string 'name'")
    arguments = call.get("arguments", {})
    if isinstance(arguments, str):
        return dispatch_json(store, call["name"], arguments)
    return dispatch(store, call["name"], arguments)


def replay_sequence(
    seed: SeedDatabase, calls: list[Any], *, where: str = "input"
) -> dict[str, Any]:
    """Replay one sequence on a fresh store and describe the outcome."""
    store = Store(seed)
    outputs = [_call(store, call, f"{where}[{i}]").to_json() for i, call in enumerate(calls)]
    return {"outputs": outputs, "db_diff": store.diff_from_seed(), "db_hash": store.hash()}


def _read_input(file: str) -> Any:
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        return json.loads(text)
    except OSError as error:
        raise DataError(f"cannot read {file}: {error}") from error
    except json.JSONDecodeError as error:
        raise DataError(f"{file} is not valid JSON: {error}") from error


def replay_command(args: argparse.Namespace) -> int:
    document = _read_input(args.file)
    seed = load_seed(resolve_data_dir(args.data_dir))
    result: Any
    if isinstance(document, list):
        result = replay_sequence(seed, document, where=args.file)
    elif isinstance(document, dict) and isinstance(document.get("sequences"), list):
        sequences = document["sequences"]
        for index, sequence in enumerate(sequences):
            if not isinstance(sequence, list):
                raise DataError(f"{args.file}: sequences[{index}] is not a list of calls")
        result = [
            replay_sequence(seed, sequence, where=f"{args.file}:sequences[{index}]")
            for index, sequence in enumerate(sequences)
        ]
    else:
        raise DataError(
            f"{args.file}: expected a list of calls or an object with a 'sequences' list"
        )
    print_json(result)
    return 0


COMMAND = Command(
    name="replay",
    help="apply tool-call sequences to fresh databases",
    description="Apply tool calls to a fresh copy of the seed database and print, per "
    "sequence, each call's output, the database diff and its hash, as JSON.",
    epilog="exit status: 0 replayed (tool errors are outputs), 2 unreadable or malformed input",
    arguments=(
        DATA_DIR,
        Argument(
            "file",
            help="JSON file ('-' for stdin): a list of {name, arguments} calls, or "
            '{"sequences": [[...], ...]}',
        ),
    ),
    handler=replay_command,
)
