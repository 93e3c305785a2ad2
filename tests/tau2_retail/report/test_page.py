"""The run report's Python side: escaping, what it reads from a run, the comparison.

The runs are real: the engine runs a few scenarios (built-in oracle and noop agents, a hostile
agent that answers markup, an endpoint that is down, a scripted judge) and writes their
artifacts and summaries with the suite's own functions (``tests/report/runs.py``).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tau2_retail import codec
from tau2_retail.report.compare import compare_summaries, comparison_lines
from tau2_retail.report.page import (
    REPORT_FILE,
    ROW_COLUMNS,
    ReportError,
    build_report_data,
    default_output,
    json_for_script,
    render_report,
    write_report,
)
from tau2_retail.report.scenario_page import action_pairs, record_differences
from tau2_retail.results.records import RunSummary
from tau2_retail.results.summary import build_summary
from tests.report.runs import HOSTILE, JUDGE_REASON, MIXED_PLAN, write_run
from tests.tau2_retail.results.test_summary import CONFIGURATION, VERSIONS, _tau2

ASSETS = Path(__file__).resolve().parents[3] / "src" / "tau2_retail" / "report" / "assets"

# task id -> the agent of each trial (tests/report/runs.py); 2 and 19 have NL assertions
PLAN = MIXED_PLAN
# the baseline: task 11 instead of 19, and other agents in some trials of 0, 2 and 7
BASELINE_PLAN = {task: agents for task, agents in PLAN.items() if task != "19"} | {
    "0": ["oracle", "oracle"],
    "2": ["noop", "oracle"],
    "7": ["oracle", "oracle"],
    "11": ["oracle", "oracle"],
}


@pytest.fixture(scope="module")
def runs(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two real runs: ``mixed`` (PLAN, with a judge) and ``baseline`` (BASELINE_PLAN)."""
    root = tmp_path_factory.mktemp("runs")
    write_run(root / "mixed", data_dir, PLAN)
    write_run(root / "baseline", data_dir, BASELINE_PLAN, judge=False)
    return {"mixed": root / "mixed", "baseline": root / "baseline"}


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _rows(main: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(zip(main["columns"], row, strict=True)) for row in main["rows"]]


# -- JSON inside <script> ---------------------------------------------------------------------


def test_json_for_script_hides_every_markup_character() -> None:
    value = {"text": "</script><!-- <script>alert(1)</script> & \u2028\u2029", "<k>": [1, None]}
    out = json_for_script(value)
    assert "<" not in out
    assert ">" not in out
    assert "&" not in out
    assert "\u2028" not in out
    assert "\\u003c/script\\u003e" in out
    assert json.loads(out) == value


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda children: st.lists(children) | st.dictionaries(st.text(), children),
        max_leaves=20,
    )
)
def test_json_for_script_round_trips_and_never_closes_the_block(value: Any) -> None:
    out = json_for_script(value)
    assert json.loads(out) == value
    assert "</" not in out
    assert "<!--" not in out


def test_the_assets_cannot_end_their_own_elements() -> None:
    for name in ("report.css", "report.js"):
        text = (ASSETS / name).read_text(encoding="utf-8")
        assert "</" not in text, name
        assert "<!--" not in text, name
    script = (ASSETS / "report.js").read_text(encoding="utf-8")
    assert "innerHTML" not in script
    assert "outerHTML" not in script
    assert "insertAdjacentHTML" not in script
    assert "document.write" not in script
    assert "eval(" not in script


# -- the page ---------------------------------------------------------------------------------


