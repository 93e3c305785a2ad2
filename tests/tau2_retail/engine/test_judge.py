"""The judge: prompt, reply normalization, and every failure mode through the real client."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tau2_retail import codec
from tau2_retail.engine.judge import (
    JUDGE_SYSTEM_PROMPT,
    MAX_RENDERED_CHARS,
    build_judge_prompt,
    judge_scenario,
)
from tau2_retail.engine.judge_reply import (
    MAX_OBJECT_ATTEMPTS,
    MAX_REPLY_CHARS,
    MISSING_VERDICT_REASON,
    NO_REASON,
    UnreadableJudgement,
    normalize_judgement,
)
from tau2_retail.engine.judge_result import JudgeResult, Verdict
from tau2_retail.errors import ContextWindowExceeded, EndpointError
from tau2_retail.models import OpenAIChatModel
from tau2_retail.models.messages import Message, Role, ToolCall, Usage
from tau2_retail.models.text import MAX_JSON_DEPTH
from tau2_retail.testing.loopback_model import loopback_model
from tau2_retail.testing.loopback_server import (
    Completion,
    Hang,
    HttpError,
    InvalidJson,
    LoopbackOpenAIServer,
    ReplyToolCall,
    SlowDrip,
)
from tau2_retail.tools.dispatch import Action

ASSERTIONS = (
    "The agent tells the user the refund amount is $54.04.",
    "The agent does not cancel order #W2.",
    "The agent apologizes for the delay.",
)


def _agent(content: str | None, *calls: ToolCall) -> Message:
    return Message(role=Role.ASSISTANT, content=content, tool_calls=calls)


def _result(call: ToolCall, content: str, *, error: bool = False) -> Message:
    return Message(
        role=Role.TOOL, content=content, tool_call_id=call.id, name=call.name, error=error
    )


LOOKUP = ToolCall(id="call_1", name="get_order_details", arguments='{"order_id":"#W1"}')
NOT_JSON = ToolCall(id="call_2", name="get_user_details", arguments="{not json")
SUM = ToolCall(id="call_3", name="calculate", arguments='{"expression": "50 + 4.04"}')
MESSAGES = (
    Message(role=Role.SYSTEM, content="You are a retail agent."),
    _agent("Hi! How can I help you today?"),
    Message(role=Role.USER, content="I want to return the lamp from order #W1."),
    _agent("Let me look that order up.", LOOKUP),
    _result(LOOKUP, '{"order_id": "#W1", "status": "delivered", "items": [{"name": "Lamp"}]}'),
    _agent(None, NOT_JSON, SUM),
    _result(
        NOT_JSON,
        "Error: Invalid JSON in the arguments of get_user_details: Expecting value",
        error=True,
    ),
    _result(SUM, "54.04"),
    _agent("Your refund will be $54.04. Sorry for the wait!"),
    Message(role=Role.USER, content="Thanks, bye. ###STOP###"),
)

REFERENCE = (
    Action(
        name="return_delivered_order_items",
        arguments={"order_id": "#W1", "item_ids": ["1"], "payment_method_id": "credit_card_1"},
    ),
)
RECORDED = (
    Action(
        name="return_delivered_order_items",
        arguments={"order_id": "#W1", "item_ids": ["1"], "payment_method_id": "paypal_2"},
    ),
)


def reply(verdicts: list[Any], *, score: Any = 0.9, reason: Any = "Mostly fine.") -> str:
    return json.dumps({"score": score, "reason": reason, "nl_assertion_verdicts": verdicts})


def verdict(index: Any, passed: Any = True, reason: Any = "Seen in the conversation.") -> Any:
    return {"index": index, "passed": passed, "reason": reason}


ALL_TRUE = reply([verdict(1), verdict(2), verdict(3)])
ONE = json.dumps(verdict(1))  # one verdict: the reply answers


def outcomes(verdicts: tuple[Verdict, ...]) -> list[tuple[int, bool, str]]:
    return [(v.index, v.passed, v.reason) for v in verdicts]


# -- the prompt ---------------------------------------------------------------------------------


def test_prompt_snapshot(snapshot):
    system, user = build_judge_prompt(
        assertions=ASSERTIONS,
        messages=MESSAGES,
        reference_actions=REFERENCE,
        recorded_actions=RECORDED,
    )
    assert system == JUDGE_SYSTEM_PROMPT
    assert system == snapshot(name="system")
    assert user == snapshot(name="user")


def test_prompt_renders_roles_calls_and_results_compactly():
    _, user = build_judge_prompt(
        assertions=ASSERTIONS,
        messages=MESSAGES,
        reference_actions=REFERENCE,
        recorded_actions=(),
    )
    lines = user.splitlines()
    assert "1. The agent tells the user the refund amount is $54.04." in lines
    assert 'agent -> get_order_details({"order_id": "#W1"})' in lines
    assert "agent -> get_user_details({not json)" in lines
    assert "tool calculate: 54.04" in lines
    assert "user: Thanks, bye. ###STOP###" in lines
    assert "You are a retail agent." not in user
    assert user.endswith("## Recorded actions\n\n(none)")


def test_prompt_truncates_long_tool_results_and_arguments():
    long = "x" * (MAX_RENDERED_CHARS + 500)
    messages = (
        Message(
            role=Role.ASSISTANT,
            tool_calls=(ToolCall(id="c", name="calculate", arguments=json.dumps({"e": long})),),
        ),
        Message(role=Role.TOOL, content=long, tool_call_id="c", name="calculate"),
    )
    _, user = build_judge_prompt(
        assertions=("a",), messages=messages, reference_actions=(), recorded_actions=()
    )
    assert long not in user
    assert f"tool calculate: {'x' * MAX_RENDERED_CHARS}… [500 more characters]" in user
    # The call's JSON adds 9 characters ('{"e": "' and '"}') to the 2500 of the string.
    assert f'calculate({{"e": "{"x" * (MAX_RENDERED_CHARS - 7)}… [509 more characters])' in user


def test_prompt_without_assertions_is_a_caller_bug():
    with pytest.raises(ValueError, match="at least one assertion"):
        build_judge_prompt(assertions=(), messages=(), reference_actions=(), recorded_actions=())


# -- normalization ------------------------------------------------------------------------------


def test_all_verdicts_true():
    score, reason, verdicts = normalize_judgement(ALL_TRUE, ASSERTIONS)
    assert (score, reason) == (0.9, "Mostly fine.")
    assert verdicts == tuple(
        Verdict(index=n, assertion=a, passed=True, reason="Seen in the conversation.")
        for n, a in enumerate(ASSERTIONS, start=1)
    )


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        pytest.param(
            [verdict(1), verdict(3)],
            [(1, True, "Seen in the conversation."), (2, False, MISSING_VERDICT_REASON),
             (3, True, "Seen in the conversation.")],
            id="missing",
        ),
        pytest.param(
            [verdict(0), verdict(1), verdict(4), verdict(-1), verdict(2), verdict(3)],
            [(n, True, "Seen in the conversation.") for n in (1, 2, 3)],
            id="out-of-range-dropped",
        ),
        pytest.param(
            [verdict(1, False, "first"), verdict(2), verdict(3), verdict(1, True, "last")],
            [(1, True, "last"), (2, True, "Seen in the conversation."),
             (3, True, "Seen in the conversation.")],
            id="repeated-keeps-last",
        ),
        pytest.param(
            [verdict(1, True, "first"), verdict(1, False, "really"), verdict(2), verdict(3)],
            [(1, False, "really"), (2, True, "Seen in the conversation."),
             (3, True, "Seen in the conversation.")],
            id="repeated-last-false",
        ),
        pytest.param(
            [verdict(3, False, "c"), verdict(1, True, "a"), verdict(2, True, "b")],
            [(1, True, "a"), (2, True, "b"), (3, False, "c")],
            id="out-of-order",
        ),
        pytest.param(
            [verdict(1, "true", "string"), verdict(2, 1, "one"), verdict(3, None, "null")],
            [(1, False, "string"), (2, False, "one"), (3, False, "null")],
            id="non-boolean-passed",
        ),
        pytest.param(
            [{"index": 1, "reason": "no passed"}, verdict(2, "yes"), verdict(3, [True])],
            [(1, False, "no passed"), (2, False, "Seen in the conversation."),
             (3, False, "Seen in the conversation.")],
            id="passed-missing-or-odd",
        ),
        pytest.param(
            [verdict("1"), verdict(2.0), verdict(True), verdict(3)],
            [(1, False, MISSING_VERDICT_REASON), (2, False, MISSING_VERDICT_REASON),
             (3, True, "Seen in the conversation.")],
            id="non-integer-index-dropped",
        ),
        pytest.param(
            ["1", None, [verdict(1)], {"passed": True}, verdict(2)],
            [(1, False, MISSING_VERDICT_REASON), (2, True, "Seen in the conversation."),
             (3, False, MISSING_VERDICT_REASON)],
            id="non-object-verdicts-dropped",
        ),
        pytest.param(
            [verdict(1, True, None), verdict(2, True, 42), {"index": 3, "passed": True}],
            [(1, True, NO_REASON), (2, True, "42"), (3, True, NO_REASON)],
            id="reasons",
        ),
    ],
)  # fmt: skip
def test_verdicts_are_normalized(verdicts, expected):
    _, _, normalized = normalize_judgement(reply(verdicts), ASSERTIONS)
    assert outcomes(normalized) == expected
    assert [v.assertion for v in normalized] == list(ASSERTIONS)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('{"score": 1.0, "reason": "The agent met every assertion."}', id="no-list"),
        pytest.param(reply([]), id="empty-list"),
        pytest.param(reply([verdict(0), verdict(4), verdict(-1)]), id="out-of-range"),
        pytest.param(reply([verdict("1"), verdict(2.0), verdict(True)]), id="non-integer-index"),
        pytest.param(reply(["1", None, [verdict(1)], {"passed": True}]), id="non-objects"),
        pytest.param('{"verdict": "PASS"}', id="own-shape"),
        pytest.param("{}", id="empty-object"),
        *(
            pytest.param(json.dumps({"score": 1, "nl_assertion_verdicts": value}), id=repr(value))
            for value in (None, "all of them", {"1": True}, 3)
        ),
    ],
)
def test_an_object_without_a_verdict_for_any_assertion_is_unreadable(text):
    """The judge did not answer what it was asked: every assertion failed, the agent was
    scored for the judge's format (``{"score": 1.0, "reason": "All met."}`` failed them all).
    Now it is unreadable like prose: asked again once, then the judge's failure."""
    with pytest.raises(UnreadableJudgement, match=r"no verdict for any of the 3 assertion\(s\)"):
        normalize_judgement(text, ASSERTIONS)


