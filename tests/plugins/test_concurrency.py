"""``--tau2-concurrency``: scenarios start ahead of their tests, each still its own test."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from tau2_retail.plugins.process import RunPlan
from tau2_retail.plugins.reporter import header_lines
from tau2_retail.settings import Inputs, Tau2Settings, resolve_settings

from .conftest import Bench, distributed

# Records, when each scenario test's call starts, how many scenarios of this process have
# started, the most that were ever in flight at once, and the objects frozen out of the
# garbage collector's passes since this conftest was imported (Python 3.12 starts with some
# frozen: 375 on 3.12.1, none on 3.11 and 3.13).
_PROBE = """\
import gc
import json
import os

import pytest

FROZEN_AT_IMPORT = gc.get_freeze_count()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    scheduler = item.funcargs.get("tau2_scheduler")
    if scheduler is None:
        return
    started = sum(scheduler.started(other) for other in item.session.items)
    line = {
        "test": item.name,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "started": started,
        "peak": scheduler.peak_in_flight,
        "frozen": gc.get_freeze_count() - FROZEN_AT_IMPORT,
        "young": gc.get_threshold()[0],
    }
    with open("probe.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\\n")
"""

TASKS = "--tau2-tasks=0,1,2,3,4,5"


def _probe(bench: Bench) -> list[dict[str, object]]:
    lines = (bench.path / "probe.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_scenarios_start_ahead_of_their_tests_up_to_the_limit(
    bench: Bench, xdist: tuple[str, ...]
) -> None:
    (bench.path / "conftest.py").write_text(_PROBE, encoding="utf-8")
    dist = ("--dist", "each") if distributed(xdist) else ()
    result = bench.run(
        *xdist, *dist, TASKS, "--tau2-concurrency=3", "--tau2-run-id=c3", "--junitxml=j.xml"
    )

    result.assert_outcomes(passed=6)
    probe = _probe(bench)
    first_per_process: dict[object, dict[str, object]] = {}
    for line in probe:
        first_per_process.setdefault(line["worker"], line)
    # each process's first test already had the next scenarios under way (an xdist worker may
    # not have received all its items yet when its first test starts)
    least = 2 if distributed(xdist) else 3
    assert all(int(str(line["started"])) >= least for line in first_per_process.values()), probe
    assert max(int(str(line["peak"])) for line in probe) <= 3
    # what existed before the first scenario is left out of the collector's full passes
    assert all(int(str(line["frozen"])) > 0 for line in probe), probe
    assert {line["young"] for line in probe} == {20_000}  # fewer passes over young objects
    # each scenario is still its own test: one junit entry and one metrics file each
    cases = ET.parse(bench.path / "j.xml").getroot().iter("testcase")
    assert sorted(case.get("name") for case in cases) == [
        f"test_tau2_retail[tau2_retail__{n}]" for n in range(6)
    ]
    assert all(bench.metrics("c3", f"tau2_retail__{n}")["is_successful"] for n in range(6))
    # (under --dist each every worker ran only its own share: no scenario twice)
    assert bench.summary("c3")["counts"]["succeeded"] == 6


def test_a_concurrency_of_one_runs_each_scenario_in_its_own_set_up(bench: Bench) -> None:
    (bench.path / "conftest.py").write_text(_PROBE, encoding="utf-8")
    result = bench.run(TASKS, "--tau2-run-id=c1")

    result.assert_outcomes(passed=6)
    assert [line["started"] for line in _probe(bench)] == [1, 2, 3, 4, 5, 6]
    # the collector as pytest has it (Python's own threshold: 700, or 2000 since 3.13)
    assert all(line["frozen"] == 0 and line["young"] < 20_000 for line in _probe(bench))


def test_a_bad_concurrency_stops_at_start_up(bench: Bench) -> None:
    result = bench.run_inprocess("--co", "--tau2-concurrency=0")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--tau2-concurrency: '0' is not valid for --tau2-concurrency; expected an integer >= 1*"]
    )


def test_x_stops_new_conversations_and_keeps_the_finished_ones_for_resume(bench: Bench) -> None:
    tasks = "--tau2-tasks=" + ",".join(str(n) for n in range(20))
    first = bench.run(
        tasks, "--tau2-agent-model=builtin:noop", "-x", "--tau2-concurrency=3", "--tau2-run-id=x"
    )

    first.assert_outcomes(failed=1)
    on_disk = sorted(p.parent.name for p in bench.run_dir("x").glob("*/metrics.json"))
    # the failing scenario and the two started ahead of it finished: their artifacts are kept
    assert len(on_disk) >= 3
    assert len(on_disk) < 20  # -x: no new conversation once the first test failed

    resumed = bench.run(tasks, "--tau2-agent-model=builtin:noop", "--tau2-resume=x")

    outcomes = resumed.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 20 - len(on_disk)
    assert bench.summary("x")["counts"]["reported"] == 20


def test_dist_each_gives_each_worker_its_own_share(bench: Bench) -> None:
    result = bench.run("-n", "2", "--dist", "each", TASKS, "--tau2-run-id=each")

    result.assert_outcomes(passed=6)  # not 12: no scenario runs on both workers
    assert bench.summary("each")["counts"]["succeeded"] == 6


def test_the_header_says_when_xdist_holds_the_concurrency_back(bench: Bench) -> None:
    loaded = bench.run("-n", "2", TASKS, "--tau2-concurrency=3", "--tau2-run-id=load")
    each = bench.run("-n", "2", "--dist", "each", TASKS, "--tau2-concurrency=3", "--tau2-run-id=e")

    loaded.assert_outcomes(passed=6)
    loaded.stdout.fnmatch_lines(
        [
            "tau2: up to 3 scenarios in flight per process",
            "tau2: --dist load holds --tau2-concurrency back: a worker keeps in flight only the "
            "scenarios xdist has sent it so far; use --dist each *",
        ]
    )
    each.assert_outcomes(passed=6)
    each.stdout.fnmatch_lines(["tau2: up to 3 scenarios in flight per process"])
    assert "holds --tau2-concurrency back" not in each.stdout.str()


@pytest.mark.parametrize(
    ("dist", "said"),
    [
        (None, None),
        ("each", None),
        ("load", "--dist load holds --tau2-concurrency back"),
        ("loadfile", "--dist loadfile holds --tau2-concurrency back"),
        ("worksteal", "takes queued items back runs their conversations again"),
    ],
)
def test_the_header_names_the_xdist_modes_that_hold_the_concurrency_back(
    dist: str | None, said: str | None
) -> None:
    settings = resolve_settings(
        Inputs(
            flag=lambda s: s.flag,
            option=lambda s: {"concurrency": "8"}.get(s.name),
            environ={},
            load_agent=lambda spec, source: None,
        ),
        Tau2Settings,
    )
    lines = header_lines(RunPlan(settings=settings, run_id="r"), dist=dist)
    held = [line for line in lines if "holds --tau2-concurrency back" in line]

    assert "tau2: up to 8 scenarios in flight per process" in lines
    if said is None:
        assert held == []
    else:
        assert len(held) == 1
        assert said in held[0]
        assert held[0].endswith("give each worker its share whole (docs/scale.md)")


# Records, for each folder the run writes, whether the helper process took it.
_WRITER_PROBE = """\
from tau2_retail.results.folder_writer import FolderWriter

