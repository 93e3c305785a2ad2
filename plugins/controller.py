"""The run: the pytest hooks of the process that owns the run files, a thin shell.

:class:`Tau2Run` is registered only where the run is written: the xdist controller, or the only
process without xdist (workers hold a :class:`~tau2_retail.plugins.process.Tau2Process` and
run scenarios). It hands each hook to the object of that concern:

- :class:`~tau2_retail.plugins.run_folder.RunFolder`: the start-up checks, the plan (sent to
  workers by :mod:`tau2_retail.plugins.interop`), the claim of the run folder once collection
  has finished, its lock and ``run_args.json``;
- :class:`~tau2_retail.plugins.ledger.RunLedger`: what was collected, each scenario's report
  (:mod:`tau2_retail.plugins.scenario_report`), the workers' ends, and at the end the records
  and the lost scenarios;
- :mod:`tau2_retail.plugins.verdict`: the CI gate and the exit status;
- :mod:`tau2_retail.plugins.reporter`: the header, the terminal section and the resume command.

At the end it writes the summaries and ``report.html``. It stays silent, and creates nothing,
when no tau2 scenario was collected. Every refusal of the run folder is a ``ConfigError``,
turned into a usage error (exit 4) here.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.errors import AgentInterrupted, ArtifactError, ConfigError, DataError
from tau2_retail.plugins.agents import AGENTS_KEY
from tau2_retail.plugins.compat import runs_no_test
from tau2_retail.plugins.interop import distributing_mode, record_suite_properties
from tau2_retail.plugins.ledger import NOT_RUN, NOT_RUN_INTERRUPTED, RunLedger
from tau2_retail.plugins.options import Tau2Settings
from tau2_retail.plugins.process import Tau2Process, send_plan
from tau2_retail.plugins.reporter import RunEnd, header_lines, resume_command, terminal_lines
from tau2_retail.plugins.run_folder import RunFolder
from tau2_retail.plugins.runtime import scenario_ids
from tau2_retail.plugins.scenario_report import WorkerLeftovers, scenario_of_item
from tau2_retail.plugins.verdict import run_verdict, suite_properties
from tau2_retail.report.page import ReportError, write_report
from tau2_retail.results.gate import GateVerdict
from tau2_retail.results.records import RunSummary
from tau2_retail.results.stopped_spending import with_ledger
from tau2_retail.results.summary import stopped_of, summary_inputs, write_run_summary
from tau2_retail.tau2_format.after_run import export_after_run

__all__ = ["NOT_RUN", "NOT_RUN_INTERRUPTED", "RUN_KEY", "Tau2Run"]

T = TypeVar("T")

_BROKEN = {
    pytest.ExitCode.INTERRUPTED: "interrupted",
    pytest.ExitCode.INTERNAL_ERROR: "with an internal error",
    pytest.ExitCode.USAGE_ERROR: "with a usage error",
}


def _usage(call: Callable[[], T]) -> T:
    """``call()``, its ``ConfigError`` a usage error (exit 4, one line)."""
    try:
        return call()
    except ConfigError as error:
        raise pytest.UsageError(str(error)) from None


def _described(error: Exception) -> str:
    """``MemoryError`` or ``ValueError: message``: an unexpected error's type and message."""
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