@pytest.mark.parametrize(
    ("score", "expected"),
    [
        (0.25, 0.25),
        (1, 1.0),
        (0, 0.0),
        (1.5, 1.0),
        (-0.2, 0.0),
        ("0.9", 0.0),
        (True, 0.0),
        (None, 0.0),
        ([1], 0.0),
    ],
)
def test_score_is_clamped_and_must_be_a_number(score, expected):
    result = normalize_judgement(reply([verdict(1)], score=score), ASSERTIONS)[0]
    assert result == expected
    assert type(result) is float


@pytest.mark.parametrize(("sign", "expected"), [("", 1.0), ("-", 0.0)])
def test_an_integer_too_large_for_a_float_is_clamped(sign, expected):
    # float() of it raised OverflowError: the scenario was lost
    text = f'{{"score": {sign}1{"0" * 400}, "nl_assertion_verdicts": [{ONE}]}}'
    assert normalize_judgement(text, ASSERTIONS)[0] == expected


@pytest.mark.parametrize(
    "wrap",
    [
        pytest.param("{}", id="strict"),
        pytest.param("```json\n{}\n```", id="fence"),
        pytest.param("My verdict: {} Done.", id="prose"),
    ],
)
def test_json_with_an_integer_too_long_to_read_is_unreadable_not_its_inner_object(wrap):
    # the verdict nested in it was read as the whole judgement: every assertion failed
    judgement = reply([verdict(1), verdict(2), verdict(3)], score="N").replace('"N"', "9" * 5000)
    text = wrap.format(judgement)
    with pytest.raises(ValueError, match=r"JSON that cannot be read \(Exceeds the limit"):
        normalize_judgement(text, ASSERTIONS)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_score_is_zero(constant):
    text = f'{{"score": {constant}, "reason": "r", "nl_assertion_verdicts": [{ONE}]}}'
    assert normalize_judgement(text, ASSERTIONS)[0] == 0.0


