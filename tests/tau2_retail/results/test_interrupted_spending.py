"""The ledger of what interrupted scenarios had spent: appended by every process, added up and
removed by the run, by ``summarize``, read by ``merge`` (the runs themselves:
``tests/plugins/test_interrupted_cost.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tau2_retail.errors import ArtifactError
from tau2_retail.results.interrupted_spending import (
    INTERRUPTED_SPENDING_FILE,
    InterruptedSpending,
    StopCause,
    clear_interrupted_spending,
    interrupted_spending,
    record_interrupted_spending,
)


def test_the_lines_of_every_process_add_up_with_their_causes_and_a_foreign_line_counts_nothing(
    tmp_path: Path,
) -> None:
    assert interrupted_spending(tmp_path) == InterruptedSpending()  # nothing was interrupted
    record_interrupted_spending(tmp_path, "tau2_retail__1", 0.0125, StopCause.TIMEOUT)
    record_interrupted_spending(tmp_path, "tau2_retail__4-trial2", 0.5, StopCause.INTERRUPT)
    record_interrupted_spending(tmp_path, "tau2_retail__5", 0.25, StopCause.INTERRUPT)
    with (tmp_path / INTERRUPTED_SPENDING_FILE).open("a", encoding="utf-8") as ledger:
        ledger.write(
            "tau2_retail__6 nan interrupt\nnot a line of ours\ntau2_retail__7 0.5 later\n"
            "tau2_retail__8 0.5\n"
        )

    spent = interrupted_spending(tmp_path)

    assert spent.cost == pytest.approx(0.7625)
    assert spent.causes == (StopCause.INTERRUPT, StopCause.TIMEOUT)  # each once, in order
    clear_interrupted_spending(tmp_path)
    assert not (tmp_path / INTERRUPTED_SPENDING_FILE).exists()
    clear_interrupted_spending(tmp_path)  # nothing to remove: no error


def test_spending_adds_up_with_each_cause_named_once_in_order() -> None:
    first = InterruptedSpending.of(0.5, [StopCause.SESSION_END, StopCause.MAXFAIL])
    assert first.causes == (StopCause.MAXFAIL, StopCause.SESSION_END)
    both = first.plus(InterruptedSpending.of(0.25, [StopCause.INTERRUPT, StopCause.MAXFAIL]))
    assert both == InterruptedSpending(
        cost=0.75, causes=(StopCause.INTERRUPT, StopCause.MAXFAIL, StopCause.SESSION_END)
    )


def test_an_unreadable_ledger_is_an_artifact_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / INTERRUPTED_SPENDING_FILE).mkdir()
    with pytest.raises(ArtifactError, match=r"cannot read .*\.interrupted-spending"):
        interrupted_spending(tmp_path)
