"""The run: its id and directory, resume bookkeeping, and the controller's aggregation.

``Tau2Run`` is registered as a plugin object in ``pytest_configure`` and kept in the config
stash. Workers (``config.workerinput``) only run scenarios and write their artifacts; the
controller (or the only process, without xdist) receives each scenario's metrics as a plain
value on its teardown report and writes the run files once, at the end.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from tau2_retail.errors import ArtifactError, Tau2Error
from tau2_retail.plugins.options import Tau2Settings
from tau2_retail.plugins.runtime import DataBundle, load_bundle
from tau2_retail.results.artifacts import load_run_metrics, validate_name

__all__ = ["METRICS_KEY", "RUN_KEY", "Tau2InfraError", "Tau2Run"]

METRICS_KEY = pytest.StashKey[dict[str, Any]]()
_SCENARIO_IN_NODEID = re.compile(r"::test_tau2_retail\[(tau2_retail__\d+(?:-trial\d+)?)\]$")
# A key that names a secret (api_key, x-api-key, access_token, Authorization), not one that only
# mentions a word such as the sampling setting ``max_tokens``.
_SECRETISH = re.compile(r"(key|token|secret|authorization|password)$", re.IGNORECASE)


def _new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def scenario_of(nodeid: str) -> str | None:
    match = _SCENARIO_IN_NODEID.search(nodeid)
    return match.group(1) if match else None


def redact(value: Any) -> Any:
    """A copy of ``value`` with anything under a secret-looking key replaced."""
    if isinstance(value, dict):
        return {
            key: "[redacted]"
            if _SECRETISH.search(str(key)) and not str(key).endswith("_env")
            else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [redact(item) for item in value]
    return value


def profile_line(profile: str) -> str:
    """The run header's line naming the profile and what it means."""
    if profile == "tau2":
        return (
            "tau2: profile tau2: upstream tau2-bench's prompts, tools, endings and reward "
            "(pinned sources; identifier normalization off); headline: tau2 reward / pass^k"
        )
    return (
        "tau2: profile default: policy + our notes, our tool descriptions + end_conversation, "
        "our judge; headline: success rate (DB_STATE_MATCH, CLEAN_EXIT, NL_ASSERTION)"
    )


class Tau2InfraError(Exception):
    """An endpoint failed after retries: the scenario is an error, not a failure."""


