"""The export at the end of a run (``--tau2-export-tau2=PATH``) and after ``merge``: the lines
it says and whether it was refused.

A shard's run is one share of the scenarios: it writes nothing, and says that ``merge`` will.
A refusal (or a run folder or data that cannot be read) is one line per reason; the run's
own files are written whatever happens here, so nothing of the run is lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tau2_retail.errors import ArtifactError, DataError, ExportRefused
from tau2_retail.tau2_format.export import ExportResult, export_run

__all__ = ["AfterRun", "export_after_run", "export_lines"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AfterRun:
    """What the end-of-run export says (each line starts with ``tau2:``) and whether it was
    refused (the run then exits 4 when nothing else failed)."""

    lines: tuple[str, ...]
    refused: bool = False


def export_lines(result: ExportResult) -> list[str]:
    """What an export says: the file, what it holds, and what ``--allow-incomplete`` did."""
    lines = [
        f"wrote {result.path}: {result.simulations} simulations, {result.tasks} tasks "
        "(upstream tau2-bench's results.json)"
    ]
    lines.extend(f"note: {note}" for note in result.notes)
    return lines


def export_after_run(
    run_dir: Path,
    output: Path,
    *,
    data_dir: Path | None = None,
    shard: tuple[int, int] | None = None,
) -> AfterRun:
    """Export ``run_dir`` to ``output`` as the end of a run does (``shard``: this run's share)."""
    if shard is not None:
        index, count = shard
        return AfterRun(
            lines=(
                f"tau2: {output} not written by shard {index}/{count}: `python -m tau2_retail "
                "merge` writes it for the merged run",
            )
        )
    try:
        result = export_run(run_dir, output, data_dir=data_dir)
    except ExportRefused as refused:
        lines = [f"tau2: {output} not written: {reason}" for reason in refused.reasons]
        if refused.partial:
            lines.append(
                f"tau2: to export what is there: python -m tau2_retail export {run_dir} "
                f"--format tau2 -o {output} --allow-incomplete"
            )
        return AfterRun(lines=tuple(lines), refused=True)
    except (ArtifactError, DataError) as error:
        return AfterRun(lines=(f"tau2: {output} not written: {error}",), refused=True)
    return AfterRun(lines=tuple(f"tau2: {line}" for line in export_lines(result)))
