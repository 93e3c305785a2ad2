"""No green that hides errors (issue 31, item 3).

Under pytest 8.3.5 every scenario's test errored (``fixture 'subtests' not found``) after its
scenario had run and recorded a pass, and the run said 100% and PASS with exit 0. An older pytest
is refused at start-up; and in general a scenario whose test errored is never a success and
never lets the gate pass. The conftest below breaks the tests exactly as pytest 8 did: the
``subtests`` fixture fails in set-up, after ``tau2_outcome`` ran the scenario.
"""

from __future__ import annotations

import pytest

from tau2_retail.plugins.errored import ErroredScenarios, _shortened
from tau2_retail.plugins.tau2_plugin import check_pytest_version

from .conftest import Bench, usage_errors

PYTEST_8 = """
import pytest

@pytest.fixture
def subtests():
    raise LookupError("fixture 'subtests' not found")
"""
GATE = ("--tau2-tasks=10,12", "--tau2-min-pass-rate=0.5", "--tau2-max-infra-errors=5")


def test_a_pytest_older_than_9_is_refused_at_start_up(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pytest, "version_tuple", (8, 3, 5))

    result = bench.run_inprocess("--co", "--tau2-tasks=10")

    assert usage_errors(result) == [
        "ERROR: tau2-retail-pytest needs pytest 9.0 or later (the benchmark's NL assertions are "
        "pytest's built-in subtests); this is pytest 8.3.5: pip install 'pytest>=9.0'"
    ]
    assert not bench.output_dir.exists()


@pytest.mark.parametrize(
    ("version", "refused"),
    [((8, 4, 2), True), ((9, 0, 0), False), ((9, 1, "dev3"), False), ((10, 0), False)],
)
def test_the_version_check(version: tuple[int | str, ...], refused: bool) -> None:
    if refused:
        with pytest.raises(pytest.UsageError, match=r"needs pytest 9\.0 or later"):
            check_pytest_version(version)
    else:
        check_pytest_version(version)


def test_a_scenario_whose_test_errored_is_lost_and_fails_the_gate(
    bench: Bench, xdist: tuple[str, ...]
) -> None:
    (bench.path / "conftest.py").write_text(PYTEST_8, encoding="utf-8")

    run = bench.run(*xdist, *GATE, "--tau2-run-id=broken")

    # the scenarios ran and passed, their tests errored: not a success, and the gate fails
    assert run.ret == pytest.ExitCode.TESTS_FAILED, run.output
    summary = bench.summary("broken")
    assert summary["counts"]["succeeded"] == 0
    assert summary["lost"] == ["tau2_retail__10", "tau2_retail__12"]
    reason = summary["lost_reasons"]["tau2_retail__10"]
    assert reason.startswith("its test errored (set-up: "), reason
    assert "fixture 'subtests' not found" in reason
    assert "Overall success rate: 100.00%" not in run.stdout
    (gate,) = [line for line in run.stdout.splitlines() if line.startswith("tau2 gate:")]
    assert "2 scenario test(s) errored (first: tau2_retail__10: its test errored" in gate
    assert gate.endswith(": FAIL"), gate
    assert "LOST tau2_retail__10: its test errored (set-up: " in run.stdout

    # the records are set aside: summarize agrees, and a resume runs them again
    folder = bench.run_dir("broken") / "tau2_retail__10"
    assert not (folder / "metrics.json").exists()
    assert "fixture 'subtests' not found" in (folder / "test_error.txt").read_text()
    summarized = bench.python("-m", "tau2_retail", "summarize", str(bench.run_dir("broken")))
    assert summarized.returncode == 0, summarized.stderr
    assert bench.summary("broken")["counts"]["succeeded"] == 0

    (bench.path / "conftest.py").unlink()
    resumed = bench.run(*xdist, *GATE, "--tau2-resume=broken")
    assert resumed.ret == pytest.ExitCode.OK, resumed.output
    assert bench.summary("broken")["counts"]["succeeded"] == 2
    assert not (folder / "test_error.txt").exists()


def test_a_test_failing_although_its_scenario_passed_is_not_a_success(bench: Bench) -> None:
    (bench.path / "conftest.py").write_text(
        "import pytest\n\n"
        "@pytest.fixture(autouse=True)\n"
        "def broken_teardown():\n"
        "    yield\n"
        "    raise RuntimeError('teardown of a user fixture')\n",
        encoding="utf-8",
    )

    run = bench.run("-n", "0", *GATE, "--tau2-run-id=teardown")

    assert run.ret == pytest.ExitCode.TESTS_FAILED, run.output
    summary = bench.summary("teardown")
    assert summary["counts"]["succeeded"] == 0
    assert summary["lost_reasons"]["tau2_retail__12"] == (
        "its test errored (teardown: RuntimeError: teardown of a user fixture)"
    )


A_WRITE_THAT_FAILS = """
import pytest

from tau2_retail.errors import ArtifactError

@pytest.fixture(autouse=True)
def a_write_that_fails(tmp_path):
    path = tmp_path / ("f" * 300)
    try:
        path.write_text("", encoding="utf-8")
    except OSError as error:
        raise ArtifactError(f"cannot write {path}: {error}") from error
"""


def test_the_lost_reason_is_the_error_under_xdist_and_keeps_its_cause(
    bench: Bench, xdist: tuple[str, ...]
) -> None:
    # xdist's controller renders a worker's report after a "[gw0] linux -- Python ..." line,
    # once taken for the error; and a cut at 300 characters lost the errno after a long path
    (bench.path / "conftest.py").write_text(A_WRITE_THAT_FAILS, encoding="utf-8")

    run = bench.run(*xdist, "--tau2-tasks=10", "--tau2-run-id=long")

    assert run.ret == pytest.ExitCode.TESTS_FAILED, run.output
    reason = bench.summary("long")["lost_reasons"]["tau2_retail__10"]
    assert reason.startswith("its test errored (set-up: ArtifactError: cannot write /"), reason
    assert reason.endswith(" … [Errno 36] File name too long)"), reason
    assert len(reason) <= len("its test errored (set-up: )") + 300
    assert f"LOST tau2_retail__10: {reason}" in run.stdout
    all_summary = (bench.run_dir("long") / "all_summary.txt").read_text(encoding="utf-8")
    assert reason in all_summary


def test_the_gate_names_the_first_errored_scenario_in_task_order_not_arrival_order() -> None:
    # under xdist the workers report in any order; the gate's line must not depend on it
    errored = ErroredScenarios()
    for scenario in ("tau2_retail__12", "tau2_retail__100", "tau2_retail__9"):
        errored.reasons[scenario] = f"its test errored ({scenario})"

    problem = errored.gate_problem()

    assert problem == (
        "3 scenario test(s) errored (first: tau2_retail__9: its test errored (tau2_retail__9))"
    )


def test_a_long_reason_cut_short_keeps_the_path_it_ends_with_whole() -> None:
    """A reason cut in its middle kept its last 80 characters from inside a path it named:
    ``define the fixture in /tmp/ ... team2/conftest.py``."""
    path = "/home/ci/builds/acme/monorepo/services/support/conftest.py"
    text = "Failed: " + "x " * 150 + f"define the fixture in {path} (the rootdir's) or elsewhere"

    shortened = _shortened(text)

    assert len(shortened) <= 300
    assert shortened.startswith("Failed: x x")
    assert shortened.endswith(f" … {path} (the rootdir's) or elsewhere")
