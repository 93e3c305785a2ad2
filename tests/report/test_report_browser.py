"""The run report in a real headless browser (Debian's chromium through playwright).

The page must load with no console error and no request but its own file, show exactly the
figures of ``summary.json``, filter and sort the scenario table, open a scenario with its
conversation, database difference, actions and verdicts, and show what a model said as text:
a model that answers ``<script>`` must not get it run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tau2_retail import codec
from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.models.prices import RoleCosts
from tau2_retail.report.compare import compare_summaries
from tau2_retail.report.page import REPORT_FILE, write_report
from tau2_retail.results.records import RunSummary
from tau2_retail.results.stats import fixed
from tau2_retail.results.summary import summarize
from tests.report.conftest import PLUGIN_RUN_ARGS, Opened, run_benchmark
from tests.report.runs import HOSTILE, JUDGE_REASON

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (or, in CI, fails) and says why
    expect = None

Open = Callable[..., Opened]
ROOT = Path(__file__).resolve().parents[2]
DOCS_SCREENSHOT = ROOT / "docs" / "report.png"


def _summary(run: Path) -> dict[str, Any]:
    return json.loads((run / "summary.json").read_text(encoding="utf-8"))


def _pct(rate: float) -> str:
    return f"{100 * rate:.2f}%"


def _text(opened: Opened, selector: str) -> str:
    return opened.page.locator(selector).first.text_content() or ""


def _assert_clean(opened: Opened) -> None:
    assert opened.console_errors == []
    assert opened.page_errors == []
    assert opened.foreign_requests() == []


def _visible_rows(opened: Opened) -> list[dict[str, str]]:
    return opened.page.eval_on_selector_all(
        ".vt-row",
        "rows => rows.map(r => ({id: r.dataset.id, status: r.dataset.status, "
        "tokens: r.querySelector('[data-col=tokens]').textContent}))",
    )


def _ci(bounds: list[float]) -> str:
    """The interval as the page and the terminal print it (a tie rounds away from zero)."""
    return f"[{fixed(100 * bounds[0], 1)}, {fixed(100 * bounds[1], 1)}]"


def _count_line(opened: Opened) -> str:
    return _text(opened, "#scenario-count")


def _select(opened: Opened, selector: str, value: str) -> None:
    opened.page.select_option(selector, value)


# -- loading ------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["plugin_run", "mixed_run"])
def test_the_page_loads_with_no_console_error_and_no_request(
    which: str, open_report: Open, request: pytest.FixtureRequest
) -> None:
    run: Path = request.getfixturevalue(which)
    opened = open_report(run / REPORT_FILE)
    assert opened.page.title() == f"tau2 retail report: {run.name}"
    assert opened.requests == [opened.url]
    # opening scenarios, folding tool calls out and going back asks for nothing either
    opened.page.locator(".vt-row").nth(1).click()
    opened.page.wait_for_selector("#scenario-view .chat")
    opened.page.get_by_role("button", name="Expand tool calls").click()
    opened.page.keyboard.press("n")
    opened.page.wait_for_selector("#scenario-view .chat")
    opened.page.locator("#back").click()
    opened.page.wait_for_selector("#overview-view:not([hidden])")
    _assert_clean(opened)


def test_the_plugin_wrote_the_report_at_the_end_of_the_run(plugin_run: Path) -> None:
    page = (plugin_run / REPORT_FILE).read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert '"name":"plugin"' in page


def test_a_report_that_cannot_be_written_costs_one_line_not_the_summary(
    plugin_run: Path, data_dir: Path, tmp_path: Path
) -> None:
    run = tmp_path / "plugin"
    shutil.copytree(plugin_run, run)
    (run / REPORT_FILE).unlink()
    (run / REPORT_FILE / "blocker").mkdir(parents=True)  # a folder where the page goes
    (run / "summary.json").unlink()
    completed = run_benchmark(
        data_dir, *PLUGIN_RUN_ARGS, f"--tau2-output-dir={tmp_path}", "--tau2-resume=plugin"
    )
    output = completed.stdout + completed.stderr
    assert "tau2: report.html not written: cannot write" in completed.stdout, output[-3000:]
    assert (run / "summary.json").is_file()
    assert "Overall success rate:" in completed.stdout
    assert "INTERNALERROR" not in output


# -- the figures ----------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["plugin_run", "mixed_run"])
def test_the_numbers_shown_equal_summary_json(
    which: str, open_report: Open, request: pytest.FixtureRequest
) -> None:
    run: Path = request.getfixturevalue(which)
    summary = _summary(run)
    opened = open_report(run / REPORT_FILE)
    metric = lambda key: _text(opened, f"[data-metric='{key}']")  # noqa: E731
    count = lambda key: _text(opened, f"[data-count='{key}']")  # noqa: E731

    for key in ("success_rate", "task_success_rate"):
        rate = summary[key]
        assert metric(key) == _pct(rate["rate"])
        assert count(key) == f"{rate['passed']}/{rate['total']} scenarios"
        assert _text(opened, f"[data-ci='{key}']") == f"95% CI {_ci(rate['ci95'])}"
    # every rate's interval, as numbers and as an error bar
    intervals = {
        cells[0]: cells[1:]
        for cells in (
            row.locator("td").all_text_contents()
            for row in opened.page.locator("[data-table=intervals] tbody tr").all()
        )
    }
    assert intervals["Overall success"] == [
        _pct(summary["success_rate"]["rate"]),
        _ci(summary["success_rate"]["ci95"]),
    ]
    assert intervals["DB-State match"] == [
        _pct(summary["signals"]["DB_STATE_MATCH"]["rate"]),
        _ci(summary["signals"]["DB_STATE_MATCH"]["ci95"]),
    ]
    for name, group in summary["by_split"].items():
        assert intervals[f"split {name}"] == [_pct(group["success_rate"]), _ci(group["ci95"])]
    assert opened.page.locator("[data-ci='signal-success'] line").count() == 3
    assert metric("tau2_reward") == f"{summary['tau2_reward']['mean']:.4f}"
    assert metric("expected") == str(summary["counts"]["expected"])
    assert metric("infra_errors") == (
        f"{summary['counts']['infra_errors']} / {summary['counts']['lost']}"
    )
    signals = summary["signals"]
    for name in ("DB_STATE_MATCH", "CLEAN_EXIT", "ACTION_MATCH"):
        rate = signals[name]
        assert metric(f"signal-{name}") == (
            f"{_pct(rate['rate'])} ({rate['passed']}/{rate['total']} scenarios)"
        )
    nl = signals["NL_ASSERTION"]
    if nl["applicable"]:
        assert metric("signal-NL_ASSERTION") == (
            f"{_pct(nl['rate'])} ({nl['passed']}/{nl['total']} assertions)"
        )
        assert metric("judge_score") == f"{summary['judge_score']['mean']:.3f}"
    else:
        assert metric("signal-NL_ASSERTION") == f"n/a ({nl['reason']})"

    assert summary["pass_hat_k"], "both runs have two trials"
    for entry in summary["pass_hat_k"]:
        assert metric(f"pass_hat_{entry['k']}") == f"{entry['value']:.3f}"
        cells = opened.page.locator(
            f"[data-table=pass_hat_k] tr[data-key='pass^{entry['k']}'] td"
        ).all_text_contents()
        low, high = entry["ci95"]
        assert cells == [
            f"pass^{entry['k']}",
            f"{entry['value']:.4f}",
            f"[{low:.4f}, {high:.4f}]",
            str(entry["tasks"]),
        ]
        assert opened.page.locator(f"[data-ci='pass_hat_{entry['k']}']").count() == 1

    total = sum(summary["stop_reasons"].values())
    for reason, n in summary["stop_reasons"].items():
        assert metric(f"stop-{reason}") == f"{n} ({_pct(n / total)})"
    for role, usage in summary["token_usage"].items():
        cells = opened.page.locator(
            f"[data-table=token_usage] tr[data-key='{role}'] td"
        ).all_text_contents()
        assert cells == [
            role,
            f"{usage['n_calls']:,}",
            f"{usage['prompt']:,}",
            f"{usage['completion']:,}",
            f"{usage.get('cache_hits', 0):,}",
        ]
    assert opened.page.locator("[data-table=cost]").count() == 0  # no prices, no cost
    assert opened.page.locator(".vt-head [data-col=cost]").count() == 0
    for key, prefix in (("by_split", "split-"), ("by_persona", "persona-")):
        for name, group in summary[key].items():
            assert metric(prefix + name) == (
                f"{_pct(group['success_rate'])} ({group['succeeded']}/{group['n']})"
            )
    infra = opened.page.locator("#infra-list li").all_text_contents()
    assert infra == [f"{e['scenario_id']}: {e['detail']}" for e in summary["infra_errors"]]
    n = len(summary["scenarios"])
    assert _count_line(opened) == f"Showing {n} of {n} scenarios"
    _assert_clean(opened)


# -- the table --------------------------------------------------------------------------------


def test_filtering_to_failed_scenarios(plugin_run: Path, open_report: Open) -> None:
    summary = _summary(plugin_run)
    opened = open_report(plugin_run / REPORT_FILE)
    total = len(summary["scenarios"])
    failed = {s["scenario_id"] for s in summary["scenarios"] if s["status"] == "FAIL"}
    assert 0 < len(failed) < total

    _select(opened, "#filter-status", "failed")
    assert _count_line(opened) == f"Showing {len(failed)} of {total} scenarios"
    rows = _visible_rows(opened)
    assert {row["id"] for row in rows} == failed
    assert {row["status"] for row in rows} == {"FAIL"}

    _select(opened, "#filter-status", "passed")
    assert {row["status"] for row in _visible_rows(opened)} == {"PASS"}

    _select(opened, "#filter-status", "")
    _select(opened, "#filter-signal", "db")
    no_db = {s["scenario_id"] for s in summary["scenarios"] if not s["db_state_match"]}
    assert {row["id"] for row in _visible_rows(opened)} == no_db

    opened.page.locator("#filter-reset").click()
    opened.page.fill("#filter-text", "__12-trial2")
    expect(opened.page.locator("#scenario-count")).to_have_text(re.compile(r"^Showing 1 of "))
    assert [row["id"] for row in _visible_rows(opened)] == ["tau2_retail__12-trial2"]

    opened.page.fill("#filter-text", "no such scenario")
    expect(opened.page.locator("#scenario-count")).to_have_text(re.compile(r"^Showing 0 of "))
    assert _visible_rows(opened) == []
    _assert_clean(opened)


def test_filtering_by_stop_reason_and_sorting(mixed_run: Path, open_report: Open) -> None:
    summary = _summary(mixed_run)
    opened = open_report(mixed_run / REPORT_FILE)
    _select(opened, "#filter-stop", "infra_error")
    assert [row["id"] for row in _visible_rows(opened)] == [
        e["scenario_id"] for e in summary["infra_errors"]
    ]
    _select(opened, "#filter-stop", "")
    _select(opened, "#filter-signal", "nl")
    nl_failed = {
        s["scenario_id"]
        for s in summary["scenarios"]
        if s["nl_assertion_pass_count"] is not None
        and s["nl_assertion_pass_count"] < s["nl_assertion_total"]
    }
    assert nl_failed
    assert {row["id"] for row in _visible_rows(opened)} == nl_failed

    opened.page.locator("#filter-reset").click()
    opened.page.locator(".vt-head [data-col=tokens]").click()
    tokens = [int(row["tokens"].replace(",", "")) for row in _visible_rows(opened)]
    assert tokens == sorted(tokens)
    assert tokens[0] < tokens[-1]
    opened.page.locator(".vt-head [data-col=tokens]").click()
    tokens = [int(row["tokens"].replace(",", "")) for row in _visible_rows(opened)]
    assert tokens == sorted(tokens, reverse=True)
    _assert_clean(opened)


def _changed_copy(
    run: Path, target: Path, change: Callable[[int, ScenarioMetrics], ScenarioMetrics]
) -> Path:
    """``run`` with every scenario's metrics changed by ``change`` (given the scenario's
    number in path order), summarized and reported again."""
    shutil.copytree(run, target)
    for number, path in enumerate(sorted(target.rglob("metrics.json"))):
        metrics = codec.decode_value(ScenarioMetrics, json.loads(path.read_text(encoding="utf-8")))
        path.write_text(json.dumps(codec.encode(change(number, metrics))), encoding="utf-8")
    summarize(target)
    write_report(target)
    return target


def _priced_copy(run: Path, target: Path) -> Path:
    """``run`` with a cost in every scenario's metrics (a different one each)."""

    def priced(number: int, metrics: ScenarioMetrics) -> ScenarioMetrics:
        # not in scenario order, so that sorting by cost differs from sorting by scenario
        agent = ((number * 7) % 11 + 1) / 1000
        cost = RoleCosts(agent=agent, user=agent / 10, judge=0.0005)
        return dataclasses.replace(metrics, cost=cost)

    return _changed_copy(run, target, priced)


