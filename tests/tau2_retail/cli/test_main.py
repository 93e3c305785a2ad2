"""``python -m tau2_retail``: user-facing help, help text on every option, exit statuses, a
closed output pipe and a terminal that cannot encode non-ASCII."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tau2_retail.cli.main import EXIT_PIPE_CLOSED, build_parser, main
from tau2_retail.testing.timeouts import scaled_timeout


def _parsers(
    parser: argparse.ArgumentParser, path: str = ""
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path or "python -m tau2_retail", parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}".strip())


def test_the_top_help_is_for_users_and_lists_exit_statuses(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m tau2_retail")
    assert "without pytest" in out
    assert "exit status:" in out
    assert f"{EXIT_PIPE_CLOSED}  the output pipe was closed early" in out
    commands = (
        "data", "tasks", "gold", "replay", "run", "summarize", "merge", "report", "export",
        "import", "cache",
    )  # fmt: skip
    for command in commands:
        assert re.search(rf"^    {command}\b", out, re.MULTILINE), command


def test_every_option_of_every_command_has_help_text():
    missing = [
        f"{path}: {action.option_strings or action.dest}"
        for path, parser in _parsers(build_parser())
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
        and not action.help
    ]
    assert missing == []


def test_every_command_documents_its_exit_statuses():
    leaves = [
        (path, parser)
        for path, parser in _parsers(build_parser())
        if not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)
    ]
    assert {path for path, _ in leaves} == {
        "data fetch",
        "data verify",
        "tasks",
        "gold",
        "replay",
        "run",
        "summarize",
        "merge",
        "report",
        "export",
        "import",
        "cache stats",
        "cache prune",
    }
    assert [path for path, parser in leaves if "exit status:" not in (parser.epilog or "")] == []


def test_a_closed_output_pipe_ends_quietly(data_dir: Path):
    """``python -m tau2_retail gold | head -1``: no BrokenPipeError traceback."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tau2_retail", "gold", "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd="/",
    )
    assert process.stdout is not None
    assert process.stderr is not None
    process.stdout.close()  # the reader is gone before the first write
    with process.stderr:
        err = process.stderr.read().decode()
    assert process.wait(timeout=scaled_timeout(60)) == EXIT_PIPE_CLOSED
    assert err == ""


@pytest.mark.parametrize(
    "environment",
    [
        {"PYTHONIOENCODING": "ascii"},
        {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""},
    ],
    ids=["pythonioencoding-ascii", "c-locale"],
)
def test_an_ascii_terminal_gets_escapes_not_a_traceback(data_dir: Path, environment):
    """Run 17's transcript shortens a long line with ``…``: an ASCII stdout once raised
    UnicodeEncodeError there, and exit 1 said "the scenario failed"."""
    completed = subprocess.run(
        [sys.executable, "-m", "tau2_retail", "run", "17", "--data-dir", str(data_dir)],
        capture_output=True,
        env={**os.environ, **environment},
        cwd="/",
        timeout=scaled_timeout(120),
        check=False,
    )
    assert b"Traceback" not in completed.stderr, completed.stderr.decode()
    assert completed.returncode == 0
    out = completed.stdout.decode("ascii")
    assert "\\u2026 [" in out
    assert out.rstrip().endswith("result: success, tau2 reward 1")
