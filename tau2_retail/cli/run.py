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
from tau2_retail.data.tasks import Task, trial_seeds
from tau2_retail.engine.conversation import Limits
from tau2_retail.engine.harness import Harness, Roles, load_bundle
from tau2_retail.engine.profiles import PROFILE_NAMES, ProfileName, policy_for
from tau2_retail.engine.scenario import Scenario, ScenarioOutcome
from tau2_retail.engine.scoring import describe_db_difference
from tau2_retail.errors import ConfigError, DataError
from tau2_retail.models.agent import AgentFactory, AgentIdentity, AgentRunner, load_agent_factory
from tau2_retail.models.builtin import BUILTIN_AGENTS, BUILTIN_CUSTOMER, BUILTIN_ORACLE
from tau2_retail.models.cache import CacheMode, ResponseCache
from tau2_retail.models.choice import ModelChoice, choose_model
from tau2_retail.models.config import DEFAULT_API_KEY_ENV, NO_API_KEY, EndpointConfig
from tau2_retail.models.messages import Message, Role, ToolCall
from tau2_retail.models.prices import PriceTable
from tau2_retail.results.artifacts import write_outcome
from tau2_retail.results.summary import usd

__all__ = [
    "DEFAULT_BASE_SEED",
    "EXIT_FAILED",
    "EXIT_INFRA_ERROR",
    "EXIT_SUCCESS",
    "MAX_SHOWN_CHARS",
    "add_parser",
    "render_message",
    "render_transcript",
    "run_command",
]

EXIT_SUCCESS: Final = 0
EXIT_FAILED: Final = 1
EXIT_INFRA_ERROR: Final = 3

DEFAULT_BASE_SEED: Final = 300
"""The pytest plugin's default ``--tau2-seed``."""

MAX_SHOWN_CHARS: Final = 300
"""Tool-call arguments and tool results longer than this are cut in the readable output."""

_NO_JUDGE_HINT: Final = (
    "no judge configured: NL assertions are not applicable "
    "(set --judge-model and --judge-base-url to judge them)"
)

_DEFAULT_ENDPOINT: Final = EndpointConfig(model="defaults")
_DEFAULT_LIMITS: Final = Limits()

# -- the arguments --------------------------------------------------------------------------------


def _positive_int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"got {value}; expected an integer >= 1")
    return value


