"""The ledger of what stopped scenarios had spent: appended by every process, added up past
the offset a summary counted by the run, ``summarize`` and ``merge``, never changed by them
(the runs themselves: ``tests/plugins/test_interrupted_cost.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tau2_retail.errors import ArtifactError
from tau2_retail.results.stopped_spending import (
    STOPPED_SPENDING_FILE,
    StopCause,
    StoppedSpending,
    record_stopped_spending,
    with_ledger,
)

NONE: StoppedSpending = StoppedSpending()


def test_the_lines_of_every_process_add_up_by_cause_and_a_foreign_line_counts_nothing(
    tmp_path: Path,
) -> None:
    assert with_ledger(tmp_path, NONE) == NONE  # nothing was stopped
    record_stopped_spending(tmp_path, "tau2_retail__1", 0.0125, StopCause.TIMEOUT)
    record_stopped_spending(tmp_path, "tau2_retail__4-trial2", 0.5, StopCause.INTERRUPT)
    record_stopped_spending(tmp_path, "tau2_retail__5", 0.25, StopCause.INTERRUPT)
    record_stopped_spending(tmp_path, "tau2_retail__9", 0.125, StopCause.BUDGET)
    with (tmp_path / STOPPED_SPENDING_FILE).open("a", encoding="utf-8") as ledger:
        ledger.write(
            "tau2_retail__6 nan interrupt\nnot a line of ours\ntau2_retail__7 0.5 later\n"
            "tau2_retail__8 0.5\n"
        )

    spent = with_ledger(tmp_path, NONE)

    assert spent.budget == 0.125
    assert spent.budget_stopped == ("tau2_retail__9",)
    assert spent.interrupted == pytest.approx(0.7625)
    assert spent.interrupted_by == (StopCause.INTERRUPT, StopCause.TIMEOUT)  # once, in order
    assert spent.counted == (tmp_path / STOPPED_SPENDING_FILE).stat().st_size  # all of it


def test_a_summary_adds_only_the_complete_lines_past_the_offset_it_starts_from(
    tmp_path: Path,
) -> None:
    record_stopped_spending(tmp_path, "tau2_retail__1", 0.5, StopCause.BUDGET)
    first = with_ledger(tmp_path, NONE)
    ledger = tmp_path / STOPPED_SPENDING_FILE
    assert first.counted == ledger.stat().st_size
    assert with_ledger(tmp_path, first) == first  # nothing new: the same amounts and offset
    # a process is writing its line: half of it is there (the next summary's)
    with ledger.open("a", encoding="utf-8") as file:
        file.write("tau2_retail__2 0.25 inter")

    second = with_ledger(tmp_path, first)

    assert second == first
    with ledger.open("a", encoding="utf-8") as file:
        file.write("rupt\n")
    record_stopped_spending(tmp_path, "tau2_retail__3", 0.125, StopCause.TIMEOUT)

    third = with_ledger(tmp_path, second)

    assert (third.budget, third.interrupted) == (0.5, 0.375)
    assert third.budget_stopped == ("tau2_retail__1",)
    assert third.interrupted_by == (StopCause.INTERRUPT, StopCause.TIMEOUT)
    assert third.counted == ledger.stat().st_size
    assert ledger.read_text(encoding="utf-8").count("\n") == 3  # never changed


@pytest.mark.parametrize("how", ["removed", "replaced"])
def test_a_ledger_shorter_than_the_offset_is_a_new_one_counted_from_its_start(
    tmp_path: Path, how: str
) -> None:
    """Removed or replaced by hand: what the summary holds stays, and the lines of the new
    file are added from its first (not skipped, nor read from the middle of a line)."""
    record_stopped_spending(tmp_path, "tau2_retail__1", 0.5, StopCause.INTERRUPT)
    record_stopped_spending(tmp_path, "tau2_retail__2", 0.25, StopCause.INTERRUPT)
    counted = with_ledger(tmp_path, NONE)
    (tmp_path / STOPPED_SPENDING_FILE).unlink()
    if how == "removed":
        assert with_ledger(tmp_path, counted) == StoppedSpending.of(
            interrupted=0.75, by=[StopCause.INTERRUPT]
        )  # offset 0: summary.json omits it
        return
    record_stopped_spending(tmp_path, "tau2_retail__3", 0.125, StopCause.MAXFAIL)

    spent = with_ledger(tmp_path, counted)

    assert spent.interrupted == 0.875
    assert spent.interrupted_by == (StopCause.INTERRUPT, StopCause.MAXFAIL)
    assert spent.counted == (tmp_path / STOPPED_SPENDING_FILE).stat().st_size


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
        with_ledger(tmp_path, NONE)
