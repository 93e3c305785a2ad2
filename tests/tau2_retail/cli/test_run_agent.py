"""``python -m tau2_retail run TASK --agent package.module:factory``: your agent, one scenario."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tau2_retail.cli.main import main

AGENT = """\
class Ender:
    name = "ender"

    def respond(self, messages, tools):
        return {"tool_calls": [{"id": "e", "function": {"name": "end_conversation"}}]}


class Raiser:
    def respond(self, messages, tools):
        raise LookupError("no route")
"""


@pytest.fixture
def agent_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    (tmp_path / "cli_agents_x.py").write_text(AGENT, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "cli_agents_x"
    sys.modules.pop("cli_agents_x", None)


def test_an_agent_as_code_runs_one_scenario(data_dir, agent_module, capsys):
    # task 10's gold database is the seed: ending at once succeeds
    assert main(["run", "10", "--agent", f"{agent_module}:Ender", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert f"agent: code {agent_module}:Ender (ender); user: builtin:customer" in out
    assert "agent -> end_conversation({})" in out
    assert "result: success" in out


def test_a_raising_agent_fails_the_scenario(data_dir, agent_module, capsys):
    assert (
        main(["run", "10", "--agent", f"{agent_module}:Raiser", "--data-dir", str(data_dir)]) == 1
    )
    assert "ending: agent_error (agent: respond() raised LookupError: no route)" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--agent", "cli_agents_x:Nope"], "cli_agents_x:Nope: module 'cli_agents_x' has no"),
        (
            ["--agent", "cli_agents_x:Ender", "--agent-model", "gpt-x"],
            "--agent 'cli_agents_x:Ender' and --agent-model both name the agent",
        ),
    ],
)
def test_a_bad_agent_is_a_usage_error(data_dir, agent_module, capsys, extra, expected):
    assert main(["run", "10", *extra, "--data-dir", str(data_dir)]) == 2
    assert expected in capsys.readouterr().err


def test_an_agent_in_src_not_importable_gets_the_fix_for_this_command(
    data_dir, tmp_path, monkeypatch, capsys
):
    """The fix named was pytest's pythonpath setting, which this command never reads."""
    (tmp_path / "src" / "acme_cli_agent_x9").mkdir(parents=True)
    (tmp_path / "src" / "acme_cli_agent_x9" / "__init__.py").write_text(AGENT, encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # not on sys.path: pytest's own import mode keeps it off

    spec = "acme_cli_agent_x9:Ender"
    assert main(["run", "10", "--agent", spec, "--data-dir", str(data_dir)]) == 2
    err = capsys.readouterr().err
    assert err.strip().endswith(
        "it is in src/acme_cli_agent_x9, but src is not on sys.path: install your project "
        "(pip install -e .) or add src to PYTHONPATH"
    )
    # the fix it names works
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    try:
        assert main(["run", "10", "--agent", spec, "--data-dir", str(data_dir)]) == 0
    finally:
        sys.modules.pop("acme_cli_agent_x9", None)