_put = FolderWriter.put


async def put(self, folder):
    with open("writer.txt", "a", encoding="utf-8") as out:
        out.write(f"{self.in_child}\\n")
    return await _put(self, folder)


FolderWriter.put = put
"""


def test_with_scenarios_in_flight_a_helper_process_writes_their_folders(bench: Bench) -> None:
    (bench.path / "conftest.py").write_text(_WRITER_PROBE, encoding="utf-8")
    bench.run(TASKS, "--tau2-concurrency=3", "--tau2-run-id=ahead").assert_outcomes(passed=6)
    assert (bench.path / "writer.txt").read_text(encoding="utf-8").split() == ["True"] * 6
    assert all(bench.metrics("ahead", f"tau2_retail__{n}")["is_successful"] for n in range(6))

    (bench.path / "writer.txt").unlink()
    bench.run(TASKS, "--tau2-run-id=one").assert_outcomes(passed=6)
    # one scenario at a time: written in the process that runs it
    assert (bench.path / "writer.txt").read_text(encoding="utf-8").split() == ["False"] * 6


def test_a_helper_process_that_stops_leaves_the_folders_to_the_run(bench: Bench) -> None:
    (bench.path / "conftest.py").write_text(
        "import tau2_retail.results.folder_writer as writer\n\n"
        "writer._CHILD = 'import sys; sys.exit(3)'  # the helper ends at once\n",
        encoding="utf-8",
    )
    result = bench.run(TASKS, "--tau2-concurrency=3", "--tau2-run-id=gone")

    result.assert_outcomes(passed=6)
    assert all(bench.metrics("gone", f"tau2_retail__{n}")["is_successful"] for n in range(6))
    result.stdout.fnmatch_lines(
        ["the artifact writer process is not used (it stopped): the scenario folders are written*"]
    )
    assert bench.summary("gone")["counts"]["succeeded"] == 6
