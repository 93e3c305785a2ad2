"""Numbers a team can gate on (issue 19), in real runs of the built-in agents.

The oracle passes every task; the no-op agent (it ends at once) passes only the 11 whose gold
database is the seed. Against an oracle baseline its failures are pass->fail flips, paired by
task and trial: on 6 tasks (3 of them seed tasks) 3 flips, one-sided exact McNemar
p = 2**-3 = 0.125, not significant at 0.05; on all 114, 103 flips, p = 2**-103.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from scipy.stats import binomtest

from tests.test_docs import readme_sample_output, sample_of_run

from .conftest import SEED_DB_TASKS, Bench

SIX = "--tau2-tasks=0,1,2,10,12,24"  # 10, 12, 24: seed tasks
NOOP = "--tau2-agent-model=builtin:noop"
ALPHA_GATE = ("--tau2-regression-alpha=0.05", "--tau2-max-regression=0")


def _gate_line(lines: list[str]) -> str:
    [line] = [line for line in lines if line.startswith("tau2 gate:")]
    return line


def test_noop_against_an_oracle_baseline_on_six_tasks_is_not_significant(
    bench: Bench, xdist: tuple[str, ...]
) -> None:
    baseline = bench.run(*xdist, SIX, "--tau2-run-id=oracle")
    assert baseline.ret == pytest.ExitCode.OK
    base = f"--tau2-baseline={bench.run_dir('oracle')}"

    result = bench.run(*xdist, SIX, NOOP, "--tau2-run-id=noop", base, *ALPHA_GATE)

    result.assert_outcomes(passed=3, failed=3)
    assert result.ret == pytest.ExitCode.OK  # a 50-point drop, but p = 0.125 > 0.05
    assert _gate_line(result.stdout.lines) == (
        "tau2 gate: profile default, success rate 50.00% [18.8, 81.2], baseline 100.00% "
        "(change -50.00%, max regression 0.00%), 3 flipped pass->fail, 0 fail->pass of 6 "
        "paired, p=0.125 (not significant at alpha 0.05), infra errors 0 (max 0): PASS"
    )
    # the same run without the option fails on the drop, as before
    plain = bench.run(*xdist, SIX, NOOP, "--tau2-run-id=plain", base, "--tau2-max-regression=0")
    assert plain.ret == pytest.ExitCode.TESTS_FAILED
    assert "p=0.125, infra errors 0 (max 0): FAIL" in _gate_line(plain.stdout.lines)


def test_the_alpha_comes_from_the_environment_and_the_ini_file(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    baseline = bench.run(SIX, "--tau2-run-id=oracle")
    assert baseline.ret == pytest.ExitCode.OK
    base = f"--tau2-baseline={bench.run_dir('oracle')}"
    monkeypatch.setenv("TAU2_REGRESSION_ALPHA", "0.2")  # 0.125 <= 0.2: significant

    significant = bench.run(SIX, NOOP, "--tau2-run-id=env", base)

    assert significant.ret == pytest.ExitCode.TESTS_FAILED
    assert "p=0.125 (significant at alpha 0.2)" in _gate_line(significant.stdout.lines)
    monkeypatch.delenv("TAU2_REGRESSION_ALPHA")
    bench.add_ini(tau2_regression_alpha="0.01")

    from_ini = bench.run(SIX, NOOP, "--tau2-run-id=ini", base)

    assert from_ini.ret == pytest.ExitCode.OK
    assert "p=0.125 (not significant at alpha 0.01)" in _gate_line(from_ini.stdout.lines)
    assert bench.summary("ini")["configuration"]["sources"]["regression_alpha"] == (
        "ini tau2_regression_alpha"
    )


def test_full_noop_run_against_the_oracle_is_a_significant_regression(bench: Bench) -> None:
    oracle = bench.run("-n", "2", "--tau2-run-id=oracle")
    assert oracle.ret == pytest.ExitCode.OK
    # the baseline is the README's first command (all 114, offline, -n 2): its sample output
    # is this run's (issue 27, item 7), compared here rather than at the cost of another run
    assert readme_sample_output() == sample_of_run(oracle.stdout.lines)

    result = bench.run(
        "-n", "2", NOOP, "--tau2-run-id=floor",
        f"--tau2-baseline={bench.run_dir('oracle')}", *ALPHA_GATE,
    )  # fmt: skip

    result.assert_outcomes(passed=11, failed=103)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert _gate_line(result.stdout.lines) == (
        "tau2 gate: profile default, success rate 9.65% [5.5, 16.5], baseline 100.00% "
        "(change -90.35%, max regression 0.00%), 103 flipped pass->fail, 0 fail->pass of 114 "
        "paired, p=9.86e-32 (significant at alpha 0.05), infra errors 0 (max 0): FAIL"
    )
    summary = bench.summary("floor")
    passed = {row["task_id"] for row in summary["scenarios"] if row["is_successful"]}
    assert passed == SEED_DB_TASKS
    assert summary["counts"]["expected"] == 114
    # summary.json's interval of 11/114 is the Wilson score interval
    wilson = binomtest(11, 114).proportion_ci(method="wilson")
    assert summary["success_rate"] == {
        "passed": 11,
        "total": 114,
        "rate": 11 / 114,
        "ci95": [pytest.approx(wilson.low, abs=1e-12), pytest.approx(wilson.high, abs=1e-12)],
        "ci95_method": "wilson",
    }
    assert "Overall success rate: 9.65% (11/114 scenarios) [5.5, 16.5]" in result.stdout.lines
    assert summary["signals"]["CLEAN_EXIT"]["passed"] == 114
    assert summary["signals"]["NL_ASSERTION"] == {
        "applicable": False,
        "reason": "no judge configured",
        "gating": True,
        "unit": "assertions",
    }
    assert len(list(bench.run_dir("floor").glob("tau2_retail__*/metrics.json"))) == 114


def _merge(bench: Bench, *run_ids: str, into: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable, "-m", "tau2_retail", "merge",
            *(str(bench.run_dir(run_id)) for run_id in run_ids),
            "--into", str(bench.run_dir(into)),
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_merge_command_gates_with_the_shards_alpha(bench: Bench) -> None:
    assert bench.run(SIX, "--tau2-run-id=oracle").ret == pytest.ExitCode.OK
    base = f"--tau2-baseline={bench.run_dir('oracle')}"
    for i in (1, 2):
        bench.run(SIX, NOOP, f"--tau2-shard={i}/2", f"--tau2-run-id=s{i}", base, *ALPHA_GATE)

    merged = _merge(bench, "s1", "s2", into="merged")

    assert merged.returncode == 0, merged.stderr
    assert (
        "3 flipped pass->fail, 0 fail->pass of 6 paired, p=0.125 (not significant at alpha "
        "0.05), infra errors 0 (max 0): PASS"
    ) in merged.stdout


def test_the_merge_command_refuses_an_alpha_outside_0_1(bench: Bench) -> None:
    for i in (1, 2):
        bench.run(SIX, NOOP, f"--tau2-shard={i}/2", f"--tau2-run-id=s{i}")
    for i in (1, 2):  # a hand-edited (or foreign) run_args.json
        path = Path(bench.run_dir(f"s{i}")) / "run_args.json"
        args = json.loads(path.read_text(encoding="utf-8"))
        args["configuration"]["settings"]["regression_alpha"] = 1.5
        path.write_text(json.dumps(args), encoding="utf-8")

    merged = _merge(bench, "s1", "s2", into="merged")

    assert merged.returncode == 2
    assert "regression_alpha 1.5 is not valid for --tau2-regression-alpha" in merged.stderr
    assert not bench.run_dir("merged").exists()
