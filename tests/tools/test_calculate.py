"""``calculate``: upstream's results and error texts without ``eval``, and refusal of attacks.

The reference in these tests is upstream's own expression, ``eval`` included: it only ever sees
strings generated here from digits and operators, or the fixed strings below.
"""

from __future__ import annotations

import time
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tau2_retail.testing.timeouts import scaled_timeout
from tau2_retail.tools.calculate import MAX_NESTING_DEPTH, calculate
from tau2_retail.tools.dispatch import ToolResult, dispatch
from tau2_retail.tools.store import Store
from tau2_retail.tools.tool_error import ToolError


def upstream(expression: str) -> str:
    """What upstream answers: its character check, then ``eval`` (only on safe test input)."""
    if not all(char in "0123456789+-*/(). " for char in expression):
        return "Error: Invalid characters in expression"
    try:
        with warnings.catch_warnings():
            # "'int' object is not callable; perhaps you missed a comma?" is only printed
            warnings.simplefilter("ignore", SyntaxWarning)
            return str(round(float(eval(expression, {"__builtins__": None}, {})), 2))
    except Exception as error:  # upstream turns every exception into its text
        return f"Error: {error}"


def ours(expression: str) -> str:
    try:
        return calculate(expression)
    except ToolError as error:
        return f"Error: {error}"


@pytest.mark.parametrize(
    ("expression", "content", "error"),
    [
        # results are bare strings
        ("2 + 2", "4.0", False),
        ("10/3", "3.33", False),
        ("100 - 33.333", "66.67", False),
        ("(120.50 - 30) * 0.9", "81.45", False),
        ("7 // 2", "3.0", False),
        ("-2 ** 2", "-4.0", False),
        ("2 ** -1", "0.5", False),
        ("  2+2", "4.0", False),
        ("1/3*3", "1.0", False),
        ("00", "0.0", False),
        ("10.0**308*10", "inf", False),
        # errors are upstream's texts
        ("1/0", "Error: division by zero", True),
        ("1.0/0", "Error: float division by zero", True),
        ("1//0", "Error: integer division or modulo by zero", True),
        ("1.5.2", "Error: invalid syntax (<string>, line 1)", True),
        ("", "Error: invalid syntax (<string>, line 0)", True),
        ("(1 + 2", "Error: '(' was never closed (<string>, line 1)", True),
        ("2 +* 3", "Error: invalid syntax (<string>, line 1)", True),
        ("2 x 3", "Error: Invalid characters in expression", True),
        # found by hypothesis:
        ("0(*0)", "Error: 0 argument after * must be an iterable, not int", True),
        ("0(*())", "Error: 'int' object is not callable", True),
        ("1e5", "Error: Invalid characters in expression", True),
        ("1_000", "Error: Invalid characters in expression", True),
        ("2 % 3", "Error: Invalid characters in expression", True),
        ("\t2", "Error: Invalid characters in expression", True),
        ("__import__('os')", "Error: Invalid characters in expression", True),
        ("0 ** -1", "Error: 0.0 cannot be raised to a negative power", True),
        ("2 ** 4096", "Error: int too large to convert to float", True),
    ],
)
def test_result_and_error_texts(store, expression, content, error):
    result = dispatch(store, "calculate", {"expression": expression})
    assert result == ToolResult(content=content, error=error)


@pytest.mark.parametrize(
    "expression",
    [
        "",
        " ",
        "1.5.2",
        "()",
        "...",
        "(1)(2)",
        "1(2)",
        "()()",
        "(1, 2)",
        "(-8) ** (1/3)",
        "(-1) ** 0.5",
        "0.0 ** -1",
        "1.0 // 0",
        "10.0 ** 400",
        "2 ** -10000",
        "1" * 5000,
        "0" * 3 + "1",
        "1" * 400 + ".0 - " + "1" * 400 + ".0",
        "4.0 ** 0.5 ** -1",
        "- - + 3",
        "(((((1)))))",
        "1 .5",
        "1. 5",
        "1 /",
    ],
)
def test_odd_expressions_match_upstream(expression):
    assert ours(expression) == upstream(expression)


def _number() -> st.SearchStrategy[str]:
    integers = st.integers(min_value=0, max_value=999).map(str)
    decimals = st.tuples(st.integers(0, 999), st.integers(0, 99)).map(lambda p: f"{p[0]}.{p[1]}")
    return st.one_of(integers, decimals)


