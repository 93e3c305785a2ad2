"""The run folder: checked at start-up, claimed once collection has finished, described by
``run_args.json``, locked while the run lives.

:class:`RunFolder` checks the output folder, refuses an existing run id unless resuming, and on
resume takes the folder's lock (:mod:`tau2_retail.results.lock`), compares the stored
configuration and adopts its scenario set: the result is the run's frozen
:class:`~tau2_retail.plugins.process.RunPlan`. Once collection has finished, before any
scenario runs, :meth:`RunFolder.claim` creates and locks the folder (a new run) and writes
``run_args.json`` with the settings and the expected scenarios (what this session selected,
after ``-k``/``-m``/``--lf``, plus on resume those of the stored run), so a kill or a full disk
never leaves the folder without its description. The lock is held until :meth:`close` (the OS
releases it if the process dies).

Every refusal is a :class:`~tau2_retail.errors.ConfigError` whose message names the option, the
problem and the fix; the pytest hooks turn it into a usage error (exit 4).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from tau2_retail.errors import ArtifactError, ConfigError, DataError, RunInUse
from tau2_retail.models.agent import AgentIdentity
from tau2_retail.models.secrets import redact_argv
from tau2_retail.plugins.agents import import_agent_source
from tau2_retail.plugins.options import Tau2Settings
from tau2_retail.plugins.process import RunPlan, new_run_id, run_configuration
from tau2_retail.results.artifacts import load_run_metrics
from tau2_retail.results.lock import LOCK_FILE, RunLock
from tau2_retail.results.records import PACKAGE, RunArgs, RunConfiguration, RunSummary
from tau2_retail.results.summary import read_run_args, read_summary, write_run_args
from tau2_retail.settings import REDACTED_JSON_FLAGS, adopt_stored, resume_differences

__all__ = ["RunFolder", "argv_redacted", "versions"]


def versions() -> dict[str, str]:
    """The versions a run records: Python's and those of the packages that run it."""
    found = {"python": platform.python_version()}
    for package in (PACKAGE, "pytest", "pytest-xdist", "openai"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def argv_redacted() -> list[str]:
    """The command line, with keys, URL passwords and extra-body values redacted."""
    return redact_argv(sys.argv, json_flags=REDACTED_JSON_FLAGS)


class RunFolder:
    """The folder of this session's run and its plan; see the module docstring."""

    def __init__(self, settings: Tau2Settings, *, collect_only: bool = False) -> None:
        #: the run as decided at start-up: final once ``start`` returns, then sent to workers
        self.plan = RunPlan(
            settings=settings, run_id=settings.resume or settings.run_id or new_run_id()
        )
        self.collect_only = collect_only
        #: the run folder's lock, held from the claim (resume: start-up) until ``close``
        self.lock: RunLock | None = None
        #: ``run_args.json`` of the resumed run, as stored
        self.stored: RunArgs | None = None
        #: the resumed run's ``summary.json`` (None: none, or unreadable, as ``summarize``
        #: reads it): what its earlier invocations' scenarios stopped unscored had spent, by the
        #: budget and in flight, to which this session's summary adds its own
        self.earlier: RunSummary | None = None
        #: the scenario ids this session selected (after -k, --lf and resume): with those of
        #: the stored run, the expected list of ``run_args.json``
        self.selected: set[str] = set()
        self.claimed = False
        #: the claim of the run folder stopped the session (it is another process's)
        self.refused = False

    @property
    def settings(self) -> Tau2Settings:
        return self.plan.settings

    @property
    def run_dir(self) -> Path:
        return self.plan.run_dir

    def configuration(self, agent_identity: AgentIdentity | None = None) -> RunConfiguration:
        """The settings as the run files record them, with the agent as its scenarios saw it."""
        return run_configuration(self.plan, agent_identity=agent_identity)

    # -- start-up ---------------------------------------------------------------------------

    def start(self) -> RunPlan:
        """Check the output folder, the run id and (on resume) the stored configuration, and
        decide the plan. On resume the lock is taken here, before the files are read, and kept.
        """
        if self.settings.resume:
            self._import_agent()
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
        return self.plan

    def _import_agent(self) -> None:
        """A resumed run is compared with the agent's name, version and model: an agent still
        pending (the ini file's or the environment's) is imported at start-up."""
        source = self.settings.agent_source
        if source is not None:
            spec_source = self.settings.source("agent_code")
            self.plan = self.plan.with_agent(import_agent_source(source, spec_source))

    def close(self) -> None:
        """Release the run folder's lock (idempotent): the run is over in this process."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def option(self) -> str:
        """The option that names this run, as the user gave it."""
        run_id = self.plan.run_id
        return f"--tau2-resume {run_id}" if self.settings.resume else f"--tau2-run-id {run_id}"

    def _take_lock(self) -> None:
        """Lock the run folder, or stop: one line naming the live process."""
        try:
            self.lock = RunLock.acquire(self.run_dir)
        except RunInUse as error:
            raise ConfigError(
                f"{self.option()}: run {self.plan.run_id} is in use by {error.holder}; "
                "a run folder has one live process at a time: wait for that run to end, or "
                "choose another run id"
            ) from None
        except ArtifactError as error:
            raise ConfigError(f"{self.option()}: {error}") from None

    def _refuse_existing(self) -> None:
        """A new run whose folder exists: name the live process if one holds it (a live run
        has its lock file: one is never created here)."""
        if (self.run_dir / LOCK_FILE).exists():
            self._take_lock()
            self.close()
        raise ConfigError(
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
                    raise ConfigError(
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
            raise ConfigError(f"{self.settings.source('tasks')}: {problem}")

    def _start_resume(self) -> None:
        run_id = self.plan.run_id
        if not self.run_dir.is_dir():
            raise ConfigError(
                f"--tau2-resume {run_id}: no run directory {self.run_dir}; "
                f"runs are folders of --tau2-output-dir ({self.settings.output_dir})"
            )
        self._take_lock()
        try:
            stored = read_run_args(self.run_dir)
        except ArtifactError as error:
            raise ConfigError(f"--tau2-resume {run_id}: {error}") from None
        try:
            finished = load_run_metrics(self.run_dir)
        except ArtifactError as error:  # a record of another format version
            raise ConfigError(f"--tau2-resume {run_id}: {error}") from None
        if stored is not None:
            self._compare(stored)
            self.stored = stored
            self.earlier = _earlier_summary(self.run_dir)
        elif finished.records or finished.incomplete:
            # run_args.json is written before the first scenario starts: results without it
            # mean it was removed; the settings are unknown
            raise ConfigError(
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
            raise ConfigError(f"--tau2-resume {run_id}: {error}") from None
        if adopted:
            self.plan = dataclasses.replace(self.plan, settings=settings, adopted=adopted)
        differing = resume_differences(stored.configuration, now=run_configuration(self.plan))
        package = PACKAGE
        before, now = stored.scored_by, versions()[package]
        if before is not None and before != now:
            raise ConfigError(
                f"--tau2-resume {run_id}: the stored run's scenarios were scored by {package} "
                f"{before}, this is {now}: one run would hold the scores of two versions; "
                f"install {package}=={before} to resume it, or start a new run without "
                "--tau2-resume"
            )
        if differing:
            where = (
                " (a role given no base URL sends its requests where OPENAI_BASE_URL points: "
                "that is what was recorded)"
                if any(d.key.endswith("_base_url") for d in differing)
                else ""
            )
            raise ConfigError(
                f"--tau2-resume {run_id}: the settings differ from the stored run "
                f"({'; '.join(map(str, differing))}){where}; resume with the stored settings "
                "(give, change or drop those options so they match: the agent, the customer "
                "and the judge are not stored as options and must be given again), or start a "
                "new run without --tau2-resume"
            )

    # -- the claim ----------------------------------------------------------------------------

    def claim(self, scenarios: Sequence[str], configuration: RunConfiguration) -> None:
        """Create and lock the run folder (a new run) and describe it in ``run_args.json``.

        Called once collection has finished and before any scenario starts (per worker under
        xdist: the expected list grows to the union of the workers' selections). A collect-only
        session runs nothing and writes nothing.
        """
        new = set(scenarios) - self.selected
        self.selected |= new
        if self.collect_only or (self.claimed and not new):
            return
        self.refused = True  # until the claim is through
        if self.lock is None:
            try:
                self.run_dir.mkdir(parents=True)
            except FileExistsError:
                # another run with this id created it since start-up: name it if it is live
                self._refuse_existing()
            except OSError as error:
                raise ConfigError(
                    f"--tau2-output-dir: cannot create the run folder {self.run_dir}: {error}"
                ) from None
            self._take_lock()
        try:
            self.write_run_args(self.expected(), configuration)
        except ArtifactError as error:
            # nothing has run yet: a run folder that cannot be described is not started
            raise ConfigError(
                f"{self.option()}: the run folder cannot be described before the scenarios "
                f"start: {error}"
            ) from None
        self.claimed = True
        self.refused = False

    def expected(self, *more: str) -> list[str]:
        """The run's expected scenarios: this session's selection, the records already in the
        folder (resume), the stored run's list (resume), and ``more``."""
        stored = self.stored.expected if self.stored is not None else ()
        return sorted({*self.selected, *self.plan.completed, *stored, *more})

    def write_run_args(self, expected: Sequence[str], configuration: RunConfiguration) -> RunArgs:
        """Write ``run_args.json``; returns what it records (the summary is built from it)."""
        args = RunArgs(
            argv=tuple(argv_redacted()),
            configuration=configuration,
            trials=self.settings.trials,
            expected=tuple(expected),
            versions=versions(),
        )
        write_run_args(self.run_dir, args)
        return args


def _earlier_summary(run_dir: Path) -> RunSummary | None:
    """``run_dir``'s ``summary.json`` (None when it is missing or unreadable, as ``summarize``
    reads it)."""
    try:
        return read_summary(run_dir)
    except ArtifactError:
        return None
