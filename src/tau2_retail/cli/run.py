"""``python -m tau2_retail run ID``: one scenario without pytest, printed live or as JSON.

It goes through the same harness as the pytest fixture (``tau2_retail.engine.harness``) with
the same request options, limits and seed: the base seed's first trial seed, as pytest's
trial 1 uses. With no judge, NL assertions are not applicable and a line says how to add one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from tau2_retail import codec
from tau2_retail.cli.common import SubParsers, add_data_dir
from tau2_retail.data.files import resolve_data_dir
from tau2_retail.data.tasks import Task, trial_seeds, unknown_task_ids
from tau2_retail.engine.conversation_setup import Limits
from tau2_retail.engine.harness import DataBundle, Harness, Roles, load_bundle
from tau2_retail.engine.profiles import ProfileName
from tau2_retail.engine.scenario import Scenario, ScenarioOutcome
from tau2_retail.engine.scoring import describe_db_difference
from tau2_retail.errors import DataError
from tau2_retail.models.agent import AgentIdentity, AgentRunner
from tau2_retail.models.agent_import import CLI_IMPORTS, load_agent_factory
from tau2_retail.models.cache import CacheMode, ResponseCache
from tau2_retail.models.messages import Message, Role, ToolCall
from tau2_retail.results.artifacts import write_outcome
from tau2_retail.results.summary import usd
from tau2_retail.settings import (
    SETTINGS,
    AgentSource,
    Inputs,
    Tau2Settings,
    declarations,
    resolve_settings,
)
from tau2_retail.settings.notices import timeout_notice

__all__ = [
    "DEFAULT_BASE_SEED",
    "EXIT_FAILED",
    "EXIT_INFRA_ERROR",
    "EXIT_SUCCESS",
    "MAX_SHOWN_CHARS",
    "add_parser",
    "add_setting_flags",
    "render_message",
    "render_transcript",
    "resolve_run_settings",
    "run_command",
]

EXIT_SUCCESS: Final = 0
EXIT_FAILED: Final = 1
EXIT_INFRA_ERROR: Final = 3

MAX_SHOWN_CHARS: Final = 300
"""Tool-call arguments and tool results longer than this are cut in the readable output."""

_NO_JUDGE_HINT: Final = (
    "no judge configured: NL assertions are not applicable "
    "(set --judge-model and --judge-base-url to judge them)"
)

DEFAULT_BASE_SEED: Final = int(SETTINGS["seed"].default)
"""The pytest plugin's default ``--tau2-seed``."""

# -- the arguments: the settings of one scenario -------------------------------------------------


def add_parser(commands: SubParsers) -> None:
    run = commands.add_parser(
        "run",
        help="run one scenario and print the conversation as it happens",
        description="Run one scenario with the same harness, options and seed as the pytest "
        "run, printing each message as it is added. Built-in models need no network; any "
        "other model name is called at an OpenAI-compatible endpoint. Each option is the "
        "pytest option without tau2- (--agent-model is --tau2-agent-model), with the same "
        "values, environment variables and defaults.",
        epilog=f"exit status: {EXIT_SUCCESS} the scenario succeeded, {EXIT_FAILED} it failed, "
        "2 bad input (unknown task id, bad option, data problem), "
        f"{EXIT_INFRA_ERROR} infra_error (an endpoint failed; not the model's fault)",
    )
    add_data_dir(run)
    run.add_argument(
        "task_id", metavar="ID", help="task id, 0..113 (list: python -m tau2_retail tasks)"
    )
    groups = add_setting_flags(run)
    limits = groups[SETTINGS["seed"].run_group or ""]
    limits.add_argument(
        "--no-agent-notes",
        dest=SETTINGS["agent_notes"].dest,
        action="store_const",
        const="off",
        help="--agent-notes off: the policy alone, as upstream tau2",
    )
    limits.add_argument(
        "--output-dir",
        metavar="DIR",
        help="also write the scenario's artifacts (transcript, metrics, ...) into "
        "DIR/tau2_retail__ID",
    )
    limits.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document at the end (metrics, transcript, actions, judge) instead "
        "of the live conversation",
    )
    run.set_defaults(handler=run_command)


