"""A tiny interpreter for the string-building code of upstream's prompts (never ``exec``).

Upstream renders its prompts with a handful of constructs: string literals (optionally
``.strip()``-ed), ``TEMPLATE.format(key=value, ...)``, f-strings, ``textwrap.indent(text,
prefix)``, ``str(value)``, and ``__str__`` methods that append lines to a list under
``if self.field is not None:`` guards and return ``"\\n".join(lines)``. This module evaluates
exactly those node types over values we supply (``self.<field>`` from a mapping, module
constants from the source); any other construct raises :class:`UpstreamSourceError` naming it.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tau2_retail.data.upstream.source import Source, string_literal
from tau2_retail.errors import UpstreamSourceError

__all__ = ["Evaluator", "render_str_method"]

_NONE = object()


@dataclass(slots=True, kw_only=True)
class Evaluator:
    """Evaluates string expressions of ``source`` with ``self`` fields and local names given.

    ``nested`` renders ``str(self.<field>)`` for a field whose value is itself a record (a
    mapping) with the ``__str__`` of another class.
    """

    source: Source
    where: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    names: dict[str, Any] = field(default_factory=dict)
    nested: Mapping[str, Callable[[Mapping[str, Any]], str]] = field(default_factory=dict)

    def fail(self, node: ast.AST, what: str = "a supported string construct") -> Exception:
        return self.source.missing(f"{what} in {self.where} (found `{ast.unparse(node)}`)")

    def value(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, str | type(None)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.names:
                return self.names[node.id]
            constant = self._module_constant(node.id)
            if constant is not _NONE:
                return constant
            raise self.fail(node, f"a known name {node.id}")
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            if node.attr in self.fields:
                return self.fields[node.attr]
            raise self.fail(node, f"a known field self.{node.attr}")
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and isinstance(self.names.get(node.value.id), Mapping)
        ):
            record = self.names[node.value.id]
            if node.attr in record:
                return record[node.attr]
            raise self.fail(node, f"a known field {node.value.id}.{node.attr}")
        if isinstance(node, ast.JoinedStr):
            return "".join(self._fstring_part(part) for part in node.values)
        if isinstance(node, ast.Call):
            return self._call(node)
        raise self.fail(node)

    def text(self, node: ast.expr) -> str:
        value = self.value(node)
        if not isinstance(value, str):
            raise self.fail(node, "a string value")
        return value

    def _module_constant(self, name: str) -> Any:
        try:
            node = self.source.module_assignment(name)
        except UpstreamSourceError:
            return _NONE
        return self.source.string_constant(node, f"the module constant {name}")

    def _fstring_part(self, part: ast.expr) -> str:
        if (text := string_literal(part)) is not None:
            return text
        if isinstance(part, ast.FormattedValue) and part.format_spec is None:
            value = self.value(part.value)
            if part.conversion == ord("r"):
                return repr(value)
            return str(value)
        raise self.fail(part, "a plain f-string field")

    def _call(self, node: ast.Call) -> Any:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "strip" and not node.args:
            return self.text(func.value).strip()
        if isinstance(func, ast.Attribute) and func.attr == "replace" and len(node.args) == 2:
            return self.text(func.value).replace(self.text(node.args[0]), self.text(node.args[1]))
        if isinstance(func, ast.Attribute) and func.attr == "format" and not node.args:
            template = self.text(func.value)
            values = {}
            for keyword in node.keywords:
                if keyword.arg is None:
                    raise self.fail(node, "keyword arguments of .format()")
                values[keyword.arg] = self.value(keyword.value)
            return template.format(**values)
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "indent"
            and isinstance(func.value, ast.Name)
            and func.value.id == "textwrap"
            and len(node.args) == 2
        ):
            return textwrap.indent(self.text(node.args[0]), self.text(node.args[1]))
        if isinstance(func, ast.Name) and func.id == "str" and len(node.args) == 1:
            argument = node.args[0]
            if (
                isinstance(argument, ast.Attribute)
                and isinstance(argument.value, ast.Name)
                and argument.value.id == "self"
                and argument.attr in self.nested
            ):
                return self.nested[argument.attr](self.value(argument))
            return str(self.value(argument))
        raise self.fail(node)


def _is_not_none_guard(test: ast.expr) -> ast.expr | None:
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.IsNot)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        return test.left
    return None


def _run_block(body: list[ast.stmt], evaluator: Evaluator, lines: list[str]) -> str | None:
    for statement in body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if not isinstance(target, ast.Name):
                raise evaluator.fail(statement)
            if isinstance(statement.value, ast.List) and not statement.value.elts:
                evaluator.names[target.id] = lines
            else:
                evaluator.names[target.id] = evaluator.text(statement.value)
        elif (
            isinstance(statement, ast.Expr)
            and isinstance(statement.value, ast.Call)
            and isinstance(statement.value.func, ast.Attribute)
            and statement.value.func.attr == "append"
            and isinstance(statement.value.func.value, ast.Name)
            and evaluator.names.get(statement.value.func.value.id) is lines
            and len(statement.value.args) == 1
        ):
            lines.append(evaluator.text(statement.value.args[0]))
        elif isinstance(statement, ast.If) and not statement.orelse:
            guarded = _is_not_none_guard(statement.test)
            if guarded is None:
                raise evaluator.fail(statement.test, "an `if <field> is not None` guard")
            if evaluator.value(guarded) is not None:
                result = _run_block(statement.body, evaluator, lines)
                if result is not None:
                    return result
        elif isinstance(statement, ast.Return) and statement.value is not None:
            call = statement.value
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "join"
                and len(call.args) == 1
                and isinstance(call.args[0], ast.Name)
                and evaluator.names.get(call.args[0].id) is lines
            ):
                return evaluator.text(call.func.value).join(lines)
            raise evaluator.fail(call, 'a `return "<separator>".join(lines)`')
        else:
            raise evaluator.fail(statement, "a supported statement")
    return None


def render_str_method(
    source: Source,
    class_name: str,
    fields: Mapping[str, Any],
    *,
    nested: Mapping[str, Callable[[Mapping[str, Any]], str]] | None = None,
) -> str:
    """What ``str(<class_name>(**fields))`` returns, by interpreting its ``__str__``."""
    method = source.method(class_name, "__str__")
    body = list(method.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # a docstring
    evaluator = Evaluator(
        source=source, where=f"{class_name}.__str__", fields=fields, nested=nested or {}
    )
    result = _run_block(body, evaluator, [])
    if result is None:
        raise source.missing(f"a return statement in {class_name}.__str__")
    return result
