"""The ``tau2_*`` fixtures: a scenario's private store, its gold state, and its outcome.

``tau2_outcome`` runs the whole scenario during set-up: a model's failure is then a test
failure (the test's assertions), while an endpoint outage (``infra_error``) is a set-up error,
reported as a pytest error and excluded from the rates.
"""

from __future__ import annotations

import asyncio
import functools
import gc
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import pytest_asyncio

from tau2_retail import codec
from tau2_retail.data.gold import Gold
from tau2_retail.engine.harness import DataBundle, Harness
from tau2_retail.engine.scenario import SavedConversationError, Scenario, ScenarioOutcome
from tau2_retail.errors import AgentInterrupted, BudgetExhausted
from tau2_retail.plugins.agents import AGENTS_KEY, AgentSupply
from tau2_retail.plugins.compat import sets_up_only
from tau2_retail.plugins.interop import remember_session_loop
from tau2_retail.plugins.options import Tau2Settings
from tau2_retail.plugins.process import PROCESS_KEY, Tau2InfraError, Tau2Process
from tau2_retail.plugins.scenario_report import (
    BUDGET_VERDICT,
    INFRA_VERDICT,
    INTERRUPTED_VERDICT,
    PASS_VERDICT,
    ScenarioReport,
    attach_report,
    scenario_of_item,
)
from tau2_retail.plugins.scheduler import (
    NotStarted,
    ScenarioScheduler,
    SchedulerInterrupted,
    upcoming_items,
)
from tau2_retail.results.artifacts import load_pending_judgement, outcome_files, scenario_dir
from tau2_retail.results.folder_writer import FolderWriter
from tau2_retail.results.scenario_folder import ScenarioFiles
from tau2_retail.results.stopped_spending import StopCause, record_stopped_spending
from tau2_retail.settings.notices import timeout_notice
from tau2_retail.tools.store import Store

__all__ = [
    "Tau2InfraError",
    "tau2_agent",
    "tau2_data",
    "tau2_gold",
    "tau2_harness",
    "tau2_outcome",
    "tau2_run",
    "tau2_scenario",
    "tau2_scheduler",
    "tau2_settings",
    "tau2_store",
]


@pytest.fixture(scope="session")
def tau2_run(pytestconfig: pytest.Config) -> Tau2Process:
    """This process's view of the run: settings, run id, run folder, data."""
    if sets_up_only(pytestconfig):
        pytest.skip("--setup-only: the scenarios are not run")
    return pytestconfig.stash[PROCESS_KEY]


@pytest.fixture(scope="session")
def tau2_settings(tau2_run: Tau2Process) -> Tau2Settings:
    return tau2_run.plan.settings


@pytest.fixture(scope="session")
def tau2_data(tau2_run: Tau2Process) -> DataBundle:
    """The verified data, loaded once per process."""
    return tau2_run.bundle


@pytest.fixture
def tau2_agent() -> object | None:
    """Your agent: override this fixture in your ``conftest.py`` to put it under test.

    Return a fresh agent (an object with ``respond(messages, tools)`` or ``converse(messages,
    toolbox)``, sync or async), or from a fixture with a broader scope a factory making one
    (called once per scenario and trial: scenarios then still overlap with
    ``--tau2-concurrency``). This default returns None: the agent is ``--tau2-agent``'s
    factory, or the agent model. See docs/agents.md.
    """
    return None


@pytest.fixture
def tau2_scenario(request: pytest.FixtureRequest) -> Scenario:
    """The scenario of this test case (parametrized by the plugin)."""
    scenario: Scenario = request.param
    return scenario


@pytest.fixture
def tau2_gold(tau2_scenario: Scenario, tau2_data: DataBundle) -> Gold:
    """The task's expected database and reference actions (replayed once per process)."""
    return tau2_data.golds[tau2_scenario.task.id]


@pytest.fixture
def tau2_store(tau2_data: DataBundle) -> Store:
    """A private copy-on-write database over the seed (the scenario itself runs on its own,
    ``tau2_outcome.conversation.store``, started ahead of the test by ``tau2_scheduler``)."""
    return Store(tau2_data.golds.seed)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def tau2_harness(tau2_run: Tau2Process, tau2_data: DataBundle) -> AsyncIterator[Harness]:
    """The process's scenario runner: one endpoint client per role, shared by its scenarios
    on the session's event loop and closed at the end (a client costs tens of ms to build)."""
    settings = tau2_run.plan.settings
    async with Harness(
        bundle=tau2_data,
        roles=settings.roles,
        limits=settings.limits(),
        cache=tau2_run.cache,
        prices=settings.prices,
        spending=tau2_run.budget,
        notice=tau2_run.notice,
    ) as harness:
        try:
            yield harness
        finally:
            if harness.cache is not None:
                harness.cache.close()


