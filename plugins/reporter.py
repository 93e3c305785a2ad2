"""What the run says on the terminal: its header, its section after pytest's summary and the
resume command after Ctrl-C, each rendered from plain values (the plan, the run summary).

The rates, costs and judge lines come from :mod:`tau2_retail.results.summary`; this module puts
them in the order a CI log wants (the gate's verdict last) and adds what only the session knows
(its notices and problems, the scenarios it never started, how to resume it).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath

from tau2_retail.engine.profiles import ProfileName, policy_for
from tau2_retail.models.cache import CacheMode
from tau2_retail.models.secrets import redact_argv
from tau2_retail.plugins.ledger import NOT_RUN, NOT_RUN_INTERRUPTED
from tau2_retail.plugins.options import Tau2Settings
from tau2_retail.plugins.process import RunPlan
from tau2_retail.results.gate import GateVerdict
from tau2_retail.results.records import RunSummary, ScenarioRow
from tau2_retail.results.summary import (
    cost_lines,
    headline_lines,
    judge_format_line,
    pass_hat_k_line,
)
from tau2_retail.settings import REDACTED_JSON_FLAGS

__all__ = [
    "RunEnd",
    "counts_line",
    "failure_reason",
    "header_lines",
    "profile_line",
    "pytest_program",
    "resume_arguments",
    "resume_command",
    "terminal_lines",
]


# flags a resume command drops: the run id it names itself, and the early stop of the session
# that stopped (``-x``, ``--maxfail``, stepwise); each with the number of values that follow it when
# given without ``=``
_NOT_REPEATED = {
    "--tau2-resume": 1,
    "--tau2-run-id": 1,
    "-x": 0,
    "--exitfirst": 0,
    "--maxfail": 1,
    "--sw": 0,
    "--stepwise": 0,
    # these turn stepwise on too (each resume would stop again at its second failure)
    "--sw-skip": 0,
    "--stepwise-skip": 0,
    "--sw-reset": 0,
    "--stepwise-reset": 0,
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


def resume_command(args: Sequence[str], run_id: str, *, argv0: str | None = None) -> str:
    """The command that continues run ``run_id`` started with ``args``: the user's arguments
    (redacted) without the run id, a repeated ``--tau2-resume`` or the early stop, each quoted
    as a shell wants, after the program this session was started as (see
    :func:`pytest_program`; ``argv0`` is this process's ``sys.argv[0]`` unless given)."""
    kept = resume_arguments(redact_argv(list(args), json_flags=REDACTED_JSON_FLAGS))
    program = pytest_program(sys.argv[0] if argv0 is None else argv0)
    return shlex.join([*program, *kept, f"--tau2-resume={run_id}"])


def pytest_program(argv0: str) -> list[str]:
    """``python -m pytest`` for a session started so (``argv0`` is then pytest's
    ``__main__.py``), else ``pytest``: ``python -m`` also puts the current folder on
    ``sys.path``, which a flat layout's agent module may need to be importable."""
    main = PurePath(argv0)
    if main.name == "__main__.py" and main.parent.name == "pytest":
        return ["python", "-m", "pytest"]
    return ["pytest"]


def profile_line(profile: ProfileName) -> str:
    """The run header's line naming the profile and what it means."""
    return f"tau2: profile {profile.value}: {policy_for(profile).description}"


def offline_banner(settings: Tau2Settings) -> str:
    agent = settings.roles.agent.name.removeprefix("builtin:")
    return (
        f"tau2: OFFLINE SELF-CHECK (built-in {agent} agent, scripted customer, no judge): "
        "this measures the harness, not a model"
    )


# -- the header ---------------------------------------------------------------------------------


def header_lines(
    plan: RunPlan, *, dist: str | None = None, runs_no_test: bool = False
) -> list[str]:
    """The lines the run says once its scenarios are collected; ``dist`` is the ``--dist``
    mode when the scenarios go to xdist workers; ``runs_no_test``: a session that only shows
    what it collected (``--collect-only``...), which makes no run folder."""
    settings = plan.settings
    roles = settings.roles
    where = f"-> {plan.run_dir}" + (" (not created: no test runs)" if runs_no_test else "")
    lines = [
        f"tau2: agent {settings.describe_agent()}; user {roles.user.describe()}; "
        f"judge {roles.judge.describe() if roles.judge else 'none'}",
        f"tau2: run {plan.run_id} {where}",
    ]
    if settings.is_offline_self_check:
        lines.append(offline_banner(settings))
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
    lines.extend(_concurrency_lines(settings, dist))
    lines.extend(cost_header_lines(settings))
    if settings.resume:
        adopted = dict(plan.adopted)
        lines.append(
            f"tau2: resuming: {len(plan.completed)} scenario(s) already complete"
            + (f"; stored {', '.join(f'{k}={v}' for k, v in adopted.items())}" if adopted else "")
        )
    lines.append(profile_line(settings.profile))
    return lines


def _concurrency_lines(settings: Tau2Settings, dist: str | None) -> list[str]:
    if settings.concurrency <= 1:
        return []
    lines = [f"tau2: up to {settings.concurrency} scenarios in flight per process"]
    if dist is not None and dist != "each":
        # a worker starts ahead only the items it holds: xdist's other modes send them a few
        # at a time, or all of one module to one worker (docs/scale.md)
        again = (
            ", and a worker that takes queued items back runs their conversations again"
            if dist == "worksteal"
            else ""
        )
        lines.append(
            f"tau2: --dist {dist} holds --tau2-concurrency back: a worker keeps in flight only "
            f"the scenarios xdist has sent it so far{again}; use --dist each to give each "
            "worker its share whole (docs/scale.md)"
        )
    source = settings.agent_source
    if source is not None and source.is_fixture:
        lines.append(
            f"tau2: the agent comes from {source.identity.source}: a function-scoped "
            "fixture runs its scenarios one at a time; return a factory from a "
            "session-scoped fixture to keep them in flight (docs/agents.md)"
        )
    return lines


def cost_header_lines(settings: Tau2Settings) -> list[str]:
    """What the run header says about the response cache, prices and the budget."""
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


# -- the terminal section -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEnd:
    """What the session knows at its end, beside the run summary."""

    summary: RunSummary
    #: the scenarios whose tests reported in this session
    seen: frozenset[str]
    #: selected scenarios this session stopped before (``-x``, ``--maxfail``, Ctrl-C)
    stopped_before: tuple[str, ...]
    notices: tuple[str, ...]
    problems: tuple[str, ...]
    run_dir: Path
    report_path: Path | None
    #: what ``--tau2-export-tau2`` wrote, or why it did not
    export_lines: tuple[str, ...]
    #: how the session ended when it broke ("interrupted", ...), else None
    exit_problem: str | None
    resume_command: str
    #: the budget's closing line, when there is a budget
    budget_line: str | None
    gate: GateVerdict | None


def terminal_lines(
    settings: Tau2Settings, end: RunEnd, *, failures_listed: bool = False
) -> list[str]:
    """The tau2 section; ``failures_listed`` when pytest's short test summary already names
    each failed scenario (``-rf``, ``-ra``): then it is not listed a second time."""
    summary = end.summary
    lines: list[str] = []
    if settings.is_offline_self_check:
        lines.append(offline_banner(settings))
    lines.extend(_rate_lines(settings, summary))
    lines.append(counts_line(summary))
    lines.extend(usage_lines(settings, summary))
    judge_format = judge_format_line(summary)
    if judge_format is not None:
        lines.append(judge_format)
    lines.extend(_scenario_lines(summary, listed=end.seen if failures_listed else frozenset()))
    lines.extend(end.notices)
    lines.extend(end.problems)
    lines.append(f"run directory: {end.run_dir}")
    if end.report_path is not None:
        lines.append(f"report: {end.report_path}")
    lines.extend(end.export_lines)
    if end.stopped_before and end.exit_problem != "interrupted":  # Ctrl-C: see closing lines
        lines.append(
            f"tau2: the session stopped early; {len(end.stopped_before)} selected scenario(s) "
            f"did not run (counted as lost); resume with: {end.resume_command}"
        )
    if summary.counts.not_run and end.budget_line is not None:
        lines.append(end.budget_line)
    if end.gate is not None:  # the verdict is the last line
        lines.extend(
            f"flipped pass->fail against the baseline: {scenario_id}"
            for scenario_id in end.gate.flipped
        )
        lines.append(end.gate.line)
    return lines


def _rate_lines(settings: Tau2Settings, summary: RunSummary) -> list[str]:
    rates = headline_lines(summary, pass_k=pass_hat_k_line(summary))
    if summary.nl_assertion.rate is None and settings.roles.judge is None:
        # scored scenarios only: an infra error's assertions were not "not judged", it is
        # excluded whole
        with_nl = sum(
            1 for row in summary.scenarios if row.nl_assertion_total and row.status != "INFRA"
        )
        if with_nl and (settings.agent_source or not settings.roles.agent.is_builtin):
            rates[0] += f"; NL assertions of {with_nl} scenario(s) NOT judged: no judge"
    return rates


def _scenario_lines(summary: RunSummary, *, listed: frozenset[str]) -> list[str]:
    """A line per failed scenario (but those pytest listed), per lost one and per one the
    budget did not run."""
    lines = [
        f"FAILED {row.scenario_id}: {failure_reason(row, summary.profile)}"
        for row in summary.scenarios
        if row.status == "FAIL" and row.scenario_id not in listed
    ]
    for scenario_id in summary.lost:
        reason = summary.lost_reasons.get(scenario_id, "no metrics")
        # those never started are one line below, not one each: a stopped session may
        # leave a hundred
        if reason not in (NOT_RUN, NOT_RUN_INTERRUPTED):
            lines.append(f"LOST {scenario_id}: {reason}")
    lines.extend(f"NOT RUN (budget) {scenario_id}" for scenario_id in summary.not_run)
    return lines


def usage_lines(settings: Tau2Settings, summary: RunSummary) -> list[str]:
    """Cost per role (with prices) and replies served from the response cache."""
    lines = cost_lines(summary)
    hits = {role: u.cache_hits for role, u in summary.token_usage.items() if u.cache_hits}
    if hits or settings.cache:
        calls = sum(u.n_calls for u in summary.token_usage.values())
        shown = ", ".join(f"{role} {n}" for role, n in hits.items()) or "none"
        lines.append(
            f"response cache: {sum(hits.values())} of {calls} completion(s) served from "
            f"the cache ({shown})"
        )
    return lines


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