def _json_object(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(
            'expected a JSON object, e.g. \'{"chat_template_kwargs": {"x": 1}}\''
        ) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return value


_ROLE_WHO: Final = {
    "agent": "the agent",
    "user": "the simulated user",
    "judge": "the NL-assertion judge",
}
_RequestOption = tuple[str, Callable[[str], Any], str, str]
_REQUEST_OPTIONS: Final[tuple[_RequestOption, ...]] = (
    # (name, parser, metavar, help with {who})
    (
        "base_url",
        str,
        "URL",
        "OpenAI-compatible base URL of {who}, e.g. http://127.0.0.1:8000/v1 "
        "(default: OPENAI_BASE_URL, else OpenAI's)",
    ),
    ("temperature", float, "T", "sampling temperature of {who} (default: the server's)"),
    ("top_p", float, "P", "top_p of {who}, in (0, 1] (default: the server's)"),
    ("max_tokens", _positive_int, "N", "max tokens per reply of {who} (default: the server's)"),
    (
        "extra_body",
        _json_object,
        "JSON",
        "JSON object merged into every request body of {who} (server-specific fields)",
    ),
    (
        "timeout",
        float,
        "SECONDS",
        f"seconds per request of {{who}} (default: {_DEFAULT_ENDPOINT.timeout_seconds:g})",
    ),
    (
        "max_retries",
        int,
        "N",
        f"retries per request of {{who}} (default: {_DEFAULT_ENDPOINT.max_retries})",
    ),
)


def _add_role(parser: argparse.ArgumentParser, role: str, default: str | None) -> None:
    who = _ROLE_WHO[role]
    group = parser.add_argument_group(f"{role} model ({who})")
    if role == "agent":
        model_help = f"{', '.join(BUILTIN_AGENTS)}, or a model id at the endpoint"
    elif role == "user":
        model_help = f"{BUILTIN_CUSTOMER}, or a model id at the endpoint"
    else:
        model_help = "a model id at the endpoint (no judge when left out)"
    shown = f" (default: {default})" if default else ""
    group.add_argument(
        f"--{role}-model", default=default, metavar="NAME", help=f"{model_help}{shown}"
    )
    if role == "agent":
        group.add_argument(
            "--agent",
            metavar="MODULE:FACTORY",
            help="your agent as Python code, instead of --agent-model: package.module:factory, "
            "a class or function making an agent with respond(messages, tools) or "
            "converse(messages, toolbox)",
        )
    group.add_argument(
        f"--{role}-api-key-env",
        default=DEFAULT_API_KEY_ENV,
        metavar="NAME",
        help=f"NAME of the environment variable holding the API key of {who} "
        f"(default: {DEFAULT_API_KEY_ENV})",
    )
    for name, parse, metavar, text in _REQUEST_OPTIONS:
        group.add_argument(
            f"--{role}-{name.replace('_', '-')}",
            type=parse,
            metavar=metavar,
            help=text.format(who=who),
        )


def add_parser(commands: SubParsers) -> None:
    run = commands.add_parser(
        "run",
        help="run one scenario and print the conversation as it happens",
        description="Run one scenario with the same harness, options and seed as the pytest "
        "run, printing each message as it is added. Built-in models need no network; any "
        "other model name is called at an OpenAI-compatible endpoint.",
        epilog=f"exit status: {EXIT_SUCCESS} the scenario succeeded, {EXIT_FAILED} it failed, "
        "2 bad input (unknown task id, bad option, data problem), "
        f"{EXIT_INFRA_ERROR} infra_error (an endpoint failed; not the model's fault)",
    )
    add_data_dir(run)
    run.add_argument(
        "task_id", metavar="ID", help="task id, 0..113 (list: python -m tau2_retail tasks)"
    )
    _add_role(run, "agent", BUILTIN_ORACLE)
    _add_role(run, "user", BUILTIN_CUSTOMER)
    _add_role(run, "judge", None)
    limits = run.add_argument_group("limits, seed and output")
    limits.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_BASE_SEED,
        metavar="BASE",
        help="base seed as --tau2-seed; the scenario uses its first trial seed, as pytest's "
        f"trial 1 does (default: {DEFAULT_BASE_SEED})",
    )
    limits.add_argument(
        "--max-steps",
        type=_positive_int,
        metavar="N",
        help=f"routed messages before max_steps (default: {_DEFAULT_LIMITS.max_steps})",
    )
    limits.add_argument(
        "--max-errors",
        type=_positive_int,
        metavar="N",
        help=f"tool errors before too_many_errors (default: {_DEFAULT_LIMITS.max_errors})",
    )
    limits.add_argument(
        "--max-duration",
        type=float,
        metavar="SECONDS",
        help="wall-clock seconds before timeout "
        f"(default: {_DEFAULT_LIMITS.max_duration_seconds:g})",
    )
    limits.add_argument(
        "--profile",
        choices=PROFILE_NAMES,
        default=ProfileName.DEFAULT.value,
        help="default (ours: notes, end_conversation, our judge) or tau2 (upstream "
        "tau2-bench's prompts, tools, endings and reward, from its pinned sources), as "
        "--tau2-profile (default: default)",
    )
    limits.add_argument(
        "--no-agent-notes",
        action="store_true",
        help="give the agent the policy alone, as upstream tau2 (default: policy + our notes)",
    )
    limits.add_argument(
        "--output-dir",
        metavar="DIR",
        help="also write the scenario's artifacts (transcript, metrics, ...) into "
        "DIR/tau2_retail__ID",
    )
    cost = run.add_argument_group("cost and response cache (as --tau2-prices, --tau2-cache)")
    cost.add_argument(
        "--prices",
        type=_prices,
        metavar="JSON",
        help='USD per million tokens by model, e.g. {"my-model": {"input": 0.15, "output": '
        "0.6}}: the scenario's cost is printed and in its metrics",
    )
    cost.add_argument(
        "--cache", metavar="PATH", help="response cache file (SQLite), shared with pytest runs"
    )
    cost.add_argument(
        "--cache-mode",
        choices=[mode.value for mode in CacheMode],
        default=CacheMode.READ_WRITE.value,
        help="read-write (default), replay (never contact an endpoint) or off",
    )
    limits.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document at the end (metrics, transcript, actions, judge) instead "
        "of the live conversation",
    )
    run.set_defaults(handler=run_command)


def _prices(raw: str) -> PriceTable:
    try:
        return PriceTable.parse(raw)
    except ConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _cache(args: argparse.Namespace) -> ResponseCache | None:
    mode = CacheMode(args.cache_mode)
    if args.cache is None or mode is CacheMode.OFF:
        return None
    path = Path(args.cache)
    if mode is CacheMode.REPLAY and not path.is_file():
        raise ConfigError(f"--cache {path}: no such cache file (--cache-mode replay reads one)")
    return ResponseCache(path, mode=mode, warn=lambda line: print(line, file=sys.stderr))


def _endpoint_values(args: argparse.Namespace, role: str) -> dict[str, Any]:
    return {name: getattr(args, f"{role}_{name}") for name, *_ in _REQUEST_OPTIONS}