def test_missing_score_and_reason():
    score, reason, _ = normalize_judgement(f'{{"nl_assertion_verdicts": [{ONE}]}}', ASSERTIONS)
    assert (score, reason) == (0.0, "")
    assert normalize_judgement(reply([verdict(1)], reason=["x"]), ASSERTIONS)[1] == ""


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(f"Here is my verdict:\n{ALL_TRUE}\nHope that helps.", id="prose-around"),
        pytest.param(f"```json\n{ALL_TRUE}\n```", id="json-fence"),
        pytest.param(f"Verdict:\n```JSON\n{ALL_TRUE}\n```\nDone.", id="upper-json-fence"),
        pytest.param(f"```\n{ALL_TRUE}\n```", id="plain-fence"),
        pytest.param(f"```json {ALL_TRUE}```", id="inline-fence"),
        pytest.param(f"```python\nprint('{{}}')\n```\nthen\n```json\n{ALL_TRUE}\n```",
                     id="after-code"),
        pytest.param(f"{{oops}} and {{\"a\": }} then {ALL_TRUE} {{\"score\": 0}}",
                     id="bad-braces-first"),
        pytest.param(f"```json\n{{broken\n```\n{ALL_TRUE}", id="broken-fence-then-object"),
        pytest.param(f"[{ALL_TRUE}]", id="inside-a-list"),
        pytest.param(f"\n  {ALL_TRUE}  \n", id="whitespace"),
    ],
)  # fmt: skip
def test_json_is_found_in_the_reply(text):
    score, _, verdicts = normalize_judgement(text, ASSERTIONS)
    assert score == 0.9
    assert all(v.passed for v in verdicts)