def test_the_cost_per_role_and_the_cost_column_sort(
    mixed_run: Path, open_report: Open, tmp_path: Path
) -> None:
    run = _priced_copy(mixed_run, tmp_path / "priced")
    summary = _summary(run)
    opened = open_report(run / REPORT_FILE)

    cost = summary["cost"]
    cells = opened.page.locator("[data-table=cost] tr[data-key=run] td").all_text_contents()
    assert cells == ["run", *(f"${cost[k]:.4f}" for k in ("agent", "user", "judge", "total"))]

    def shown() -> list[float]:
        texts = opened.page.eval_on_selector_all(
            ".vt-row", "rows => rows.map(r => r.querySelector('[data-col=cost]').textContent)"
        )
        return [float(text.lstrip("$")) for text in texts]

    by_row = {row["scenario_id"]: row["cost"] for row in summary["scenarios"]}
    assert sorted(shown()) == sorted(round(v, 4) for v in by_row.values())
    opened.page.locator(".vt-head [data-col=cost]").click()
    ascending = shown()
    assert ascending == sorted(ascending)
    assert ascending[0] < ascending[-1]
    opened.page.locator(".vt-head [data-col=cost]").click()
    assert shown() == sorted(ascending, reverse=True)
    _assert_clean(opened)


def test_what_the_stopped_scenarios_spent_is_under_the_cost(
    mixed_run: Path, open_report: Open, tmp_path: Path
) -> None:
    """all_summary.txt and the terminal state what the scenarios the budget, and what stopped
    them in flight (here -x and a timeout), stopped had spent under the Cost line; the page
    showed the records' total alone, then named "the interrupt" for every cause."""
    run = _priced_copy(mixed_run, tmp_path / "stopped")
    path = run / "summary.json"
    written = json.loads(path.read_text(encoding="utf-8"))
    stopped = {
        "not_run_cost": 0.0421,
        "interrupted_cost": 0.0137,
        "interrupted_by": ["maxfail", "timeout"],
    }
    path.write_text(json.dumps({**written, **stopped}), encoding="utf-8")
    summarize(run)  # keeps them, as after a run the budget stopped, then one -x stopped
    write_report(run)
    opened = open_report(run / REPORT_FILE)

    rows = opened.page.locator("[data-table=cost] tbody tr")
    assert [rows.nth(n).locator("td").all_text_contents() for n in (1, 2)] == [
        ["stopped by the budget (no record)", "", "", "", "$0.0421"],
        ["stopped by -x/--maxfail and a timeout (no record)", "", "", "", "$0.0137"],
    ]
    _assert_clean(opened)


