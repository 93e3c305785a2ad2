"""``python -m tau2_retail tasks``: the scenarios with split, persona and counts."""

from __future__ import annotations

import argparse

from tau2_retail.cli.common import DATA_DIR, Argument, Command, print_json
from tau2_retail.data.files import resolve_data_dir
from tau2_retail.data.tasks import load_tasks, render_task_table, task_rows, task_totals

__all__ = ["COMMAND", "tasks_command"]


def tasks_command(args: argparse.Namespace) -> int:
    tasks = load_tasks(resolve_data_dir(args.data_dir))
    rows = task_rows(tasks)
    totals = task_totals(tasks)
    if args.json:
        print_json({"tasks": rows, "totals": totals}, indent=2)
    elif rows:
        print(render_task_table(rows, totals))
    else:
        print("no tasks")
    return 0


COMMAND = Command(
    name="tasks",
    help="list the scenarios: split, persona, counts",
    description="One line per task: id, split, persona, gold actions, NL assertions.",
    epilog="exit status: 0 listed, 2 the data folder is missing or does not verify",
    arguments=(
        DATA_DIR,
        Argument("--json", action="store_true", help="print JSON instead of a table"),
    ),
    handler=tasks_command,
)
