"""How the benchmarks print their figures: plain-text tables (also valid Markdown), a run's
progress line, the targets and their verdicts."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from _measure import Run, load_average


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A plain-text table (also valid Markdown)."""
    shown = [[_cell(value) for value in row] for row in rows]
    widths = [
        max(len(h), *(len(r[i]) for r in shown)) if shown else len(h) for i, h in enumerate(headers)
    ]
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |",
        "| " + " | ".join("-" * w for w in widths) + " |",
    ]
    lines += [
        "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
        for row in shown
    ]
    return "\n".join(lines)


Column = tuple[str, str | Callable[[Mapping[str, Any]], Any]]
"""A table's column: its header and the row's key, or a function of the row, giving its value."""


def parse_with_data(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The script's arguments; stops as ``parser`` does when ``TAU2_DATA_DIR`` is not set (the
    suites it runs need the data folder)."""
    args = parser.parse_args()
    if not os.environ.get("TAU2_DATA_DIR"):
        parser.error("set TAU2_DATA_DIR to the data folder")
    return args


def print_targets(rows: Iterable[Sequence[Any]]) -> None:
    """The targets table: a row per target, its limit, the figure measured and the verdict."""
    print("\nTargets\n")
    print(table(["target", "limit", "measured", "verdict"], rows))


def print_run(label: str, run: Run, figures: Mapping[str, Any], *details: str) -> None:
    """One line as a suite run ends: its wall against the ideal, completions, harness CPU,
    then ``details``, its exit status, the load and pytest's last line."""
    shown = "".join(f"{detail}, " for detail in details)
    print(
        f"  {label}: wall {run.wall_s:.1f} s, ideal {figures['ideal_s']:.1f} s "
        f"(x{figures['wall_over_ideal']:.3f}), {figures['completions']} completions, harness "
        f"CPU {figures['harness_cpu_ms_per_completion']:.2f} ms/completion, {shown}"
        f"rc {run.returncode}, load {load_average()[0]:.2f}: {run.last_line()}",
        flush=True,
    )


def run_columns(agree: str) -> tuple[Column, ...]:
    """A suite run's columns every server benchmark shows, in this order: scenarios
    (succeeded), completions (marked where the suite's own count disagrees: ``agree`` names
    that row's key), wall, start-up, ideal and wall/ideal."""
    return (
        ("scenarios (succeeded)", lambda r: f"{r['scenarios']} ({r['succeeded']})"),
        (
            "completions",
            lambda r: r["completions"] if r[agree] else f"{r['completions']} (suite disagrees)",
        ),
        ("wall s", "wall_s"),
        ("start-up s", "startup_s"),
        ("ideal s", "ideal_s"),
        ("wall/ideal", "wall_over_ideal"),
    )


def column_table(columns: Sequence[Column], rows: Iterable[Mapping[str, Any]]) -> str:
    """A :func:`table` of ``rows`` (figures by key), each column's header beside its value."""
    return table(
        [header for header, _ in columns],
        [
            [row[value] if isinstance(value, str) else value(row) for _, value in columns]
            for row in rows
        ],
    )


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def verdict(value: float, limit: float) -> str:
    return "met" if value <= limit else "NOT met"
