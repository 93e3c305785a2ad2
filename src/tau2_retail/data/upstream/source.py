"""One pinned upstream source file, read (sha256-verified) and parsed with ``ast``, never run.

The tau2 profile derives upstream's model-visible text from the syntax trees of seven files of
tau2-bench at the pinned commit. A construct the derivation needs and does not find raises
:class:`UpstreamSourceError` naming the file and the construct, never a traceback of ours.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from tau2_retail.data.files import read_verified
from tau2_retail.errors import UpstreamSourceError

__all__ = [
    "AGENT_SOURCE",
    "JUDGE_SOURCE",
    "ORCHESTRATOR_SOURCE",
    "SOURCES",
    "TASKS_SOURCE",
    "TOOLKIT_SOURCE",
    "TOOL_SOURCE",
    "USER_SOURCE",
    "Source",
    "load_source",
    "string_literal",
]

AGENT_SOURCE = "upstream/src/tau2/agent/llm_agent.py"
TOOLKIT_SOURCE = "upstream/src/tau2/domains/retail/tools.py"
TOOL_SOURCE = "upstream/src/tau2/environment/tool.py"
USER_SOURCE = "upstream/src/tau2/user/user_simulator.py"
TASKS_SOURCE = "upstream/src/tau2/data_model/tasks.py"
JUDGE_SOURCE = "upstream/src/tau2/evaluator/evaluator_nl_assertions.py"
ORCHESTRATOR_SOURCE = "upstream/src/tau2/orchestrator/orchestrator.py"
SOURCES = (
    AGENT_SOURCE,
    TOOLKIT_SOURCE,
    TOOL_SOURCE,
    USER_SOURCE,
    TASKS_SOURCE,
    JUDGE_SOURCE,
    ORCHESTRATOR_SOURCE,
)
"""The manifest names of the pinned sources (``<data dir>/upstream/src/tau2/...``)."""


@dataclass(frozen=True, slots=True)
class Source:
    """The syntax tree of one source file, with lookups that fail by naming the construct."""

    name: str
    tree: ast.Module

    def missing(self, construct: str) -> UpstreamSourceError:
        return UpstreamSourceError(source=self.name, construct=construct)

    def module_assignment(self, target: str) -> ast.expr:
        """The value of the module-level ``target = ...``."""
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == target for t in node.targets
            ):
                return node.value
        raise self.missing(f"the module-level assignment {target}")

    def class_def(self, name: str) -> ast.ClassDef:
        for node in self.tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return node
        raise self.missing(f"class {name}")

    def method(self, class_name: str, method_name: str) -> ast.FunctionDef:
        for node in self.class_def(class_name).body:
            if isinstance(node, ast.FunctionDef) and node.name == method_name:
                return node
        raise self.missing(f"method {class_name}.{method_name}")

    def has_method(self, class_name: str, method_name: str) -> bool:
        return any(
            isinstance(node, ast.FunctionDef) and node.name == method_name
            for node in self.class_def(class_name).body
        )

    def local_assignment(self, function: ast.FunctionDef, target: str, where: str) -> ast.expr:
        """The value of ``target = ...`` directly in ``function``'s body."""
        for node in function.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == target for t in node.targets
            ):
                return node.value
        raise self.missing(f"the assignment {target} in {where}")

    def string_constant(self, node: ast.expr, what: str) -> str:
        """A string literal, or a string literal followed by ``.strip()``."""
        if (text := string_literal(node)) is not None:
            return text
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "strip"
            and not node.args
            and not node.keywords
            and (text := string_literal(node.func.value)) is not None
        ):
            return text.strip()
        raise self.missing(f"{what} as a string literal")


def string_literal(node: ast.AST | None) -> str | None:
    """The text of a string literal node; None for any other node."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def load_source(data_dir: Path, name: str) -> Source:
    """Read ``<data_dir>/<name>`` (sha256-checked against the manifest) and parse it.

    Raises ``DataError``/``DigestMismatch`` (file, expected and actual digest, the fix) when
    the file is missing or altered, ``UpstreamSourceError`` when it is not Python.
    """
    data = read_verified(data_dir, name)
    try:
        tree = ast.parse(data.decode("utf-8"), filename=name)
    except (SyntaxError, UnicodeDecodeError, ValueError) as error:
        raise UpstreamSourceError(source=name, construct=f"parseable Python ({error})") from None
    return Source(name=name, tree=tree)