def test_a_reasoning_block_before_the_answer_is_not_the_answer():
    """A reasoning model served without a reasoning parser: the draft object in its thinking
    was read as the verdicts (the assertion the answer passed failed, score 0)."""
    draft = '{"index": 1, "passed": false, "reason": "not sure yet"}'
    text = f"<think>\nA first guess would be {draft}, but the call shows it.\n</think>\n{ALL_TRUE}"
    score, _, verdicts = normalize_judgement(text, ASSERTIONS)
    assert score == 0.9
    assert all(v.passed for v in verdicts)
    # a reasoning block and no answer after it: nothing to read
    with pytest.raises(ValueError, match="the reply holds only a reasoning block"):
        normalize_judgement(f"<think>{draft}</think>\n", ASSERTIONS)


def test_strict_json_wins_over_a_fence_inside_a_string():
    inner = reply([verdict(1, False), verdict(2, False), verdict(3, False)], score=0.1)
    text = reply([verdict(1, True, f"```json\n{inner}\n```"), verdict(2), verdict(3)], score=0.8)
    score, _, verdicts = normalize_judgement(text, ASSERTIONS)
    assert score == 0.8
    assert all(v.passed for v in verdicts)


def test_the_first_json_fence_wins_over_a_later_one():
    first = reply([verdict(1), verdict(2), verdict(3)], score=0.7)
    second = reply([verdict(1, False)], score=0.1)
    text = f"```json\n{first}\n```\n```json\n{second}\n```"
    assert normalize_judgement(text, ASSERTIONS)[0] == 0.7


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("", "the reply is empty"),
        ("  \n ", "the reply is empty"),
        ("All assertions are met.", "no JSON object in the reply: All assertions are met."),
        ('{"score": 1, "reason": "ok", "nl_assertion_verdicts": [', "no JSON object"),
        ("[1, 2, 3]", "no JSON object"),
        ("```json\n[true]\n```", "no JSON object"),
        ("1.0", "no JSON object"),
        # an object this reader refuses is not "no object" (said so while debugging a judge)
        ('{"index": ' + "9" * 5000 + "}", "JSON that cannot be read \\(Exceeds the limit"),
    ],
)
def test_unreadable_replies_raise(text, detail):
    with pytest.raises(ValueError, match=detail.replace(".", r"\.")):
        normalize_judgement(text, ASSERTIONS)


VERDICT_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 8),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.lists(st.booleans(), max_size=2),
)


@given(
    n_assertions=st.integers(0, 6),
    raw_verdicts=st.lists(
        st.one_of(
            st.fixed_dictionaries(
                {"index": st.one_of(st.integers(-2, 8), VERDICT_VALUES), "passed": VERDICT_VALUES},
                optional={"reason": VERDICT_VALUES},
            ),
            VERDICT_VALUES,
        ),
        max_size=12,
    ),
    score=VERDICT_VALUES,
)
def test_normalization_properties(n_assertions, raw_verdicts, score):
    assertions = [f"assertion {n}" for n in range(n_assertions)]
    text = json.dumps({"score": score, "reason": "r", "nl_assertion_verdicts": raw_verdicts})
    answered = any(
        isinstance(raw, dict) and type(raw["index"]) is int and 1 <= raw["index"] <= n_assertions
        for raw in raw_verdicts
    )
    if assertions and not answered:
        with pytest.raises(UnreadableJudgement, match="no verdict for any"):
            normalize_judgement(text, assertions)
        return
    result_score, _, verdicts = normalize_judgement(text, assertions)
    assert 0.0 <= result_score <= 1.0
    assert [v.index for v in verdicts] == list(range(1, n_assertions + 1))
    assert [v.assertion for v in verdicts] == assertions
    for v in verdicts:
        if not v.passed:
            continue
        last = [
            raw
            for raw in raw_verdicts
            if isinstance(raw, dict) and type(raw["index"]) is int and raw["index"] == v.index
        ][-1]
        assert last["passed"] is True


