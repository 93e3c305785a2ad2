"""The LLM judge of natural-language assertions (spec: conversation_and_scoring.md §5).

One request per scenario: ``build_judge_prompt`` renders our own prompt (the numbered assertions,
the conversation as ``role: text`` lines, the reference and the recorded actions) and
``judge_scenario`` sends it and turns the reply into a ``JudgeResult`` through
``normalize_judgement``. The judge never crashes a scenario. A reply that arrives but cannot be
read (no JSON object in it, empty, or longer than ``MAX_REPLY_CHARS``) is asked again once, as
a fresh request (``UNREADABLE_RETRIES``); still unreadable, it is the judge's failure, not the
agent's: the result is marked ``unreadable`` (every verdict false with reason ``Judge error:
<detail>``, score 0, each raw reply kept whole in ``judge_result.json``) and the scenario
becomes an infra error of the judge role, re-judged on resume from its saved transcript. (An
earlier version scored the first unreadable reply as failed verdicts: a judge that answers in
prose then silently failed the agent.) An endpoint that cannot answer (after its retries, or
while its circuit breaker is open) is infrastructure too: ``judge_scenario`` raises the
``EndpointError``, with the same consequence.

Normalization rules, beyond the spec's wording, decided here:

- The reply is read as strict JSON, else from the first fenced block tagged ``json`` or untagged,
  else from the first ``{`` at which a JSON object can be decoded; each stage accepts only a JSON
  object (a bare list or number falls through to the next stage). The last stage tries at most
  ``MAX_OBJECT_ATTEMPTS`` places where an object can start (``{`` then ``"`` or ``}``), so the
  work is linear in the reply, which is not read at all beyond ``MAX_REPLY_CHARS``. Nesting too
  deep for the decoder counts as "not JSON" at that stage.
- ``index`` must be a JSON integer: a string such as ``"2"`` or a float such as ``2.0`` is treated
  like an out-of-range index and dropped (the assertion then gets the missing-verdict reason
  unless another verdict names it properly).
- A verdict that is not an object is dropped; a ``nl_assertion_verdicts`` that is not a list means
  no verdicts at all.
- A verdict's ``reason`` is kept when it is a string, rendered as JSON when it is another value,
  and ``NO_REASON`` when it is missing or null. The overall ``reason`` is kept when it is a
  string, else empty.
- ``score`` must be a finite JSON number (a boolean is not one); it is clamped to [0, 1], and
  anything else counts as 0.0.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, TypeGuard

from pydantic import Field

from tau2_retail.codec import FORMAT_VERSION, Omitted
from tau2_retail.errors import ContextWindowExceeded
from tau2_retail.models.messages import AssistantTurn, Message, Role, ToolCall, Usage
from tau2_retail.models.protocol import ChatModel
from tau2_retail.models.text import valid_unicode_json
from tau2_retail.tools.dispatch import Action, parse_arguments

__all__ = [
    "JUDGE_ERROR_PREFIX",
    "JUDGE_SYSTEM_PROMPT",
    "MAX_OBJECT_ATTEMPTS",
    "MAX_RENDERED_CHARS",
    "MAX_REPLY_CHARS",
    "MISSING_VERDICT_REASON",
    "NO_REASON",
    "UNREADABLE_RETRIES",
    "JudgeResult",
    "Verdict",
    "ask_judge",
    "build_judge_prompt",
    "failed_judgement",
    "judge_scenario",
    "normalize_judgement",
]

MISSING_VERDICT_REASON: Final = "Missing verdict; treated as failed."
"""The reason of an assertion the judge gave no (valid) verdict for."""

NO_REASON: Final = "No reason given."
"""The reason of a verdict whose ``reason`` is missing or null."""

JUDGE_ERROR_PREFIX: Final = "Judge error: "
"""Starts the reason of every verdict when the judge could not be asked or understood."""

MAX_RENDERED_CHARS: Final = 2000
"""Tool-call arguments and tool results longer than this are cut in the judge's prompt."""

MAX_REPLY_CHARS: Final = 100_000
"""A judge reply longer than this is not parsed (a judged failure): a real one is a few KB."""