class _Elements(HTMLParser):
    """Collects script, style, link, img and iframe elements with their text."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None], str]] = []
        self.urls: list[str | None] = []
        self._open: tuple[str, dict[str, str | None]] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls.extend(v for k, v in attrs if k in ("src", "href", "action", "srcset", "data"))
        if tag in ("script", "style"):
            self._open = (tag, dict(attrs))
            self._text = []
        elif tag in ("link", "img", "iframe", "object", "embed", "base", "meta"):
            self.elements.append((tag, dict(attrs), ""))

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if self._open is not None and tag == self._open[0]:
            self.elements.append((tag, self._open[1], "".join(self._text)))
            self._open = None


def _csp_hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def test_the_page_is_self_contained_and_its_data_blocks_parse(runs: dict[str, Path]) -> None:
    data = build_report_data(runs["mixed"])
    page = render_report(data)
    parser = _Elements()
    parser.feed(page)
    scripts = [(attrs, text) for tag, attrs, text in parser.elements if tag == "script"]
    code = [(attrs, text) for attrs, text in scripts if attrs.get("type") != "application/json"]
    blocks = {
        attrs["id"]: text for attrs, text in scripts if attrs.get("type") == "application/json"
    }

    # one script of code (ours, allowed by its hash), one block per scenario + data + strings
    assert len(code) == 1
    assert code[0][1] == (ASSETS / "report.js").read_text(encoding="utf-8")
    assert set(blocks) == {"tau2-data", "tau2-strings"} | {
        f"tau2-d{i}" for i in range(len(data.details))
    }
    assert json.loads(blocks["tau2-data"]) == json.loads(json.dumps(data.main))
    assert json.loads(blocks["tau2-strings"]) == data.strings
    for index, detail in enumerate(data.details):
        assert json.loads(blocks[f"tau2-d{index}"]) == json.loads(json.dumps(detail))

    # nothing is loaded from anywhere: no src, no href, no external element
    others = [tag for tag, _attrs, _text in parser.elements if tag not in ("script", "style")]
    assert set(others) == {"meta"}
    assert parser.urls == ["#"]  # the page's own link to its overview
    csp = next(
        attrs["content"]
        for tag, attrs, _ in parser.elements
        if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy"
    )
    assert csp is not None
    assert "default-src 'none'" in csp
    assert f"script-src '{_csp_hash(code[0][1])}'" in csp
    assert "unsafe-inline" not in csp
    style = next(text for tag, _attrs, text in parser.elements if tag == "style")
    assert f"style-src '{_csp_hash(style)}'" in csp


def test_model_text_reaches_the_page_only_inside_escaped_json(runs: dict[str, Path]) -> None:
    page = render_report(build_report_data(runs["mixed"]))
    assert HOSTILE not in page
    assert "window.__pwned" in page  # the text is there, as data
    # the only raw "<script" tags are ours: data blocks and the code
    assert page.count("<script") == page.count("</script>")
    assert page.count("<!--") == 0


def test_the_title_is_escaped(runs: dict[str, Path], tmp_path: Path) -> None:
    data = build_report_data(runs["mixed"])
    data.main["run"]["name"] = "<b>run</b>"
    page = render_report(data)
    assert "<title>tau2 retail report: &lt;b&gt;run&lt;/b&gt;</title>" in page


# -- what the page embeds ---------------------------------------------------------------------


def test_rows_follow_summary_json(runs: dict[str, Path]) -> None:
    summary = _json(runs["mixed"] / "summary.json")
    data = build_report_data(runs["mixed"])
    assert data.main["columns"] == list(ROW_COLUMNS)
    rows = _rows(data.main)
    assert [r["id"] for r in rows] == [s["scenario_id"] for s in summary["scenarios"]]
    assert [r["status"] for r in rows] == [s["status"] for s in summary["scenarios"]]
    assert data.main["summary"] == {
        k: v for k, v in summary.items() if k not in ("scenarios", "configuration")
    }
    by_id = {r["id"]: r for r in rows}
    infra = by_id["tau2_retail__7-trial1"]
    assert infra["status"] == "INFRA"
    assert infra["stop"] == "infra_error"
    assert infra["db"] is infra["exit"] is infra["action"] is None
    nl = by_id["tau2_retail__19-trial1"]
    assert (nl["nl_passed"], nl["nl_total"]) == (1, 2)
    assert by_id["tau2_retail__0-trial1"]["nl_passed"] is None
    assert by_id["tau2_retail__0-trial1"]["split"] == "train"
    assert by_id["tau2_retail__2-trial1"]["tokens"] == 3 * 220 + 340  # agent calls + judge
    assert data.main["comparison"] is None


def test_configuration_names_models_trials_and_seeds(runs: dict[str, Path]) -> None:
    config = dict(build_report_data(runs["mixed"]).main["configuration"])
    assert config["Agent"] == "test:mixed-agent"
    assert config["User"] == "builtin:customer"
    assert config["Judge"] == "test:judge"
    assert config["Trials"] == "2"
    assert config["Base seed"] == "300"
    assert config["Trial seeds"] == "trial 1: 300, trial 2: 301"
    assert config["Agent notes"] == "on"
    # the request settings of each endpoint role (issue 12, item 9)
    assert config["Agent requests"] == (
        "temperature 0.0; top_p default; max tokens default; timeout (s) 120.0; retries 4; "
        'extra body {"top_k": 20, "vendor_auth": "[redacted]"}; '
        "down after 5 failed attempts, probed every 30.0 s"
    )
    assert "User requests" not in config  # a built-in model sends no requests


def _detail(runs: dict[str, Path], scenario: str) -> tuple[dict[str, Any], list[str]]:
    data = build_report_data(runs["mixed"])
    index = [row[0] for row in data.main["rows"]].index(scenario)
    return data.details[index], data.strings


def _texts(value: Any, strings: list[str]) -> str:
    return value if isinstance(value, str) else strings[value] if isinstance(value, int) else ""


def test_the_conversation_of_a_hostile_agent_is_kept_verbatim(runs: dict[str, Path]) -> None:
    detail, strings = _detail(runs, "tau2_retail__2-trial1")
    roles = [m["r"] for m in detail["messages"]]
    assert roles[:2] == ["assistant", "user"]
    contents = [_texts(m["c"], strings) for m in detail["messages"]]
    assert HOSTILE in contents
    call = next(m for m in detail["messages"] if m.get("k"))
    call_id, name, arguments = call["k"][0]
    assert name == "get_order_details"
    assert json.loads(_texts(arguments, strings)) == {"order_id": HOSTILE}
    result = next(m for m in detail["messages"] if m.get("i") == call_id)
    assert result["r"] == "tool"
    assert result["e"] == 1
    assert all(m["t"] >= 0 for m in detail["messages"])
    assert detail["folder"] == "tau2_retail__2/trial-1"
    assert detail["problems"] == []


def test_judge_verdicts_and_reasons(runs: dict[str, Path]) -> None:
    detail, _ = _detail(runs, "tau2_retail__19-trial1")
    assert detail["judge"] == {"score": 0.5, "reason": f"overall: {HOSTILE}", "error": None}
    assert [(a["index"], a["passed"]) for a in detail["assertions"]] == [(1, True), (2, False)]
    assert detail["assertions"][0]["reason"] == JUDGE_REASON
    assert detail["assertions"][0]["text"]


def test_unjudged_assertions_come_from_the_scenario_config(runs: dict[str, Path]) -> None:
    data = build_report_data(runs["baseline"])
    index = [row[0] for row in data.main["rows"]].index("tau2_retail__2-trial1")
    detail = data.details[index]
    assert detail["judge"] is None
    assert len(detail["assertions"]) == 1
    assert detail["assertions"][0]["passed"] is None


def test_database_difference_record_by_record(runs: dict[str, Path]) -> None:
    detail, _ = _detail(runs, "tau2_retail__5-trial1")  # noop on a return task
    assert [(r["table"], r["key"], r["kind"]) for r in detail["db"]] == [
        ("orders", "#W6390527", "changed")
    ]
    fields = {path: (expected, actual) for path, expected, actual in detail["db"][0]["fields"]}
    assert fields["status"] == ('"return requested"', '"delivered"')
    assert fields["return_items"] == ('["8538875209"]', "null")
    passing, _ = _detail(runs, "tau2_retail__0-trial1")
    assert passing["db"] == []


def test_reference_and_recorded_actions_are_paired(runs: dict[str, Path]) -> None:
    oracle, _ = _detail(runs, "tau2_retail__0-trial1")
    assert oracle["reference"]
    assert oracle["recorded"] == oracle["reference"]
    assert oracle["pairs"] == list(range(len(oracle["reference"])))
    noop, _ = _detail(runs, "tau2_retail__0-trial2")
    assert noop["recorded"] == []
    assert noop["pairs"] == [-1] * len(noop["reference"])


def test_long_texts_are_stored_once(runs: dict[str, Path]) -> None:
    data = build_report_data(runs["mixed"])
    assert len(data.strings) == len(set(data.strings))
    assert all(len(text) >= 120 for text in data.strings)


def test_missing_scenario_files_are_named_not_fatal(runs: dict[str, Path], tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(runs["mixed"], run)
    (run / "tau2_retail__0" / "trial-1" / "transcript.json").unlink()
    (run / "tau2_retail__0" / "trial-1" / "db_diff.json").write_text("{not json", encoding="utf-8")
    data = build_report_data(run)
    detail = data.details[0]
    assert detail["messages"] == []
    assert detail["problems"][0] == "transcript.json: missing"
    assert detail["problems"][1].startswith("db_diff.json: not valid JSON")


def test_metrics_are_read_from_the_folders_without_all_metrics(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(runs["mixed"], run)
    expected = build_report_data(runs["mixed"]).main["rows"]
    (run / "all_metrics.json").unlink()
    assert build_report_data(run).main["rows"] == expected


def test_a_run_without_summary_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"summary.json not found.*summarize"):
        build_report_data(tmp_path)
    (tmp_path / "summary.json").write_text("[]", encoding="utf-8")
    with pytest.raises(ReportError, match="expected a JSON object"):
        build_report_data(tmp_path)
    (tmp_path / "summary.json").write_text('{"counts": {}}', encoding="utf-8")
    with pytest.raises(ReportError, match=r"'profile' is missing.*summarize"):
        build_report_data(tmp_path)
    with pytest.raises(ReportError, match="is not a directory"):
        build_report_data(tmp_path / "nowhere")


# -- record differences and action pairs --------------------------------------------------------


def test_record_differences_walks_objects_and_lists() -> None:
    expected = {"status": "pending", "items": [{"id": 1}, {"id": 2}], "gone": 1, "same": [1]}
    actual = {"status": "cancelled", "items": [{"id": 1}, {"id": 3}, {"id": 4}], "same": [1]}
    assert record_differences(expected, actual) == [
        ["status", '"pending"', '"cancelled"'],
        ["items[1].id", "2", "3"],
        ["items[2]", None, '{"id": 4}'],
        ["gone", "1", None],
    ]
    assert record_differences({"a": None}, {}) == [["a", "null", None]]
    assert record_differences({"a": 1}, {"a": True}) == [["a", "1", "true"]]
    assert record_differences({"a": [1]}, {"a": [1]}) == []


def test_action_pairs_follow_the_action_match_rule() -> None:
    reference = [
        {"name": "cancel", "arguments": {"order_id": "#W1", "reason": "no longer needed"}},
        {"name": "refund", "arguments": {"amount": 10.0}},
        {"name": "cancel", "arguments": {"order_id": "#W1", "reason": "no longer needed"}},
    ]
    recorded = [
        {"name": "lookup", "arguments": {}},
        {"name": "refund", "arguments": {"amount": 10.0000000001}},
        {"name": "cancel", "arguments": {"order_id": "#W1", "reason": "no longer needed"}},
    ]
    # each recorded action matches once: the second cancel has no partner left
    assert action_pairs(reference, recorded) == [2, 1, -1]
    assert action_pairs([], recorded) == []


# -- comparing runs -----------------------------------------------------------------------------


def test_a_flip_names_no_change_of_a_signal_one_run_does_not_score() -> None:
    """CLEAN_EXIT of a tau2-profile run is not applicable (null in its rows); a baseline
    written before that (false in every row), or a default-profile one, did not see it change."""
    ours, passed = (
        build_summary(
            [_tau2("0", 0, reward)],
            expected=None,
            trials=2,
            configuration=CONFIGURATION,
            versions=VERSIONS,
        )
        for reward in (0.0, 1.0)
    )

    def clean_exit(value: bool | None) -> RunSummary:
        rows = tuple(dataclasses.replace(row, clean_exit=value) for row in passed.scenarios)
        return dataclasses.replace(passed, scenarios=rows)

    written_before, default = clean_exit(False), clean_exit(True)

    for baseline in (passed, written_before, default):
        flips = compare_summaries(ours, baseline)["flips"]
        assert [(f["kind"], f["signals"]) for f in flips] == [("broken", [])]


def test_compare_lists_flips_and_rate_differences(runs: dict[str, Path]) -> None:
    current = _json(runs["mixed"] / "summary.json")
    baseline = _json(runs["baseline"] / "summary.json")
    comparison = compare_summaries(
        codec.decode_value(RunSummary, current), codec.decode_value(RunSummary, baseline)
    )
    flips = {f["id"]: f for f in comparison["flips"]}
    assert flips["tau2_retail__0-trial2"]["kind"] == "broken"
    assert flips["tau2_retail__0-trial2"]["signals"] == [
        "DB_STATE_MATCH",
        "ACTION_MATCH",
    ]
    assert flips["tau2_retail__7-trial1"]["kind"] == "changed"
    assert (
        flips["tau2_retail__7-trial1"]["baseline"],
        flips["tau2_retail__7-trial1"]["current"],
    ) == (
        "PASS",
        "INFRA",
    )
    assert "tau2_retail__5-trial1" not in flips  # FAIL in both
    assert comparison["only_current"] == ["tau2_retail__19-trial1", "tau2_retail__19-trial2"]
    assert comparison["only_baseline"] == ["tau2_retail__11-trial1", "tau2_retail__11-trial2"]

    rates = {e["name"]: e for e in comparison["rates"]}
    success = rates["Overall success"]
    assert success["current"] == current["success_rate"]["rate"]
    assert success["baseline"] == baseline["success_rate"]["rate"]
    assert success["delta"] == pytest.approx(success["current"] - success["baseline"])
    assert rates["NL-Assertion pass"]["baseline"] is None  # no judge in the baseline
    assert rates["NL-Assertion pass"]["delta"] is None
    assert rates["pass^2"]["current"] == current["pass_hat_k"][1]["value"]
    assert "split train" in rates
    assert "persona lisa_brenner" in rates


def test_runs_of_other_trial_counts_compare_by_task_and_trial(runs: dict[str, Path]) -> None:
    """A one-trial run against an upstream file of two trials paired 3 scenarios, then listed
    all 114 as "only in this run" and the baseline's 6 as "only in the baseline": its ids
    (``tau2_retail__5``) were matched against ``tau2_retail__5-trial1``."""
    mixed = codec.decode_value(RunSummary, _json(runs["mixed"] / "summary.json"))
    first = [row for row in mixed.scenarios if row.trial == 1]
    one_trial = dataclasses.replace(
        mixed,
        scenarios=tuple(
            dataclasses.replace(row, scenario_id=row.scenario_id.removesuffix("-trial1"))
            for row in first
        ),
    )
    comparison = compare_summaries(one_trial, mixed)
    assert comparison["only_current"] == []
    assert comparison["only_baseline"] == [r.scenario_id for r in mixed.scenarios if r.trial == 2]
    assert comparison["flips"] == []  # the same scenarios, the same statuses
    assert set(comparison["baseline_status"]) == {row.scenario_id for row in one_trial.scenarios}
    assert comparison["paired"]["pairs"] == sum(row.status in ("PASS", "FAIL") for row in first)


def test_comparison_lines_for_the_terminal(runs: dict[str, Path]) -> None:
    data = build_report_data(runs["mixed"], against=runs["baseline"])
    comparison = data.main["comparison"]
    assert comparison["name"] == "baseline"
    lines = comparison_lines(comparison)
    assert lines[0] == "against baseline:"
    assert any(line.strip().startswith("Overall success") and "pp" in line for line in lines)
    assert any(line.startswith("flipped: ") for line in lines)
    assert "  tau2_retail__0-trial2: PASS -> FAIL" in lines
    # a long list is cut in the terminal (the page has them all)
    many = {**comparison, "flips": [comparison["flips"][0]] * 30}
    assert comparison_lines(many)[-1] == "only in the baseline: 2 scenarios"
    assert "  ... and 10 more (see the report)" in comparison_lines(many)


# -- writing and the command --------------------------------------------------------------------


def test_default_output_names(tmp_path: Path) -> None:
    assert default_output(tmp_path / "a", None) == tmp_path / "a" / REPORT_FILE
    assert default_output(tmp_path / "a", tmp_path / "b c") == tmp_path / "a" / "report-vs-b_c.html"


def test_write_report_turns_write_failures_into_report_errors(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    blocked = tmp_path / "blocked"
    (blocked / "x").mkdir(parents=True)
    with pytest.raises(ReportError, match="cannot write"):
        write_report(runs["mixed"], output=blocked)


def test_report_header_names_the_profile(runs: dict[str, Path]) -> None:
    data = build_report_data(runs["mixed"])
    assert data.main["configuration"][0] == ["Profile", "default"]


def test_an_unreadable_judgement_shows_its_assertions_as_not_judged() -> None:
    # issue 18, item 2: the judge's replies could not be read: no verdict on the agent
    from tau2_retail.report.scenario_page import _assertions

    judged = {
        "score": 0.0,
        "reason": "Judge error: unreadable reply, also when asked again: ...",
        "error": "unreadable reply, also when asked again: ...",
        "unreadable": True,
        "nl_assertion_verdicts": [
            {"index": 1, "assertion": "a", "passed": False, "reason": "Judge error: ..."}
        ],
    }
    items, summary = _assertions(judged, None)
    assert [(item["index"], item["passed"]) for item in items] == [(1, None)]
    assert summary is not None
    assert summary["error"] == judged["error"]
    items, _ = _assertions({**judged, "unreadable": False}, None)
    assert items[0]["passed"] is False