def _power_free() -> st.SearchStrategy[str]:
    return st.recursive(
        _number(),
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "//"]), inner).map(
                lambda t: f"{t[0]} {t[1]} {t[2]}"
            ),
            inner.map(lambda e: f"({e})"),
            inner.map(lambda e: f"-{e}"),
        ),
        max_leaves=12,
    )


def _expressions() -> st.SearchStrategy[str]:
    # powers only with a small literal exponent, so the reference stays fast
    power = st.tuples(_power_free(), st.integers(0, 3)).map(lambda t: f"({t[0]}) ** {t[1]}")
    return st.recursive(
        st.one_of(_power_free(), power),
        lambda inner: st.tuples(inner, st.sampled_from(["+", "-", "*", "/"]), inner).map(
            lambda t: f"{t[0]} {t[1]} {t[2]}"
        ),
        max_leaves=4,
    )


@settings(max_examples=300, deadline=None)
@given(_expressions())
def test_generated_expressions_match_upstream(expression):
    assert ours(expression) == upstream(expression)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789+-*/(). ", max_size=30))
def test_any_allowed_text_gives_a_result_or_an_error(expression):
    # random strings of the allowed characters: never an exception, and upstream's answer
    # wherever upstream's own answer is cheap to compute (no power operator)
    answer = ours(expression)
    assert isinstance(answer, str)
    if "**" not in expression:
        assert answer == upstream(expression)


ATTACKS = {
    "tower": "9**9**9**9",
    "huge-power": "10**10**10",
    "long-chain": "+".join(["1"] * 10_000),
    "chain-under-limit": "+".join(["1"] * 4_999),
    "deep-parentheses": "(" * 5_000 + "1" + ")" * 5_000,
    "parentheses-under-limit": "(" * 300 + "1" + ")" * 300,
    "unary-chain": "-" * 9_999 + "1",
    "power-chain": "2**" * 3_000 + "2",
    "product-of-powers": "-(2**4000)*-(2**4000)",
    "float-power": "2.0**100000",
    "import": "__import__('os').system('true')",
    "attribute": "(1).__class__",
}


@pytest.mark.parametrize("expression", ATTACKS.values(), ids=ATTACKS.keys())
def test_attacks_refused_quickly(seed, expression):
    start = time.perf_counter()
    result = dispatch(Store(seed), "calculate", {"expression": expression})
    elapsed = time.perf_counter() - start
    assert result.error is True
    assert result.content.startswith("Error: ")
    # a watchdog against runaway arithmetic, not a speed target (that is in benchmarks/)
    assert elapsed < scaled_timeout(10), f"{elapsed:.2f} s"


def test_attack_texts(store):
    for expression, message in [
        ("9**9**9**9", "Expression result is too large to compute"),
        ("10**10**10", "Expression result is too large to compute"),
        ("+".join(["1"] * 10_000), "Expression is too long (at most 10000 characters)"),
        ("+".join(["1"] * 4_999), "Expression is too deeply nested"),
        ("(" * 300 + "1" + ")" * 300, "too many nested parentheses (<string>, line 1)"),
        ("__import__('os')", "Invalid characters in expression"),
    ]:
        assert dispatch(store, "calculate", {"expression": expression}) == ToolResult(
            content=f"Error: {message}", error=True
        )


def _at_stack_depth(frames: int, expression: str) -> str:
    return _at_stack_depth(frames - 1, expression) if frames else ours(expression)


@pytest.mark.parametrize("frames", [0, 500], ids=["shallow-stack", "deep-stack"])
def test_the_nesting_limit_is_ours_whatever_the_python_and_the_stack(frames):
    """Python refused a chain such as "1+1+...+1" where its parser gave up: on 3.11 from about
    2,990 terms, fewer under a deeper stack; on 3.13 never (4,999 terms gave "4999.0")."""
    deepest = "+".join(["1"] * MAX_NESTING_DEPTH)  # nests exactly MAX_NESTING_DEPTH deep
    assert _at_stack_depth(frames, deepest) == f"{MAX_NESTING_DEPTH}.0"
    for too_deep in (
        "+".join(["1"] * (MAX_NESTING_DEPTH + 1)),
        "-" * MAX_NESTING_DEPTH + "1",
        "2**" * MAX_NESTING_DEPTH + "2",
        "+".join(["1"] * 4_999),
    ):
        assert _at_stack_depth(frames, too_deep) == "Error: Expression is too deeply nested"


def test_calculate_records_no_action_and_changes_nothing(store):
    assert dispatch(store, "calculate", {"expression": "2 + 2"}).action is None
    assert store.changed_keys() == []