MAX_OBJECT_ATTEMPTS: Final = 16
"""Places in a prose reply where a JSON object could start that are tried before giving up."""

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
_FENCE: Final = re.compile(r"```")
_FENCE_TAG: Final = re.compile(r"[A-Za-z0-9_+.-]*")
# Where a JSON object can start: "{" then a key's quote or the closing brace.
_OBJECT_START: Final = re.compile(r'\{\s*["}]')
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_JSON_FENCE_TAGS: Final = frozenset({"", "json"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """The judge's verdict on one assertion; ``index`` is 1-based."""

    index: int
    assertion: str
    passed: bool
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeInput:
    """The exact prompt the judge was given."""

    system_prompt: str
    user_content: str


_NOT_WRITTEN: Final = Field(exclude=True)
_NO_INPUT: Final = JudgeInput(system_prompt="", user_content="")


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeResult:
    """What the judge said about one scenario, with the exact prompt it was given.

    ``verdicts`` holds exactly one verdict per assertion, in order. ``error`` is set (and every
    verdict failed) when the endpoint refused the prompt or the reply could not be read.
    ``usage`` counts the judge's tokens over its ``requests`` (a reply that cannot be read is
    asked again, in the default profile). ``unreadable_replies`` holds the
    replies that could not be read (kept whole); ``unreadable`` is set when the last one could
    not be read either: the verdicts are then the judge's failure, not the agent's (the scenario
    is an infra error of the judge role).
    """

    # the keys of judge_result.json (spec §6), in order; error and the rest only when set
    format_version: int = FORMAT_VERSION
    score: float
    reason: str
    judge_input: JudgeInput = field(init=False, default=_NO_INPUT)
    verdicts: Annotated[tuple[Verdict, ...], Field(serialization_alias="nl_assertion_verdicts")]
    #: how many assertions were judged met
    pass_count: Annotated[int, Field(serialization_alias="nl_assertion_pass_count")] = field(
        init=False, default=0
    )
    #: how many assertions were judged
    total: Annotated[int, Field(serialization_alias="nl_assertion_total")] = field(
        init=False, default=0
    )
    #: ``pass_count / total`` (0.0 when there is nothing to judge)
    pass_rate: Annotated[float, Field(serialization_alias="nl_assertion_pass_rate")] = field(
        init=False, default=0.0
    )
    error: Annotated[str | None, Omitted] = None
    raw_reply: Annotated[str | None, Omitted] = None
    unreadable_replies: Annotated[tuple[str, ...], Omitted] = ()
    unreadable: Annotated[bool, Omitted] = False
    # not written
    system_prompt: Annotated[str, _NOT_WRITTEN]
    user_content: Annotated[str, _NOT_WRITTEN]
    usage: Annotated[Usage, _NOT_WRITTEN] = field(default_factory=Usage)
    attempts: Annotated[int, _NOT_WRITTEN] = 0
    wait_seconds: Annotated[float, _NOT_WRITTEN] = 0.0
    requests: Annotated[int, _NOT_WRITTEN] = 1

    def __post_init__(self) -> None:
        judge_input = JudgeInput(system_prompt=self.system_prompt, user_content=self.user_content)
        passed = sum(verdict.passed for verdict in self.verdicts)
        total = len(self.verdicts)
        object.__setattr__(self, "judge_input", judge_input)
        object.__setattr__(self, "pass_count", passed)
        object.__setattr__(self, "total", total)
        object.__setattr__(self, "pass_rate", passed / total if total else 0.0)


class _UnreadableJudgement(ValueError):
    """The judge's reply holds no JSON object (``judge_scenario`` asks again, once)."""


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


# -- the reply ----------------------------------------------------------------------------------


def normalize_judgement(
    text: str, assertions: Sequence[str]
) -> tuple[float, str, tuple[Verdict, ...]]:
    """``(score, reason, verdicts)`` from the judge's reply, per spec §5 and the module docstring.

    The verdicts are exactly one per assertion, in order, indexed 1..n. Raises a private
    ``ValueError`` subclass when the reply holds no JSON object at all.
    """
    data = _judgement_object(text)
    raw_verdicts = data.get("nl_assertion_verdicts")
    by_index: dict[int, dict[str, Any]] = {}
    if isinstance(raw_verdicts, list):
        for raw in raw_verdicts:
            if not isinstance(raw, dict):
                continue
            index = raw.get("index")
            if _is_int(index) and 1 <= index <= len(assertions):
                by_index[index] = raw  # a repeated index keeps the last
    verdicts = tuple(
        _verdict(n, assertion, by_index.get(n)) for n, assertion in enumerate(assertions, start=1)
    )
    reason = data.get("reason")
    return _score(data.get("score")), reason if isinstance(reason, str) else "", verdicts


def _verdict(index: int, assertion: str, raw: dict[str, Any] | None) -> Verdict:
    if raw is None:
        return Verdict(
            index=index, assertion=assertion, passed=False, reason=MISSING_VERDICT_REASON
        )
    reason = raw.get("reason")
    if reason is None:
        reason = NO_REASON
    elif not isinstance(reason, str):
        reason = json.dumps(reason, ensure_ascii=False)
    # Only JSON true passes: "true", 1 or "yes" are not a verdict the judge committed to.
    return Verdict(
        index=index, assertion=assertion, passed=raw.get("passed") is True, reason=reason
    )


def _score(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    score = float(value)
    if not math.isfinite(score):
        return 0.0
    return min(max(score, 0.0), 1.0)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _judgement_object(text: str) -> dict[str, Any]:
    """The JSON object of the reply: strict JSON, else the first JSON fence, else the first one."""
    if not text.strip():
        raise _UnreadableJudgement("the reply is empty")
    if len(text) > MAX_REPLY_CHARS:
        raise _UnreadableJudgement(
            f"the reply has {len(text):,} characters, more than the {MAX_REPLY_CHARS:,} read"
        )
    data = _json_object(text)
    if data is not None:
        return data
    fenced = _first_json_fence(text)
    if fenced is not None:
        data = _json_object(fenced)
        if data is not None:
            return data
    found = _first_object(text)
    if found is None:
        raise _UnreadableJudgement(f"no JSON object in the reply: {_excerpt(text)}")
    return found


def _first_json_fence(text: str) -> str | None:
    """The body of the first fenced block tagged ``json`` or untagged; fences pair in order."""
    marks = [match.end() for match in _FENCE.finditer(text)]
    for opening, closing in zip(marks[::2], marks[1::2], strict=False):
        tag_match = _FENCE_TAG.match(text, opening)
        assert tag_match is not None  # the pattern matches the empty string
        if tag_match.group().lower() in _JSON_FENCE_TAGS:
            return text[tag_match.end() : closing - 3]
    return None


def _json_object(text: str) -> dict[str, Any] | None:
    """``text`` as a JSON object, or None (not JSON, nested too deeply, or not an object)."""
    try:
        # NaN and Infinity are accepted here: a non-finite score is clamped (spec §5)
        data = valid_unicode_json(json.loads(text))
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _first_object(text: str) -> dict[str, Any] | None:
    """The JSON object decoded at the first candidate ``{`` where one decodes.

    A candidate is a ``{`` followed by a key's opening quote or by ``}`` (any other ``{``
    cannot start an object). At most ``MAX_OBJECT_ATTEMPTS`` candidates are tried, so a
    reply of 100,000 braces costs as much as a short one (each failed attempt costs the C
    decoder a scan proportional to the reply, never more).
    """
    decoder = json.JSONDecoder()
    for attempt, match in enumerate(_OBJECT_START.finditer(text)):
        if attempt == MAX_OBJECT_ATTEMPTS:
            return None
        try:
            data, _ = decoder.raw_decode(text, match.start())
        except (ValueError, RecursionError):
            continue
        if isinstance(data, dict):
            return valid_unicode_json(data)  # type: ignore[no-any-return]
    return None


def _excerpt(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# -- the request --------------------------------------------------------------------------------


def failed_judgement(
    *,
    system_prompt: str,
    user_content: str,
    assertions: Sequence[str],
    detail: str,
    usage: Usage,
    raw_reply: str | None,
    attempts: int,
    wait_seconds: float,
    requests: int = 1,
    unreadable_replies: tuple[str, ...] = (),
    unreadable: bool = False,
) -> JudgeResult:
    """A judgement that could not be read: every assertion fails with ``Judge error: <detail>``.

    ``unreadable`` marks it as the judge's failure (an infra error of the judge role)."""
    reason = JUDGE_ERROR_PREFIX + detail
    return JudgeResult(
        score=0.0,
        reason=reason,
        system_prompt=system_prompt,
        user_content=user_content,
        verdicts=tuple(
            Verdict(index=n, assertion=assertion, passed=False, reason=reason)
            for n, assertion in enumerate(assertions, start=1)
        ),
        usage=usage,
        error=detail,
        raw_reply=raw_reply,
        attempts=attempts,
        wait_seconds=wait_seconds,
        requests=requests,
        unreadable_replies=unreadable_replies,
        unreadable=unreadable,
    )


async def ask_judge(
    model: ChatModel,
    *,
    system_prompt: str,
    user_content: str,
    assertions: Sequence[str],
    seed: int | None,
) -> AssistantTurn | JudgeResult:
    """One judge request (system + user message, no tools): the reply, or, when the endpoint
    says the prompt is too long for it, a failed judgement (it cannot be judged there, now or on
    resume). An endpoint that cannot answer raises its ``EndpointError`` (an outage)."""
    request = (
        Message(role=Role.SYSTEM, content=system_prompt),
        Message(role=Role.USER, content=user_content),
    )
    try:
        return await model.complete(request, tools=None, seed=seed)
    except ContextWindowExceeded as error:
        return failed_judgement(
            system_prompt=system_prompt,
            user_content=user_content,
            assertions=assertions,
            detail=str(error),
            usage=Usage(),
            raw_reply=None,
            attempts=error.attempts,
            wait_seconds=error.wait_seconds,
        )


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
    ``unreadable_replies`` and the last one in ``raw_reply``). A ``ContextWindowExceeded``
    gives a failed judgement that is not ``unreadable`` (the prompt cannot be judged there, now
    or on resume). An endpoint that cannot answer raises its ``EndpointError``: that is an
    outage (an infra error of the judge role), not a verdict. ``usage``, ``attempts`` and
    ``wait_seconds`` add up every request; ``ValueError`` for empty ``assertions`` (a bug).
    """
    system_prompt, user_content = build_judge_prompt(
        assertions=assertions,
        messages=messages,
        reference_actions=reference_actions,
        recorded_actions=recorded_actions,
    )
    unreadable: list[AssistantTurn] = []  # the turns whose reply could not be read
    detail = ""
    for _ in range(1 + UNREADABLE_RETRIES):
        turn = await ask_judge(
            model,
            system_prompt=system_prompt,
            user_content=user_content,
            assertions=assertions,
            seed=seed,
        )
        if isinstance(turn, JudgeResult):
            return _after(unreadable, turn)
        text = turn.content or ""
        try:
            score, reason, verdicts = normalize_judgement(text, assertions)
        except _UnreadableJudgement as error:
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
    prompt = (system_prompt, user_content)
    return _unreadable(unreadable, prompt=prompt, assertions=assertions, detail=detail)


def _unreadable(
    unreadable: Sequence[AssistantTurn],
    *,
    prompt: tuple[str, str],
    assertions: Sequence[str],
    detail: str,
) -> JudgeResult:
    """The judge's failure to answer readably, also when asked again."""
    system_prompt, user_content = prompt
    return failed_judgement(
        system_prompt=system_prompt,
        user_content=user_content,
        assertions=assertions,
        detail=f"unreadable reply, also when asked again: {detail}",
        usage=sum((t.usage for t in unreadable), Usage()),
        raw_reply=unreadable[-1].content or "",
        attempts=sum(t.attempts for t in unreadable),
        wait_seconds=sum(t.wait_seconds for t in unreadable),
        requests=len(unreadable),
        unreadable_replies=tuple(t.content or "" for t in unreadable),
        unreadable=True,
    )


def _after(unreadable: Sequence[AssistantTurn], result: JudgeResult) -> JudgeResult:
    """``result`` with what the unreadable replies before it spent (tokens, attempts, waits)."""
    return dataclasses.replace(
        result,
        usage=sum((t.usage for t in unreadable), Usage()) + result.usage,
        attempts=sum(t.attempts for t in unreadable) + result.attempts,
        wait_seconds=sum(t.wait_seconds for t in unreadable) + result.wait_seconds,
        requests=len(unreadable) + 1,
        unreadable_replies=tuple(t.content or "" for t in unreadable),
    )