def test_the_scenarios_the_budget_did_not_run_are_named(
    mixed_run: Path, open_report: Open, tmp_path: Path
) -> None:
    """all_summary.txt counts them ("1 not run (budget)"); the page counted them nowhere and
    said "None: every expected scenario was scored." """
    run = tmp_path / "not_run"
    shutil.copytree(mixed_run, run)
    stopped = "tau2_retail__7-trial2"
    shutil.rmtree(run / "tau2_retail__7" / "trial-2")
    path = run / "summary.json"
    written = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**written, "not_run": [stopped]}), encoding="utf-8")
    summary = summarize(run)  # keeps them, as after a run the budget stopped
    write_report(run)
    opened = open_report(run / REPORT_FILE)

    counts = summary.counts
    assert (counts.not_run, counts.lost) == (1, 0)
    assert opened.page.locator("[data-count=expected]").text_content() == (
        f"{counts.succeeded} passed, {counts.failed} failed, 1 not run (budget)"
    )
    assert opened.page.locator("#not-run-list li").all_text_contents() == [stopped]
    _assert_clean(opened)


def test_a_signal_the_profile_does_not_score_reads_not_applicable(
    mixed_run: Path, open_report: Open, tmp_path: Path
) -> None:
    """A tau2-profile run: CLEAN_EXIT is not part of its success. summary.json gave it a rate of
    0% (the page's card and bar too) and every scenario's EXIT cell a failure."""

    def tau2(number: int, metrics: ScenarioMetrics) -> ScenarioMetrics:
        breakdown = dict(metrics.success_breakdown)
        breakdown["not_applicable"] = (*breakdown.get("not_applicable", ()), "CLEAN_EXIT")
        return dataclasses.replace(metrics, profile="tau2", success_breakdown=breakdown)

    run = _changed_copy(mixed_run, tmp_path / "tau2", tau2)
    summary = _summary(run)
    opened = open_report(run / REPORT_FILE)

    reason = summary["signals"]["CLEAN_EXIT"]["reason"]
    assert _text(opened, "[data-metric='signal-CLEAN_EXIT']") == f"n/a ({reason})"
    exits = opened.page.eval_on_selector_all(
        ".vt-row", "rows => rows.map(r => r.querySelector('[data-col=exit]').textContent)"
    )
    assert exits
    assert set(exits) == {"\u2013"}  # not applicable, in every row
    _assert_clean(opened)