# -- the result ---------------------------------------------------------------------------------


def test_result_json_has_the_artifact_shape():
    verdicts = (
        Verdict(index=1, assertion="a", passed=True, reason="yes"),
        Verdict(index=2, assertion="b", passed=False, reason="no"),
    )
    result = JudgeResult(
        score=0.5, reason="half", system_prompt="S", user_content="U", verdicts=verdicts
    )
    assert (result.pass_count, result.total, result.pass_rate) == (1, 2, 0.5)
    assert codec.encode(result) == {
        "format_version": 1,
        "score": 0.5,
        "reason": "half",
        "judge_input": {"system_prompt": "S", "user_content": "U"},
        "nl_assertion_verdicts": [
            {"index": 1, "assertion": "a", "passed": True, "reason": "yes"},
            {"index": 2, "assertion": "b", "passed": False, "reason": "no"},
        ],
        "nl_assertion_pass_count": 1,
        "nl_assertion_total": 2,
        "nl_assertion_pass_rate": 0.5,
    }
    failed = JudgeResult(
        score=0.0, reason="r", system_prompt="S", user_content="U", verdicts=(), error="boom"
    )
    assert codec.encode(failed)["error"] == "boom"
    assert failed.pass_rate == 0.0


# -- through the real client and the loopback server --------------------------------------------


@pytest.fixture
def make_judge(openai_server: LoopbackOpenAIServer) -> Callable[..., OpenAIChatModel]:
    def make(**overrides: Any) -> OpenAIChatModel:
        fields: dict[str, Any] = {
            "model": "judge-model",
            "api_key_env": "TAU2_TEST_JUDGE_KEY_UNSET",
            "max_retries": 2,
        }
        return loopback_model(openai_server, **(fields | overrides))

    return make


async def judge(make_judge: Callable[..., OpenAIChatModel], **overrides: Any) -> JudgeResult:
    async with make_judge(**overrides) as model:
        return await judge_scenario(
            model,
            assertions=ASSERTIONS,
            messages=MESSAGES,
            reference_actions=REFERENCE,
            recorded_actions=RECORDED,
            seed=1567,
        )


def assert_judge_error(result: JudgeResult, *fragments: str) -> None:
    assert result.error is not None
    for fragment in fragments:
        assert fragment in result.error
    reason = f"Judge error: {result.error}"
    assert result.score == 0.0
    assert result.reason == reason
    assert outcomes(result.verdicts) == [(n, False, reason) for n in (1, 2, 3)]
    assert [v.assertion for v in result.verdicts] == list(ASSERTIONS)
    assert result.pass_rate == 0.0
    assert codec.encode(result)["error"] == result.error


@pytest.mark.asyncio
async def test_all_true_through_the_endpoint(openai_server, make_judge):
    openai_server.enqueue(Completion(content=ALL_TRUE, prompt_tokens=900, completion_tokens=80))
    result = await judge(make_judge)
    assert result.error is None
    assert (result.score, result.reason) == (0.9, "Mostly fine.")
    assert (result.pass_count, result.total, result.pass_rate) == (3, 3, 1.0)
    assert result.usage == Usage(n_calls=1, prompt=900, completion=80)
    system, user = build_judge_prompt(
        assertions=ASSERTIONS, messages=MESSAGES, reference_actions=REFERENCE,
        recorded_actions=RECORDED,
    )  # fmt: skip
    assert (result.system_prompt, result.user_content) == (system, user)
    (request,) = openai_server.requests
    assert request.body["model"] == "judge-model"
    assert request.body["seed"] == 1567
    assert "tools" not in request.body
    assert request.body["messages"] == [
        {"role": "system", "content": system},
        {"role": "user", "content": user},
    ]
    assert "error" not in codec.encode(result)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("verdicts", "expected_passed"),
    [
        pytest.param([verdict(1), verdict(3)], [True, False, True], id="missing"),
        pytest.param([verdict(0), verdict(7), verdict(2)], [False, True, False], id="out-of-range"),
        pytest.param(
            [verdict(2, False), verdict(1), verdict(2), verdict(3), verdict(3, False)],
            [True, True, False],
            id="repeated",
        ),
        pytest.param([verdict(3), verdict(2), verdict(1, False)], [False, True, True], id="order"),
        pytest.param(
            [verdict(1, "true"), verdict(2, 1), verdict(3, True)], [False, False, True], id="bools"
        ),
    ],
)
async def test_verdict_normalization_through_the_endpoint(
    openai_server, make_judge, verdicts, expected_passed
):
    openai_server.enqueue(Completion(content=reply(verdicts)))
    result = await judge(make_judge)
    assert result.error is None
    assert [v.passed for v in result.verdicts] == expected_passed
    assert [v.index for v in result.verdicts] == [1, 2, 3]
    assert result.pass_count == sum(expected_passed)
    assert result.usage.n_calls == 1


