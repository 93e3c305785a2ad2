"""What the tests that run the benchmark in a project of their own share: where the benchmark
module is, and readers of a run directory's files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["BENCHMARK_MODULE", "REPO_ROOT", "RunFiles"]

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCHMARK_MODULE = REPO_ROOT / "tests_tau2_retail" / "test_scenarios.py"


class RunFiles:
    """Readers of ``<output_dir>/<run id>/``; a subclass provides ``output_dir``."""

    __slots__ = ()
    output_dir: Path

    def run_dir(self, run_id: str) -> Path:
        return self.output_dir / run_id

    def read_json(self, run_id: str, name: str) -> Any:
        return json.loads((self.run_dir(run_id) / name).read_text(encoding="utf-8"))

    def summary(self, run_id: str) -> dict[str, Any]:
        summary: dict[str, Any] = self.read_json(run_id, "summary.json")
        return summary

    def metrics(self, run_id: str, scenario: str) -> dict[str, Any]:
        metrics: dict[str, Any] = self.read_json(run_id, f"{scenario}/metrics.json")
        return metrics