# -- a scenario -------------------------------------------------------------------------------


def test_a_scenario_view_shows_conversation_diff_and_actions(
    mixed_run: Path, open_report: Open
) -> None:
    opened = open_report(mixed_run / REPORT_FILE)
    _select(opened, "#filter-status", "failed")
    opened.page.locator(".vt-row[data-id='tau2_retail__5-trial1']").click()
    view = opened.page.locator("#scenario-view")
    view.locator(".chat").wait_for()
    assert opened.page.url.endswith("#s/tau2_retail__5-trial1")
    assert _text(opened, "#scenario-view .nav .title") == "tau2_retail__5-trial1"

    transcript = json.loads(
        (mixed_run / "tau2_retail__5" / "trial-1" / "transcript.json").read_text(encoding="utf-8")
    )
    user_text = next(m["content"] for m in transcript["messages"] if m["role"] == "user")
    bubbles = view.locator(".chat .msg[data-role=user] .text").all_text_contents()
    assert bubbles[0] == user_text
    assert view.locator(".chat .msg[data-role=assistant]").count() >= 2

    record = view.locator("#db-diff .record")
    assert record.count() == 1
    assert "#W6390527" in (record.locator(".key").text_content() or "")
    rows = record.locator("tbody tr").all()
    cells = {
        row.locator("td").nth(0).text_content(): row.locator("td").all_text_contents()[1:]
        for row in rows
    }
    assert cells["status"] == ['"return requested"', '"delivered"']

    assert view.locator("#actions .action.unmatched").count() == 1
    assert "return_delivered_order_items" in (
        view.locator("#actions .action .name").first.text_content() or ""
    )

    # prev/next walk the filtered table; Escape goes back to it, filters kept
    opened.page.locator("#next").click()
    expect(opened.page.locator("#scenario-view .nav .title")).not_to_have_text(
        "tau2_retail__5-trial1"
    )
    opened.page.keyboard.press("Escape")
    opened.page.wait_for_selector("#overview-view:not([hidden])")
    assert {row["status"] for row in _visible_rows(opened)} == {"FAIL"}
    _assert_clean(opened)


