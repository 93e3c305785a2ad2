"""The LLM judge of natural-language assertions (spec: conversation_and_scoring.md §5).

One request per scenario: ``build_judge_prompt`` renders our own prompt (the numbered assertions,
the conversation as ``role: text`` lines, the reference and the recorded actions) and
``judge_scenario`` sends it and turns the reply into a ``JudgeResult`` through
``normalize_judgement``. The judge never crashes a scenario. A reply that arrives but cannot be
read (no JSON object in it, no verdict for any assertion, empty, or longer than
``MAX_REPLY_CHARS``) is asked again once, as a fresh request (``UNREADABLE_RETRIES``); still
unreadable, it is the judge's failure, not the agent's: the result is marked ``unreadable``
(every verdict false with reason ``Judge error: <detail>``, score 0, each raw reply kept whole
in ``judge_result.json``) and the scenario becomes an infra error of the judge role, re-judged
on resume from its saved transcript. (An
earlier version scored the first unreadable reply as failed verdicts: a judge that answers in
prose then silently failed the agent.) An endpoint that cannot answer (after its retries, or
while its circuit breaker is open) is infrastructure too: ``judge_scenario`` raises the
``EndpointError``, with the same consequence.

The reply is read by ``tau2_retail.engine.judge_reply`` (its normalization rules); the records
are in ``tau2_retail.engine.judge_result``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from typing import Final

from tau2_retail.engine.judge_reply import UnreadableJudgement, normalize_judgement
from tau2_retail.engine.judge_result import JudgeInput, JudgeResult, Verdict
from tau2_retail.models.messages import AssistantTurn, Message, Role, ToolCall, Usage
from tau2_retail.models.protocol import ChatModel
from tau2_retail.tools.dispatch import Action, parse_arguments

__all__ = [
    "JUDGE_ERROR_PREFIX",
    "JUDGE_SYSTEM_PROMPT",
    "MAX_RENDERED_CHARS",
    "UNREADABLE_RETRIES",
    "ask_judge",
    "build_judge_prompt",
    "failed_judgement",
    "judge_scenario",
    "with_reply",
]

JUDGE_ERROR_PREFIX: Final = "Judge error: "
"""Starts the reason of every verdict when the judge could not be asked or understood."""

MAX_RENDERED_CHARS: Final = 2000
"""Tool-call arguments and tool results longer than this are cut in the judge's prompt."""

UNREADABLE_RETRIES: Final = 1
"""Fresh requests sent after a judge reply that cannot be read, before it counts as the judge's
failure (an infra error of the judge role)."""

JUDGE_SYSTEM_PROMPT: Final = """\
You are a strict evaluator of a customer-support conversation between an agent and a customer \
of an online retail store. The agent can call tools that read and change the store's database.

You receive:
- numbered assertions about what the agent should have said or done;
- the conversation, one message per line as "role: text" (roles: agent, user, tool); a line \
"agent -> name({...})" is a tool call by the agent and "tool name: ..." is its result;
- the reference actions (the database writes a correct agent makes for this task) and the \
recorded actions (the writes this agent actually made).

Judge each assertion on its own, strictly from the evidence in the conversation and the recorded \
actions. An assertion passes only when the evidence clearly shows it is met; if the evidence is \
missing, ambiguous or contradicts it, it fails. The reference actions are context, not evidence \
of what the agent did.

Answer ONLY with one JSON object, no prose and no code fence, of this form:
{"score": <number from 0 to 1: your overall judgement of how well the agent met the assertions>, \
"reason": "<one or two sentences>", "nl_assertion_verdicts": [{"index": <the assertion's \
1-based number>, "passed": <true or false>, "reason": "<the evidence, briefly>"}]}
Give exactly one verdict per assertion, in the order of the assertions."""
"""The judge's system prompt (pinned by a snapshot test: it is part of the benchmark)."""

_ROLE_LABELS: Final = {Role.ASSISTANT: "agent", Role.USER: "user", Role.TOOL: "tool"}
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


# -- the prompt ---------------------------------------------------------------------------------


