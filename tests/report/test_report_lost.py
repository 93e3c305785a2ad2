"""The report names why each scenario without a record has none, as ``all_summary.txt`` does.

An interrupted run's scenarios that Ctrl-C kept from starting are lost with the reason ``not run
(interrupted)``, a killed run's summarized later ``no metrics.json (...)``, a skipped test's
``skipped: ...``; the budget's are ``not_run``. The terminal and ``all_summary.txt`` show each
reason; the page said ``lost (no metrics)`` for every one.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path

from tau2_retail import codec
from tau2_retail.report.page import REPORT_FILE, write_report
from tau2_retail.results.atomic import write_json_atomic
from tau2_retail.results.summary import SUMMARY_JSON_FILE, read_summary
from tests.report.conftest import Opened

Open = Callable[..., Opened]


def _with_missing(run: Path, target: Path) -> Path:
    """``run`` whose summary also has lost scenarios (with and without a reason) and scenarios
    the budget did not run, reported again."""
    shutil.copytree(run, target)
    summary = read_summary(target)
    assert summary is not None
    counts = dataclasses.replace(
        summary.counts,
        expected=summary.counts.expected + 5,
        lost=3,
        not_run=2,
    )
    changed = dataclasses.replace(
        summary,
        counts=counts,
        lost=("tau2_retail__11", "tau2_retail__12", "tau2_retail__13"),
        lost_reasons={
            "tau2_retail__11": "not run (interrupted)",
            "tau2_retail__12": "skipped: quick CI",
        },
        not_run=("tau2_retail__14", "tau2_retail__15"),
    )
    write_json_atomic(target / SUMMARY_JSON_FILE, codec.encode(changed))
    write_report(target)
    return target


def test_each_lost_scenario_shows_its_reason_and_the_budgets_are_listed(
    mixed_run: Path, open_report: Open, tmp_path: Path
) -> None:
    run = _with_missing(mixed_run, tmp_path / "missing")
    summary = read_summary(run)
    assert summary is not None
    opened = open_report(run / REPORT_FILE)
    items = opened.page.locator("#infra-list li").all_text_contents()
    infra = [f"{e.scenario_id}: {e.detail}" for e in summary.infra_errors]
    assert items == [
        *infra,
        "tau2_retail__11: not run (interrupted)",
        "tau2_retail__12: skipped: quick CI",
        "tau2_retail__13: lost (no metrics)",
    ]
    # the budget's: neither lost nor scored, named in their own panel
    not_run = opened.page.locator("#not-run-list li").all_text_contents()
    assert not_run == ["tau2_retail__14", "tau2_retail__15"]
    assert opened.console_errors == []
    assert opened.page_errors == []
