"""The command line: ``python -m tau2_retail <command>``.

Each command lives beside the concept it serves; this module only parses arguments and
hands off. Errors of the suite's own tree print one line to stderr and exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from tau2_retail.errors import Tau2Error

__all__ = ["build_parser", "main"]

Handler = Callable[[argparse.Namespace], int]


def _data_fetch(args: argparse.Namespace) -> int:
    from tau2_retail.data.files import fetch_command

    return fetch_command(args)


def _data_verify(args: argparse.Namespace) -> int:
    from tau2_retail.data.files import verify_command

    return verify_command(args)


def _tasks(args: argparse.Namespace) -> int:
    from tau2_retail.data.tasks import tasks_command

    return tasks_command(args)


def _gold(args: argparse.Namespace) -> int:
    from tau2_retail.data.gold import gold_command

    return gold_command(args)


def _replay(args: argparse.Namespace) -> int:
    from tau2_retail.cli.replay import replay_command

    return replay_command(args)


def _run(args: argparse.Namespace) -> int:
    from tau2_retail.cli.run import run_command

    return run_command(args)


def _summarize(args: argparse.Namespace) -> int:
    from tau2_retail.results.summary import summarize_command

    return summarize_command(args)


def _report(args: argparse.Namespace) -> int:
    from tau2_retail.report.page import report_command

    return report_command(args)


def _add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        help="folder holding the upstream files (default: $TAU2_DATA_DIR, else fixtures/cache)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tau2_retail", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    data = commands.add_parser("data", help="fetch or verify the pinned upstream data files")
    data_commands = data.add_subparsers(dest="data_command", required=True, metavar="ACTION")
    fetch = data_commands.add_parser("fetch", help="download the pinned files into the cache")
    fetch.add_argument("--from", dest="source_dir", help="copy from this local folder instead")
    fetch.add_argument("--dest", help="target folder (default: fixtures/cache)")
    fetch.add_argument("--base-url", help="override the download address prefix (mirrors, tests)")
    fetch.set_defaults(handler=_data_fetch)
    verify = data_commands.add_parser("verify", help="check a folder against the manifest")
    verify.add_argument("folder", nargs="?", help="folder to check (default: the resolved one)")
    verify.set_defaults(handler=_data_verify)

    tasks = commands.add_parser("tasks", help="list the scenarios: split, persona, counts")
    _add_data_dir(tasks)
    tasks.add_argument("--json", action="store_true", help="print JSON instead of a table")
    tasks.set_defaults(handler=_tasks)

    gold = commands.add_parser("gold", help="expected database diff, reference actions, hash")
    _add_data_dir(gold)
    gold.add_argument("ids", nargs="*", metavar="ID", help="task ids (default: all)")
    gold.set_defaults(handler=_gold)

    replay = commands.add_parser("replay", help="apply tool-call sequences to fresh databases")
    _add_data_dir(replay)
    replay.add_argument("file", help="JSON file ('-' for stdin): a list of calls or {sequences}")
    replay.set_defaults(handler=_replay)

    run = commands.add_parser("run", help="run one scenario and print the conversation")
    _add_data_dir(run)
    run.add_argument("task_id", metavar="ID")
    run.add_argument("--agent-model", default="builtin:oracle")
    run.add_argument("--agent-base-url")
    run.add_argument("--agent-api-key-env", default="OPENAI_API_KEY")
    run.add_argument("--user-model", default="builtin:customer")
    run.add_argument("--user-base-url")
    run.add_argument("--user-api-key-env", default="OPENAI_API_KEY")
    run.add_argument("--judge-model", help="judge model id at an endpoint (default: no judge)")
    run.add_argument("--judge-base-url")
    run.add_argument("--judge-api-key-env", default="OPENAI_API_KEY")
    run.add_argument("--seed", type=int, default=None)
    run.add_argument("--max-steps", type=int, help="routed-message limit (default: 200)")
    run.add_argument(
        "--no-agent-notes", action="store_true", help="agent prompt is the policy alone"
    )
    run.add_argument(
        "--profile",
        choices=("default", "tau2"),
        default="default",
        help="default (ours) or tau2 (upstream tau2-bench's prompts, tools, endings, reward)",
    )
    run.add_argument("--json", action="store_true", help="print the full result as JSON")
    run.set_defaults(handler=_run)

    summarize = commands.add_parser("summarize", help="rebuild a run's summaries from artifacts")
    summarize.add_argument("run_dir", metavar="RUN_DIR")
    summarize.set_defaults(handler=_summarize)

    report = commands.add_parser("report", help="write a run's self-contained HTML report")
    report.add_argument("run_dir", metavar="RUN_DIR")
    report.add_argument(
        "--against", metavar="OTHER_RUN", help="compare with this run: flipped scenarios, rates"
    )
    report.add_argument(
        "--force",
        action="store_true",
        help="compare with --against even when the two runs used different profiles",
    )
    report.add_argument(
        "--output",
        metavar="FILE",
        help="where to write (default: RUN_DIR/report.html, or RUN_DIR/report-vs-OTHER.html)",
    )
    report.set_defaults(handler=_report)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except Tau2Error as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