def _stopped(run: Tau2Process, scenario: Scenario, spent: float, cause: StopCause) -> None:
    """Note in the run folder what ``scenario``, stopped unscored by ``cause``, had spent
    (the run's summary adds it up: also when its test never reports, -x or Ctrl-C having
    stopped the session first, and under xdist after a Ctrl-C, when the controller reads no
    more reports)."""
    if not spent:
        return
    try:
        record_stopped_spending(run.plan.run_dir, scenario.id, spent, cause)
    except OSError as error:  # said, never raised: the scenario is being stopped
        run.notice(f"tau2: what a stopped scenario had spent was not recorded: {error}")


def _session_stop_cause(session: pytest.Session) -> StopCause:
    """Why the session stops the scenarios still running at its end: Ctrl-C (SIGTERM, an
    agent's ``KeyboardInterrupt``: pytest's exit status is set before it tears the session's
    fixtures down), ``-x`` / ``--maxfail`` (it then tears them down in the failing test's
    teardown), or its end before their tests ran."""
    if session.exitstatus == pytest.ExitCode.INTERRUPTED:
        return StopCause.INTERRUPT
    if session.shouldfail:
        return StopCause.MAXFAIL
    return StopCause.SESSION_END


def _abandon(scheduler: ScenarioScheduler[Finished], item: pytest.Item) -> None:
    """``item``'s test is over: its scenario, if still running, is cancelled. Its test ended
    waiting for it: interrupted, or (what else stops a test from outside the event loop)
    failed by a timeout's signal."""
    interrupted = item.session.exitstatus == pytest.ExitCode.INTERRUPTED
    scheduler.abandon(item, StopCause.INTERRUPT if interrupted else StopCause.TIMEOUT)


def _is_scenario_item(item: pytest.Item) -> bool:
    """A benchmark scenario test the scheduler may start ahead (not one marked to skip)."""
    return (
        scenario_of_item(item) is not None
        and "tau2_outcome" in getattr(item, "fixturenames", ())
        and item.get_closest_marker("skip") is None
    )


class Finished(NamedTuple):
    """A scenario's outcome, the folder its artifacts were written to, and the interrupt its
    agent's ``close()`` raised once the conversation was over (the run stops after this
    scenario's test, which reports its verdict)."""

    outcome: ScenarioOutcome
    directory: Path
    interrupt: str | None = None


async def _play(
    run: Tau2Process,
    harness: Harness,
    scenario: Scenario,
    agents: AgentSupply,
    item: pytest.Item,
    scheduler: ScenarioScheduler[Finished],
) -> tuple[ScenarioOutcome, AgentInterrupted | None]:
    """Run ``scenario`` (or judge it again, :func:`_rejudged`). With the outcome, the interrupt
    the agent's ``close()`` raised (its run stops once the record is written). Stopped
    unscored, it notes what it had spent and why (in flight: the ``scheduler`` tells why)."""

    def interrupted(spent: float) -> None:
        _stopped(run, scenario, spent, scheduler.stop_cause(item))

    try:
        rejudged = await _rejudged(run, harness, scenario, agents, interrupted)
        if rejudged is not None:
            return rejudged, None
        runner = agents.runner(item.nodeid)
        try:
            outcome = await harness.run(scenario, agent=runner, on_interrupted=interrupted)
            return outcome, runner.interrupted if runner is not None else None
        finally:
            if runner is not None:
                agents.after(runner, run.notices)
    except BudgetExhausted as stopped:
        # noted now, not by its test's report: -x or a Ctrl-C may stop the session first
        _stopped(run, scenario, stopped.spent, StopCause.BUDGET)
        raise