@pytest.mark.asyncio
async def test_non_boolean_passed_keeps_its_reason(openai_server, make_judge):
    openai_server.enqueue(
        Completion(
            content=reply([verdict(1, "true", "said it"), verdict(2, 1, "kept"), verdict(3)])
        )
    )
    result = await judge(make_judge)
    assert outcomes(result.verdicts)[:2] == [(1, False, "said it"), (2, False, "kept")]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "content",
    [
        pytest.param(f"Sure! Here is the evaluation:\n{ALL_TRUE}\nLet me know.", id="prose"),
        pytest.param(f"```json\n{ALL_TRUE}\n```", id="json-fence"),
        pytest.param(f"Result:\n```\n{ALL_TRUE}\n```", id="plain-fence"),
    ],
)
async def test_wrapped_json_through_the_endpoint(openai_server, make_judge, content):
    openai_server.enqueue(Completion(content=content))
    result = await judge(make_judge)
    assert result.error is None
    assert result.pass_rate == 1.0
    assert result.score == 0.9


def assert_judge_failure(result: JudgeResult, replies: list[str], *fragments: str) -> None:
    """The judge's own failure: every verdict false with the reason, marked unreadable, every
    reply kept whole (the last also as ``raw_reply``)."""
    assert_judge_error(result, "unreadable reply, also when asked again", *fragments)
    assert result.unreadable is True
    assert result.unreadable_replies == tuple(replies)
    assert result.requests == len(replies)
    data = codec.encode(result)
    assert (data["unreadable"], data["unreadable_replies"]) == (True, replies)
    assert data["raw_reply"] == replies[-1]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        pytest.param('{"score": 1, "nl_assertion_verdicts": [{"index": 1,', "no JSON object",
                     id="invalid-json"),
        pytest.param("All three assertions are clearly met.", "no JSON object in the reply",
                     id="prose-only"),
        pytest.param("", "the reply is empty", id="empty"),
        pytest.param(None, "the reply is empty", id="null-content"),
    ],
)  # fmt: skip
async def test_an_unreadable_reply_twice_is_the_judges_failure(
    openai_server, make_judge, content, fragment
):
    # Issue 18, item 2: asked again once as a fresh request; still unreadable, the judgement is
    # the judge's failure (an infra error of the judge role), not failed verdicts of the agent.
    reply = Completion(content=content, prompt_tokens=50, completion_tokens=9)
    openai_server.enqueue(reply, reply, Completion(content=ALL_TRUE))
    result = await judge(make_judge)
    assert_judge_failure(result, [content or ""] * 2, fragment)
    assert result.usage == Usage(n_calls=2, prompt=100, completion=18)
    first, second = openai_server.requests
    assert first.body == second.body  # the same request again, fresh
    assert openai_server.pending == 1


@pytest.mark.asyncio
async def test_prose_once_then_json_is_a_normal_result(openai_server, make_judge):
    prose = "The agent met all three assertions."
    openai_server.enqueue(
        Completion(content=prose, prompt_tokens=50, completion_tokens=9),
        Completion(content=ALL_TRUE, prompt_tokens=50, completion_tokens=80),
    )
    result = await judge(make_judge)
    assert result.error is None
    assert result.unreadable is False
    assert (result.pass_rate, result.score) == (1.0, 0.9)
    assert result.unreadable_replies == (prose,)
    assert (result.requests, result.attempts) == (2, 2)
    assert result.usage == Usage(n_calls=2, prompt=100, completion=89)
    assert codec.encode(result)["unreadable_replies"] == [prose]
    assert "unreadable" not in codec.encode(result)
    assert len(openai_server.requests) == 2


