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
    take_stopped_spending,
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
    assert spent.ledgers == ()  # read as it is (merge): nothing taken
    assert (tmp_path / STOPPED_SPENDING_FILE).exists()


def _files(run_dir: Path) -> list[str]:
    return sorted(path.name for path in run_dir.glob(f"{STOPPED_SPENDING_FILE}*"))


def test_a_summary_takes_the_ledger_as_a_batch_and_counts_no_batch_it_holds(
    tmp_path: Path,
) -> None:
    record_stopped_spending(tmp_path, "tau2_retail__1", 0.5, StopCause.BUDGET)

    first = take_stopped_spending(tmp_path, held=())

    assert first.budget == 0.5
    (batch,) = first.ledgers
    assert _files(tmp_path) == [batch] != [STOPPED_SPENDING_FILE]
    # a process appends after the take (an xdist worker killed late): a new live file
    record_stopped_spending(tmp_path, "tau2_retail__2", 0.25, StopCause.INTERRUPT)
    # the summary of `first` was written and lists `batch`, which could not be removed
    second = take_stopped_spending(tmp_path, held=first.ledgers)

    assert (second.budget, second.interrupted) == (0.0, 0.25)  # batch: counted already
    assert batch in second.ledgers
    assert len(second.ledgers) == 2
    assert stopped_spending(tmp_path, held=second.ledgers) == StoppedSpending()
    # a summary that held nothing (none, or unreadable: its amounts are lost) counts them all
    assert stopped_spending(tmp_path).budget == 0.5
    clear_stopped_spending(tmp_path, second.ledgers)
    assert _files(tmp_path) == []
    clear_stopped_spending(tmp_path, second.ledgers)  # nothing to remove: no error
    assert take_stopped_spending(tmp_path, held=()) == StoppedSpending()


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