async def _rejudged(
    run: Tau2Process,
    harness: Harness,
    scenario: Scenario,
    agents: AgentSupply,
    on_interrupted: Callable[[float], None],
) -> ScenarioOutcome | None:
    """On resume, a scenario whose conversation finished but whose judge was down, judged again
    from its saved transcript (the conversation is not run again); None: it runs again."""
    if not run.plan.settings.resume or harness.roles.judge is None:
        return None
    pending = load_pending_judgement(
        scenario_dir(run.plan.run_dir, scenario.name, scenario.trial, scenario.trials)
    )
    if pending is None:
        return None
    try:
        return await harness.rejudge(
            scenario,
            transcript=pending.transcript,
            expected_db_hash=pending.db_hash,
            agent=agents.identity,
            on_interrupted=on_interrupted,
        )
    except SavedConversationError:
        return None  # run it again from the start


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def tau2_scheduler(
    request: pytest.FixtureRequest, tau2_run: Tau2Process, tau2_harness: Harness
) -> AsyncIterator[ScenarioScheduler[Finished]]:
    """Starts this process's scenarios ahead of their tests, ``--tau2-concurrency`` at once.

    Each scenario writes its artifacts as soon as it finishes, so a session that stops early
    (Ctrl-C, ``-x``, ``--maxfail``) keeps every finished one (``--tau2-resume`` skips them);
    the conversations still running are cancelled.
    """
    session = request.session
    configuration = codec.encode(tau2_run.configuration)
    remember_session_loop(session.config, asyncio.get_running_loop())
    agents = session.config.stash[AGENTS_KEY]

    async def start(item: pytest.Item) -> Finished:
        scenario = scenario_of_item(item)
        assert scenario is not None, "the scheduler starts only scenario items"
        try:
            outcome, interrupt = await _play(
                tau2_run, tau2_harness, scenario, agents, item, scheduler
            )
        except AgentInterrupted as raised:
            # as Ctrl-C: the scenarios in flight stop (no record), the test pytest is at tells
            # the run, which stops there (summaries written, resume offered). An exception,
            # not the KeyboardInterrupt, ends this task: that one would escape the event loop.
            reason = f"{raised} in {scenario.id}"
            scheduler.interrupt(reason)
            raise SchedulerInterrupted(reason) from None
        for hit in outcome.timeouts:
            tau2_run.notice(timeout_notice(hit))
        directory = await writer.put(
            _folder_of(tau2_run, tau2_harness, outcome, scenario, configuration)
        )
        if interrupt is None:
            return Finished(outcome, directory)
        # close() raised it: the others in flight stop, this scenario keeps its record
        reason = f"{interrupt} in {scenario.id}"
        scheduler.interrupt(reason)
        return Finished(outcome, directory, reason)

    budget = tau2_run.budget
    writer = await _folder_writer(tau2_run)
    upcoming, upcoming_is_final = upcoming_items(session)
    scheduler = ScenarioScheduler(
        limit=tau2_run.plan.settings.concurrency,
        start=start,
        upcoming=upcoming,
        upcoming_is_final=upcoming_is_final,
        wanted=lambda item: agents.starts_ahead and _is_scenario_item(item),
        stopping=lambda: bool(session.shouldfail or session.shouldstop),
        admit=lambda: budget is None or not budget.exhausted,
    )
    try:
        yield scheduler
    finally:
        try:
            await scheduler.aclose(_session_stop_cause(session))
        finally:
            await writer.aclose()  # every folder it received is on disk


def _folder_of(
    run: Tau2Process,
    harness: Harness,
    outcome: ScenarioOutcome,
    scenario: Scenario,
    configuration: Any,
) -> functools.partial[ScenarioFiles]:
    """What writes ``outcome``'s folder (for the folder writer): its files, its prompts and the
    run's configuration."""
    return functools.partial(
        outcome_files,
        run.plan.run_dir,
        outcome,
        prompts=harness.prompts(scenario.task),
        config=configuration,
    )


async def _folder_writer(run: Tau2Process) -> FolderWriter:
    """Where this process's scenario folders are written: with scenarios in flight together,
    by the helper process (many end close together: their files' encoding and kernel time off
    the loop's thread), the process made ready for hundreds of them; else in this process."""
    concurrency = run.plan.settings.concurrency
    if concurrency == 1:
        return FolderWriter(None)  # one scenario at a time: written in this process
    freeze_long_lived_objects()
    raise_open_files_limit(concurrency)
    return await FolderWriter.start(on_fallback=run.notice)


_YOUNG_COLLECTION_THRESHOLD = 20_000


def freeze_long_lived_objects() -> None:
    """Leave what exists before the first scenario (modules, the data, pytest's items) out of
    the cyclic garbage collector's full passes: they live as long as the process, and with
    hundreds of conversations in flight those passes walked them again and again (9 % of the
    process's CPU at 912 in flight). Collect the young generation after 20,000 allocations
    instead of 700: a request's short-lived objects are then mostly gone before a pass, instead
    of being walked and promoted while their request runs."""
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(max(gc.get_threshold()[0], _YOUNG_COLLECTION_THRESHOLD), older, oldest)