def build_judge_prompt(
    *,
    assertions: Sequence[str],
    messages: Sequence[Message],
    reference_actions: Sequence[Action],
    recorded_actions: Sequence[Action],
) -> tuple[str, str]:
    """The judge's ``(system prompt, user content)`` for one scenario; deterministic text.

    System messages of the conversation are left out; tool-call arguments and tool results are
    cut at ``MAX_RENDERED_CHARS`` characters each.
    """
    if not assertions:
        raise ValueError("build_judge_prompt needs at least one assertion")
    numbered = "\n".join(f"{n}. {text}" for n, text in enumerate(assertions, start=1))
    conversation = "\n".join(_render_conversation(messages)) or "(no messages)"
    sections = [
        f"## Assertions\n\n{numbered}",
        f"## Conversation\n\n{conversation}",
        f"## Reference actions\n\n{_render_actions(reference_actions)}",
        f"## Recorded actions\n\n{_render_actions(recorded_actions)}",
    ]
    # Lone surrogates (none should be left here) could not be encoded into the request.
    return JUDGE_SYSTEM_PROMPT, _LONE_SURROGATE.sub("\ufffd", "\n\n".join(sections))


def _render_conversation(messages: Sequence[Message]) -> list[str]:
    lines: list[str] = []
    for message in messages:
        label = _ROLE_LABELS.get(message.role)
        if label is None:
            continue
        if message.role is Role.TOOL:
            who = f"tool {message.name}" if message.name else "tool"
            lines.append(f"{who}: {_truncated(message.content or '')}")
            continue
        if message.content and message.content.strip():
            lines.append(f"{label}: {message.content}")
        lines.extend(f"{label} -> {_render_call(call)}" for call in message.tool_calls)
    return lines


def _render_call(call: ToolCall) -> str:
    try:
        # parse_arguments turns escaped lone surrogates into U+FFFD and deep nesting into a
        # ValueError; dumping may still hit the recursion limit on what json could parse.
        arguments = json.dumps(parse_arguments(call.arguments), ensure_ascii=False)
    except (ValueError, RecursionError):
        # The model's raw text, as it sent it: the judge may need to see it was malformed.
        arguments = call.arguments
    return f"{call.name}({_truncated(arguments)})"


def _render_actions(actions: Sequence[Action]) -> str:
    if not actions:
        return "(none)"
    return "\n".join(json.dumps(action.to_json(), ensure_ascii=False) for action in actions)


def _truncated(text: str) -> str:
    if len(text) <= MAX_RENDERED_CHARS:
        return text
    cut = len(text) - MAX_RENDERED_CHARS
    return f"{text[:MAX_RENDERED_CHARS]}… [{cut} more characters]"


# -- the request --------------------------------------------------------------------------------


def failed_judgement(prompt: JudgeInput, assertions: Sequence[str], *, detail: str) -> JudgeResult:
    """A judgement that could not be made: every assertion fails with ``Judge error: <detail>``.

    It counts no request: the caller adds what its requests spent (:func:`with_reply`,
    ``dataclasses.replace``)."""
    reason = JUDGE_ERROR_PREFIX + detail
    return JudgeResult(
        score=0.0,
        reason=reason,
        system_prompt=prompt.system_prompt,
        user_content=prompt.user_content,
        verdicts=tuple(
            Verdict(index=n, assertion=assertion, passed=False, reason=reason)
            for n, assertion in enumerate(assertions, start=1)
        ),
        error=detail,
    )


def with_reply(
    failed: JudgeResult, turn: AssistantTurn, *, raw_reply: str | None, unreadable: bool = False
) -> JudgeResult:
    """``failed`` with the one reply it could not read: kept as ``raw_reply`` and among the
    unreadable replies, with what its request spent. ``unreadable`` marks the judgement as the
    judge's failure (an infra error of the judge role)."""
    return dataclasses.replace(
        failed,
        usage=turn.usage,
        raw_reply=raw_reply,
        attempts=turn.attempts,
        wait_seconds=turn.wait_seconds,
        unreadable_replies=(turn.content or "",),
        unreadable=unreadable,
    )