class Tau2Run:
    """State of one pytest session's benchmark run (one per process)."""

    def __init__(self, config: pytest.Config, settings: Tau2Settings) -> None:
        self.config = config
        self.settings = settings
        workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
        self.is_worker = workerinput is not None
        if workerinput is not None:
            self.run_id: str = workerinput["tau2_run_id"]
            self.completed: frozenset[str] = frozenset(workerinput["tau2_completed"])
        else:
            self.run_id = settings["resume"] or settings["run_id"] or _new_run_id()
            self.completed = frozenset()
        validate_name("run id", self.run_id)
        self.run_dir = Path(settings["output_dir"]).joinpath(self.run_id).absolute()
        self._bundle: DataBundle | None = None
        self.metrics: dict[str, dict[str, Any]] = {}
        self.seen: set[str] = set()
        self.summary: dict[str, Any] | None = None
        self.gate_line: str | None = None

    @property
    def public_configuration(self) -> dict[str, Any]:
        """The settings as plain values, secrets redacted, plus the run id."""
        configuration: dict[str, Any] = redact(self.settings.to_json())
        configuration["run_id"] = self.run_id
        return configuration

    # -- start-up ---------------------------------------------------------------------------

    def prepare_controller(self) -> None:
        """Controller only: check the output folder and, on resume, find finished scenarios."""
        for folder in (self.run_dir, *self.run_dir.parents):
            if folder.exists():
                problem = None
                if not folder.is_dir():
                    problem = "is a file"
                elif not os.access(folder, os.W_OK | os.X_OK):
                    # read-only mount or permissions: every scenario would fail to write
                    problem = "is not writable"
                if problem:
                    raise pytest.UsageError(
                        f"{self.settings.sources['output_dir']}: "
                        f"{self.settings['output_dir']!r} is not valid for --tau2-output-dir; "
                        f"expected a folder (or a path to create one), but {folder} {problem}"
                    )
                break
        if self.settings["resume"]:
            if not self.run_dir.is_dir():
                raise pytest.UsageError(
                    f"--tau2-resume {self.run_id}: no run directory {self.run_dir}; "
                    f"runs are folders of --tau2-output-dir ({self.settings['output_dir']})"
                )
            try:
                finished = load_run_metrics(self.run_dir)
            except ArtifactError as error:
                raise pytest.UsageError(f"--tau2-resume {self.run_id}: {error}") from error
            self.completed = frozenset(
                m["scenario_id"] for m in finished if not m.get("infra_error")
            )

    @property
    def bundle(self) -> DataBundle:
        if self._bundle is None:
            try:
                self._bundle = load_bundle(self.settings)
            except Tau2Error as error:
                # from None: the chained error would print the same message a second time
                raise pytest.fail.Exception(str(error), pytrace=False) from None
        return self._bundle

    # -- hooks -------------------------------------------------------------------------------

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        settings = self.settings
        lines = [
            f"tau2: agent {settings.agent.describe()}; user {settings.user.describe()}; "
            f"judge {settings.judge.describe() if settings.judge else 'none'}",
            f"tau2: run {self.run_id} -> {self.run_dir}",
        ]
        if settings.is_offline_self_check:
            agent = settings.agent.name.removeprefix("builtin:")
            lines.append(
                f"tau2: OFFLINE SELF-CHECK (built-in {agent} agent, scripted customer, no judge): "
                "this measures the harness, not a model"
            )
        if settings.judge is None:
            lines.append(
                "tau2: NL assertions not applicable: no judge configured "
                "(set --tau2-judge-model and --tau2-judge-base-url)"
            )
        if settings["resume"]:
            lines.append(f"tau2: resuming: {len(self.completed)} scenario(s) already complete")
        lines.append(profile_line(settings["profile"]))
        return lines

    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if not self.completed:
            return
        keep: list[pytest.Item] = []
        done: list[pytest.Item] = []
        for item in items:
            scenario = scenario_of(item.nodeid)
            (done if scenario in self.completed else keep).append(item)
        if done:
            config.hook.pytest_deselected(items=done)
            items[:] = keep

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.excinfo is not None and call.excinfo.errisinstance(Tau2InfraError):
            # an outage is not a bug of the test: one line says what failed, no traceback
            report.longrepr = f"Tau2InfraError: {call.excinfo.value}"
        if call.when == "teardown":
            metrics = item.stash.get(METRICS_KEY, None)
            if metrics is not None:
                # a plain value on the report: xdist carries it to the controller
                report.tau2_metrics = metrics  # type: ignore[attr-defined]
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            return
        scenario = scenario_of(report.nodeid)
        if scenario is None:
            return
        self.seen.add(scenario)
        metrics = getattr(report, "tau2_metrics", None)
        if isinstance(metrics, dict):
            self.metrics[scenario] = metrics

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.is_worker or not (self.seen or self.completed):
            return
        from tau2_retail.plugins.summary import finish_run

        finish_run(self, session)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.summary is None:
            return
        from tau2_retail.plugins.summary import terminal_lines

        terminalreporter.section("tau2 retail")
        for line in terminal_lines(self):
            terminalreporter.write_line(line)


class XdistBridge:
    """Hands run-wide values to xdist workers (registered only when xdist is active)."""

    def __init__(self, run: Tau2Run) -> None:
        self.run = run

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["tau2_run_id"] = self.run.run_id
        node.workerinput["tau2_completed"] = sorted(self.run.completed)


RUN_KEY = pytest.StashKey[Tau2Run]()


def argv_redacted() -> list[str]:
    """The command line, with anything that looks like a key replaced."""
    shown = []
    for arg in sys.argv:
        shown.append("[redacted]" if re.search(r"sk-[A-Za-z0-9_-]{8,}", arg) else arg)
    return shown
