"""``calculate``: arithmetic with Python's semantics, without ``eval``.

The expression is parsed into a syntax tree and only number literals, ``+ - * / // **`` and
unary signs are evaluated, with Python's own operators so results and error texts equal
upstream's ``eval``. Integer results beyond a size bound and powers that would exhaust memory
or time are refused instead of computed, and so is nesting beyond a depth of our own
(``MAX_NESTING_DEPTH``): where Python's parser gives up depends on the Python version, and on
3.11 on how deep the caller's stack is.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from tau2_retail.tools.tool_error import ToolError

__all__ = [
    "ALLOWED_CHARACTERS",
    "MAX_EXPRESSION_LENGTH",
    "MAX_INTEGER_BITS",
    "MAX_NESTING_DEPTH",
    "calculate",
]

ALLOWED_CHARACTERS = frozenset("0123456789+-*/(). ")
MAX_EXPRESSION_LENGTH = 10_000
# 2**4096 is far beyond a float (about 2**1024): any larger integer could only end in upstream's
# "int too large to convert to float", so refusing it changes no realistic answer.
MAX_INTEGER_BITS = 4096
# "1+1+...+1" nests as deep as it is long. Python's own limit is no fixed number: 3.11 refused
# such a chain from about 2,990 terms, fewer the deeper the caller's stack (3 per frame: 2,000
# under a 400-frame stack), 3.12 from about 3,000, and 3.13 parses every chain that fits in
# MAX_EXPRESSION_LENGTH. Ours is far below 3.11's at any realistic stack, so the answer is the
# same under every Python; no arithmetic a model writes comes near it.
MAX_NESTING_DEPTH = 1000

Number = int | float
# eval of these characters can also produce ``...`` (Ellipsis) and ``()``; Python's operators
# then raise the TypeError texts upstream shows, so they are carried as values too.
Value = Any

_BINARY: dict[type[ast.operator], Callable[[Value, Value], Value]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
}
_TOO_LARGE = "Expression result is too large to compute"
_TOO_DEEP = "Expression is too deeply nested"


def _checked_pow(base: Value, exponent: Value) -> Value:
    both_int = isinstance(base, int) and isinstance(exponent, int)
    if (
        both_int
        and exponent > 0
        and abs(base) > 1
        and exponent * math.log2(abs(base)) > MAX_INTEGER_BITS
    ):
        raise ToolError(_TOO_LARGE)
    result = base**exponent
    if isinstance(result, complex):
        # upstream's float() of eval's complex result fails with this TypeError text
        raise ToolError("float() argument must be a string or a real number, not 'complex'")
    return result


def _apply(node: ast.expr, values: list[Value]) -> Value:
    if isinstance(node, ast.Call):
        arguments = values[len(values) - len(node.args) :]
        del values[len(values) - len(node.args) :]
        function = values.pop()
        for argument, value in zip(node.args, arguments, strict=True):
            # "0(*0)": Python unpacks the starred arguments before it tries the call
            if isinstance(argument, ast.Starred) and not isinstance(value, tuple):
                raise ToolError(
                    f"{function} argument after * must be an iterable, not {type(value).__name__}"
                )
        raise ToolError(f"'{type(function).__name__}' object is not callable")
    if isinstance(node, ast.Tuple):
        del values[len(values) - len(node.elts) :]
        return ()
    if isinstance(node, ast.BinOp):
        right = values.pop()
        left = values.pop()
        if isinstance(node.op, ast.Pow):
            return _checked_pow(left, right)
        result = _BINARY[type(node.op)](left, right)
    elif isinstance(node, ast.UnaryOp):
        operand = values.pop()
        result = -operand if isinstance(node.op, ast.USub) else +operand
    else:
        raise AssertionError(f"unexpected node {type(node).__name__}")
    if isinstance(result, int) and result.bit_length() > MAX_INTEGER_BITS:
        raise ToolError(_TOO_LARGE)
    return result


def _check_node(node: ast.expr) -> None:
    if isinstance(node, ast.Constant):
        value = node.value
        if value is not Ellipsis and (
            isinstance(value, bool) or not isinstance(value, int | float)
        ):
            raise ToolError("Invalid characters in expression")
    elif isinstance(node, ast.Tuple | ast.Call | ast.Starred):
        if isinstance(node, ast.Call) and node.keywords:
            raise ToolError("Invalid characters in expression")
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in _BINARY:
            raise ToolError("Invalid characters in expression")
    elif isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, ast.USub | ast.UAdd):
            raise ToolError("Invalid characters in expression")
    else:
        raise ToolError("Invalid characters in expression")


def _children(node: ast.expr) -> list[ast.expr]:
    """The operands of ``node`` in evaluation order (a Starred's value stands for it)."""
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp):
        return [node.operand]
    if isinstance(node, ast.Tuple):
        return list(node.elts)
    if isinstance(node, ast.Call):
        return [node.func, *node.args]
    if isinstance(node, ast.Starred):
        return [node.value]
    return []


def _evaluate(root: ast.expr) -> Value:
    # An explicit stack: "1+1+...+1" nests as deep as it is long, too deep for recursion.
    values: list[Value] = []
    stack: list[tuple[ast.expr, bool, int]] = [(root, False, 1)]
    while stack:
        node, children_done, depth = stack.pop()
        if children_done:
            values.append(_apply(node, values))
            continue
        _check_node(node)
        if depth > MAX_NESTING_DEPTH:
            raise ToolError(_TOO_DEEP)
        if isinstance(node, ast.Constant):
            values.append(node.value)
            continue
        if not isinstance(node, ast.Starred):  # the Call applies its starred arguments
            stack.append((node, True, depth))
        stack.extend((child, False, depth + 1) for child in reversed(_children(node)))
    return values.pop()


def calculate(expression: str) -> str:
    """Evaluate ``expression`` and return ``str(round(float(result), 2))``."""
    # The length first: a megabyte of digits is refused without reading it.
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise ToolError(f"Expression is too long (at most {MAX_EXPRESSION_LENGTH} characters)")
    if not all(char in ALLOWED_CHARACTERS for char in expression):
        raise ToolError("Invalid characters in expression")
    try:
        # eval() strips leading spaces of a source string; compile() does not
        tree = ast.parse(expression.lstrip(" \t"), filename="<string>", mode="eval")
        result = _evaluate(tree.body)
        return str(round(float(result), 2))
    except (SyntaxError, ArithmeticError, TypeError) as error:
        raise ToolError(str(error)) from error
    except RecursionError as error:
        # ast.parse recurses while building the tree of a long chain such as "1+1+...+1"
        raise ToolError(_TOO_DEEP) from error
    except MemoryError as error:
        raise ToolError(_TOO_LARGE) from error