async def ask_judge(model: ChatModel, prompt: JudgeInput, *, seed: int | None) -> AssistantTurn:
    """One judge request (system + user message, no tools): the reply. An endpoint that cannot
    answer raises its ``EndpointError`` (an outage of the judge role), one whose model's
    context window cannot hold the prompt too (``ContextWindowExceeded``): the judge cannot
    read this conversation, which is not the agent's failure; a judge with a larger window
    judges it on resume."""
    request = (
        Message(role=Role.SYSTEM, content=prompt.system_prompt),
        Message(role=Role.USER, content=prompt.user_content),
    )
    return await model.complete(request, tools=None, seed=seed)


async def judge_scenario(
    model: ChatModel,
    *,
    assertions: Sequence[str],
    messages: Sequence[Message],
    reference_actions: Sequence[Action],
    recorded_actions: Sequence[Action],
    seed: int | None = None,
) -> JudgeResult:
    """Ask ``model`` (system + user message, no tools) to judge the assertions.

    Never raises for the model's behaviour. A reply with no readable JSON object is asked again
    as a fresh request (``UNREADABLE_RETRIES`` times); when the last reply cannot be read
    either, the result is ``unreadable`` (the judge's failure: every verdict fails with reason
    ``Judge error: <detail>``, score 0, ``error`` set, every reply kept in
    ``unreadable_replies`` and the last one in ``raw_reply``). An endpoint that cannot answer
    raises its ``EndpointError``, a prompt too long for its model ``ContextWindowExceeded``:
    that is an outage (an infra error of the judge role), not a verdict. ``usage``, ``attempts`` and
    ``wait_seconds`` add up every request; ``ValueError`` for empty ``assertions`` (a bug).
    """
    system_prompt, user_content = build_judge_prompt(
        assertions=assertions,
        messages=messages,
        reference_actions=reference_actions,
        recorded_actions=recorded_actions,
    )
    prompt = JudgeInput(system_prompt=system_prompt, user_content=user_content)
    unreadable: list[AssistantTurn] = []  # the turns whose reply could not be read
    detail = ""
    for _ in range(1 + UNREADABLE_RETRIES):
        turn = await ask_judge(model, prompt, seed=seed)
        text = turn.content or ""
        try:
            score, reason, verdicts = normalize_judgement(text, assertions)
        except UnreadableJudgement as error:
            unreadable.append(turn)
            detail = str(error)
            continue
        verdict = JudgeResult(
            score=score,
            reason=reason,
            system_prompt=system_prompt,
            user_content=user_content,
            verdicts=verdicts,
            usage=turn.usage,
            raw_reply=text,
            attempts=turn.attempts,
            wait_seconds=turn.wait_seconds,
        )
        return _after(unreadable, verdict)
    return _unreadable(unreadable, prompt, assertions=assertions, detail=detail)


def _unreadable(
    unreadable: Sequence[AssistantTurn],
    prompt: JudgeInput,
    *,
    assertions: Sequence[str],
    detail: str,
) -> JudgeResult:
    """The judge's failure to answer readably, also when asked again."""
    *earlier, last = unreadable
    failed = failed_judgement(
        prompt, assertions, detail=f"unreadable reply, also when asked again: {detail}"
    )
    return _after(earlier, with_reply(failed, last, raw_reply=last.content or "", unreadable=True))


def _after(unreadable: Sequence[AssistantTurn], result: JudgeResult) -> JudgeResult:
    """``result`` with what the unreadable replies before it spent (tokens, attempts, waits)
    and those replies, before its own."""
    return dataclasses.replace(
        result,
        usage=sum((t.usage for t in unreadable), Usage()) + result.usage,
        attempts=sum(t.attempts for t in unreadable) + result.attempts,
        wait_seconds=sum(t.wait_seconds for t in unreadable) + result.wait_seconds,
        requests=len(unreadable) + 1,
        unreadable_replies=tuple(t.content or "" for t in unreadable) + result.unreadable_replies,
    )
