"""The run: one object on the controller (or the single process) that owns the run files.

:class:`Tau2Run` is registered only where the run is written: the xdist controller, or the only
process without xdist (workers hold a :class:`~tau2_retail.plugins.process.Tau2Process` and
run scenarios). At start-up it checks the output folder, refuses an existing run id unless
resuming, and on resume takes the run folder's lock (:mod:`tau2_retail.results.lock`), compares
the stored configuration and adopts its scenario set. Once collection has finished, before any
scenario runs, it claims the run folder: creates and locks it (a new run) and writes
``run_args.json`` with the settings and the expected scenarios (what this session selected,
after ``-k``/``-m``/``--lf``, plus on resume those of the stored run), so a kill or a full disk
never leaves the folder without its description. It decides the run once, at start-up, as a
frozen :class:`~tau2_retail.plugins.process.RunPlan` (settings, adopted on resume, run id,
completed scenarios) that it hands to workers (``worker_payload``, sent by
:mod:`tau2_retail.plugins.interop`), receives each scenario's result through the report's
``user_properties``, and at the end completes ``run_args.json``, writes the summaries and
``report.html``, applies the CI gate (:func:`tau2_retail.results.gate.evaluate_gate`), and
writes the tau2 section of the terminal summary. The lock is held until ``pytest_unconfigure``
(the OS releases it if the process dies). It stays silent, and creates nothing, when no tau2
scenario was collected.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import shlex
import sys
from collections.abc import Generator, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.engine.profiles import ProfileName, policy_for
from tau2_retail.errors import AgentInterrupted, ArtifactError, DataError, RunInUse
from tau2_retail.models.agent import AgentIdentity
from tau2_retail.models.cache import CacheMode
from tau2_retail.models.secrets import redact_argv
from tau2_retail.plugins.budget import BUDGET_VERDICT
from tau2_retail.plugins.empty_selection import EmptySelection
from tau2_retail.plugins.errored import ErroredScenarios
from tau2_retail.plugins.interop import record_suite_properties
from tau2_retail.plugins.options import Tau2Settings
from tau2_retail.plugins.process import (
    RunPlan,
    Tau2Process,
    new_run_id,
    run_configuration,
    scenario_of,
    send_plan,
)
from tau2_retail.report.page import ReportError, write_report
from tau2_retail.results.artifacts import load_run_metrics
from tau2_retail.results.gate import GateVerdict, evaluate_gate
from tau2_retail.results.lock import RunLock
from tau2_retail.results.records import (
    RunArgs,
    RunConfiguration,
    RunSummary,
    ScenarioRow,
)
from tau2_retail.results.summary import (
    cost_lines,
    headline_lines,
    judge_format_line,
    pass_hat_k_line,
    read_run_args,
    read_summary,
    write_run_args,
    write_run_summary,
)
from tau2_retail.settings import EXTRA_BODY_FLAGS, adopt_stored, resume_differences

__all__ = [
    "AGENT_PROPERTY",
    "ARTIFACTS_PROPERTY",
    "INTERRUPT_PROPERTY",
    "NOTICE_PROPERTY",
    "NOT_RUN",
    "NOT_RUN_INTERRUPTED",
    "OUTCOME_PROPERTY",
    "RUN_KEY",
    "Tau2Run",
]

#: ``user_properties`` names a scenario's report carries (also visible in junit XML).
ARTIFACTS_PROPERTY = "tau2_artifacts"
OUTCOME_PROPERTY = "tau2_outcome"
#: why an expected scenario has no record when this session never started it
NOT_RUN = "not run (the session ended before it started)"
#: why an expected scenario has no record when Ctrl-C stopped the session before it started
NOT_RUN_INTERRUPTED = "not run (interrupted)"
#: a line a process has to say once (the response cache turned itself off)
NOTICE_PROPERTY = "tau2_notice"
#: the agent given as code, as its scenario saw it (JSON: source, name, version)
AGENT_PROPERTY = "tau2_agent"
#: the agent's code raised KeyboardInterrupt (where): the run stops as for Ctrl-C
INTERRUPT_PROPERTY = "tau2_interrupt"

_BROKEN = {
    pytest.ExitCode.INTERRUPTED: "interrupted",
    pytest.ExitCode.INTERNAL_ERROR: "with an internal error",
    pytest.ExitCode.USAGE_ERROR: "with a usage error",
}


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for package in ("tau2-retail-pytest", "pytest", "pytest-xdist", "openai"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


def argv_redacted() -> list[str]:
    """The command line, with keys, URL passwords and extra-body values redacted."""
    return redact_argv(sys.argv, extra_body_flags=EXTRA_BODY_FLAGS)


# flags a resume command drops: the run id it names itself, and the early stop of the session
# that stopped (``-x``, ``--maxfail``); each with the number of values that follow it when
# given without ``=``
_NOT_REPEATED = {
    "--tau2-resume": 1,
    "--tau2-run-id": 1,
    "-x": 0,
    "--exitfirst": 0,
    "--maxfail": 1,
    "--sw": 0,
    "--stepwise": 0,
}
# short flags without a value that may be combined with -x in one word (``-xq``)
_SHORT_SWITCHES = frozenset("xvqsl")


def resume_arguments(args: Sequence[str]) -> list[str]:
    """The arguments of a pytest command line that a resume repeats: every one but the run
    id, ``--tau2-resume`` and the early stop (``-x``, ``--maxfail``), as the user typed them."""
    kept: list[str] = []
    skip = 0
    for arg in args:
        if skip:
            skip -= 1
            continue
        name = arg.split("=", 1)[0]
        if name in _NOT_REPEATED:
            skip = 0 if "=" in arg else _NOT_REPEATED[name]
            continue
        if (
            len(arg) > 2
            and arg[0] == "-"
            and arg[1] != "-"
            and set(arg[1:]) <= _SHORT_SWITCHES
            and "x" in arg
        ):
            arg = arg.replace("x", "")
            if arg == "-":
                continue
        kept.append(arg)
    return kept


def profile_line(profile: ProfileName) -> str:
    """The run header's line naming the profile and what it means."""
    return f"tau2: profile {profile.value}: {policy_for(profile).description}"