@pytest.mark.asyncio
async def test_json_in_a_fence_is_read_without_asking_again(openai_server, make_judge):
    openai_server.enqueue(Completion(content=f"```json\n{ALL_TRUE}\n```"))
    result = await judge(make_judge)
    assert (result.error, result.unreadable, result.unreadable_replies) == (None, False, ())
    assert result.pass_rate == 1.0
    assert result.requests == 1
    assert len(openai_server.requests) == 1
    assert "unreadable_replies" not in codec.encode(result)


@pytest.mark.asyncio
async def test_tool_calls_instead_of_an_answer_are_unreadable(openai_server, make_judge):
    calls = Completion(tool_calls=(ReplyToolCall(name="calculate"),))
    openai_server.enqueue(calls, calls)
    result = await judge(make_judge)
    assert_judge_failure(result, ["", ""], "the reply is empty")
    assert result.usage.n_calls == 2


@pytest.mark.asyncio
async def test_an_outage_on_the_second_request_is_an_outage(openai_server, make_judge):
    openai_server.enqueue(Completion(content="prose"), HttpError.openai(401, "Bad key."))
    with pytest.raises(EndpointError, match="HTTP 401"):
        await judge(make_judge)


@pytest.mark.asyncio
async def test_context_window_on_the_second_request_is_an_outage(openai_server, make_judge):
    openai_server.enqueue(Completion(content="prose"), HttpError.context_length_exceeded())
    with pytest.raises(ContextWindowExceeded, match="context window"):
        await judge(make_judge)
    assert len(openai_server.requests) == 2


@pytest.mark.parametrize(
    ("replies", "fragments", "n_requests"),
    [
        pytest.param([HttpError.server_error()] * 3, ("HTTP 500", "after 3 attempt(s)"), 3,
                     id="500-after-retries"),
        pytest.param([HttpError.openai(401, "Incorrect API key provided.")],
                     ("HTTP 401", "Incorrect API key provided."), 1, id="401-not-retried"),
        pytest.param([InvalidJson()] * 3, ("unparseable reply",), 3, id="not-json"),
        pytest.param([SlowDrip(interval=0.1)] * 3, ("no complete reply within the 0.3 s",), 3,
                     id="slow-drip"),
        pytest.param([Hang()] * 3, ("timeout", "after 3 attempt(s)"), 3, id="hang"),
    ],
)  # fmt: skip
@pytest.mark.asyncio
async def test_a_judge_outage_raises_the_endpoint_error_not_a_verdict(
    openai_server, make_judge, replies, fragments, n_requests
):
    # The judge is infrastructure: an outage is not the agent's failure (issue 12, item 2).
    openai_server.enqueue(*replies)
    with pytest.raises(EndpointError) as raised:
        await judge(make_judge, timeout_seconds=0.3)
    for fragment in fragments:
        assert fragment in str(raised.value)
    assert len(openai_server.requests) == n_requests


@pytest.mark.asyncio
async def test_500_then_success_is_a_normal_result(openai_server, make_judge):
    openai_server.enqueue(HttpError.server_error(), Completion(content=ALL_TRUE))
    result = await judge(make_judge)
    assert result.error is None
    assert result.pass_rate == 1.0


@pytest.mark.asyncio
async def test_a_prompt_too_long_for_the_judges_model_is_its_outage_not_a_verdict(
    openai_server, make_judge
):
    """The judge's window cannot hold the conversation: the judge's failure, not the agent's
    (an infra error of the judge role; a judge with a larger window judges it on resume)."""
    openai_server.enqueue(HttpError.context_length_exceeded())
    with pytest.raises(ContextWindowExceeded, match="context window"):
        await judge(make_judge)
    assert len(openai_server.requests) == 1  # not retried


@pytest.mark.asyncio
async def test_an_unparseable_reply_is_kept_whole_in_the_result(openai_server, make_judge):
    reply = "I think the agent did well. " * 40 + "{not json"
    again = "Still prose. " * 30
    openai_server.enqueue(Completion(content=reply), Completion(content=again))
    result = await judge(make_judge)
    assert_judge_failure(result, [reply, again], "no JSON object")


@pytest.mark.asyncio
async def test_a_reply_without_verdicts_is_asked_again_then_the_judges_failure(
    openai_server, make_judge
):
    """``{"score": 0.5}`` failed every assertion: the agent scored for the judge's format."""
    openai_server.enqueue(Completion(content='{"score": 0.5}'), Completion(content="{}"))
    result = await judge(make_judge)
    assert_judge_failure(result, ['{"score": 0.5}', "{}"], "no verdict for any")