def raise_open_files_limit(concurrency: int) -> None:
    """Let the process hold a connection per conversation and role: the soft limit of open
    files (1024 on many systems; 912 conversations need about 1,900 sockets for the agent and
    the customer) raised towards the hard limit. Nothing on systems without it (Windows)."""
    try:
        import resource
    except ImportError:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 3 * concurrency + 256  # agent, customer and judge connections, and files
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def _report(
    request: pytest.FixtureRequest,
    run: Tau2Process,
    scenario: Scenario,
    verdict: str,
    **fields: Any,
) -> None:
    """Tell the run how this scenario's test went: one record, with this process's notices
    new since its previous report (the run says each once)."""
    report = ScenarioReport(
        scenario_id=scenario.id,
        trial=scenario.trial + 1,
        verdict=verdict,
        notices=run.take_notices(),
        **fields,
    )
    attach_report(request.node, report)


def _verdict(outcome: ScenarioOutcome) -> str:
    if outcome.is_infra_error:
        return INFRA_VERDICT
    if outcome.metrics.is_successful:
        return PASS_VERDICT
    return f"FAIL: {outcome.short_reason()}"


def _budget_skip_reason(run: Tau2Process, stopped: Exception) -> str:
    budget = run.budget
    spent = f"${budget.spent:,.4f} of ${budget.limit:,.4f}" if budget else "the budget"
    how = "stopped unscored" if isinstance(stopped, BudgetExhausted) else "not run"
    return (
        f"{how} (budget): {spent} spent (--tau2-max-cost); resume with a higher "
        f"budget: --tau2-resume {run.plan.run_id}"
    )


_RAN_KEY = pytest.StashKey[set[str]]()
"""The node ids of this process's scenario tests that have run (a test run again by a plugin
must not run its scenario again: best-of-N, and a fixture's agent is not there for it)."""


@pytest_asyncio.fixture(loop_scope="session")
async def tau2_outcome(
    request: pytest.FixtureRequest,
    tau2_run: Tau2Process,
    tau2_scheduler: ScenarioScheduler[Finished],
    tau2_scenario: Scenario,
    tau2_agent: object | None,
) -> ScenarioOutcome:
    """This test's scenario (started ahead by the scheduler, its artifacts written); its
    result goes to the run. The conversation ran on ``tau2_outcome.conversation.store``."""
    agents = request.config.stash[AGENTS_KEY]
    ran = request.config.stash.setdefault(_RAN_KEY, set())
    if request.node.nodeid in ran:
        pytest.fail(
            "this scenario's test runs a second time (a plugin re-running tests?): a scenario "
            "runs once per test, so it is not run again and the run counts it lost; "
            "--tau2-resume re-runs lost scenarios, --tau2-trials runs more trials",
            pytrace=False,
        )
    ran.add(request.node.nodeid)
    request.addfinalizer(functools.partial(_abandon, tau2_scheduler, request.node))
    if not tau2_scheduler.started(request.node):
        agents.accept(request.node.nodeid, tau2_agent)
    try:
        outcome, directory, interrupt = await tau2_scheduler.outcome(request.node)
    except SchedulerInterrupted as interrupted:
        # the agent's KeyboardInterrupt: the run stops at this test's report
        _report(request, tau2_run, tau2_scenario, INTERRUPTED_VERDICT, interrupt=str(interrupted))
        pytest.skip(f"not run: the agent interrupted the run ({interrupted})")
    except (NotStarted, BudgetExhausted) as stopped:  # what it spent: in the ledger (_play)
        _report(request, tau2_run, tau2_scenario, BUDGET_VERDICT)
        pytest.skip(_budget_skip_reason(tau2_run, stopped))
    _report(
        request,
        tau2_run,
        tau2_scenario,
        _verdict(outcome),
        artifacts=directory.relative_to(tau2_run.plan.run_dir).as_posix(),
        agent=agents.identity,
        interrupt=interrupt,
    )
    if outcome.is_infra_error:
        raise Tau2InfraError(
            f"infra_error: {outcome.infra_detail} "
            "(excluded from the pass rate; re-run with --tau2-resume "
            f"{tau2_run.plan.run_id})"
        )
    # returned, not yielded: nothing to undo, and a generator fixture's teardown runs the
    # event loop once more per test
    return outcome
