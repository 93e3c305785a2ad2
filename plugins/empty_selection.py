"""A gate asked for on a session that runs no scenario fails: it has nothing to measure.

``--tau2-tasks=0 --tau2-shard=2/2 --tau2-min-pass-rate=0.5`` selects no scenario (the only task
is in shard 1): the benchmark test is collected with an empty parameter set and pytest skips it,
exit 0. A gate must never pass by default, so the session fails with a gate line that says why.
The gate applies when the benchmark module was collected in the session (scenarios deselected by
``-k``/``-m`` included), or when the gate was asked for on the command line or in the
environment; a gate in the ini file of a project whose session did not collect the benchmark
(the team running its own unit tests) stays silent, as the run does.
"""

from __future__ import annotations

from tau2_retail.plugins.options import Tau2Settings
from tau2_retail.results.gate import GateVerdict, empty_selection_verdict

__all__ = ["EmptySelection"]

_GATE_SETTINGS = ("min_pass_rate", "baseline")
_SELECTION_SETTINGS = ("tasks", "shard", "split")


class EmptySelection:
    """Whether the session collected the benchmark, and the verdict when it ran nothing."""

    def __init__(self) -> None:
        self.benchmark_collected = False

    def collected(self, benchmark: bool) -> None:
        """Whether a process of this session collected a test of the benchmark (deselected
        ones included)."""
        self.benchmark_collected = self.benchmark_collected or benchmark

    def verdict(self, settings: Tau2Settings) -> GateVerdict | None:
        """The failing verdict when a gate applies to this session that ran no scenario."""
        if settings.min_pass_rate is None and not settings.baseline:
            return None
        explicit = any(
            not settings.sources.get(name, "default").startswith(("ini ", "default"))
            for name in _GATE_SETTINGS
        )
        if not (self.benchmark_collected or explicit):
            return None
        shown = {
            "tasks": ",".join(settings.tasks),
            "shard": "/".join(map(str, settings.shard or ())),
            "split": settings.split,
        }
        given = [
            f"{settings.sources[name]} {shown[name]}"
            for name in _SELECTION_SETTINGS
            if settings.sources.get(name, "default") != "default"
        ]
        why = (
            f"the selection is empty: {', '.join(given)}"
            if given
            else "no benchmark scenario was selected"
        )
        return empty_selection_verdict(why)
