"""Upstream tau2-bench's ``results.json``: a tau2-profile run exported to it, and upstream runs
read as runs of this suite (``spec/tau2_results.md``).

- :func:`export_run` (``python -m tau2_retail export``, ``--tau2-export-tau2``): one document
  that upstream's ``Results`` model loads, written one simulation at a time; a run that cannot
  be exported is refused with one line per reason (:class:`~tau2_retail.errors.ExportRefused`).
- :func:`upstream_summary`, :func:`import_results` (``python -m tau2_retail import``),
  :func:`read_baseline` (``--tau2-baseline``, ``report --against``): an upstream file read as
  upstream wrote it, never re-scored.

The layer sits above ``results`` (it reads and writes run folders) and below ``report`` (which
compares with an upstream file). The file's typed records are in :mod:`.schema`, upstream's
words (endings, implementations) and the decision on tool arguments that are not a JSON object
in :mod:`.terms`.
"""

from __future__ import annotations

from tau2_retail.tau2_format.after_run import AfterRun, export_after_run, export_lines
from tau2_retail.tau2_format.export import ExportResult, export_run
from tau2_retail.tau2_format.upstream_run import (
    import_results,
    read_baseline,
    upstream_run,
    upstream_summary,
)

__all__ = [
    "AfterRun",
    "ExportResult",
    "export_after_run",
    "export_lines",
    "export_run",
    "import_results",
    "read_baseline",
    "upstream_run",
    "upstream_summary",
]