def test_a_model_that_answers_markup_gets_text_not_code(mixed_run: Path, open_report: Open) -> None:
    opened = open_report(mixed_run / REPORT_FILE, "#s/tau2_retail__2-trial1")
    page = opened.page
    page.locator("#scenario-view .chat").wait_for()
    page.get_by_role("button", name="Expand tool calls").click()

    agent_texts = page.locator("#scenario-view .msg[data-role=assistant] .text").all_text_contents()
    assert HOSTILE in agent_texts
    assert f"Here is what I found: {HOSTILE}" in agent_texts
    call = page.locator("#scenario-view details.call").first
    assert json.loads(call.locator("pre").first.text_content() or "") == {"order_id": HOSTILE}
    assert call.get_attribute("class") == "call error"  # the lookup of that "order" failed

    verdict = page.locator("#assertions .assertion .reason").first.text_content()
    assert verdict == JUDGE_REASON
    assert HOSTILE in (page.locator("#assertions p").first.text_content() or "")

    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("img, iframe, object, embed").count() == 0
    assert page.locator("body script").count() == page.locator("script").count()
    assert page.locator("b:text('bold?')").count() == 0
    _assert_clean(opened)


# -- comparing runs ---------------------------------------------------------------------------


def test_comparing_two_runs(mixed_run: Path, baseline_run: Path, open_report: Open) -> None:
    path, _ = write_report(mixed_run, against=baseline_run)
    comparison = compare_summaries(
        codec.decode_value(RunSummary, _summary(mixed_run)),
        codec.decode_value(RunSummary, _summary(baseline_run)),
    )
    opened = open_report(path)
    section = opened.page.locator("#comparison")
    assert section.is_visible()
    assert "baseline" in (section.locator("h2").text_content() or "")
    for kind in ("fixed", "broken", "changed"):
        expected = [f["id"] for f in comparison["flips"] if f["kind"] == kind]
        shown = section.locator(f"[data-flips={kind}] li a").all_text_contents()
        assert shown == expected
    success = next(e for e in comparison["rates"] if e["name"] == "Overall success")
    cells = section.locator("tr[data-key='Overall success'] td").all_text_contents()
    assert cells[1] == f"{_pct(success['current'])} ({success['current_text']})"
    assert cells[2] == f"{_pct(success['baseline'])} ({success['baseline_text']})"
    delta = 100 * success["delta"]
    assert cells[3] == f"{'+' if delta >= 0 else ''}{delta:.2f} pp"

    paired = comparison["paired"]
    assert paired["pairs"] > 0
    shown = _text(opened, "#comparison [data-paired]")
    assert shown.startswith(
        f"Paired by task and trial: {paired['pairs']} pairs, {paired['broken']} pass\u2192fail, "
        f"{paired['fixed']} fail\u2192pass; one-sided exact McNemar p = "
    )
    assert shown.endswith(_ci(paired["ci95"]))

    _select(opened, "#filter-change", "flipped")
    assert {row["id"] for row in _visible_rows(opened)} == {f["id"] for f in comparison["flips"]}
    _assert_clean(opened)


