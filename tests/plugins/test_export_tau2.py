"""``--tau2-export-tau2=PATH`` through pytest: the run's upstream results.json at its end, the
same after ``--tau2-resume`` and after ``merge`` of shards as for an uninterrupted run; the
refusals (exit 4); and an upstream results.json as the gate's baseline.

A loopback endpoint in the tau2 profile plays agent (the task's gold calls), customer and judge
(every assertion met): tasks 2, 5 and 24 score reward 1.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tau2_retail.data.tasks import Task, load_user_guidelines
from tau2_retail.engine.profiles import ProfileName, load_profile
from tau2_retail.testing.scripted_endpoint import always

from .conftest import SERVER_ERROR, Bench, ScriptedEndpoint

TASKS = ("--tau2-profile=tau2", "--tau2-tasks=2,5,24", "--tau2-trials=2")
EXAMPLE = "upstream_results_example.json"


@pytest.fixture(scope="module")
def upstream(tasks: Mapping[str, Task], data_dir: Path) -> Iterator[ScriptedEndpoint]:
    profile = load_profile(ProfileName.TAU2, data_dir, tasks=tasks)
    scripted = ScriptedEndpoint(tasks, load_user_guidelines(data_dir), profile=profile)
    with scripted.server:
        yield scripted


def _roles(endpoint: ScriptedEndpoint) -> list[str]:
    return [
        *endpoint.args("agent", max_retries=0),
        *endpoint.args("user"),
        *endpoint.args("judge"),
    ]


def _comparable(path: Path) -> dict[str, Any]:
    """An export without what differs between two runs of the same scenarios: when it was
    written and ran, and the ids (they name the run)."""
    document = copy.deepcopy(json.loads(path.read_bytes()))
    del document["timestamp"]
    for simulation in document["simulations"]:
        for key in ("id", "timestamp", "start_time", "end_time", "duration"):
            del simulation[key]
        for message in simulation["messages"]:
            del message["timestamp"]
    return document


def test_a_run_exports_at_its_end_and_a_resumed_run_exports_the_same(
    bench: Bench, upstream: ScriptedEndpoint
) -> None:
    reference = bench.path / "reference.json"
    first = bench.run(
        *TASKS, *_roles(upstream), "--tau2-run-id=ref", f"--tau2-export-tau2={reference}"
    )
    assert first.ret == 0, first.output
    assert (
        f"tau2: wrote {reference}: 6 simulations, 114 tasks (upstream tau2-bench's results.json)"
    ) in first.stdout.lines

    # the agent's endpoint fails for task 5 (infra errors) and a power loss empties a record
    upstream.faults["5"] = always(SERVER_ERROR)
    resumed = bench.path / "resumed.json"
    options = (*TASKS, *_roles(upstream), f"--tau2-export-tau2={resumed}")
    try:
        interrupted = bench.run(*options, "--tau2-run-id=res")
    finally:
        del upstream.faults["5"]
    assert interrupted.ret == pytest.ExitCode.TESTS_FAILED
    endings = [s["termination_reason"] for s in json.loads(resumed.read_bytes())["simulations"]]
    assert endings.count("infrastructure_error") == 2
    (bench.run_dir("res") / "tau2_retail__24" / "trial-1" / "metrics.json").write_text("")

    again = bench.run(*options, "--tau2-resume=res")

    assert again.ret == 0, again.output
    assert _comparable(resumed) == _comparable(reference)


def test_merged_shards_export_what_one_run_does(bench: Bench, upstream: ScriptedEndpoint) -> None:
    single = bench.path / "single.json"
    merged = bench.path / "merged.json"
    assert bench.run(*TASKS, *_roles(upstream), f"--tau2-export-tau2={single}").ret == 0
    for index in (1, 2):
        shard = bench.run(
            *TASKS,
            *_roles(upstream),
            f"--tau2-shard={index}/2",
            f"--tau2-run-id=s{index}",
            f"--tau2-export-tau2={merged}",
        )
        assert shard.ret == 0, shard.output
        assert (
            f"tau2: {merged} not written by shard {index}/2: `python -m tau2_retail merge` "
            "writes it for the merged run"
        ) in shard.stdout.lines
    assert not merged.exists()

    process = bench.python(
        "-m", "tau2_retail", "merge", str(bench.run_dir("s1")), str(bench.run_dir("s2")),
        "--into", str(bench.run_dir("merged")),
    )  # fmt: skip

    assert process.returncode == 0, process.stderr
    assert f"tau2: wrote {merged}: 6 simulations, 114 tasks" in process.stdout
    assert _comparable(merged) == _comparable(single)

    # a merge missing a shard does not write a file that would look whole
    merged.unlink()
    partial = bench.python(
        "-m", "tau2_retail", "merge", str(bench.run_dir("s1")),
        "--into", str(bench.run_dir("partial")),
    )  # fmt: skip
    assert partial.returncode == 1, partial.stderr  # the gate fails on the missing shard
    assert f"tau2: {merged} not written: shard(s) 2/2 not given" in partial.stdout
    assert not merged.exists()


def test_a_default_profile_run_is_refused_at_start_up(bench: Bench) -> None:
    result = bench.run_inprocess("--tau2-tasks=0", "--tau2-export-tau2=out.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert errors == [
        "ERROR: --tau2-export-tau2: --tau2-export-tau2 'out.json': a default-profile run cannot "
        "be scored by upstream tau2-bench: its tools find normalized ids (upstream's replay of "
        "`w2378156` fails), its agent ends the call with end_conversation (not an upstream tool) "
        "and its endings (agent_exit, the grace turn after the user's stop) are not upstream's; "
        "run the benchmark with --tau2-profile=tau2"
    ]
    assert not list(bench.output_dir.glob("*"))


def test_a_run_that_cannot_be_exported_says_why_and_exits_4(bench: Bench) -> None:
    """Offline, without a judge, task 2's reward needs the judge: the run is written, the
    export is not."""
    path = bench.path / "out.json"
    result = bench.run(
        "--tau2-profile=tau2", "--tau2-tasks=2,10", "--tau2-run-id=nj", f"--tau2-export-tau2={path}"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        [
            f"tau2: {path} not written: 1 scenario(s) have no tau2 reward *: tau2_retail__2; *",
            f"tau2: to export what is there: python -m tau2_retail export {bench.run_dir('nj')} "
            f"--format tau2 -o {path} --allow-incomplete",
        ]
    )
    assert not path.exists()
    assert (bench.run_dir("nj") / "summary.json").is_file()


def test_an_upstream_results_json_is_a_baseline_of_the_gate(
    bench: Bench, upstream: ScriptedEndpoint, data_dir: Path
) -> None:
    example = data_dir / EXAMPLE
    if not example.is_file():
        pytest.skip(f"{EXAMPLE} is not in the data folder")
    same = ("--tau2-profile=tau2", "--tau2-tasks=0,5,24", "--tau2-trials=2")
    result = bench.run(*same, *_roles(upstream), f"--tau2-baseline={example}")
    assert result.ret == 0, result.output
    result.stdout.fnmatch_lines(
        [
            "tau2 gate: profile tau2, success rate (upstream reward 1) 100.00% * baseline "
            "100.00% (change ?0.00%, max regression 0.00%), 0 flipped pass->fail, 0 fail->pass "
            "of 6 paired, p=1, infra errors 0 (max 0): PASS"
        ]
    )
    ours = bench.run("--tau2-tasks=0", f"--tau2-baseline={example}")
    assert ours.ret == pytest.ExitCode.TESTS_FAILED
    assert (
        "tau2 gate: profile default, baseline of profile tau2: their rates are not comparable; "
        "give a baseline run of the same profile: FAIL"
    ) in ours.stdout.lines
