"""A gate that cannot compare fails and says why; it never passes by default (issue 30, items
1 to 4).

A baseline that shares no scored scenario with the run, a baseline whose scenarios were all
infra errors, a gate on a selection without any scenario, and an unusable ``--tau2-baseline``
(refused at start-up, like every other setting).
"""

from __future__ import annotations

import pytest

from tau2_retail.testing.bench import error_lines

from .conftest import SERVER_ERROR, Bench, ScriptedEndpoint

NOOP = "--tau2-agent-model=builtin:noop"
ALPHA = ("--tau2-regression-alpha=0.05",)


def _gate_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("tau2 gate:")]


def test_a_baseline_sharing_no_scenario_fails_the_gate_with_alpha(
    bench: Bench, xdist: tuple[str, ...]
) -> None:
    base = bench.run(*xdist, "--tau2-tasks=10,12", "--tau2-run-id=base")
    assert base.ret == pytest.ExitCode.OK, base.output

    # a 100-point drop on other tasks: 0 pairs, p=1 "not significant" used to PASS
    run = bench.run(
        *xdist, "--tau2-tasks=0,1", NOOP, f"--tau2-baseline={bench.run_dir('base')}", *ALPHA
    )

    assert run.ret == pytest.ExitCode.TESTS_FAILED, run.output
    (line,) = _gate_lines(run.stdout)
    assert "baseline 100.00% (none of its scenarios scored in this run too" in line
    assert (
        "cannot compare (the baseline shares no scored scenario with this run: give a "
        "baseline of the same tasks and trials)"
    ) in line
    assert line.endswith(": FAIL"), line


def test_a_baseline_of_infra_errors_only_fails_the_gate(
    bench: Bench, endpoint: ScriptedEndpoint
) -> None:
    for task in ("0", "1"):
        endpoint.agent[task] = SERVER_ERROR
    base = bench.run(
        "-n", "0", "--tau2-tasks=0,1", *endpoint.agent_args(), "--tau2-run-id=down"
    )  # fmt: skip
    assert bench.summary("down")["counts"]["infra_errors"] == 2, base.output

    # every scenario of this run fails; against "baseline n/a" the gate used to PASS
    run = bench.run("-n", "0", "--tau2-tasks=0,1", NOOP, f"--tau2-baseline={bench.run_dir('down')}")

    assert run.ret == pytest.ExitCode.TESTS_FAILED, run.output
    (line,) = _gate_lines(run.stdout)
    assert "success rate 0.00%" in line
    assert "baseline n/a" in line
    assert (
        "cannot compare (the baseline has no scored scenario, all infra errors or lost: "
        "give a baseline run that scored its scenarios)"
    ) in line
    assert line.endswith(": FAIL"), line


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_gate_on_an_empty_selection_fails_and_says_why(bench: Bench, workers: str) -> None:
    # task 0 is the only task, and it is in shard 1 of 2: shard 2 selects nothing
    run = bench.run(
        "-n", workers, "--tau2-tasks=0", "--tau2-shard=2/2", "--tau2-min-pass-rate=0.5"
    )  # fmt: skip

    assert run.ret == pytest.ExitCode.TESTS_FAILED, run.output
    assert "tau2 retail" in run.stdout
    assert _gate_lines(run.stdout) == [
        "tau2 gate: no scenario ran (the selection is empty: --tau2-tasks 0, --tau2-shard 2/2); "
        "a gate with nothing to measure fails: FAIL"
    ]
    assert not bench.output_dir.exists()  # nothing ran, nothing is written


def test_a_gate_in_the_ini_file_stays_silent_when_the_benchmark_is_not_collected(
    bench: Bench,
) -> None:
    bench.add_ini(tau2_min_pass_rate="0.5")
    bench.pytester.makepyfile(test_other="def test_other():\n    pass\n")

    result = bench.run_inprocess("test_other.py")

    assert result.ret == pytest.ExitCode.OK
    assert "tau2 retail" not in result.stdout.str()


def test_a_gate_on_the_command_line_fails_when_no_scenario_is_collected(bench: Bench) -> None:
    bench.pytester.makepyfile(test_other="def test_other():\n    pass\n")

    result = bench.run_inprocess("test_other.py", "--tau2-min-pass-rate=0.5")

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert _gate_lines(result.stdout.str()) == [
        "tau2 gate: no scenario ran (no benchmark scenario was selected); a gate with nothing "
        "to measure fails: FAIL"
    ]


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda path: None, "it does not exist"),
        (
            lambda path: path.write_text("not a run\n"),
            "it is a file that is not an upstream results.json: ",
        ),
        (lambda path: path.mkdir(), "it has no summary.json (a run folder has one once its run"),
        (
            lambda path: (path.mkdir(), (path / "summary.json").write_text("{garbage")),
            "its summary.json cannot be read: ",
        ),
    ],
    ids=["missing", "a-file", "no-summary", "garbage"],
)
def test_an_unusable_baseline_is_refused_at_start_up(bench: Bench, make, problem: str) -> None:
    baseline = bench.path / "baseline"
    make(baseline)

    result = bench.run_inprocess("--tau2-tasks=10", f"--tau2-baseline={baseline}")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = error_lines(result.stderr)
    assert len(errors) == 1, result.stderr.str()
    assert errors[0].startswith(
        f"ERROR: --tau2-baseline: {str(baseline)!r} is not valid for --tau2-baseline; expected "
        "the folder of an earlier run holding its summary.json, or an upstream tau2-bench "
        f"results.json, but {problem}"
    ), errors[0]
    assert not bench.output_dir.exists()  # refused before any scenario ran


def test_an_infra_error_is_not_counted_among_the_scenarios_not_judged(
    bench: Bench, endpoint: ScriptedEndpoint
) -> None:
    """Tasks 2 and 3 have NL assertions and no judge is set: only the scored one was "not
    judged"; the headline counted the infra error too (and said so of a run with none
    scored)."""
    endpoint.agent["2"] = SERVER_ERROR
    run = bench.run("-n", "0", "--tau2-tasks=2,3", *endpoint.agent_args())
    rates = next(line for line in run.stdout.lines if line.startswith("Overall success rate"))
    assert rates.endswith("; NL assertions of 1 scenario(s) NOT judged: no judge"), rates
    endpoint.agent["3"] = SERVER_ERROR
    down = bench.run("-n", "0", "--tau2-tasks=2,3", *endpoint.agent_args())
    rates = next(line for line in down.stdout.lines if line.startswith("Overall success rate"))
    assert "NOT judged" not in rates
