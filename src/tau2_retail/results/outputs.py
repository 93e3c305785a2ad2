"""Where a command may write a file beside a run: never over the run's own records.

``report --output`` and ``export -o`` took any path: given ``RUN/run_args.json`` (a slip of the
shell's completion) they replaced it, and the run could no longer be resumed or summarized
(``run_args.json`` cannot be rebuilt). A path that is one of the run's records, or anything
inside a scenario's folder, is refused before anything is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from tau2_retail.results.lock import LOCK_FILE
from tau2_retail.results.summary import (
    ALL_METRICS_FILE,
    RUN_ARGS_FILE,
    SUMMARY_JSON_FILE,
    SUMMARY_TEXT_FILE,
)

__all__ = ["RUN_RECORDS", "output_problem"]

RUN_RECORDS: Final = frozenset(
    {RUN_ARGS_FILE, SUMMARY_JSON_FILE, SUMMARY_TEXT_FILE, ALL_METRICS_FILE, LOCK_FILE}
)
"""The files of a run folder's top level that only the run and ``summarize`` write."""


def output_problem(run_dir: Path, output: Path) -> str | None:
    """Why ``output`` must not be written for ``run_dir`` (it is one of the run's records,
    or inside a scenario's folder), or None."""
    run = Path(run_dir).resolve()
    target = Path(output).resolve()
    if target.parent == run and target.name in RUN_RECORDS:
        return f"{output} is the run's own {target.name}: write the file elsewhere"
    if run in target.parents and target.parent != run:
        return f"{output} is inside the run's scenario folders: write the file elsewhere"
    return None