def test_filtering_to_flaky_tasks(mixed_run: Path, open_report: Open) -> None:
    summary = _summary(mixed_run)
    flaky = {entry["task_id"] for entry in summary["flaky_tasks"]}
    assert flaky  # task 0 (oracle, noop) and others disagree between their two trials
    opened = open_report(mixed_run / REPORT_FILE)
    listed = opened.page.locator("#flaky-list li").all_text_contents()
    assert listed == [
        f"task {e['task_id']}: {e['passed']}/{e['trials']} trials passed"
        for e in summary["flaky_tasks"]
    ]

    _select(opened, "#filter-status", "flaky")

    rows = _visible_rows(opened)
    expected = {s["scenario_id"] for s in summary["scenarios"] if s["task_id"] in flaky}
    assert {row["id"] for row in rows} == expected
    assert {row["status"] for row in rows} >= {"PASS", "FAIL"}
    _assert_clean(opened)


# -- the picture --------------------------------------------------------------------------------


def test_screenshots(mixed_run: Path, open_report: Open, tmp_path: Path) -> None:
    """Screenshots of the overview and a scenario, kept as test artifacts.

    With ``TAU2_UPDATE_REPORT_SCREENSHOT=1`` the overview also replaces ``docs/report.png``
    (the README's picture).
    """
    opened = open_report(mixed_run / REPORT_FILE)
    overview = tmp_path / "report-overview.png"
    opened.page.screenshot(path=str(overview))
    opened.page.locator(".vt-row[data-id='tau2_retail__5-trial1']").click()
    opened.page.locator("#scenario-view .chat").wait_for()
    scenario = tmp_path / "report-scenario.png"
    opened.page.screenshot(path=str(scenario), full_page=True)
    for shot in (overview, scenario):
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert shot.stat().st_size > 10_000
    if os.environ.get("TAU2_UPDATE_REPORT_SCREENSHOT") == "1":
        DOCS_SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copyfile(overview, DOCS_SCREENSHOT)
    _assert_clean(opened)


def test_labels_are_whole_and_counts_agree_in_number(mixed_run: Path, open_report: Open) -> None:
    """The signals chart shows "Action match (excluded)" whole, not "Action match (exclu...";
    a role with one request reads "(1 call)", not "(1 calls)"."""
    opened = open_report(mixed_run / REPORT_FILE)
    labels = opened.page.locator("svg.chart text").all_text_contents()
    assert "Action match (excluded)" in labels
    assert not [label for label in labels if label.endswith("\u2026")]
    # and no text runs past its chart's edge (the value "100.00% (114/114 scenarios)" did)
    overflowing = opened.page.evaluate(
        """() => [...document.querySelectorAll("svg.chart text")]
            .filter((t) => {
              const box = t.getBBox();
              const width = t.ownerSVGElement.viewBox.baseVal.width;
              return box.x < -2 || box.x + box.width > width + 0.5;
            })
            .map((t) => t.textContent)"""
    )
    assert overflowing == []
    opened.page.locator(".vt-row").nth(0).click()
    opened.page.wait_for_selector("#scenario-view .chat")
    shown = opened.page.locator("#scenario-view").inner_text()
    assert "(1 calls)" not in shown
    _assert_clean(opened)