class Tau2Run:
    """The benchmark run of this pytest session, on the process that writes its files."""

    def __init__(self, config: pytest.Config, settings: Tau2Settings) -> None:
        self.config = config
        self.folder = RunFolder(settings, collect_only=runs_no_test(config))
        self.ledger = RunLedger(self._known_scenarios)
        self._process: Tau2Process | None = None
        #: what stops this run, held until a scenario is collected (see ``start``)
        self.unmet: ConfigError | None = None
        #: ``unmet`` stopped the session once its scenarios were collected
        self.stopped = False
        self.collected = False
        self.interrupted = False
        self.summary: RunSummary | None = None
        self.gate: GateVerdict | None = None
        self.problems: list[str] = []
        self.report_path: Path | None = None
        self.exit_problem: str | None = None
        #: the exit status the run decides (gate, unusable baseline, resumed run), set at finish
        self.exit_verdict: pytest.ExitCode | None = None
        #: what ``--tau2-export-tau2`` wrote, or why it did not
        self.export_lines: tuple[str, ...] = ()

    @property
    def process(self) -> Tau2Process:
        """This process's view of the plan (there once ``start`` has returned)."""
        assert self._process is not None, "Tau2Run.start() decides the plan first"
        return self._process

    def start(self, unmet: ConfigError | None = None, *, defer: bool = False) -> Tau2Process:
        """Decide the plan (:meth:`RunFolder.start`); returns this process's view of it.

        ``unmet`` is what the settings lack here (a key variable unset...). It, or a refusal of
        the run folder (the run id exists...), stops the session now (exit 4), unless
        ``defer``: no ``--tau2-*`` option was given, the settings come from the ini file, the
        environment or a ``tau2_agent`` fixture, which every pytest run of the project reads;
        the problem then waits for a scenario to be collected, and a session that collects
        none (the project's own tests) stays silent. The agent those name is imported then
        too (:meth:`_import_agent`), after that problem.
        """
        problem = unmet
        if problem is None:
            try:
                self.folder.start()
            except ConfigError as error:
                problem = error
        if problem is not None and not defer:
            raise pytest.UsageError(str(problem)) from None
        self.unmet = problem
        self._process = Tau2Process(self.folder.plan)
        return self._process

    def close(self) -> None:
        """Release the run folder's lock (idempotent): the run is over in this process."""
        self.folder.close()

    def _known_scenarios(self) -> list[str]:
        try:
            return scenario_ids(self.folder.settings)
        except (DataError, ValueError):
            return []  # the workers report the error, with its fix, when they collect

    # -- collection and the workers (these reached through ``plugins.interop``) ----------------

    def worker_payload(self) -> dict[str, Any]:
        """The run-wide values each worker receives, as plain values: the run plan."""
        payload: dict[str, Any] = {}
        send_plan(payload, self.folder.plan)
        return payload

    def on_worker_collection(self, node_id: str, ids: Sequence[str]) -> None:
        # Before any scenario is scheduled: the claim happens before any scenario starts. Under
        # --dist each every worker holds its own share: the expected list is the union.
        self._collected(self.ledger.worker_collected(node_id, ids))

    def on_worker_down(
        self, node_id: str, error: object | None, leftovers: WorkerLeftovers | None
    ) -> None:
        self.ledger.worker_down(node_id, error, leftovers)

    def incomplete(self, exitstatus: int) -> bool:
        """Whether the session ended before every worker finished: Ctrl-C (also while the
        workers were still starting), a refused claim of the run folder, a need of the run
        found unmet once the workers collected, a crashed worker."""
        return (
            exitstatus == pytest.ExitCode.INTERRUPTED
            or self.folder.refused
            or self.stopped
            or bool(self.ledger.workers_down)
        )

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        found = {
            item.nodeid: scenario.id
            for item in session.items
            if (scenario := scenario_of_item(item)) is not None
        }
        self._collected(self.ledger.collected(found))

    def _collected(self, scenarios: Sequence[str]) -> None:
        # a resumed run is active even when every scenario is complete (nothing left to run)
        if not scenarios and not self.folder.plan.completed:
            return
        if self.unmet is not None:
            self.stopped = True
            raise pytest.UsageError(str(self.unmet))
        self._import_agent()
        configuration = self.folder.configuration(self.ledger.agent_identity)
        _usage(lambda: self.folder.claim(scenarios, configuration))
        if self.collected:
            return
        self.collected = True
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        quiet = self.config.get_verbosity() < 0
        for line in header_lines(
            self.folder.plan,
            dist=distributing_mode(self.config),
            runs_no_test=self.folder.collect_only,
        ):
            if not quiet or "OFFLINE SELF-CHECK" in line:
                reporter.write_line(line)

    def _import_agent(self) -> None:
        """Import an agent the ini file or the environment names (pending since start-up: the
        project's own test sessions never import it), before the run folder is claimed and the
        header names the agent; one that cannot be loaded stops the session (exit 4)."""
        try:
            self.process.import_agent(self.config.stash[AGENTS_KEY])
        except ConfigError as error:
            self.stopped = True
            raise pytest.UsageError(str(error)) from None
        self.folder.plan = self.process.plan

    # -- results ---------------------------------------------------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        interrupt = self.ledger.observe(report)
        if interrupt is not None:
            # what Ctrl-C does, here in the process that owns the run (under xdist its workers
            # stop as for Ctrl-C; a worker interrupted itself would be reported as crashed)
            self.problems.append(f"tau2: interrupted by the agent: {interrupt}")
            raise AgentInterrupted(interrupt)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.ledger.collector_failed(report.nodeid)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(
        self, session: pytest.Session, exitstatus: int
    ) -> Generator[None, None, None]:
        """Write the run files, then apply the gate (its verdict is the exit status).

        A finished session is written before the other plugins finish (junit XML then holds the
        rates and the gate). An interrupted one is written after them: xdist's workers finish
        their current scenario while xdist shuts them down, and those records count too.
        """
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        self.ledger.take_leftovers(self.process.leftovers())  # this process's own (no xdist)
        # interrupted before pytest reported a scenario (during the first test's set-up, while
        # the scenarios started ahead ran): the records of those that finished still count
        recorded = self.folder.plan.completed or (interrupted and self.folder.claimed)
        # a session that runs no test (--setup-plan reports each one as set up) has no run
        active = not self.folder.collect_only and bool(
            self.ledger.seen or (self.collected and recorded)
        )
        self.interrupted = interrupted
        if active and not interrupted:
            self._finish(session)
        yield
        if active and interrupted:
            self._finish(session)
        if not active and exitstatus not in _BROKEN and not self.folder.collect_only:
            self.gate = self.ledger.empty.verdict(self.folder.settings)
            if self.gate is not None:
                self.exit_verdict = pytest.ExitCode.TESTS_FAILED
        # applied last: plugins that finish after us (one ORs in the status pytest passed to
        # the hook) must not undo the run's verdict
        if self.exit_verdict is not None:
            session.exitstatus = self.exit_verdict

    def _finish(self, session: pytest.Session) -> None:
        self.problems.extend(self.ledger.errored.set_aside(self.folder.run_dir))
        records, lost = self.ledger.records(
            self.folder.run_dir, self.folder.expected(), interrupted=self.interrupted
        )
        try:
            self.summary = self._write_summary(records, lost)
        except ArtifactError as error:
            self.problems.append(f"tau2: could not write the run summary: {error}")
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
            return
        try:
            self.report_path, _ = write_report(self.folder.run_dir)
        except ReportError as error:  # the summary is written; the page is a convenience
            self.problems.append(f"tau2: report.html not written: {error}")
        except Exception as error:
            # a page of a big run can exhaust the memory (MemoryError) or meet a bug of ours: the
            # run is scored and summarized, so it still ends with its section and gate, and the
            # error is named (`python -m tau2_retail report` builds the page again later)
            self.problems.append(f"tau2: report.html not written: {_described(error)}")
        self.exit_problem = _BROKEN.get(pytest.ExitCode(session.exitstatus))
        self._apply_gate(self.summary)
        self._export_tau2(session)

    def _write_summary(
        self, records: dict[str, ScenarioMetrics], lost: dict[str, str]
    ) -> RunSummary:
        """Write ``run_args.json`` and the summaries of ``records`` (by scenario) and ``lost``."""
        expected = self.folder.expected(*records, *lost, *self.ledger.seen)
        configuration = self.folder.configuration(self.ledger.agent_identity)
        args = self.folder.write_run_args(expected, configuration)
        # what every scenario stopped unscored had spent, in this session (the processes'
        # ledger) and (resume) the earlier ones: spent and billed, whether or not a later
        # invocation scored it (the ledger's lines past what the earlier summary counted)
        stopped = with_ledger(self.folder.run_dir, stopped_of(self.folder.earlier))
        return write_run_summary(
            self.folder.run_dir,
            [records[key] for key in sorted(records)],
            **summary_inputs(
                args,
                lost=lost,
                # those the budget stopped whose tests never reported (-x, Ctrl-C) too: the
                # ledger names them
                not_run=sorted(
                    (self.ledger.budget_skipped | set(stopped.budget_stopped)) - records.keys()
                ),
                stopped=stopped,
            ),
        )

    def _export_tau2(self, session: pytest.Session) -> None:
        """``--tau2-export-tau2``: the run as upstream's results.json; a refusal exits 4 when
        nothing else failed (the run's own files are written)."""
        settings = self.folder.settings
        if not settings.export_tau2:
            return
        exported = export_after_run(
            self.folder.run_dir,
            Path(settings.export_tau2),
            data_dir=Path(settings.data_dir) if settings.data_dir else None,
            shard=settings.shard,
        )
        self.export_lines = exported.lines
        status = session.exitstatus if self.exit_verdict is None else self.exit_verdict
        if exported.refused and status == pytest.ExitCode.OK:
            self.exit_verdict = pytest.ExitCode.USAGE_ERROR

    def _apply_gate(self, summary: RunSummary) -> None:
        verdict = run_verdict(
            summary,
            self.folder.settings,
            session_problem=self.exit_problem,
            errored_problem=self.ledger.errored.gate_problem(),
            others_failed=self.ledger.others_failed,
        )
        self.gate = verdict.gate
        self.exit_verdict = verdict.exit_status
        self.problems.extend(verdict.problems)
        record_suite_properties(
            self.config, suite_properties(self.folder.plan.run_id, summary, self.gate)
        )

    # -- the terminal section -----------------------------------------------------------------

    def resume_command(self) -> str:
        """The command that continues this run (see :func:`reporter.resume_command`)."""
        return resume_command(self.config.invocation_params.args, self.folder.plan.run_id)

    def not_run(self) -> list[str]:
        """Selected scenarios this session stopped before (``-x``, ``--maxfail``, Ctrl-C)."""
        if self.summary is None:
            return []
        # not run and lost (an expected scenario without a record): counted with the lost
        recorded = {row.scenario_id for row in self.summary.scenarios}
        budget = set(self.summary.not_run)  # stopped by the budget, listed as such
        return sorted(self.folder.selected - recorded - budget - self.ledger.seen)

    def run_end(self, summary: RunSummary) -> RunEnd:
        """What the terminal section is rendered from."""
        budget = self.process.budget
        return RunEnd(
            summary=summary,
            seen=frozenset(self.ledger.seen),
            stopped_before=tuple(self.not_run()),
            notices=tuple(self.ledger.notices),
            problems=tuple(self.problems),
            run_dir=self.folder.run_dir,
            report_path=self.report_path,
            export_lines=self.export_lines,
            exit_problem=self.exit_problem,
            resume_command=self.resume_command(),
            budget_line=budget.line(summary.counts.not_run) if budget is not None else None,
            gate=self.gate,
        )

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> Generator[None, None, None]:
        """The tau2 section comes last, after pytest's short test summary: the rates and the
        gate's verdict are the last lines a CI log shows (only pytest's closing line follows)."""
        yield
        if self.summary is None:
            if self.problems or self.gate:  # the summary failed, or a gate ran on nothing
                terminalreporter.section("tau2 retail")
            for line in [*self.problems, *([self.gate.line] if self.gate else [])]:
                terminalreporter.write_line(line)
            return
        terminalreporter.section("tau2 retail")
        failures_listed = bool(terminalreporter.hasopt("f"))
        end = self.run_end(self.summary)
        for line in terminal_lines(self.folder.settings, end, failures_listed=failures_listed):
            terminalreporter.write_line(line)

    def closing_lines(self) -> list[str]:
        """After Ctrl-C, the resume command: the session's very last line (below pytest's
        KeyboardInterrupt banner and its count of tests)."""
        if not self.interrupted or not self.folder.run_dir.is_dir():
            return []
        if self.summary is None and self.problems:
            return []  # the run could not be summarized: the section said why
        when = "" if self.summary is not None else " before any scenario finished"
        return [f"tau2: interrupted{when}; resume with: {self.resume_command()}"]


RUN_KEY = pytest.StashKey[Tau2Run]()