def _choice(args: argparse.Namespace, role: str) -> ModelChoice | None:
    name: str | None = getattr(args, f"{role}_model")
    values = _endpoint_values(args, role)
    given = [
        f"--{role}-{key.replace('_', '-')}" for key, value in values.items() if value is not None
    ]
    if name is None:
        if given:
            raise ConfigError(f"{given[0]} given without --{role}-model: name the {role} model")
        return None

    def endpoint(model: str) -> EndpointConfig:
        defaults = _DEFAULT_ENDPOINT
        try:
            return EndpointConfig(
                model=model,
                base_url=values["base_url"],
                api_key_env=getattr(args, f"{role}_api_key_env"),
                temperature=values["temperature"],
                top_p=values["top_p"],
                max_tokens=values["max_tokens"],
                extra_body=values["extra_body"] or {},
                timeout_seconds=(
                    defaults.timeout_seconds if values["timeout"] is None else values["timeout"]
                ),
                max_retries=(
                    defaults.max_retries if values["max_retries"] is None else values["max_retries"]
                ),
            )
        except ConfigError as error:
            raise ConfigError(f"--{role}-*: {error}") from error

    try:
        choice = choose_model(role, name, endpoint)
    except ConfigError as error:
        if str(error).startswith("--"):
            raise
        raise ConfigError(f"--{role}-model: {error}") from error
    if choice.endpoint is None and given:
        raise ConfigError(
            f"{given[0]} given with the built-in model {name!r}; built-in models run locally: "
            "drop the option or name an endpoint model"
        )
    # a replay never contacts an endpoint: it needs no key
    replay = bool(args.cache) and args.cache_mode == CacheMode.REPLAY.value
    problem = choice.endpoint.missing_key(os.environ) if choice.endpoint and not replay else None
    if problem:
        raise ConfigError(
            f"--{role}-model {name}: {problem}; set it, name another variable with "
            f"--{role}-api-key-env, or say the endpoint takes no key with "
            f"--{role}-api-key-env={NO_API_KEY}"
        )
    return choice


def _limits(args: argparse.Namespace) -> Limits:
    duration: float | None = args.max_duration
    if duration is not None and not duration > 0:
        raise ConfigError(f"--max-duration: got {duration:g}; expected a number of seconds > 0")
    defaults = _DEFAULT_LIMITS
    return Limits(
        max_steps=args.max_steps or defaults.max_steps,
        max_errors=args.max_errors or defaults.max_errors,
        max_duration_seconds=duration or defaults.max_duration_seconds,
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


def _print_live(message: Message) -> None:
    for line in render_message(message):
        print(line, flush=True)


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
    code: tuple[AgentFactory, AgentIdentity] | None = None
    if args.agent:
        if args.agent_model != BUILTIN_ORACLE:
            raise ConfigError(
                f"--agent {args.agent!r} and --agent-model {args.agent_model!r} both name the "
                "agent; give one of them"
            )
        code = load_agent_factory(args.agent)
    roles = Roles(
        agent=_required(_choice(args, "agent")),
        user=_required(_choice(args, "user")),
        judge=_choice(args, "judge"),
    )
    limits = _limits(args)
    identity = code[1] if code is not None else None
    base_seed: int = args.seed
    if base_seed < 0:
        raise ConfigError(f"--seed: got {base_seed}; expected an integer >= 0")
    profile = ProfileName(args.profile)
    if args.no_agent_notes and not policy_for(profile).takes_agent_notes:
        raise ConfigError(
            "--no-agent-notes applies to the default profile only; the tau2 profile sends "
            "upstream's agent prompt (drop the option)"
        )
    data_dir = resolve_data_dir(args.data_dir)
    bundle = load_bundle(data_dir, agent_notes=not args.no_agent_notes, profile=profile)
    task = bundle.tasks.get(args.task_id)
    if task is None:
        raise DataError(
            f"unknown task id {args.task_id!r}; known ids are 0..{len(bundle.tasks) - 1} "
            "(list them with: python -m tau2_retail tasks)"
        )
    seed = trial_seeds(base_seed, 1)[0]
    scenario = Scenario(task=task, trial=0, trials=1, seed=seed)
    live = not args.json
    if live:
        header = _header(task, roles, seed, base_seed, profile, identity)
        print("\n".join(header), end="\n\n", flush=True)

    async def run() -> ScenarioOutcome:
        async with Harness(
            bundle=bundle, roles=roles, limits=limits, cache=cache, prices=args.prices
        ) as harness:
            outcome = await harness.run(
                scenario,
                on_message=_print_live if live else None,
                agent=AgentRunner(*code) if code is not None else None,
            )
            if args.output_dir is not None:
                write_outcome(
                    Path(args.output_dir),
                    outcome,
                    prompts=harness.prompts(task),
                    config={
                        "command": "run",
                        "seed": seed,
                        "base_seed": base_seed,
                        "profile": profile.value,
                        # names and URLs only: request bodies may carry secrets
                        "agent": identity.describe() if identity else roles.agent.describe(),
                        "user": roles.user.describe(),
                        "judge": roles.judge.describe() if roles.judge else None,
                    },
                )
            return outcome

    cache = _cache(args)
    try:
        outcome = asyncio.run(run())
    finally:
        if cache is not None:
            cache.close()
    if live:
        print()
        print("\n".join(_report(outcome)))
    else:
        json.dump(_json_document(outcome), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    if outcome.is_infra_error:
        return EXIT_INFRA_ERROR
    return EXIT_SUCCESS if outcome.metrics.is_successful else EXIT_FAILED


def _required(choice: ModelChoice | None) -> ModelChoice:
    assert choice is not None  # agent and user have built-in defaults
    return choice
