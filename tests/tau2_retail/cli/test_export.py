"""``python -m tau2_retail export RUN_DIR --format tau2 -o FILE [--allow-incomplete]``: the file,
and the refusals (exit 4, one line each, nothing written)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from tau2_retail.cli.main import main
from tau2_retail.engine.harness import DataBundle
from tau2_retail.testing.loopback_server import Completion, Reply, ReplyToolCall
from tau2_retail.testing.scripted_endpoint import Fault, Request, ScriptedEndpoint
from tau2_retail.testing.tau2_runs import write_tau2_run
from tests.report.runs import write_run
from tests.tau2_retail.conftest import MIXED_TASKS, MIXED_TRIALS

REFUSED = 4


Capture = pytest.CaptureFixture[str]
WriteRun = Callable[..., Path]


def _export(run: Path, output: Path, *more: str) -> int:
    return main(["export", str(run), "--format", "tau2", "-o", str(output), *more])


@pytest.fixture
def tau2_run(
    export_bundle: DataBundle, export_endpoint: ScriptedEndpoint, tmp_path: Path
) -> WriteRun:
    """Writes ``tmp_path/NAME``: a tau2-profile run of ``task_ids`` against the export endpoint,
    with ``faults`` (task id -> fault) scripted for that run only."""

    def write(
        name: str,
        task_ids: tuple[str, ...],
        *,
        judge: bool = True,
        faults: Mapping[str, Fault] | None = None,
    ) -> Path:
        run = tmp_path / name
        added = dict(faults or {})
        export_endpoint.faults.update(added)
        try:
            write_tau2_run(run, export_bundle, export_endpoint, task_ids=task_ids, judge=judge)
        finally:
            for task in added:
                del export_endpoint.faults[task]
        return run

    return write


def test_export_writes_the_file_and_says_what_it_holds(
    mixed_run: Path, tmp_path: Path, capsys: Capture
) -> None:
    output = tmp_path / "results.json"
    assert _export(mixed_run, output) == 0
    scenarios = len(MIXED_TASKS) * MIXED_TRIALS
    assert capsys.readouterr().out == (
        f"wrote {output}: {scenarios} simulations, 114 tasks (upstream tau2-bench's results.json)\n"
    )
    assert len(json.loads(output.read_bytes())["simulations"]) == scenarios


def test_a_default_profile_run_is_refused_in_one_line(
    data_dir: Path, tmp_path: Path, capsys: Capture
) -> None:
    run = tmp_path / "default"
    write_run(run, data_dir, {"0": ["oracle"], "5": ["noop"]}, judge=False)
    assert _export(run, tmp_path / "out.json") == REFUSED
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("error: export refused: a default-profile run cannot be scored by ")
    assert err[0].endswith("run the benchmark with --tau2-profile=tau2")
    assert not (tmp_path / "out.json").exists()


def test_an_incomplete_run_is_refused_listing_what_is_missing(
    mixed_run: Path, tmp_path: Path, capsys: Capture
) -> None:
    run = tmp_path / "mixed"
    shutil.copytree(mixed_run, run)
    (run / "tau2_retail__19" / "trial-2" / "metrics.json").write_text("")  # cut short
    shutil.rmtree(run / "tau2_retail__2" / "trial-1")  # never ran
    output = tmp_path / "results.json"

    assert _export(run, output) == REFUSED
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "error: export refused: 2 scenario(s) have no complete record in the run (lost, "
        "interrupted or not run): tau2_retail__2-trial1, tau2_retail__19-trial2; finish the "
        "run first (pytest ... --tau2-resume=mixed), or pass --allow-incomplete to export the "
        "others"
    ]
    assert not output.exists()

    assert _export(run, output, "--allow-incomplete") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == (
        "note: left out 2 scenario(s) that have no complete record in the run (lost, "
        "interrupted or not run): tau2_retail__2-trial1, tau2_retail__19-trial2"
    )
    simulations = json.loads(output.read_bytes())["simulations"]
    assert len(simulations) == len(MIXED_TASKS) * MIXED_TRIALS - 2


def test_scenarios_without_a_reward_are_refused(
    tau2_run: WriteRun, tmp_path: Path, capsys: Capture
) -> None:
    run = tau2_run("nojudge", ("0", "2"), judge=False)
    assert _export(run, tmp_path / "out.json") == REFUSED
    assert capsys.readouterr().err == (
        "error: export refused: 1 scenario(s) have no tau2 reward (their reward_basis has "
        "NL_ASSERTION and the run had no judge): tau2_retail__2; run them with a judge "
        "(--tau2-judge-model), or pass --allow-incomplete to export the others\n"
    )


def test_tool_arguments_that_are_not_an_object_are_refused(
    tau2_run: WriteRun, tmp_path: Path, capsys: Capture
) -> None:
    """Upstream's model layer cannot parse such a reply (it retries the simulation and records
    ``infrastructure_error`` without messages): refused, or written as upstream records it."""
    bad = Completion(
        tool_calls=(
            ReplyToolCall(name="get_user_details", arguments='["yusuf_rossi_9620"]', id="bad"),
        )
    )

    def first_call_bad(request: Request) -> Reply | None:
        calls = [m for m in request.body["messages"] if m.get("tool_calls")]
        return bad if request.role == "agent" and not calls else None

    run = tau2_run("bad", ("0", "24"), faults={"24": first_call_bad})
    output = tmp_path / "out.json"

    assert _export(run, output) == REFUSED
    err = capsys.readouterr().err
    assert err.startswith(
        "error: export refused: 1 scenario(s) have a tool call whose arguments are not a JSON "
        "object (upstream's model layer cannot parse such a reply: it retries the simulation "
        "and records it as infrastructure_error without messages): tau2_retail__24 (message 2: "
        'get_user_details(["yusuf_rossi_9620"])); '
    )
    assert err.count("\n") == 1
    assert not output.exists()

    assert _export(run, output, "--allow-incomplete") == 0
    assert "note: wrote 1 scenario(s) as infrastructure_error" in capsys.readouterr().out
    by_task = {s["task_id"]: s for s in json.loads(output.read_bytes())["simulations"]}
    written = by_task["24"]
    assert (written["termination_reason"], written["messages"]) == ("infrastructure_error", [])
    assert written["reward_info"]["reward"] == 0.0
    assert "not a JSON object" in written["info"]["error"]
    assert by_task["0"]["termination_reason"] == "user_stop"


def _first_call(arguments: str) -> Callable[[Request], Reply | None]:
    bad = Completion(
        tool_calls=(ReplyToolCall(name="get_user_details", arguments=arguments, id="bad"),)
    )

    def first_call_bad(request: Request) -> Reply | None:
        calls = [m for m in request.body["messages"] if m.get("tool_calls")]
        return bad if request.role == "agent" and not calls else None

    return first_call_bad


def test_tool_arguments_python_reads_but_json_does_not_hold_are_written_as_strict_json(
    tau2_run: WriteRun, tmp_path: Path
) -> None:
    """A lone surrogate (the export stopped with UnicodeEncodeError) becomes U+FFFD, as the
    tools read it; NaN is null (pydantic's default for it in JSON)."""
    run = tau2_run("odd", ("24",), faults={"24": _first_call('{"user_id": "\\ud800", "x": NaN}')})
    output = tmp_path / "out.json"
    assert _export(run, output) == 0
    (simulation,) = json.loads(output.read_bytes(), parse_constant=_not_json)["simulations"]
    first = next(m for m in simulation["messages"] if m.get("tool_calls"))
    assert first["tool_calls"][0]["arguments"] == {"user_id": "\ufffd", "x": None}


def test_tool_arguments_nested_too_deeply_are_not_an_object(
    tau2_run: WriteRun, tmp_path: Path, capsys: Capture
) -> None:
    """Upstream's json.loads raises RecursionError on them (the export stopped with it)."""
    deep = '{"user_id": ' + "[" * 100_000 + "]" * 100_000 + "}"
    run = tau2_run("deep", ("24",), faults={"24": _first_call(deep)})
    assert _export(run, tmp_path / "out.json") == REFUSED
    assert "tau2_retail__24 (message 2: get_user_details({" in capsys.readouterr().err


def _not_json(constant: str) -> None:
    raise AssertionError(f"{constant} in the export: not JSON")


def test_not_a_run_directory_exits_2(tmp_path: Path, capsys: Capture) -> None:
    (tmp_path / "empty").mkdir()
    assert _export(tmp_path / "empty", tmp_path / "out.json") == 2
    assert "run_args.json is missing" in capsys.readouterr().err


def test_the_export_never_writes_over_the_runs_records(mixed_run: Path, capsys: Capture) -> None:
    before = (mixed_run / "run_args.json").read_bytes()
    assert _export(mixed_run, mixed_run / "run_args.json") == REFUSED
    assert "is the run's own run_args.json: write the file elsewhere" in capsys.readouterr().err
    assert (mixed_run / "run_args.json").read_bytes() == before
