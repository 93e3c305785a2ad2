"""Upstream's NL-assertion judge: its prompt (derived from the pinned evaluator) and its reading.

One request per scenario whose ``reward_basis`` has NL_ASSERTION and whose task has
assertions: upstream's system prompt and user prompt (every message of the trajectory as
``role: content``, then the assertions as a Python list), ``temperature`` 0.0 unless configured,
no seed (upstream sends none to its judge). The reply is read as upstream reads it: strict JSON,
its ``results`` list, each result's outcome, ``met`` flag and reasoning; the NL reward is 1 when
every returned result is met (so an empty list passes, as upstream's ``all()`` does).

Where upstream would raise (a reply that is not a JSON object, a result without its keys, a
``met`` value pydantic would reject), the verdicts fail with ``Judge error: <detail>``: the
scenario is scored 0 for NL rather than dropped, and the reply is not asked again (upstream
does not; the default judge does). The reply still counts as unreadable in the run summary's
note on whether the judge follows the format. The endpoint is treated as the default judge
treats it: a prompt it refuses as too long is a failed verdict; an endpoint that cannot answer
raises its ``EndpointError`` (an infra error of the judge role, re-judged on resume).

The verdicts are laid out one per task assertion (result *i* for assertion *i*), so the
benchmark's subtests read them like the default judge's: an assertion the judge returned no
result for passes (upstream counts only the results returned), a result beyond the assertions
is appended as an extra verdict.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from tau2_retail.data.upstream.prompts import JudgeTemplate
from tau2_retail.engine.judge import ask_judge, failed_judgement, with_reply
from tau2_retail.engine.judge_result import JudgeInput, JudgeResult, Verdict
from tau2_retail.models.messages import Message, Role
from tau2_retail.models.protocol import ChatModel
from tau2_retail.models.text import valid_unicode

__all__ = ["NO_RESULT_REASON", "judge_upstream", "read_upstream_reply", "upstream_trajectory"]

NO_RESULT_REASON: Final = (
    "The judge returned no result for this assertion; upstream's reward counts only the "
    "results returned."
)
_TRUE_TEXTS: Final = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE_TEXTS: Final = frozenset({"0", "off", "f", "false", "n", "no"})


class _UpstreamWouldRaise(ValueError):
    """The reply is one upstream's evaluator cannot read (it would raise)."""


def upstream_trajectory(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The conversation as upstream's trajectory: every message with its role and content."""
    return [
        {"role": message.role.value, "content": message.content}
        for message in messages
        if message.role is not Role.SYSTEM
    ]


def _met(value: object) -> bool:
    """pydantic's lax reading of a ``bool`` field (what upstream's ``NLAssertionCheck`` does)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE_TEXTS | _FALSE_TEXTS:
        return value.strip().lower() in _TRUE_TEXTS
    raise _UpstreamWouldRaise(f"met value {value!r} is not a boolean")


def read_upstream_reply(
    text: str, template: JudgeTemplate, assertions: Sequence[str]
) -> tuple[Verdict, ...]:
    """The verdicts of a reply, read as upstream reads it; raises a ``ValueError`` subclass."""
    keys = template.reply
    try:
        data = json.loads(text)  # as upstream reads it
    except ValueError as error:
        raise _UpstreamWouldRaise(f"the reply is not JSON ({error})") from None
    except RecursionError:
        raise _UpstreamWouldRaise("the reply is JSON nested too deeply to read") from None
    if not isinstance(data, Mapping):
        raise _UpstreamWouldRaise("the reply is not a JSON object")
    results = data.get(keys.results, [])
    if not isinstance(results, list):
        raise _UpstreamWouldRaise(f"{keys.results!r} is not a list")
    verdicts = []
    for index, result in enumerate(results, start=1):
        if not isinstance(result, Mapping):
            raise _UpstreamWouldRaise(f"result {index} is not an object")
        missing = [k for k in (keys.assertion, keys.met, keys.reasoning) if k not in result]
        if missing:
            raise _UpstreamWouldRaise(f"result {index} lacks {', '.join(missing)}")
        outcome, reasoning = result[keys.assertion], result[keys.reasoning]
        if not isinstance(outcome, str) or not isinstance(reasoning, str):
            raise _UpstreamWouldRaise(f"result {index}: outcome and reasoning must be strings")
        # made writable: a lone surrogate would fail every artifact write (it cannot change a
        # verdict); only the texts kept are walked (a whole reply can nest deeper than a walk)
        outcome, reasoning = valid_unicode(outcome), valid_unicode(reasoning)
        assertion = assertions[index - 1] if index <= len(assertions) else outcome
        verdicts.append(
            Verdict(
                index=index, assertion=assertion, passed=_met(result[keys.met]), reason=reasoning
            )
        )
    verdicts.extend(
        Verdict(index=index, assertion=assertion, passed=True, reason=NO_RESULT_REASON)
        for index, assertion in enumerate(assertions, start=1)
        if index > len(verdicts)
    )
    return tuple(verdicts)


async def judge_upstream(
    model: ChatModel,
    template: JudgeTemplate,
    *,
    assertions: Sequence[str],
    messages: Sequence[Message],
) -> JudgeResult:
    """Ask ``model`` once with upstream's prompt and read its reply as upstream does.

    Raises ``EndpointError`` when the endpoint cannot answer, or cannot hold the prompt (an
    outage, not a verdict).
    """
    system_prompt = template.system_prompt
    user_content = template.user_content(upstream_trajectory(messages), list(assertions))
    prompt = JudgeInput(system_prompt=system_prompt, user_content=user_content)
    turn = await ask_judge(model, prompt, seed=None)
    try:
        verdicts = read_upstream_reply(turn.content or "", template, assertions)
    except _UpstreamWouldRaise as error:
        # counted for the run summary's note on the judge's format; scored as upstream does
        failed = failed_judgement(prompt, assertions, detail=str(error))
        return with_reply(failed, turn, raw_reply=turn.content)
    all_met = all(verdict.passed for verdict in verdicts)
    return JudgeResult(
        score=1.0 if all_met else 0.0,
        reason="every returned result met" if all_met else "a returned result was not met",
        system_prompt=system_prompt,
        user_content=user_content,
        verdicts=verdicts,
        usage=turn.usage,
        attempts=turn.attempts,
        wait_seconds=turn.wait_seconds,
    )