def add_setting_flags(
    parser: argparse.ArgumentParser, model: type[Tau2Settings] = Tau2Settings
) -> dict[str, argparse._ArgumentGroup]:
    """A flag for each setting of ``model`` the command takes, in the group its declaration
    names; returns the groups by title."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for setting in declarations(model):
        if setting.run_group is None:
            continue
        if setting.run_group not in groups:
            groups[setting.run_group] = parser.add_argument_group(setting.run_group)
        env = f" [env {setting.env_var}]" if setting.env_var else ""
        # a help that names its default already (``(default 8 MiB)``) is not told it twice
        told = "(default" in setting.help
        default = f" (default: {setting.default})" if setting.default and not told else ""
        groups[setting.run_group].add_argument(
            setting.cli_flag,
            dest=setting.dest,
            metavar=setting.metavar,
            help=f"{setting.help}{default}{env}",
        )
    return groups


def _load_agent(spec: str, source: str) -> AgentSource | None:
    if not spec:
        return None
    factory, identity = load_agent_factory(spec, imports=CLI_IMPORTS)
    return AgentSource(identity=identity, factory=factory)


def resolve_run_settings(
    args: argparse.Namespace, model: type[Tau2Settings] = Tau2Settings
) -> Tau2Settings:
    """The settings of ``args`` (flag, then ``TAU2_*`` environment variable, then default), as
    the pytest plugin resolves them; ``ConfigError`` (exit status 2) for a bad one."""
    return resolve_settings(
        Inputs(
            flag=lambda setting: setting.cli_flag,
            option=lambda setting: getattr(args, setting.dest, None),
            applies=lambda setting: setting.cli,
            environ=os.environ,
            load_agent=_load_agent,
            one_scenario=True,
        ),
        model,
    )


def _cache(settings: Tau2Settings) -> ResponseCache | None:
    if not settings.cache or settings.cache_mode is CacheMode.OFF:
        return None
    return ResponseCache(
        Path(settings.cache),
        mode=settings.cache_mode,
        warn=lambda line: print(line, file=sys.stderr),
    )


# -- the output -----------------------------------------------------------------------------------


def _truncated(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) <= MAX_SHOWN_CHARS:
        return flat
    return f"{flat[:MAX_SHOWN_CHARS]}… [{len(flat) - MAX_SHOWN_CHARS} more characters]"


def _call_text(call: ToolCall) -> str:
    return f"agent -> {call.name}({_truncated(call.arguments)})"


def render_message(message: Message) -> list[str]:
    """One message as lines: ``agent:``, ``user:``, ``agent -> tool(args)``, ``tool: ...``.

    Agent text that came with tool calls is shown too (the user never saw it); tool results and
    arguments are cut at ``MAX_SHOWN_CHARS``; a failed tool call is marked ``tool (error):``.
    System messages are not shown.
    """
    text = message.content or ""
    if message.role is Role.ASSISTANT:
        lines = [f"agent: {text}"] if text.strip() else []
        return lines + [_call_text(call) for call in message.tool_calls]
    if message.role is Role.USER:
        return [f"user: {text}"]
    if message.role is Role.TOOL:
        marker = " (error)" if message.error else ""
        return [f"tool{marker}: {_truncated(text)}"]
    return []


def render_transcript(messages: Sequence[Message]) -> list[str]:
    """The conversation as lines (:func:`render_message` of each message)."""
    return [line for message in messages for line in render_message(message)]


def _live_printer(mask: Callable[[str], str]) -> Callable[[Message], None]:
    """Prints each message as it joins the conversation, the roles' keys masked (the
    conversation itself goes on unmasked)."""

    def print_live(message: Message) -> None:
        for line in render_message(message):
            print(mask(line), flush=True)

    return print_live


def _header(
    task: Task,
    roles: Roles,
    seed: int,
    base_seed: int,
    profile: ProfileName,
    agent: AgentIdentity | None = None,
) -> list[str]:
    judge = roles.judge
    shown = f"code {agent.describe()}" if agent is not None else roles.agent.describe()
    lines = [
        f"scenario {task.scenario_name} (split {task.split}, persona {task.persona_name}, "
        f"seed {seed} = trial 1 of base seed {base_seed}, profile {profile.value})",
        f"agent: {shown}; user: {roles.user.describe()}; "
        f"judge: {judge.describe() if judge else 'none'}",
    ]
    if judge is None and task.nl_assertions:
        lines.append(_NO_JUDGE_HINT)
    return lines


def _report(outcome: ScenarioOutcome) -> list[str]:
    metrics = outcome.metrics
    conversation = outcome.conversation
    # the metrics' detail also names a judge outage after the conversation
    detail = f" ({metrics.stop_detail})" if metrics.stop_detail else ""
    lines = [f"ending: {conversation.stop_reason.value}{detail}"]
    if metrics.db_state_match:
        lines.append(f"DB match: yes (hash {metrics.db_state_expected_hash[:12]})")
    else:
        lines.append(
            f"DB match: no (expected hash {metrics.db_state_expected_hash[:12]}, "
            f"actual {metrics.db_state_actual_hash[:12]})"
        )
        lines.extend(f"  {line}" for line in describe_db_difference(outcome.db_diff).splitlines())
    lines.append(
        "signals: "
        + "; ".join(
            f"{state} {', '.join(signals)}"
            for state, signals in metrics.success_breakdown.items()
            if signals
        )
    )
    if outcome.judge is not None:
        for verdict in outcome.judge.verdicts:
            mark = "passed" if verdict.passed else "failed"
            lines.append(f"  NL {verdict.index} {mark}: {verdict.assertion} ({verdict.reason})")
    usage = metrics.token_usage
    lines.append(
        "tokens: "
        + "; ".join(
            f"{role} {value.n_calls} call{'' if value.n_calls == 1 else 's'}, "
            f"{value.prompt} prompt, {value.completion} completion"
            for role, value in usage.items()
        )
    )
    hits = sum(value.cache_hits for value in usage.values())
    if hits:
        lines.append(f"response cache: {hits} completion(s) served from the cache")
    if metrics.cost is not None:
        cost = metrics.cost
        lines.append(
            f"cost: {usd(cost.total)} ("
            + ", ".join(f"{role} {usd(cost.role(role))}" for role in ("agent", "user", "judge"))
            + ")"
        )
    if outcome.is_infra_error:
        verdict_line = (
            f"result: infra_error (the {metrics.infra_role or 'agent'} endpoint failed; not scored)"
        )
    else:
        verdict_line = f"result: {'success' if metrics.is_successful else 'failure'}"
    reward = metrics.tau2_reward
    shown = "n/a (no judge)" if reward is None else f"{reward:g}"
    lines.append(f"{verdict_line}, tau2 reward {shown}")
    return lines


def _json_document(outcome: ScenarioOutcome) -> dict[str, Any]:
    document: dict[str, Any] = {
        "metrics": codec.encode(outcome.metrics),
        "transcript": outcome.conversation.to_json()["messages"],
        "actions": [action.to_json() for action in outcome.conversation.actions],
    }
    if outcome.judge is not None:
        document["judge"] = codec.encode(outcome.judge)
    return document


# -- the command ----------------------------------------------------------------------------------


def run_command(args: argparse.Namespace) -> int:
    """Run task ``args.task_id`` once and print it; the exit status says how it went."""
    # Every setting is checked before the data is loaded or any client is built.
    settings = resolve_run_settings(args)
    limits = settings.limits()
    source = settings.agent_source
    identity = source.identity if source is not None else None
    data_dir = resolve_data_dir(args.data_dir)
    bundle = load_bundle(data_dir, agent_notes=settings.agent_notes, profile=settings.profile)
    if problem := unknown_task_ids([args.task_id], bundle.tasks):
        raise DataError(f"{problem} (list them with: python -m tau2_retail tasks)")
    task = bundle.tasks[args.task_id]
    seed = trial_seeds(settings.seed, 1)[0]
    scenario = Scenario(task=task, trial=0, trials=1, seed=seed)
    live = not args.json
    if live:
        header = _header(task, settings.roles, seed, settings.seed, settings.profile, identity)
        print("\n".join(header), end="\n\n", flush=True)
    cache = _cache(settings)
    try:
        outcome = asyncio.run(
            _run_once(
                settings,
                bundle,
                scenario,
                limits=limits,
                cache=cache,
                live=live,
                output_dir=args.output_dir,
            )
        )
    finally:
        if cache is not None:
            cache.close()
    return _print_outcome(outcome, live=live)


async def _run_once(
    settings: Tau2Settings,
    bundle: DataBundle,
    scenario: Scenario,
    *,
    limits: Limits,
    cache: ResponseCache | None,
    live: bool,
    output_dir: str | None,
) -> ScenarioOutcome:
    """The scenario through a harness of its own; its folder written when ``output_dir`` is set."""
    roles = settings.roles
    source = settings.agent_source
    async with Harness(
        bundle=bundle,
        roles=roles,
        limits=limits,
        cache=cache,
        prices=settings.prices,
        notice=lambda line: print(line, file=sys.stderr),
    ) as harness:
        masker = harness.masker
        outcome = await harness.run(
            scenario,
            on_message=_live_printer(masker.text if masker else str) if live else None,
            agent=AgentRunner(source.factory, source.identity)
            if source is not None and source.factory is not None
            else None,
        )
        if output_dir is not None:
            identity = source.identity if source is not None else None
            write_outcome(
                Path(output_dir),
                outcome,
                prompts=harness.prompts(scenario.task),
                config={
                    "command": "run",
                    "seed": scenario.seed,
                    "base_seed": settings.seed,
                    "profile": settings.profile.value,
                    # names and URLs only: request bodies may carry secrets
                    "agent": identity.describe() if identity else roles.agent.describe(),
                    "user": roles.user.describe(),
                    "judge": roles.judge.describe() if roles.judge else None,
                },
            )
        return outcome


def _print_outcome(outcome: ScenarioOutcome, *, live: bool) -> int:
    """The outcome on stdout (the live report, or the JSON document); the exit status."""
    for hit in outcome.timeouts:
        print(timeout_notice(hit, cli=True), file=sys.stderr)
    if live:
        print()
        print("\n".join(_report(outcome)))
    else:
        json.dump(_json_document(outcome), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    if outcome.is_infra_error:
        return EXIT_INFRA_ERROR
    return EXIT_SUCCESS if outcome.metrics.is_successful else EXIT_FAILED