@pytest.mark.asyncio
async def test_a_reply_without_verdicts_then_one_with_them_is_scored(openai_server, make_judge):
    openai_server.enqueue(Completion(content='{"score": 0.5}'), Completion(content=ALL_TRUE))
    result = await judge(make_judge)
    assert result.error is None
    assert result.pass_rate == 1.0
    assert len(openai_server.requests) == 2


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param("[" * 100_000, id="100k-brackets"),
        pytest.param("{" * 100_000, id="100k-braces"),
        pytest.param('{"a": ' * 20_000, id="open-objects"),
        pytest.param("x" * (MAX_REPLY_CHARS + 1), id="over-the-cap"),
    ],
)
def test_hostile_replies_are_unreadable_not_a_crash(reply):
    with pytest.raises(ValueError, match="reply"):
        normalize_judgement(reply, ASSERTIONS)


@pytest.mark.parametrize("before", ["", "Verdict: "])
def test_an_object_nested_deeper_than_the_unicode_walk_is_not_json_not_a_crash(before):
    # the decoder reads it; replacing lone surrogates in it raised RecursionError
    deep = '{"a": ' * 600 + "1" + "}" * 600
    with pytest.raises(ValueError, match="no JSON object"):
        normalize_judgement(before + deep, ASSERTIONS)


@pytest.mark.parametrize("before", ["", "Verdict: "])
def test_the_deepest_judgement_read_is_the_same_under_every_python(before):
    """Python's recursion limit drew this line: about 497 levels on 3.11 (fewer under a deeper
    stack), 995 on 3.12 and 3.13; a reply 600 deep was read on 3.13 only."""

    def reply(depth: int) -> str:
        inner = '{"a": ' * (depth - 1) + "1" + "}" * (depth - 1)
        # the verdict after the deep value: no place an object could start reaches it
        return (
            before
            + '{"score": 1, "reason": "r", "extra": '
            + inner
            + f', "nl_assertion_verdicts": [{ONE}]}}'
        )

    assert normalize_judgement(reply(MAX_JSON_DEPTH), ASSERTIONS)[:2] == (1.0, "r")
    # every place an object could start is too deep (the reader tries MAX_OBJECT_ATTEMPTS)
    with pytest.raises(ValueError, match="no JSON object"):
        normalize_judgement(reply(MAX_JSON_DEPTH + MAX_OBJECT_ATTEMPTS), ASSERTIONS)


def test_an_object_after_stray_braces_and_quotes_is_found():
    reply = f'Note: {{draft "oops\n then {{"score": 1, "nl_assertion_verdicts": [{ONE}]}} done'
    assert normalize_judgement(reply, ASSERTIONS)[0] == 1.0
    nested = f'{{outer {{"score": 0.5, "reason": "r", "nl_assertion_verdicts": [{ONE}]}}}}'
    assert normalize_judgement(nested, ASSERTIONS)[:2] == (0.5, "r")


def test_deep_and_surrogate_tool_arguments_render_in_the_prompt():
    deep = '{"order_id": ' + "[" * 1000 + "]" * 1000 + "}"
    lone = '{"order_id": "\\ud83d"}'
    messages = [
        Message(
            role=Role.ASSISTANT,
            tool_calls=(
                ToolCall(id="c1", name="get_order_details", arguments=deep),
                ToolCall(id="c2", name="get_order_details", arguments=lone),
            ),
        ),
        Message(role=Role.TOOL, tool_call_id="c2", name="get_order_details", content="x\ud83d"),
    ]
    _, user_content = build_judge_prompt(
        assertions=ASSERTIONS, messages=messages, reference_actions=(), recorded_actions=()
    )
    user_content.encode("utf-8")  # no lone surrogate is left
    assert 'get_order_details({"order_id": "\ufffd"})' in user_content
    assert "[[[[" in user_content


def test_a_lone_surrogate_in_the_judges_json_becomes_a_replacement_character():
    # issue 21: the escape survived the reply's decoding and broke the judge_result.json write
    text = '{"score": 1, "reason": "ok \\ud83d", "nl_assertion_verdicts": ' + (
        '[{"index": 1, "passed": false, "reason": "cut \\ud83d"}]}'
    )
    score, reason, verdicts = normalize_judgement(text, ["a"])
    assert (score, reason) == (1.0, "ok \ufffd")
    assert verdicts[0].reason == "cut \ufffd"
    fenced = normalize_judgement(f"Here:\n```json\n{text}\n```", ["a"])
    assert fenced[2][0].reason == "cut \ufffd"
    prose = normalize_judgement(f"My verdict is {text} as you see", ["a"])
    assert prose[2][0].reason == "cut \ufffd"
