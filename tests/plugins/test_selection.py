"""Which scenarios a run has: ids, ``--tau2-tasks``, ``--tau2-split``, trials, and markers."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest

from tau2_retail.data.tasks import Task

from .conftest import Bench, distributed

NODE = "test_scenarios.py::test_tau2_retail[{}]"


def collected(result: pytest.RunResult) -> list[str]:
    """The node ids listed by ``--co -q``."""
    return [line for line in result.stdout.lines if line.startswith("test_scenarios.py::")]


def nodes(*scenario_ids: str) -> list[str]:
    return [NODE.format(scenario_id) for scenario_id in scenario_ids]


def test_a_default_run_has_the_114_scenarios_in_task_order(bench: Bench) -> None:
    result = bench.run_inprocess("--co", "-q")

    assert result.ret == pytest.ExitCode.OK
    assert collected(result) == nodes(*(f"tau2_retail__{n}" for n in range(114)))


def test_tau2_tasks_selects_exactly_those_ids(bench: Bench) -> None:
    # 0,3 must not pick tau2_retail__30..39 or __103
    result = bench.run_inprocess("--co", "-q", "--tau2-tasks=3, 0")

    assert collected(result) == nodes("tau2_retail__0", "tau2_retail__3")


def test_tau2_tasks_takes_inclusive_ranges(bench: Bench) -> None:
    # what a new user typed first (0-30 was refused); 98-101 crosses a digit count
    result = bench.run_inprocess("--co", "-q", "--tau2-tasks=98-101,5,0-2")

    assert collected(result) == nodes(
        *(f"tau2_retail__{n}" for n in (0, 1, 2, 5, 98, 99, 100, 101))
    )


def test_a_range_past_the_last_task_is_refused_with_the_valid_ids(bench: Bench) -> None:
    result = bench.run_inprocess("--co", "-q", "--tau2-tasks=110-120")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        "unknown task id(s) 114, 115, 116, 117, 118, 119, 120 for --tau2-tasks; valid ids are "
        "0..113"
    ) in result.stderr.str()


def test_trials_number_the_ids(bench: Bench) -> None:
    result = bench.run_inprocess("--co", "-q", "--tau2-tasks=0,3", "--tau2-trials=2")

    assert collected(result) == nodes(
        "tau2_retail__0-trial1",
        "tau2_retail__0-trial2",
        "tau2_retail__3-trial1",
        "tau2_retail__3-trial2",
    )


def test_tau2_split_test_has_the_40_test_tasks(bench: Bench, tasks: Mapping[str, Task]) -> None:
    result = bench.run_inprocess("--co", "-q", "--tau2-split=test")

    test_ids = [task.id for task in tasks.values() if task.split == "test"]
    assert len(test_ids) == 40
    assert collected(result) == nodes(*(f"tau2_retail__{n}" for n in test_ids))


@pytest.mark.parametrize(
    ("expression", "wanted", "count"),
    [
        ("tau2_split_test", lambda task: task.split == "test", 40),
        ("tau2_split_train", lambda task: task.split == "train", 74),
        ("tau2_nl", lambda task: bool(task.nl_assertions), 40),
        (
            "tau2_split_test and tau2_nl",
            lambda task: task.split == "test" and task.nl_assertions,
            None,
        ),
    ],
    ids=["test", "train", "nl", "test-and-nl"],
)
def test_markers_select_by_split_and_nl_assertions(
    bench: Bench,
    tasks: Mapping[str, Task],
    expression: str,
    wanted: Callable[[Task], object],
    count: int | None,
) -> None:
    result = bench.run_inprocess("--co", "-q", "-m", expression)

    ids = [task.id for task in tasks.values() if wanted(task)]
    assert count is None or len(ids) == count
    assert collected(result) == nodes(*(f"tau2_retail__{n}" for n in ids))
    assert f"{len(ids)}/114 tests collected ({114 - len(ids)} deselected)" in result.stdout.str()


def test_the_scenarios_run_are_those_selected(bench: Bench, xdist: tuple[str, ...]) -> None:
    # 10 is train, 12 and 62 are test: only those two run, and only they are in the summary
    result = bench.run(
        *xdist,
        "-m",
        "tau2_split_test",
        "--tau2-tasks=10,12,62",
        "--tau2-agent-model=builtin:noop",
        "--tau2-run-id=sel",
    )

    # xdist's controller does not report the deselections its workers make
    result.assert_outcomes(passed=2, deselected=None if distributed(xdist) else 1)
    summary = bench.summary("sel")
    assert [row["scenario_id"] for row in summary["scenarios"]] == [
        "tau2_retail__12",
        "tau2_retail__62",
    ]
    assert summary["counts"]["expected"] == 2
    assert summary["lost"] == []
    assert sorted(p.name for p in bench.run_dir("sel").iterdir() if p.is_dir()) == [
        "tau2_retail__12",
        "tau2_retail__62",
    ]


def test_four_shards_split_the_selected_scenarios_between_them(bench: Bench) -> None:
    shares = [
        collected(bench.run_inprocess("--co", "-q", "--tau2-trials=2", f"--tau2-shard={i}/4"))
        for i in range(1, 5)
    ]

    everything = collected(bench.run_inprocess("--co", "-q", "--tau2-trials=2"))
    assert sorted(node for share in shares for node in share) == sorted(everything)
    assert all(40 <= len(share) <= 74 for share in shares)  # 228 scenarios, about 57 each
    for share in shares:  # both trials of a task in the same share
        tasks = {node.split("[")[1].split("-")[0] for node in share}
        assert len(share) == 2 * len(tasks)


def test_a_bad_shard_stops_at_start_up(bench: Bench) -> None:
    result = bench.run_inprocess("--co", "--tau2-shard=5/4")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*'5/4' is not valid for --tau2-shard; expected I/N with 1 <= I <= N, e.g. 2/4*"]
    )


SKIPPING_CONFTEST = """
import pytest

def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid.endswith("[tau2_retail__12]"):
            item.add_marker(pytest.mark.skip(reason="quick CI"))
        if item.nodeid.endswith("[tau2_retail__62]"):
            item.add_marker(pytest.mark.skipif(True, reason="slow"))
        if item.nodeid.endswith("[tau2_retail__0]"):
            item.add_marker(pytest.mark.xfail(reason="known bad", strict=False))
        if item.nodeid.endswith("[tau2_retail__24]"):
            item.add_marker(pytest.mark.xfail(reason="not now", run=False))
"""


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_scenario_a_users_marker_skips_is_lost_as_skipped(bench: Bench, workers: str) -> None:
    """A skip marker added by a team's hook kept the scenario from running, and the run said
    ``no metrics.json (interrupted, or its process was lost)``, a crash's reason."""
    (bench.path / "conftest.py").write_text(SKIPPING_CONFTEST, encoding="utf-8")

    run = bench.run(
        "-n", workers, "--tau2-tasks=0,10,12,24,62", "--tau2-agent-model=builtin:noop",
        "--tau2-run-id=skips",
    )  # fmt: skip

    summary = bench.summary("skips")
    assert summary["lost_reasons"] == {
        "tau2_retail__12": "skipped: quick CI",
        "tau2_retail__24": "skipped: xfail [NOTRUN] not now",
        "tau2_retail__62": "skipped: slow",
    }
    # an expected failure still runs and is scored
    assert [row["scenario_id"] for row in summary["scenarios"]] == [
        "tau2_retail__0",
        "tau2_retail__10",
    ]
    assert "LOST tau2_retail__12: skipped: quick CI" in run.stdout
