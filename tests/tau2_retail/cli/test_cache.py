"""``python -m tau2_retail cache stats|prune PATH`` and the ``run`` command's cost and cache
options, against the loopback endpoint."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tau2_retail.cli.main import EXIT_BAD_INPUT, main
from tau2_retail.cli.run import EXIT_SUCCESS
from tau2_retail.testing.loopback_server import Completion, LoopbackOpenAIServer, ReplyToolCall

END = Completion(
    tool_calls=(ReplyToolCall(id="end", name="end_conversation"),),
    prompt_tokens=1_000,
    completion_tokens=100,
)
PRICES = json.dumps({"test-model": {"input": 2.0, "output": 10.0}})


Capture = pytest.CaptureFixture[str]
RunTask = Callable[..., int]


@pytest.fixture
def run_task(data_dir: Path, openai_server: LoopbackOpenAIServer) -> RunTask:
    """The ``run`` command on the loopback endpoint, with the test prices and more options."""
    base_url = openai_server.base_url  # taken now: a test may stop the server

    def run(*extra: str) -> int:
        return main(
            [
                "run",
                "12",  # a task whose gold database is the seed: ending at once succeeds
                "--data-dir",
                str(data_dir),
                "--agent-model=test-model",
                f"--agent-base-url={base_url}",
                "--agent-max-retries=0",
                f"--prices={PRICES}",
                *extra,
            ]
        )

    return run


def test_run_prints_the_cost_and_serves_a_second_run_from_the_cache(
    run_task: RunTask, openai_server: LoopbackOpenAIServer, tmp_path: Path, capsys: Capture
) -> None:
    cache = tmp_path / "cache.sqlite"
    openai_server.enqueue(END)
    assert run_task(f"--cache={cache}") == EXIT_SUCCESS
    out = capsys.readouterr().out
    assert "cost: $0.0030 (agent $0.0030, user $0.0000, judge $0.0000)" in out

    openai_server.stop()  # replay: the endpoint is not needed any more
    assert run_task(f"--cache={cache}", "--cache-mode=replay") == 0
    out = capsys.readouterr().out
    assert "response cache: 1 completion(s) served from the cache" in out
    assert "cost: $0.0000" in out
    assert len(openai_server.requests) == 1

    assert main(["cache", "stats", str(cache)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"cache {cache}: ")
    assert "1 entries, 0 hits" in out  # replay reads without counting
    assert "by role: agent 1" in out
    assert "by model: test-model 1" in out
    assert main(["cache", "stats", "--json", str(cache)]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["entries"], stats["by_role"], stats["format"]) == (1, {"agent": 1}, 1)

    assert main(["cache", "prune", str(cache), "--older-than", "0"]) == 0
    assert "removed 1 entries" in capsys.readouterr().out
    assert (
        json.loads((main(["cache", "stats", "--json", str(cache)]), capsys.readouterr().out)[1])[
            "entries"
        ]
        == 0
    )


def test_a_missing_or_foreign_file_exits_2(tmp_path: Path, capsys: Capture) -> None:
    assert main(["cache", "stats", str(tmp_path / "none.sqlite")]) == EXIT_BAD_INPUT
    assert "no such cache file" in capsys.readouterr().err
    foreign = tmp_path / "notes.txt"
    foreign.write_text("not a database " * 100)
    assert main(["cache", "prune", str(foreign)]) == EXIT_BAD_INPUT
    assert "not a usable cache file (file is not a database)" in capsys.readouterr().err


def test_replay_without_a_cache_file_is_bad_input(
    run_task: RunTask, openai_server: LoopbackOpenAIServer, tmp_path: Path, capsys: Capture
) -> None:
    missing = tmp_path / "missing.sqlite"
    assert run_task(f"--cache={missing}", "--cache-mode=replay") == 2
    assert "is not valid for --cache with --cache-mode replay; expected an existing cache file" in (
        capsys.readouterr().err
    )
    assert openai_server.requests == ()
