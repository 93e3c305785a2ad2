"""Upstream's 16 retail tool schemas, derived from the toolkit's signatures and docstrings.

Upstream builds each schema at run time: ``as_tool`` reads a toolkit method's signature and
docstring, a pydantic model named as in ``environment/tool.py`` holds one field per parameter
(its docstring description attached), and ``model_json_schema()`` renders it. This module
reproduces that result from the syntax trees: the tools are the methods of the retail toolkit
class decorated with ``is_tool(...)``, in source order; ``self`` is left out; ``str`` becomes
``{"type": "string"}`` and ``List[str]`` an array of strings; every parameter without a default
is required; each property's title is pydantic's (``field_name.title()`` with ``_`` as space).
Keys are sorted as pydantic sorts them (properties keep the signature order).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any, TypeVar

from tau2_retail.data.upstream.docstrings import parse_google_docstring
from tau2_retail.data.upstream.source import Source, string_literal

__all__ = ["derive_tool_schemas"]

_TOOLKIT_CLASS = "RetailTools"
_TOOL_DECORATOR = "is_tool"
_TOOL_CLASS = "Tool"

T = TypeVar("T")


def _first_in(
    tool_source: Source, method: str, find: Callable[[ast.AST], T | None], what: str
) -> T:
    """The first value ``find`` gives for a node of ``Tool.<method>`` (in ``ast.walk`` order);
    a missing construct, named by ``what``, when no node gives one."""
    for node in ast.walk(tool_source.method(_TOOL_CLASS, method)):
        if (found := find(node)) is not None:
            return found
    raise tool_source.missing(f"{what} in {_TOOL_CLASS}.{method}")


def _model_title(tool_source: Source) -> str:
    """The name of the parameters model (upstream's ``create_model(<name>, **params)``)."""

    def title(node: ast.AST) -> str | None:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "create_model"
            and node.args
            and any(keyword.arg is None for keyword in node.keywords)
        ):
            return string_literal(node.args[0])
        return None

    return _first_in(tool_source, "parse_data", title, "create_model(<name>, **params)")


def _description_joiner(tool_source: Source) -> str:
    """What goes between the short and the long description in ``Tool._get_description``."""

    def joiner(node: ast.AST) -> str | None:
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Add)
            and isinstance(node.left, ast.BinOp)
        ):
            return string_literal(node.left.right)
        return None

    return _first_in(
        tool_source, "_get_description", joiner, "short_desc + <separator> + long_desc"
    )


def _envelope(tool_source: Source) -> tuple[str, tuple[str, ...]]:
    """The outer ``type`` value and the keys of ``function`` in ``Tool.openai_schema``."""

    def envelope(node: ast.AST) -> tuple[str, tuple[str, ...]] | None:
        if not isinstance(node, ast.Return) or not isinstance(node.value, ast.Dict):
            return None
        outer = {
            key.value: value
            for key, value in zip(node.value.keys, node.value.values, strict=True)
            if isinstance(key, ast.Constant)
        }
        kind, function = outer.get("type"), outer.get("function")
        kind_text = string_literal(kind)
        if kind_text is not None and isinstance(function, ast.Dict):
            keys = tuple(k.value for k in function.keys if isinstance(k, ast.Constant))
            if keys == ("name", "description", "parameters"):
                return kind_text, keys
        return None

    return _first_in(
        tool_source,
        "openai_schema",
        envelope,
        'the {"type": ..., "function": {"name", "description", "parameters"}} literal',
    )


def _is_tool(method: ast.FunctionDef) -> bool:
    return any(
        isinstance(decorator, ast.Call)
        and isinstance(decorator.func, ast.Name)
        and decorator.func.id == _TOOL_DECORATOR
        for decorator in method.decorator_list
    )


def _type_schema(annotation: ast.expr | None, source: Source, where: str) -> dict[str, Any]:
    if isinstance(annotation, ast.Name) and annotation.id == "str":
        return {"type": "string"}
    if (
        isinstance(annotation, ast.Subscript)
        and isinstance(annotation.value, ast.Name)
        and annotation.value.id in ("List", "list")
    ):
        return {"items": _type_schema(annotation.slice, source, where), "type": "array"}
    shown = ast.unparse(annotation) if annotation is not None else "no annotation"
    raise source.missing(f"a str or List[str] annotation for {where} (found {shown})")


def _field_title(name: str) -> str:
    return name.title().replace("_", " ")


def _tool_schema(
    method: ast.FunctionDef, *, source: Source, model_title: str, joiner: str, kind: str
) -> dict[str, Any]:
    arguments = method.args
    if arguments.vararg or arguments.kwarg or arguments.kwonlyargs or arguments.defaults:
        raise source.missing(
            f"a plain signature (positional parameters without defaults) for {method.name}"
        )
    parameters = arguments.posonlyargs + arguments.args
    if not parameters or parameters[0].arg != "self":
        raise source.missing(f"the self parameter of {_TOOLKIT_CLASS}.{method.name}")
    docstring = parse_google_docstring(ast.get_docstring(method, clean=False))
    if not docstring.short_description:
        raise source.missing(f"the docstring of {_TOOLKIT_CLASS}.{method.name}")
    description = docstring.short_description
    if docstring.long_description:
        description = docstring.short_description + joiner + docstring.long_description
    properties: dict[str, Any] = {}
    required = []
    for parameter in parameters[1:]:
        name = parameter.arg
        field = _type_schema(parameter.annotation, source, f"{method.name}({name})")
        if name in docstring.params:
            field["description"] = docstring.params[name]
        field["title"] = _field_title(name)
        properties[name] = dict(sorted(field.items()))
        required.append(name)
    parameters_schema: dict[str, Any] = {"properties": properties}
    if required:
        parameters_schema["required"] = required
    parameters_schema["title"] = model_title
    parameters_schema["type"] = "object"
    return {
        "function": {
            "description": description,
            "name": method.name,
            "parameters": parameters_schema,
        },
        "type": kind,
    }


def derive_tool_schemas(*, toolkit: Source, tool: Source) -> tuple[dict[str, Any], ...]:
    """The OpenAI function schemas of upstream's retail tools, in upstream's order."""
    model_title = _model_title(tool)
    joiner = _description_joiner(tool)
    kind, _ = _envelope(tool)
    methods = [
        node
        for node in toolkit.class_def(_TOOLKIT_CLASS).body
        if isinstance(node, ast.FunctionDef) and _is_tool(node)
    ]
    if not methods:
        raise toolkit.missing(f"methods decorated with {_TOOL_DECORATOR}(...) in {_TOOLKIT_CLASS}")
    return tuple(
        _tool_schema(method, source=toolkit, model_title=model_title, joiner=joiner, kind=kind)
        for method in methods
    )
