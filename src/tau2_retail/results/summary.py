"""Run-level summaries (spec: conversation_and_scoring.md §1 pass^k, §4 signals, §6 artifacts).

:func:`build_summary` turns the scenarios' ``metrics.json`` records into the figures of
``summary.json`` (pure); :mod:`tau2_retail.results.summary_text` renders them for people
(``all_summary.txt``, the terminal's lines; its names are re-exported here).
:func:`write_run_summary` writes ``all_metrics.json``, ``summary.json`` and ``all_summary.txt``
(only the controller process calls it), and :func:`summarize` rebuilds them from the
artifacts of a run folder (``python -m tau2_retail summarize RUN_DIR``). Every record read or
written is typed (:mod:`tau2_retail.results.records`, :mod:`tau2_retail.engine.metrics`).

Counting rules:

- A scenario ended by ``infra_error`` is not the model's failure: it is listed and left out of
  every rate's denominator (pass^k included). A *lost* scenario (expected, but no metrics, e.g.
  its worker was killed, or its ``metrics.json`` is empty or truncated) is listed, with the
  reason when one is known, and left out too.
- NL_ASSERTION is denominated in assertions, over the scenarios where it was applicable.
- ACTION_MATCH is shown but excluded from success; the judge score and the tau2 reward are
  informational in the default profile.
- In the tau2 profile the headline is upstream's reward and pass^k (a scenario succeeds when
  its reward is 1); our signals follow, labelled, CLEAN_EXIT not applicable.
- The judge's replies are counted over every scenario (retries after an unreadable reply
  included); when most of them could not be read, the summary says the judge does not follow
  the reply format (``summary_text.judge_format_line``).
- Every rate carries its 95% interval (:mod:`tau2_retail.results.stats`): Wilson's, or a
  bootstrap over tasks when a task gives several units (trials, NL assertions); pass^k too.
  With trials > 1 the tasks whose trials disagree are listed as flaky.

``run_args.json`` (:class:`~tau2_retail.results.records.RunArgs`, written by the pytest plugin)
gives ``summarize`` the trials, the expected scenarios, the configuration and the versions.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NotRequired, TypedDict, Unpack

from tau2_retail import codec
from tau2_retail.engine.metrics import ScenarioMetrics
from tau2_retail.engine.profiles import MIXED, ProfileName
from tau2_retail.errors import ArtifactError
from tau2_retail.results import summary_figures as figures
from tau2_retail.results.artifacts import RunMetrics, load_run_metrics
from tau2_retail.results.atomic import write_json_atomic, write_text_atomic
from tau2_retail.results.long_text import cut_long_texts
from tau2_retail.results.records import (
    Counts,
    InfraErrorRow,
    RunArgs,
    RunConfiguration,
    RunSummary,
)
from tau2_retail.results.stopped_spending import StoppedSpending, with_ledger
from tau2_retail.results.summary_figures import pass_hat_k
from tau2_retail.results.summary_text import (
    INTERVAL_NOTE,
    cost_lines,
    flaky_lines,
    headline_lines,
    judge_format_line,
    pass_hat_k_line,
    render_summary_text,
    usd,
)

__all__ = [
    "ALL_METRICS_FILE",
    "INTERVAL_NOTE",
    "NO_RESULT",
    "RUN_ARGS_FILE",
    "SUMMARY_JSON_FILE",
    "SUMMARY_TEXT_FILE",
    "build_summary",
    "cost_lines",
    "flaky_lines",
    "headline_lines",
    "judge_format_line",
    "pass_hat_k",
    "pass_hat_k_line",
    "read_run_args",
    "read_summary",
    "render_summary_text",
    "scenario_order",
    "stopped_of",
    "summarize",
    "summary_inputs",
    "usd",
    "write_run_args",
    "write_run_summary",
]

ALL_METRICS_FILE = "all_metrics.json"
SUMMARY_JSON_FILE = "summary.json"
SUMMARY_TEXT_FILE = "all_summary.txt"
RUN_ARGS_FILE = "run_args.json"
#: why ``summarize`` lists an expected scenario that has no ``metrics.json`` at all
NO_RESULT = "no metrics.json (not run, interrupted, or its process was lost)"


def _run_profile(metrics: Sequence[ScenarioMetrics], configuration: RunConfiguration | None) -> str:
    """The run's profile: the one its scenarios record (``mixed`` when they disagree), else
    the configured one, else ``default``."""
    recorded = {m.profile for m in metrics}
    if len(recorded) == 1:
        return recorded.pop()
    if len(recorded) > 1:
        return MIXED
    configured = configuration.profile if configuration is not None else None
    return configured or ProfileName.DEFAULT.value


def build_summary(
    metrics: Sequence[ScenarioMetrics],
    *,
    expected: Sequence[str] | None,
    trials: int,
    configuration: RunConfiguration | None,
    versions: Mapping[str, str],
    lost: Mapping[str, str] | Sequence[str] = (),
    not_run: Sequence[str] = (),
    stopped: StoppedSpending | None = None,
) -> RunSummary:
    """The figures of ``summary.json`` from the scenarios' metrics.

    ``not_run``: scenarios the budget kept from starting or stopped unscored, neither lost nor
    scored; ``stopped``: what those it stopped, and those stopped in flight, had spent.

    ``expected``: the scenario ids the run meant to produce (None when unknown); those without
    metrics are lost, as are the ids in ``lost`` (a mapping gives each one's reason, e.g. an
    unreadable ``metrics.json``). ``configuration`` (secrets already redacted) and
    ``versions`` are recorded as given. Each scenario id must appear once in ``metrics`` (else
    ``ValueError``). ``counts.expected`` is every scenario of the run, reported or lost, so
    ``expected == scored + infra_errors + lost`` and ``scored == succeeded + failed``.
    """
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    ordered = sorted(metrics, key=ScenarioMetrics.sort_key)
    missing = _missing(ordered, expected=expected, lost=lost, not_run=not_run)
    scored = [m for m in ordered if not m.infra_error]
    profile = _run_profile(ordered, configuration)
    pass_k, flaky = figures.trial_figures(scored, trials=trials, profile=profile)
    cost, unpriced = figures.cost_of(ordered, configuration)
    return RunSummary(
        profile=profile,
        configuration=configuration,
        versions=dict(versions),
        trials=trials,
        counts=_counts(ordered, scored, missing),
        **figures.rates_of(scored, configuration),
        pass_hat_k=pass_k,
        stop_reasons=figures.stop_reasons(ordered),
        token_usage=figures.token_usage(ordered),
        by_split=figures.group_rates(scored, "split"),
        by_persona=figures.group_rates(scored, "persona_name"),
        infra_errors=_infra_rows(ordered),
        lost=missing.lost,
        lost_reasons={
            key: missing.reasons[key] for key in missing.lost if missing.reasons.get(key)
        },
        judge_replies=figures.judge_replies(ordered),
        flaky_tasks=flaky,
        scenarios=tuple(figures.row_of(m) for m in ordered),
        cost=cost,
        unpriced_models=unpriced,
        not_run=missing.not_run,
        **_stopped_fields(stopped or StoppedSpending()),
    )


def _stopped_fields(stopped: StoppedSpending) -> dict[str, Any]:
    """``not_run_cost``, ``interrupted_cost`` with its ``interrupted_by``, and
    ``stopped_spending_counted``: an amount that rounds to 0 (micro-dollars) is omitted, as is
    an offset of 0 (a run without a ledger)."""
    budget = figures.rounded_usd(stopped.budget)
    interrupted = figures.rounded_usd(stopped.interrupted)
    return {
        "not_run_cost": budget or None,
        "interrupted_cost": interrupted or None,
        "interrupted_by": stopped.interrupted_by if interrupted else (),
        "stopped_spending_counted": stopped.counted,
    }


def _infra_rows(ordered: Sequence[ScenarioMetrics]) -> tuple[InfraErrorRow, ...]:
    return tuple(
        InfraErrorRow(scenario_id=m.scenario_id, detail=m.stop_detail)
        for m in ordered
        if m.infra_error
    )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Missing:
    """The scenarios of a run without a record: lost (with their reasons) and not run."""

    lost: tuple[str, ...]
    reasons: Mapping[str, str]
    not_run: tuple[str, ...]


def _missing(
    ordered: Sequence[ScenarioMetrics],
    *,
    expected: Sequence[str] | None,
    lost: Mapping[str, str] | Sequence[str],
    not_run: Sequence[str],
) -> _Missing:
    ids = [m.scenario_id for m in ordered]
    duplicates = sorted(name for name, n in Counter(ids).items() if n > 1)
    if duplicates:
        raise ValueError(f"scenarios reported more than once: {', '.join(duplicates)}")
    reported = set(ids)
    reasons = dict(lost) if isinstance(lost, Mapping) else dict.fromkeys(lost, "")
    unstarted = sorted(set(not_run) - reported, key=scenario_order)
    missing = set(reasons) | (set(expected or ()) - reported)
    lost_ids = sorted(missing - reported - set(unstarted), key=scenario_order)
    return _Missing(lost=tuple(lost_ids), reasons=reasons, not_run=tuple(unstarted))


def _counts(
    ordered: Sequence[ScenarioMetrics], scored: Sequence[ScenarioMetrics], missing: _Missing
) -> Counts:
    succeeded = sum(1 for m in scored if m.is_successful)
    return Counts(
        expected=len(ordered) + len(missing.lost) + len(missing.not_run),
        reported=len(ordered),
        scored=len(scored),
        succeeded=succeeded,
        failed=len(scored) - succeeded,
        infra_errors=len(ordered) - len(scored),
        lost=len(missing.lost),
        not_run=len(missing.not_run),
    )


def scenario_order(scenario_id: str) -> tuple[float, str]:
    """The sort key of a scenario id: ``tau2_retail__12-trial3`` sorts by 12 then the text."""
    tail = scenario_id.rpartition("__")[2]
    number = tail.partition("-")[0]
    return (float(int(number)) if number.isdigit() else math.inf), scenario_id


class SummaryInputs(TypedDict):
    """What :func:`build_summary` takes beside the metrics (``lost`` and ``not_run`` optional)."""

    expected: Sequence[str] | None
    trials: int
    configuration: RunConfiguration | None
    versions: Mapping[str, str]
    lost: NotRequired[Mapping[str, str] | Sequence[str]]
    not_run: NotRequired[Sequence[str]]
    stopped: NotRequired[StoppedSpending | None]


def summary_inputs(
    args: RunArgs,
    *,
    lost: Mapping[str, str] | Sequence[str] = (),
    not_run: Sequence[str] = (),
    stopped: StoppedSpending | None = None,
) -> SummaryInputs:
    """The inputs of :func:`build_summary` that ``run_args.json`` records (the expected
    scenarios, trials, configuration and versions), with the run's ``lost`` and ``not_run``
    (and what those the budget stopped, and those stopped in flight, had spent: ``stopped``)."""
    return SummaryInputs(
        expected=args.expected,
        trials=args.trials,
        configuration=args.configuration,
        versions=args.versions,
        lost=lost,
        not_run=not_run,
        stopped=stopped,
    )


def write_run_summary(
    run_dir: Path,
    metrics: Sequence[ScenarioMetrics],
    **inputs: Unpack[SummaryInputs],
) -> RunSummary:
    """Write ``all_metrics.json``, ``summary.json`` and ``all_summary.txt``; return the summary.

    Controller process only. ``inputs`` are those of :func:`build_summary`; the offset up to
    which the ledger of stopped spending is counted (``stopped``'s) is written with the
    amounts, in the one atomic write of ``summary.json``.
    """
    run_dir = Path(run_dir)
    summary = build_summary(metrics, **inputs)
    ordered = sorted(metrics, key=ScenarioMetrics.sort_key)
    write_json_atomic(
        run_dir / ALL_METRICS_FILE,
        cut_long_texts(codec.encode(ordered, list[ScenarioMetrics])),
    )
    write_json_atomic(run_dir / SUMMARY_JSON_FILE, codec.encode(summary))
    write_text_atomic(run_dir / SUMMARY_TEXT_FILE, render_summary_text(summary))
    return summary


def write_run_args(run_dir: Path, args: RunArgs) -> None:
    """Write ``run_args.json`` atomically (secrets already redacted by the caller)."""
    write_json_atomic(Path(run_dir) / RUN_ARGS_FILE, codec.encode(args))


def read_run_args(run_dir: Path) -> RunArgs | None:
    """``run_args.json`` of a run, None when there is none; :class:`ArtifactError` if unusable."""
    path = Path(run_dir) / RUN_ARGS_FILE
    if not path.is_file():
        return None
    return codec.read(RunArgs, path)


def stopped_of(summary: RunSummary | None) -> StoppedSpending:
    """What ``summary`` says the scenarios the budget stopped, and those stopped in flight,
    had spent, what stopped the latter, and how much of the ledger that includes (nothing
    without a summary)."""
    if summary is None:
        return StoppedSpending()
    return StoppedSpending.of(
        budget=summary.not_run_cost or 0.0,
        interrupted=summary.interrupted_cost or 0.0,
        by=summary.interrupted_by,
        counted=summary.stopped_spending_counted,
    )


def read_summary(run_dir: Path) -> RunSummary | None:
    """``summary.json`` of a run, None when there is none; :class:`ArtifactError` if unusable."""
    path = Path(run_dir) / SUMMARY_JSON_FILE
    if not path.is_file():
        return None
    return codec.read(RunSummary, path)


def summarize(run_dir: Path) -> RunSummary:
    """Rebuild the run summaries of ``run_dir`` from its artifacts (the ``summarize`` command).

    Trials, expected scenarios, configuration and versions come from ``run_args.json``; without
    it, from the earlier ``summary.json`` (never replaced by empty values), else from the
    metrics. Unreadable ``metrics.json`` files count as lost, with their reason. The lines of
    the ledger of stopped spending past the offset the earlier summary counted (a run killed
    while it stopped) are added to its ``not_run_cost`` and ``interrupted_cost``.
    """
    run_dir = Path(run_dir)
    loaded = load_run_metrics(run_dir)
    if loaded.misplaced:
        more = f" (and {len(loaded.misplaced) - 1} more)" if len(loaded.misplaced) > 1 else ""
        raise ArtifactError(
            f"{run_dir} is not a readable run: {loaded.misplaced[0]}{more}; move or remove it"
        )
    run_args = read_run_args(run_dir)
    if run_args is None and not loaded.records and not loaded.incomplete:
        raise ArtifactError(
            f"{run_dir} has no run_args.json and no scenario metrics (no <scenario>/metrics.json "
            "or <scenario>/trial-<k>/metrics.json); is it a run directory?"
        )
    try:
        earlier = read_summary(run_dir)
    except ArtifactError:
        earlier = None
    return _rebuilt(run_dir, loaded, run_args, earlier)


def _rebuilt(
    run_dir: Path, loaded: RunMetrics, run_args: RunArgs | None, earlier: RunSummary | None
) -> RunSummary:
    """:func:`summarize`'s summary of ``loaded`` (the run's records), written."""
    # scenarios the budget kept from starting (or stopped), and what those it stopped, and
    # those stopped in flight, had spent, are recorded in the summary only, and (a run killed
    # while it stopped) what its stopped scenarios had spent in the ledger, which the summary
    # then holds up to the offset it writes (a resume must not count it again)
    stopped = with_ledger(run_dir, stopped_of(earlier))
    # and those the ledger says the budget stopped (their tests never reported: -x, Ctrl-C)
    not_run = tuple(sorted({*(earlier.not_run if earlier else ()), *stopped.budget_stopped}))
    if run_args is not None:
        # run_args.json is written before the first scenario starts: every expected scenario
        # without a whole record is listed as lost, even when the run was killed at once
        reported = {m.scenario_id for m in loaded.records}
        reasons = dict.fromkeys(
            (key for key in run_args.expected if key not in reported and key not in not_run),
            NO_RESULT,
        )
        reasons.update(loaded.incomplete)
        inputs = summary_inputs(run_args, lost=reasons, not_run=not_run)
    else:
        inputs = SummaryInputs(
            expected=[row.scenario_id for row in earlier.scenarios] if earlier else None,
            trials=earlier.trials if earlier else max((m.trial for m in loaded.records), default=1),
            configuration=earlier.configuration if earlier else None,
            versions=earlier.versions if earlier else {},
            lost=loaded.incomplete,
            not_run=not_run,
        )
    inputs["stopped"] = stopped
    return write_run_summary(run_dir, loaded.records, **inputs)
