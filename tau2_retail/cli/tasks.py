"""``python -m tau2_retail tasks``: the scenarios with split, persona and counts."""

from __future__ import annotations

import argparse
import json

from tau2_retail.cli.common import SubParsers, add_data_dir
from tau2_retail.data.files import resolve_data_dir
from tau2_retail.data.tasks import load_tasks, render_task_table, task_rows, task_totals

__all__ = ["add_parser", "tasks_command"]


def add_parser(commands: SubParsers) -> None:
    tasks = commands.add_parser(
        "tasks",
        help="list the scenarios: split, persona, counts",
        description="One line per task: id, split, persona, gold actions, NL assertions.",
        epilog="exit status: 0 listed, 2 the data folder is missing or does not verify",
    )
    add_data_dir(tasks)
    tasks.add_argument("--json", action="store_true", help="print JSON instead of a table")
    tasks.set_defaults(handler=tasks_command)


def tasks_command(args: argparse.Namespace) -> int:
    tasks = load_tasks(resolve_data_dir(args.data_dir))
    rows = task_rows(tasks)
    totals = task_totals(tasks)
    if args.json:
        print(json.dumps({"tasks": rows, "totals": totals}, indent=2))
    elif rows:
        print(render_task_table(rows, totals))
    else:
        print("no tasks")
    return 0
