"""The ledger of what stopped scenarios had spent: appended by every process, added up and
removed by the run, by ``summarize``, read by ``merge`` (the runs themselves:
``tests/plugins/test_interrupted_cost.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tau2_retail.errors import ArtifactError
from tau2_retail.results.stopped_spending import (
    STOPPED_SPENDING_FILE,
    StopCause,
    StoppedSpending,
    clear_stopped_spending,
    record_stopped_spending,
    stopped_spending,
)


def test_the_lines_of_every_process_add_up_by_cause_and_a_foreign_line_counts_nothing(
    tmp_path: Path,
) -> None:
    assert stopped_spending(tmp_path) == StoppedSpending()  # nothing was stopped
    record_stopped_spending(tmp_path, "tau2_retail__1", 0.0125, StopCause.TIMEOUT)
    record_stopped_spending(tmp_path, "tau2_retail__4-trial2", 0.5, StopCause.INTERRUPT)
    record_stopped_spending(tmp_path, "tau2_retail__5", 0.25, StopCause.INTERRUPT)
    record_stopped_spending(tmp_path, "tau2_retail__9", 0.125, StopCause.BUDGET)
    with (tmp_path / STOPPED_SPENDING_FILE).open("a", encoding="utf-8") as ledger:
        ledger.write(
            "tau2_retail__6 nan interrupt\nnot a line of ours\ntau2_retail__7 0.5 later\n"
            "tau2_retail__8 0.5\n"
        )

    spent = stopped_spending(tmp_path)

    assert spent.budget == 0.125
    assert spent.interrupted == pytest.approx(0.7625)
    assert spent.interrupted_by == (StopCause.INTERRUPT, StopCause.TIMEOUT)  # once, in order
    clear_stopped_spending(tmp_path)
    assert not (tmp_path / STOPPED_SPENDING_FILE).exists()
    clear_stopped_spending(tmp_path)  # nothing to remove: no error


def test_spending_adds_up_with_each_cause_named_once_in_order() -> None:
    first = StoppedSpending.of(
        budget=0.125, interrupted=0.5, by=[StopCause.SESSION_END, StopCause.MAXFAIL]
    )
    assert first.interrupted_by == (StopCause.MAXFAIL, StopCause.SESSION_END)
    both = first.plus(
        StoppedSpending.of(interrupted=0.25, by=[StopCause.INTERRUPT, StopCause.MAXFAIL])
    )
    assert both == StoppedSpending(
        budget=0.125,
        interrupted=0.75,
        interrupted_by=(StopCause.INTERRUPT, StopCause.MAXFAIL, StopCause.SESSION_END),
    )


def test_an_unreadable_ledger_is_an_artifact_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / STOPPED_SPENDING_FILE).mkdir()
    with pytest.raises(ArtifactError, match=r"cannot read .*\.stopped-spending"):
        stopped_spending(tmp_path)
