"""``python -m tau2_retail run ID``: one scenario, without pytest, printed for a human or as JSON.

The models are chosen by name: ``builtin:oracle`` / ``builtin:noop`` (agent) and
``builtin:customer`` (user) need no network; any other name is a model id at an
OpenAI-compatible endpoint (``--<role>-base-url``, key read from ``--<role>-api-key-env``).
With no judge, NL assertions are not applicable and a line says how to configure one.

Exit status: 0 when the scenario succeeded, 1 when it failed, 3 on ``infra_error`` (the
endpoint failed; not the model's fault). Errors of the suite's own tree (an unknown task id,
a bad setting) are reported by ``cli.main`` with status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Any, Final

from tau2_retail.data.files import resolve_data_dir
from tau2_retail.data.gold import GoldBook
from tau2_retail.data.seed import load_seed
from tau2_retail.data.tasks import Task, load_tasks
from tau2_retail.engine.conversation import Limits
from tau2_retail.engine.profiles import Profile, ProfileName, load_profile, request_config
from tau2_retail.engine.scenario import Scenario, ScenarioOutcome, run_scenario
from tau2_retail.engine.scoring import describe_db_difference
from tau2_retail.errors import ConfigError, DataError
from tau2_retail.models.builtin import builtin_model, is_builtin
from tau2_retail.models.config import EndpointConfig
from tau2_retail.models.messages import Message, Role, ToolCall
from tau2_retail.models.protocol import ChatModel
from tau2_retail.tools.store import Store

__all__ = [
    "EXIT_FAILED",
    "EXIT_INFRA_ERROR",
    "EXIT_SUCCESS",
    "MAX_SHOWN_CHARS",
    "render_transcript",
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


def _truncated(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) <= MAX_SHOWN_CHARS:
        return flat
    return f"{flat[:MAX_SHOWN_CHARS]}… [{len(flat) - MAX_SHOWN_CHARS} more characters]"


def _call_text(call: ToolCall) -> str:
    return f"agent -> {call.name}({_truncated(call.arguments)})"


def render_transcript(messages: Sequence[Message]) -> list[str]:
    """The conversation as lines: ``agent:``, ``user:``, ``agent -> tool(args)``, ``tool: ...``.

    Agent text that came with tool calls is shown too (the user never saw it); tool results and
    arguments are cut at ``MAX_SHOWN_CHARS``; a failed tool call is marked ``tool (error):``.
    """
    lines: list[str] = []
    for message in messages:
        text = message.content or ""
        if message.role is Role.ASSISTANT:
            if text.strip():
                lines.append(f"agent: {text}")
            lines.extend(_call_text(call) for call in message.tool_calls)
        elif message.role is Role.USER:
            lines.append(f"user: {text}")
        elif message.role is Role.TOOL:
            marker = " (error)" if message.error else ""
            lines.append(f"tool{marker}: {_truncated(text)}")
    return lines


def _endpoint(
    stack: AsyncExitStack, config: EndpointConfig, *, role: str, profile: ProfileName
) -> ChatModel:
    """An OpenAI-compatible client with the profile's request parameters, closed with ``stack``."""
    from tau2_retail.models.openai_client import OpenAIChatModel

    model = OpenAIChatModel(request_config(profile, role, config))
    stack.push_async_callback(model.close)
    return model


def _model(
    stack: AsyncExitStack,
    role: str,
    name: str,
    *,
    base_url: str | None,
    api_key_env: str,
    task: Task,
    profile: ProfileName,
) -> ChatModel:
    """The built-in model ``name``, or a client for it at ``base_url``."""
    if is_builtin(name):
        if base_url is not None:
            raise ConfigError(
                f"--{role}-base-url {base_url!r} given with the built-in model {name!r}; "
                "built-in models run locally: drop the URL or name an endpoint model"
            )
        return builtin_model(name, task, role=role)
    return _endpoint(
        stack,
        EndpointConfig(model=name, base_url=base_url, api_key_env=api_key_env),
        role=role,
        profile=profile,
    )


def _judge_config(args: argparse.Namespace) -> EndpointConfig | None:
    name: str | None = args.judge_model
    if name is None:
        return None
    if is_builtin(name):
        raise ConfigError(
            f"--judge-model {name!r}: there is no built-in judge; name a model at an "
            "OpenAI-compatible endpoint (with --judge-base-url), or leave the option out"
        )
    return EndpointConfig(
        model=name, base_url=args.judge_base_url, api_key_env=args.judge_api_key_env
    )


def _limits(args: argparse.Namespace) -> Limits:
    max_steps: int | None = args.max_steps
    if max_steps is None:
        return Limits()
    if max_steps < 1:
        raise ConfigError(f"--max-steps: got {max_steps}; expected a positive integer")
    return Limits(max_steps=max_steps)