class Tau2Run:
    """The benchmark run of this pytest session, on the process that writes its files."""

    def __init__(self, config: pytest.Config, settings: Tau2Settings) -> None:
        self.config = config
        #: the run as decided at start-up: final once ``start`` returns, then sent to workers
        self.plan = RunPlan(
            settings=settings, run_id=settings.resume or settings.run_id or new_run_id()
        )
        self._process: Tau2Process | None = None
        #: the agent as its scenarios saw it (a fixture's agent: name and version, once seen)
        self.agent_identity: AgentIdentity | None = None
        self.seen: set[str] = set()
        #: failed tests and collectors of the session that are not tau2 scenarios (a user's own)
        self.others_failed: list[str] = []
        self.collected = False
        self.summary: RunSummary | None = None
        self.gate: GateVerdict | None = None
        self.problems: list[str] = []
        self.report_path: Path | None = None
        self.exit_problem: str | None = None
        self.interrupted = False
        #: the scenario ids this session selected (after -k, --lf and resume): with those of
        #: the stored run, the expected list of ``run_args.json``
        self.selected: set[str] = set()
        #: the exit status the run decides (gate, unusable baseline, resumed run), set at finish
        self.exit_verdict: pytest.ExitCode | None = None
        #: the run folder's lock, held from the claim (resume: start-up) until ``close``
        self.lock: RunLock | None = None
        #: ``run_args.json`` of the resumed run, as stored
        self.stored: RunArgs | None = None
        self.claimed = False
        #: the claim of the run folder stopped the session (it is another process's)
        self.refused = False
        #: the workers that ended abnormally (crashed, or interrupted), and each worker's
        #: collected scenarios (under ``--dist each`` its share)
        self.workers_down: list[str] = []
        self.worker_scenarios: dict[str, frozenset[str]] = {}
        #: scenarios the budget kept from starting
        self.budget_skipped: set[str] = set()
        #: lines the processes asked to say once, in order
        self.notices: dict[str, None] = {}
        #: whether the benchmark was collected (a gate on an empty selection fails)
        self.empty = EmptySelection()
        #: scenarios whose test errored: never a success (see ``plugins.errored``)
        self.errored = ErroredScenarios()

    @property
    def process(self) -> Tau2Process:
        """This process's view of the plan (there once ``start`` has returned)."""
        assert self._process is not None, "Tau2Run.start() decides the plan first"
        return self._process

    @property
    def settings(self) -> Tau2Settings:
        return self.plan.settings

    @property
    def configuration(self) -> RunConfiguration:
        """The settings as the run files record them, with the agent as its scenarios saw it."""
        return run_configuration(self.plan, agent_identity=self.agent_identity)

    @property
    def run_dir(self) -> Path:
        return self.plan.run_dir

    @property
    def adopted(self) -> dict[str, Any]:
        return dict(self.plan.adopted)

    # -- start-up ---------------------------------------------------------------------------

    def start(self) -> Tau2Process:
        """Check the output folder, the run id and (on resume) the stored configuration, and
        decide the plan; returns this process's :class:`Tau2Process` of it.

        On resume the run folder's lock is taken here, before its files are read, and kept.
        """
        self._check_output_dir()
        try:
            if self.settings.resume:
                self._start_resume()
            elif self.run_dir.exists():
                self._refuse_existing()
            if self.settings.tasks:
                self._check_task_ids()
        except BaseException:
            self.close()
            raise
        self._process = Tau2Process(self.plan)
        return self._process

    def close(self) -> None:
        """Release the run folder's lock (idempotent): the run is over in this process."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def _option(self) -> str:
        run_id = self.plan.run_id
        return f"--tau2-resume {run_id}" if self.settings.resume else f"--tau2-run-id {run_id}"

    def _take_lock(self) -> None:
        """Lock the run folder, or stop: exit 4, one line naming the live process."""
        try:
            self.lock = RunLock.acquire(self.run_dir)
        except RunInUse as error:
            raise pytest.UsageError(
                f"{self._option()}: run {self.plan.run_id} is in use by {error.holder}; "
                "a run folder has one live process at a time: wait for that run to end, or "
                "choose another run id"
            ) from None
        except ArtifactError as error:
            raise pytest.UsageError(f"{self._option()}: {error}") from None

    def _refuse_existing(self) -> None:
        """A new run whose folder exists: name the live process if one holds it."""
        self._take_lock()
        self.close()
        raise pytest.UsageError(
            f"--tau2-run-id {self.plan.run_id}: {self.run_dir} already exists; "
            f"continue it with --tau2-resume {self.plan.run_id}, or choose a new run id "
            "(omit --tau2-run-id for a timestamp)"
        )

    def _check_output_dir(self) -> None:
        settings = self.settings
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
                        f"{settings.source('output_dir')}: {settings.output_dir!r} is not "
                        "valid for --tau2-output-dir; expected a folder (or a path to create "
                        f"one), but {folder} {problem}"
                    )
                break

    def _check_task_ids(self) -> None:
        from tau2_retail.data.files import resolve_data_dir
        from tau2_retail.data.tasks import load_tasks, unknown_task_ids

        try:
            tasks = load_tasks(resolve_data_dir(self.settings.data_dir or None))
        except DataError:
            return  # the data error is reported, with its fix, when scenarios are collected
        problem = unknown_task_ids(self.settings.tasks, tasks, given_as="--tau2-tasks")
        if problem:
            raise pytest.UsageError(f"{self.settings.source('tasks')}: {problem}")

    def _start_resume(self) -> None:
        settings = self.settings
        run_id = self.plan.run_id
        if not self.run_dir.is_dir():
            raise pytest.UsageError(
                f"--tau2-resume {run_id}: no run directory {self.run_dir}; "
                f"runs are folders of --tau2-output-dir ({settings.output_dir})"
            )
        self._take_lock()
        try:
            stored = read_run_args(self.run_dir)
        except ArtifactError as error:
            raise pytest.UsageError(f"--tau2-resume {run_id}: {error}") from None
        try:
            finished = load_run_metrics(self.run_dir)
        except ArtifactError as error:  # a record of another format version
            raise pytest.UsageError(f"--tau2-resume {run_id}: {error}") from None
        if stored is not None:
            self._compare(stored)
            self.stored = stored
        elif finished.records or finished.incomplete:
            # run_args.json is written before the first scenario starts: results without it
            # mean it was removed; the settings are unknown
            raise pytest.UsageError(
                f"--tau2-resume {run_id}: {self.run_dir} has scenario results but no "
                "run_args.json, so its settings are unknown and this session's could differ "
                "(another model would mix into its summary); start a new run without "
                "--tau2-resume"
            )
        self.plan = dataclasses.replace(
            self.plan,
            completed=frozenset(m.scenario_id for m in finished.records if not m.infra_error),
        )

    def _compare(self, stored: RunArgs) -> None:
        """Adopt the stored scenario set where not given; refuse any other difference."""
        run_id = self.plan.run_id
        try:
            settings, adopted = adopt_stored(
                self.settings, stored.configuration, where=f"{self.run_dir}/run_args.json: settings"
            )
        except ArtifactError as error:
            raise pytest.UsageError(f"--tau2-resume {run_id}: {error}") from None
        if adopted:
            self.plan = dataclasses.replace(self.plan, settings=settings, adopted=adopted)
        differing = resume_differences(stored.configuration, now=run_configuration(self.plan))
        if differing:
            raise pytest.UsageError(
                f"--tau2-resume {run_id}: the settings differ from the stored run "
                f"({'; '.join(map(str, differing))}); resume with the stored settings (drop or "
                "change those options), or start a new run without --tau2-resume"
            )

    # -- the workers (reached through ``plugins.interop``) -------------------------------------

    def worker_payload(self) -> dict[str, Any]:
        """The run-wide values each worker receives, as plain values: the run plan."""
        payload: dict[str, Any] = {}
        send_plan(payload, self.plan)
        return payload

    def on_worker_collection(self, node_id: str, ids: Sequence[str]) -> None:
        # Before any scenario is scheduled: the claim happens before any scenario starts. Under
        # --dist each every worker holds its own share: the expected list is the union.
        scenarios = [scenario for nodeid in ids if (scenario := scenario_of(nodeid))]
        self.empty.collected(ids)
        self.worker_scenarios[node_id] = frozenset(scenarios)
        self._collected(scenarios)

    def on_worker_down(self, node_id: str, error: object | None) -> None:
        if error is not None:
            self.workers_down.append(node_id)

    def _crashed_shares(self) -> dict[str, str]:
        """Each scenario a crashed worker held, with the worker (none after Ctrl-C: there every
        worker stops). Those without a record were not run because it crashed and no worker
        took them over (xdist's ``--max-worker-restart`` reached)."""
        if self.interrupted:
            return {}
        return {
            scenario: node_id
            for node_id in reversed(self.workers_down)
            for scenario in self.worker_scenarios.get(node_id, ())
        }

    def incomplete(self, exitstatus: int) -> bool:
        """Whether the session ended before every worker finished: Ctrl-C (also while the
        workers were still starting), a refused claim of the run folder, a crashed worker."""
        return exitstatus == pytest.ExitCode.INTERRUPTED or self.refused or bool(self.workers_down)

    def pytest_deselected(self, items: Sequence[pytest.Item]) -> None:
        self.empty.collected(item.nodeid for item in items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.empty.collected(item.nodeid for item in session.items)
        self._collected(
            [scenario for item in session.items if (scenario := scenario_of(item.nodeid))]
        )

    def _collected(self, scenarios: Sequence[str]) -> None:
        # a resumed run is active even when every scenario is complete (nothing left to run)
        if not scenarios and not self.plan.completed:
            return
        self._claim(scenarios)
        if self.collected:
            return
        self.collected = True
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        lines = self.header_lines()
        quiet = self.config.get_verbosity() < 0
        for line in lines:
            if not quiet or "OFFLINE SELF-CHECK" in line:
                reporter.write_line(line)

    def _claim(self, scenarios: Sequence[str]) -> None:
        """Create and lock the run folder (a new run) and describe it in ``run_args.json``.

        Called once collection has finished and before any scenario starts (per worker under
        xdist: the expected list grows to the union of the workers' selections). A collect-only
        session runs nothing and writes nothing.
        """
        new = set(scenarios) - self.selected
        self.selected |= new
        if self.config.option.collectonly or (self.claimed and not new):
            return
        self.refused = True  # until the claim is through
        if self.lock is None:
            try:
                self.run_dir.mkdir(parents=True)
            except FileExistsError:
                # another run with this id created it since start-up: name it if it is live
                self._refuse_existing()
            except OSError as error:
                raise pytest.UsageError(
                    f"--tau2-output-dir: cannot create the run folder {self.run_dir}: {error}"
                ) from None
            self._take_lock()
        try:
            self._write_run_args(self.expected())
        except ArtifactError as error:
            # nothing has run yet: a run folder that cannot be described is not started
            raise pytest.UsageError(
                f"{self._option()}: the run folder cannot be described before the scenarios "
                f"start: {error}"
            ) from None
        self.claimed = True
        self.refused = False

    def expected(self, *more: str) -> list[str]:
        """The run's expected scenarios: this session's selection, the records already in the
        folder (resume), the stored run's list (resume), and ``more``."""
        stored = self.stored.expected if self.stored is not None else ()
        return sorted({*self.selected, *self.plan.completed, *stored, *more})

    def _write_run_args(self, expected: Sequence[str]) -> None:
        settings = self.settings
        write_run_args(
            self.run_dir,
            RunArgs(
                argv=tuple(argv_redacted()),
                configuration=self.configuration,
                trials=settings.trials,
                expected=tuple(expected),
                versions=_versions(),
            ),
        )

    def header_lines(self) -> list[str]:
        settings = self.settings
        roles = settings.roles
        lines = [
            f"tau2: agent {settings.describe_agent()}; user {roles.user.describe()}; "
            f"judge {roles.judge.describe() if roles.judge else 'none'}",
            f"tau2: run {self.plan.run_id} -> {self.run_dir}",
        ]
        if settings.is_offline_self_check:
            lines.append(self.offline_banner())
        if roles.judge is None:
            lines.append(
                "tau2: NL assertions not applicable: no judge configured "
                "(set --tau2-judge-model; --tau2-judge-base-url defaults to OpenAI's)"
            )
        if settings.shard is not None:
            index, count = settings.shard
            lines.append(
                f"tau2: shard {index}/{count} of the selected tasks; merge the shards with "
                "python -m tau2_retail merge RUN_DIR... --into RUN_DIR"
            )
        if settings.concurrency > 1:
            lines.append(f"tau2: up to {settings.concurrency} scenarios in flight per process")
            source = settings.agent_source
            if source is not None and source.is_fixture:
                lines.append(
                    f"tau2: the agent comes from {source.identity.source}: a function-scoped "
                    "fixture runs its scenarios one at a time; return a factory from a "
                    "session-scoped fixture to keep them in flight (docs/agents.md)"
                )
        lines.extend(self.cost_header_lines())
        if settings.resume:
            lines.append(
                f"tau2: resuming: {len(self.plan.completed)} scenario(s) already complete"
                + (
                    f"; stored {', '.join(f'{k}={v}' for k, v in self.adopted.items())}"
                    if self.adopted
                    else ""
                )
            )
        lines.append(profile_line(settings.profile))
        return lines

    def cost_header_lines(self) -> list[str]:
        """What the run header says about the response cache, prices and the budget."""
        settings = self.settings
        lines = []
        if settings.cache and settings.cache_mode is not CacheMode.OFF:
            what = (
                "replay: no endpoint is contacted; a request not in the cache is an infra error"
                if settings.cache_mode is CacheMode.REPLAY
                else "read-write: identical requests are answered from it, at no cost"
            )
            lines.append(f"tau2: response cache {settings.cache} ({what})")
        if settings.prices is not None:
            lines.append(
                f"tau2: prices for {len(settings.prices.models)} model(s); the run reports "
                "its cost (USD)"
            )
        if settings.max_cost is not None:
            lines.append(
                f"tau2: budget ${settings.max_cost:,.4f} (--tau2-max-cost): each request "
                "reserves its estimated cost first; one that would pass it is not sent"
            )
        return lines

    def offline_banner(self) -> str:
        agent = self.settings.roles.agent.name.removeprefix("builtin:")
        return (
            f"tau2: OFFLINE SELF-CHECK (built-in {agent} agent, scripted customer, no judge): "
            "this measures the harness, not a model"
        )

    # -- results ---------------------------------------------------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        scenario = scenario_of(report.nodeid)
        interrupt = None
        for name, value in report.user_properties:
            if name == NOTICE_PROPERTY:
                self.notices.setdefault(str(value), None)
            elif name == OUTCOME_PROPERTY and value == BUDGET_VERDICT and scenario:
                self.budget_skipped.add(scenario)
            elif name == INTERRUPT_PROPERTY:
                interrupt = str(value)
        if scenario is not None:
            self.seen.add(scenario)
            self._agent_seen(report)
            self.errored.observe(scenario, report)
        elif report.failed:
            self.others_failed.append(report.nodeid)
        if interrupt is not None:
            # what Ctrl-C does, here in the process that owns the run (under xdist its workers
            # stop as for Ctrl-C; a worker interrupted itself would be reported as crashed)
            self.problems.append(f"tau2: interrupted by the agent: {interrupt}")
            raise AgentInterrupted(interrupt)

    def _agent_seen(self, report: pytest.TestReport) -> None:
        """A fixture's agent is known only once a scenario had it: its name and version then
        reach the summary, the report and the gate line (from a worker too)."""
        if self.agent_identity is not None:
            return
        for name, value in report.user_properties:
            if name == AGENT_PROPERTY and isinstance(value, str):
                data = json.loads(value)
                self.agent_identity = AgentIdentity(
                    source=str(data["source"]),
                    name=data.get("name"),
                    version=data.get("version"),
                    fixture=bool(data.get("fixture")),
                )

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.others_failed.append(report.nodeid or "collection")

    def _metrics(self) -> tuple[dict[str, ScenarioMetrics], dict[str, str]]:
        """The whole records in the run folder (this session's, and on resume the earlier
        ones), and why each other scenario of the run has none.

        The folder is the truth, as for resume and ``summarize``: a scenario whose record was
        written is complete even when Ctrl-C cut its test short or its report never reached
        this process; one without a whole record is lost, with the reason.
        """
        self.problems.extend(self.errored.set_aside(self.run_dir))
        on_disk = load_run_metrics(self.run_dir)
        records = {m.scenario_id: m for m in on_disk.records}
        reasons = dict(on_disk.incomplete)
        for scenario, reason in self.errored.reasons.items():  # lost, whatever its record
            records.pop(scenario, None)
            reasons[scenario] = reason
        for scenario in self.seen - records.keys() - self.budget_skipped:
            reasons.setdefault(scenario, "no metrics.json (interrupted, or its process was lost)")
        # selected but never started: lost, unless the budget kept them from starting
        crashed = self._crashed_shares()
        for scenario in set(self.expected()) - records.keys() - self.budget_skipped:
            worker = crashed.get(scenario)
            reasons.setdefault(
                scenario,
                (NOT_RUN_INTERRUPTED if self.interrupted else NOT_RUN)
                if worker is None
                else f"not run: its worker {worker} crashed and no worker took it over",
            )
        return records, reasons

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
        # interrupted before pytest reported a scenario (during the first test's set-up, while
        # the scenarios started ahead ran): the records of those that finished still count
        recorded = self.plan.completed or (interrupted and self.claimed)
        active = bool(self.seen or (self.collected and recorded))
        self.interrupted = interrupted
        if active and not interrupted:
            self._finish(session)
        yield
        if active and interrupted:
            self._finish(session)
        if not active and exitstatus not in _BROKEN and not self.config.option.collectonly:
            self.gate = self.empty.verdict(self.settings)
            if self.gate is not None:
                self.exit_verdict = pytest.ExitCode.TESTS_FAILED
        # applied last: plugins that finish after us (one ORs in the status pytest passed to
        # the hook) must not undo the run's verdict
        if self.exit_verdict is not None:
            session.exitstatus = self.exit_verdict

    def _finish(self, session: pytest.Session) -> None:
        records, lost = self._metrics()
        expected = self.expected(*records, *lost, *self.seen)
        settings = self.settings
        configuration = self.configuration
        try:
            self._write_run_args(expected)
            self.summary = write_run_summary(
                self.run_dir,
                [records[key] for key in sorted(records)],
                expected=expected,
                trials=settings.trials,
                configuration=configuration,
                versions=_versions(),
                lost=lost,
                not_run=sorted(self.budget_skipped - records.keys()),
            )
        except ArtifactError as error:
            self.problems.append(f"tau2: could not write the run summary: {error}")
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
            return
        try:
            self.report_path, _ = write_report(self.run_dir)
        except ReportError as error:  # the summary is written; the page is a convenience
            self.problems.append(f"tau2: report.html not written: {error}")
        self.exit_problem = _BROKEN.get(pytest.ExitCode(session.exitstatus))
        self._apply_gate()
        self._suite_properties()

    def _apply_gate(self) -> None:
        assert self.summary is not None
        settings = self.settings
        baseline: RunSummary | None = None
        if settings.baseline:
            try:
                baseline = read_summary(Path(settings.baseline))
            except ArtifactError as error:
                self.problems.append(f"tau2: baseline unusable: {error}")
            if baseline is None and not self.problems:
                self.problems.append(f"tau2: baseline {settings.baseline} has no summary.json")
            if baseline is None:
                self.exit_verdict = pytest.ExitCode.TESTS_FAILED
                return
        self.gate = evaluate_gate(
            self.summary,
            min_pass_rate=settings.min_pass_rate,
            max_infra_errors=settings.max_infra_errors,
            baseline=baseline,
            max_regression=settings.max_regression or 0.0,
            regression_alpha=settings.regression_alpha,
            session_problem=self.exit_problem,
            problems=[problem] if (problem := self.errored.gate_problem()) else [],
        )
        if self.gate is not None and self.others_failed:
            self.problems.append(
                f"tau2: {len(self.others_failed)} test(s) outside the benchmark failed "
                f"(first: {self.others_failed[0]}); the exit status stays failed whatever the "
                "gate says"
            )
        self.exit_verdict = self._verdict()

    def _verdict(self) -> pytest.ExitCode | None:
        """The exit status of the whole run when the session failed only in scenarios.

        With a gate, its verdict. Without one, a resumed run's status is the one an
        uninterrupted run would have: a failure, infra error or lost scenario recorded by an
        earlier session still fails it (and a run with nothing left to do is not "no tests").
        """
        if self.exit_problem is not None or self.others_failed or self.summary is None:
            return None
        if self.summary.counts.not_run:
            return pytest.ExitCode.TESTS_FAILED  # the budget stopped the run: not complete
        if self.gate is not None:
            passed = self.gate.passed
        elif self.settings.resume:
            counts = self.summary.counts
            passed = counts.failed + counts.infra_errors + counts.lost == 0
        else:
            return None
        return pytest.ExitCode.OK if passed else pytest.ExitCode.TESTS_FAILED

    def _suite_properties(self) -> None:
        """The rates and the gate as junit ``<testsuite>`` properties (with --junitxml)."""
        if self.summary is None:
            return
        summary = self.summary
        properties: dict[str, object] = {
            "tau2_run_id": self.plan.run_id,
            "tau2_success_rate": summary.success_rate.rate,
            "tau2_scored": summary.counts.scored,
            "tau2_succeeded": summary.counts.succeeded,
            "tau2_infra_errors": summary.counts.infra_errors,
            "tau2_lost": summary.counts.lost,
        }
        for entry in summary.pass_hat_k:
            properties[f"tau2_pass_hat_{entry.k}"] = entry.value
        if self.gate is not None:
            properties["tau2_gate"] = self.gate.verdict
            properties["tau2_gate_line"] = self.gate.line
            if self.gate.paired is not None:
                properties["tau2_gate_p_value"] = self.gate.paired.p_value
        record_suite_properties(self.config, properties)

    # -- the terminal section -----------------------------------------------------------------

    def resume_command(self) -> str:
        """The command that continues this run: the user's arguments (redacted) without the
        run id, a repeated ``--tau2-resume`` or the early stop, each quoted as a shell wants."""
        args = resume_arguments(
            redact_argv(list(self.config.invocation_params.args), extra_body_flags=EXTRA_BODY_FLAGS)
        )
        return shlex.join(["pytest", *args, f"--tau2-resume={self.plan.run_id}"])

    def not_run(self) -> list[str]:
        """Selected scenarios this session stopped before (``-x``, ``--maxfail``, Ctrl-C)."""
        if self.summary is None:
            return []
        # not run and lost (an expected scenario without a record): counted with the lost
        recorded = {row.scenario_id for row in self.summary.scenarios}
        return sorted(self.selected - recorded - self.seen)

    def terminal_lines(self, *, failures_listed: bool = False) -> list[str]:
        """The tau2 section; ``failures_listed`` when pytest's short test summary already names
        each failed scenario (``-rf``, ``-ra``): then it is not listed a second time."""
        summary = self.summary
        assert summary is not None
        settings = self.settings
        lines: list[str] = []
        if settings.is_offline_self_check:
            lines.append(self.offline_banner())
        rates = headline_lines(summary, pass_k=pass_hat_k_line(summary))
        if summary.nl_assertion.rate is None and settings.roles.judge is None:
            with_nl = sum(1 for row in summary.scenarios if row.nl_assertion_total)
            if with_nl and (settings.agent_source or not settings.roles.agent.is_builtin):
                rates[0] += f"; NL assertions of {with_nl} scenario(s) NOT judged: no judge"
        lines.extend(rates)
        lines.append(counts_line(summary))
        lines.extend(self.usage_lines(summary))
        judge_format = judge_format_line(summary)
        if judge_format is not None:
            lines.append(judge_format)
        for row in summary.scenarios:
            if row.status == "FAIL" and not (failures_listed and row.scenario_id in self.seen):
                lines.append(f"FAILED {row.scenario_id}: {failure_reason(row, summary.profile)}")
        for scenario_id in summary.lost:
            reason = summary.lost_reasons.get(scenario_id, "no metrics")
            # those never started are one line below, not one each: a stopped session may
            # leave a hundred
            if reason not in (NOT_RUN, NOT_RUN_INTERRUPTED):
                lines.append(f"LOST {scenario_id}: {reason}")
        for scenario_id in summary.not_run:
            lines.append(f"NOT RUN (budget) {scenario_id}")
        lines.extend(self.notices)
        lines.extend(self.problems)
        lines.append(f"run directory: {self.run_dir}")
        if self.report_path is not None:
            lines.append(f"report: {self.report_path}")
        not_run = self.not_run()
        if not_run and self.exit_problem != "interrupted":  # Ctrl-C: see closing_lines
            lines.append(
                f"tau2: the session stopped early; {len(not_run)} selected scenario(s) did not "
                f"run (counted as lost); resume with: {self.resume_command()}"
            )
        budget = self.process.budget
        if summary.counts.not_run and budget is not None:
            lines.append(budget.line(summary.counts.not_run))
        if self.gate is not None:  # the verdict is the last line
            lines.extend(
                f"flipped pass->fail against the baseline: {scenario_id}"
                for scenario_id in self.gate.flipped
            )
            lines.append(self.gate.line)
        return lines

    def usage_lines(self, summary: RunSummary) -> list[str]:
        """Cost per role (with prices) and replies served from the response cache."""
        lines = cost_lines(summary)
        hits = {role: u.cache_hits for role, u in summary.token_usage.items() if u.cache_hits}
        if hits or self.settings.cache:
            calls = sum(u.n_calls for u in summary.token_usage.values())
            shown = ", ".join(f"{role} {n}" for role, n in hits.items()) or "none"
            lines.append(
                f"response cache: {sum(hits.values())} of {calls} completion(s) served from "
                f"the cache ({shown})"
            )
        return lines

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
        for line in self.terminal_lines(failures_listed=failures_listed):
            terminalreporter.write_line(line)

    def closing_lines(self) -> list[str]:
        """After Ctrl-C, the resume command: the session's very last line (below pytest's
        KeyboardInterrupt banner and its count of tests)."""
        if not self.interrupted or not self.run_dir.is_dir():
            return []
        if self.summary is None and self.problems:
            return []  # the run could not be summarized: the section said why
        when = "" if self.summary is not None else " before any scenario finished"
        return [f"tau2: interrupted{when}; resume with: {self.resume_command()}"]


def counts_line(summary: RunSummary) -> str:
    """Infra errors and the scenarios without a record: lost, or never started after Ctrl-C."""
    counts = summary.counts
    unstarted = sum(
        1 for key in summary.lost if summary.lost_reasons.get(key) == NOT_RUN_INTERRUPTED
    )
    not_run = f", not run (interrupted): {unstarted}" if unstarted else ""
    return (
        f"infra errors: {counts.infra_errors}, lost scenarios: {counts.lost - unstarted}"
        f"{not_run} (excluded from the rates; see all_summary.txt)"
    )


def failure_reason(row: ScenarioRow, profile: str = ProfileName.DEFAULT) -> str:
    """A short reason a scenario failed: its stop, its DB, its NL verdicts (the stop when it
    costs the scenario in ``profile``: in ours when it is not ``agent_exit``, in tau2's when
    upstream does not score that ending)."""
    parts = []
    if not row.db_state_match:
        parts.append("DB differs")
    if row.nl_assertion_pass_count is not None and (
        row.nl_assertion_pass_count < row.nl_assertion_total
    ):
        missing = row.nl_assertion_total - row.nl_assertion_pass_count
        parts.append(f"NL {missing}/{row.nl_assertion_total} not met")
    if policy_for(profile).ending_fails(row.stop_reason):
        parts.append(f"stop {row.stop_reason}")
    return ", ".join(parts) or "failed"


RUN_KEY = pytest.StashKey[Tau2Run]()
