"""What a person reads at the end of a run: NL assertions as subtests, each failed scenario
listed once, the gate's verdict among the last lines, and a resume command as the user would
type it."""

from __future__ import annotations

from xml.etree import ElementTree

import pytest

from tau2_retail.plugins.reporter import resume_arguments, resume_command

from .conftest import Bench, ScriptedEndpoint


@pytest.mark.parametrize(
    ("args", "kept"),
    [
        (["-x", "-n", "2", "--tau2-tasks=1,2"], ["-n", "2", "--tau2-tasks=1,2"]),
        (["-xq", "--exitfirst", "--maxfail", "3", "-v"], ["-q", "-v"]),
        (["--maxfail=2", "-k", "tau2_retail"], ["-k", "tau2_retail"]),
        (["--tau2-run-id", "r1", "--tau2-resume=r1", "--tau2-resume", "r1"], []),
        # not the early stop: -k takes a value that may hold an x; -rx is a report option
        (["-k", "x", "-kx", "-rx"], ["-k", "x", "-kx", "-rx"]),
        (["--tau2-output-dir=my runs"], ["--tau2-output-dir=my runs"]),
        # every stepwise form turns stepwise on
        (["--sw", "--sw-skip", "--stepwise-skip", "-q"], ["-q"]),
        (["--stepwise", "--sw-reset", "--stepwise-reset"], []),
    ],
)
def test_a_resume_repeats_every_argument_but_the_run_id_and_the_early_stop(
    args: list[str], kept: list[str]
) -> None:
    assert resume_arguments(args) == kept


@pytest.mark.parametrize(
    ("argv0", "program"),
    [
        # python -m pytest: in a flat layout the agent module is importable only because
        # python -m puts the current folder on sys.path; a pasted `pytest ...` could not import it
        ("/venv/lib/python3.11/site-packages/pytest/__main__.py", "python -m pytest"),
        ("/venv/bin/pytest", "pytest"),
        ("/venv/bin/py.test", "pytest"),
        # some other module's __main__ (a runner calling pytest.main)
        ("/venv/lib/python3.11/site-packages/tool/__main__.py", "pytest"),
    ],
)
def test_a_resume_starts_as_the_session_did(argv0: str, program: str) -> None:
    command = resume_command(["-n", "2", "--tau2-run-id=r1"], "r1", argv0=argv0)
    assert command == f"{program} -n 2 --tau2-resume=r1"


def test_nl_assertions_are_subtests_and_the_gate_closes_the_output(
    bench: Bench, endpoint: ScriptedEndpoint
) -> None:
    endpoint.judge_fails["62"] = {2}
    junit = bench.path / "nl.xml"

    run = bench.run(
        "-n", "0", "-v", "-rA", "--tau2-tasks=10,24,62", "--tau2-run-id=nl", f"--junitxml={junit}",
        "--tau2-min-pass-rate=0.5", *endpoint.agent_args(), *endpoint.judge_args(),
        "--tau2-user-model=builtin:customer",
    )  # fmt: skip

    lines = run.stdout.lines
    # one subtest per judged assertion, named by its index; the judge's reason is the failure
    assert any("[tau2_retail__24] SUBPASSED[NL assertion 1]" in line for line in lines)
    assert any("[tau2_retail__62] SUBPASSED[NL assertion 1]" in line for line in lines)
    assert any("[tau2_retail__62] SUBFAILED[NL assertion 2]" in line for line in lines)
    assert not any("SUB" in line and "tau2_retail__10]" in line for line in lines)
    assert "judged not met: not said" in run.stdout.str()
    # NL gates success: the scenario fails with its short reason
    assert run.outcomes() == {
        "tau2_retail__10": "passed",
        "tau2_retail__24": "passed",
        "tau2_retail__62": "failed",
    }
    # (pytest trims the line to the terminal's width)
    assert any(line.startswith("FAILED") and "__62] - Failed: NL 1/2" in line for line in lines)
    # listed once: pytest's short summary names it, the tau2 section does not repeat it
    assert not any(line.startswith("FAILED tau2_retail__62") for line in lines)
    # the verdict is among the last lines: only pytest's closing line follows it
    assert lines[-2].startswith("tau2 gate: "), lines[-6:]
    assert lines[-2].endswith("PASS")
    assert run.returncode == pytest.ExitCode.OK
    # junit: the failed assertion is a <failure> of the scenario's testcase, before its own
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert suite.get("tests") == "6"  # 3 scenarios, 3 judged assertions
    case = next(c for c in suite.iter("testcase") if "[tau2_retail__62]" in c.get("name", ""))
    messages = [failure.get("message", "") for failure in case.iter("failure")]
    assert messages[0].startswith("Failed: judged not met: not said")
    assert messages[1] == "Failed: NL 1/2 not met"
    assert not list(case.iter("skipped"))


def test_without_a_judge_no_nl_subtest_is_created(bench: Bench) -> None:
    run = bench.run("-n", "0", "-v", "--tau2-tasks=24,62", "--tau2-run-id=nojudge")

    assert run.returncode == pytest.ExitCode.OK
    assert "SUBPASSED" not in run.stdout.str()
    assert "SUBSKIPPED" not in run.stdout.str()
    assert any(
        "NL assertions not applicable: no judge configured" in line for line in run.stdout.lines
    )


def test_after_x_the_resume_command_drops_x_and_names_the_run_once(
    bench: Bench, endpoint: ScriptedEndpoint
) -> None:
    run = bench.run(
        "-n", "0", "-x", "--tau2-tasks=10,12,13,25,50", "--tau2-run-id=stop",
        *endpoint.agent_args(), "--tau2-user-model=builtin:customer",
    )  # fmt: skip

    assert run.returncode == pytest.ExitCode.TESTS_FAILED
    hint = [line for line in run.stdout.lines if "resume with: " in line]
    assert len(hint) == 1
    assert "2 selected scenario(s) did not run" in hint[0]
    command = hint[0].split("resume with: ", 1)[1]
    # the session was started as python -m pytest (as every Bench run is)
    assert command.startswith("python -m pytest ")
    assert command.endswith(" --tau2-resume=stop")
    assert " -x " not in command
    assert "--tau2-run-id" not in command
    assert "--tau2-tasks=10,12,13,25,50" in command

    resumed = bench.run(*command.split()[3:])
    # the two that did not run, run now; the failure recorded before still fails the run
    assert resumed.parseoutcomes() == {"passed": 2, "deselected": 3}
    assert resumed.returncode == pytest.ExitCode.TESTS_FAILED
    summary = bench.summary("stop")
    assert summary["counts"]["expected"] == 5
    assert summary["counts"]["succeeded"] == 4
