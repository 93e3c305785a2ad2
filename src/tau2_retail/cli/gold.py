"""``python -m tau2_retail gold [ID ...]``: each task's expected outcome as JSON."""

from __future__ import annotations

import argparse

from tau2_retail.cli.common import DATA_DIR, Argument, Command, print_json
from tau2_retail.data.files import resolve_data_dir
from tau2_retail.data.gold import GoldBook
from tau2_retail.data.seed import load_seed
from tau2_retail.data.tasks import load_tasks

__all__ = ["COMMAND", "gold_command"]


def gold_command(args: argparse.Namespace) -> int:
    data_dir = resolve_data_dir(args.data_dir)
    tasks = load_tasks(data_dir)
    book = GoldBook(seed=load_seed(data_dir), tasks=tasks)
    ids = list(args.ids) or list(tasks)
    output = {task_id: book[task_id].to_json() for task_id in ids}
    print_json(output, indent=1)
    return 0


COMMAND = Command(
    name="gold",
    help="expected database diff, reference actions and hash of tasks",
    description="Replay each task's gold actions on a fresh database and print the result "
    "as JSON: {id: {db_diff, actions, db_hash}}.",
    epilog="exit status: 0 printed, 2 unknown task id or a data problem",
    arguments=(DATA_DIR, Argument("ids", nargs="*", metavar="ID", help="task ids (default: all)")),
    handler=gold_command,
)