async def _run(
    args: argparse.Namespace, *, task: Task, book: GoldBook, profile: Profile
) -> ScenarioOutcome:
    # Settings are checked before any client is built.
    limits = _limits(args)
    judge_config = _judge_config(args)
    async with AsyncExitStack() as stack:
        agent = _model(
            stack,
            "agent",
            args.agent_model,
            base_url=args.agent_base_url,
            api_key_env=args.agent_api_key_env,
            task=task,
            profile=profile.name,
        )
        user = _model(
            stack,
            "user",
            args.user_model,
            base_url=args.user_base_url,
            api_key_env=args.user_api_key_env,
            task=task,
            profile=profile.name,
        )
        judge = None
        if judge_config is not None:
            judge = _endpoint(stack, judge_config, role="judge", profile=profile.name)
        return await run_scenario(
            Scenario(task=task, trial=0, trials=1, seed=args.seed),
            agent=agent,
            user=user,
            judge_model=judge,
            gold=book[task.id],
            store=Store(book.seed),
            agent_prompt=profile.agent_prompt,
            user_prompt=profile.user_prompt(task),
            tools=profile.tools,
            limits=limits,
            profile=profile,
        )


def _header(args: argparse.Namespace, task: Task) -> list[str]:
    judge: str | None = args.judge_model
    lines = [
        f"scenario {task.scenario_name} (split {task.split}, persona {task.persona_name}, "
        f"seed {args.seed}, profile {args.profile})",
        f"agent: {_where(args.agent_model, args.agent_base_url)}; "
        f"user: {_where(args.user_model, args.user_base_url)}; "
        f"judge: {_where(judge, args.judge_base_url) if judge else 'none'}",
    ]
    if judge is None and task.nl_assertions:
        lines.append(_NO_JUDGE_HINT)
    return lines


def _where(name: str, base_url: str | None) -> str:
    return f"{name} at {base_url}" if base_url else name


def _report(outcome: ScenarioOutcome) -> list[str]:
    metrics = outcome.metrics
    conversation = outcome.conversation
    detail = f" ({conversation.detail})" if conversation.detail else ""
    lines = [f"ending: {conversation.stop_reason.value}{detail}"]
    if metrics["db_state_match"]:
        lines.append(f"DB match: yes (hash {metrics['db_state_expected_hash'][:12]})")
    else:
        lines.append(
            f"DB match: no (expected hash {metrics['db_state_expected_hash'][:12]}, "
            f"actual {metrics['db_state_actual_hash'][:12]})"
        )
        lines.extend(f"  {line}" for line in describe_db_difference(outcome.db_diff).splitlines())
    lines.append(
        "signals: "
        + "; ".join(
            f"{state} {', '.join(signals)}"
            for state, signals in metrics["success_breakdown"].items()
            if signals
        )
    )
    if outcome.judge is not None:
        for verdict in outcome.judge.verdicts:
            mark = "passed" if verdict.passed else "failed"
            lines.append(f"  NL {verdict.index} {mark}: {verdict.assertion} ({verdict.reason})")
    usage = metrics["token_usage"]
    lines.append(
        "tokens: "
        + "; ".join(
            f"{role} {value['n_calls']} calls, {value['prompt']} prompt, "
            f"{value['completion']} completion"
            for role, value in usage.items()
        )
    )
    if outcome.is_infra_error:
        verdict_line = "result: infra_error (the endpoint failed; not scored)"
    else:
        verdict_line = f"result: {'success' if metrics['is_successful'] else 'failure'}"
    reward = metrics["tau2_reward"]
    shown = "n/a (no judge)" if reward is None else f"{reward:g}"
    lines.append(f"{verdict_line}, tau2 reward {shown}")
    return lines


def run_command(args: argparse.Namespace) -> int:
    """Run task ``args.task_id`` once and print it; the exit status says how it went."""
    data_dir = resolve_data_dir(args.data_dir)
    tasks = load_tasks(data_dir)
    task = tasks.get(args.task_id)
    if task is None:
        raise DataError(
            f"unknown task id {args.task_id!r}; known ids are 0..{len(tasks) - 1} "
            "(list them with: python -m tau2_retail tasks)"
        )
    if args.profile == ProfileName.TAU2.value and args.no_agent_notes:
        raise ConfigError(
            "--no-agent-notes applies to the default profile only; the tau2 profile sends "
            "upstream's agent prompt (drop the option)"
        )
    profile = load_profile(
        ProfileName(args.profile), data_dir, agent_notes=not args.no_agent_notes, tasks=tasks
    )
    book = GoldBook(seed=load_seed(data_dir), tasks=tasks)
    outcome = asyncio.run(_run(args, task=task, book=book, profile=profile))
    if args.json:
        document: dict[str, Any] = {
            "metrics": outcome.metrics,
            "transcript": outcome.conversation.to_json()["messages"],
            "actions": [action.to_json() for action in outcome.conversation.actions],
        }
        if outcome.judge is not None:
            document["judge"] = outcome.judge.to_json()
        print(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        print("\n".join(_header(args, task)))
        print()
        print("\n".join(render_transcript(outcome.conversation.messages)))
        print()
        print("\n".join(_report(outcome)))
    if outcome.is_infra_error:
        return EXIT_INFRA_ERROR
    return EXIT_SUCCESS if outcome.metrics["is_successful"] else EXIT_FAILED
