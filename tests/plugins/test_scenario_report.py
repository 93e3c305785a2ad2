"""One report per scenario (issue 27, item 2): a scenario's test tells the run everything in one
codec-encoded record, and a test is a scenario's by its parameter, never by its name."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from types import SimpleNamespace
from typing import Literal, cast

import pytest

from tau2_retail.models.agent import AgentIdentity
from tau2_retail.plugins.ledger import RunLedger
from tau2_retail.plugins.scenario_report import (
    REPORT_PROPERTY,
    ScenarioReport,
    attach_report,
    report_of,
    scenario_ids_of_nodes,
)

from .conftest import Bench

RECORD = ScenarioReport(
    scenario_id="tau2_retail__7-trial2",
    trial=2,
    verdict="FAIL: DB differs",
    artifacts="tau2_retail__7/trial2",
    agent=AgentIdentity(source="conftest.py::tau2_agent", name="mine", fixture=True),
    notices=("tau2: the response cache is off",),
)


def test_the_record_is_one_property_read_back_whole() -> None:
    item = cast(pytest.Item, SimpleNamespace(user_properties=[]))

    attach_report(item, RECORD)

    names = [name for name, _ in item.user_properties]
    assert names.count(REPORT_PROPERTY) == 1
    # beside it only what junit XML shows a reader (docs/ci.md), never read back
    assert sorted(set(names) - {REPORT_PROPERTY}) == ["tau2_artifacts", "tau2_outcome"]
    assert report_of([("tau2_nl_1", "met: ok"), *item.user_properties]) == RECORD
    assert report_of([("tau2_nl_1", "met: ok")]) is None


def test_node_ids_without_their_items_map_to_the_scenarios_the_plugin_parametrized() -> None:
    known = {"[tau2_retail__1]": "tau2_retail__1", "[tau2_retail__2]": "tau2_retail__2"}

    found = scenario_ids_of_nodes(
        [
            "pkg/test_scenarios.py::test_tau2_retail[tau2_retail__1]",
            "tests/test_mine.py::test_my_agent[tau2_retail__2]",  # any name
            "tests/test_own.py::test_other[tau2_retail__3]",  # not parametrized by the plugin
            "tests/test_own.py::test_plain",
        ],
        known,
    )

    assert found == {
        "pkg/test_scenarios.py::test_tau2_retail[tau2_retail__1]": "tau2_retail__1",
        "tests/test_mine.py::test_my_agent[tau2_retail__2]": "tau2_retail__2",
    }


def _report(
    nodeid: str, properties: list[tuple[str, object]], outcome: Literal["passed", "failed"]
) -> pytest.TestReport:
    return pytest.TestReport(
        nodeid, ("x.py", 1, "x"), {}, outcome, None, "setup", user_properties=properties
    )


def test_the_ledger_reads_a_scenario_from_its_record_and_its_test_from_collection() -> None:
    ledger = RunLedger(list)
    ledger.collected({"t.py::anything[a]": "tau2_retail__9"})
    item = cast(pytest.Item, SimpleNamespace(user_properties=[]))
    attach_report(item, RECORD)

    ledger.observe(_report("renamed.py::whatever", item.user_properties, "passed"))
    ledger.observe(_report("t.py::anything[a]", [], "failed"))  # errored before its record
    ledger.observe(_report("own.py::test_own", [], "failed"))

    assert ledger.seen == {"tau2_retail__7-trial2", "tau2_retail__9"}
    assert ledger.agent_identity == RECORD.agent
    assert list(ledger.notices) == list(RECORD.notices)
    assert ledger.others_failed == ["own.py::test_own"]
    assert list(ledger.errored.reasons) == ["tau2_retail__9"]


RENAMED = """
import pytest

@pytest.mark.asyncio(loop_scope="session")
async def test_my_agent(tau2_outcome):
    assert tau2_outcome.metrics.is_successful
"""


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_scenario_test_of_any_name_is_counted_with_its_one_record(
    bench: Bench, workers: str
) -> None:
    """A user's own test of the ``tau2_outcome`` fixture runs scenarios as the shipped one
    does; the run used to know a scenario only by the name ``test_tau2_retail`` in its node id
    and wrote no summary for them."""
    (bench.path / "test_mine.py").write_text(RENAMED, encoding="utf-8")
    junit = bench.path / "mine.xml"

    result = bench.run(
        "-n", workers, "--tau2-tasks=10,12", "--tau2-run-id=mine", f"--junitxml={junit}",
        "test_mine.py",
    )  # fmt: skip

    assert result.ret == 0, result.stdout.str()
    summary = bench.summary("mine")
    assert summary["counts"]["succeeded"] == 2
    cases = ET.parse(junit).getroot().iter("testcase")
    for case in cases:
        properties = [(p.get("name", ""), p.get("value", "")) for p in case.iter("property")]
        assert [name for name, _ in properties].count(REPORT_PROPERTY) == 1
        record = report_of(properties)
        assert record is not None
        assert record.verdict == "PASS"
        assert case.get("name") == f"test_my_agent[{record.scenario_id}]"
