"""Finding an agent by import string (``package.module:factory``), checked at start-up.

The named object must be a factory of agents: a class callable with no arguments (inspected,
not called), or a function returning a fresh agent (called twice, to check what it returns and
that each call makes a new one). Whatever the user's code raises at start-up (importing the
module, reading the name, calling the factory), ``SystemExit`` included, is a ``ConfigError``
naming what failed; when the agent's own package cannot be found, it says how to make it
importable.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tau2_retail.errors import ConfigError
from tau2_retail.models.agent import AgentFactory, AgentIdentity, agent_style

__all__ = ["CLI_IMPORTS", "PYTEST_IMPORTS", "ImportRoute", "load_agent_factory", "parse_agent_spec"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportRoute:
    """How a user puts a folder on ``sys.path`` for the command that loads the agent: named in
    the fix an import error gets, which must work for that command."""

    #: where a folder is added (the setting or variable)
    path_setting: str
    #: the command that puts its current folder on ``sys.path``
    command: str


PYTEST_IMPORTS: Final = ImportRoute(
    path_setting="pytest's pythonpath setting", command="python -m pytest"
)
# python -m tau2_retail reads no pytest configuration: its pythonpath setting does nothing there
CLI_IMPORTS: Final = ImportRoute(path_setting="PYTHONPATH", command="python -m tau2_retail")


def parse_agent_spec(spec: str) -> tuple[str, str]:
    """``(module, attribute)`` of ``package.module:factory``; raises ``ConfigError``."""
    module, colon, attribute = spec.strip().partition(":")
    if (
        not colon
        or not module
        or not attribute
        or not all(part.isidentifier() for part in (*module.split("."), *attribute.split(".")))
    ):
        raise ConfigError(
            f"{spec!r} is not an import string; expected package.module:factory, e.g. "
            "my_agents.support:make_agent"
        )
    return module, attribute


def load_agent_factory(
    spec: str, *, imports: ImportRoute = PYTEST_IMPORTS
) -> tuple[AgentFactory, AgentIdentity]:
    """The factory named by ``spec`` and the identity of the agent it makes.

    The named object must be callable: a class, or a function returning a fresh agent. A
    function is called twice here to check what it returns, and that it is a fresh object
    each time (a class is inspected instead: it must be callable with no arguments).
    Raises ``ConfigError`` naming what is wrong (module not importable, with the import error,
    and how to make it importable when the agent's own package is missing, naming where it is
    when the current folder or its ``src/`` holds it, in the terms of ``imports``;
    attribute missing; not callable; a class needing arguments; an object with neither
    ``respond`` nor ``converse``; one object returned by every call).
    """
    module_name, attribute = parse_agent_spec(spec)
    module = _users_code(
        spec,
        f"cannot import {module_name!r}:",
        importlib.import_module,
        module_name,
        hint=lambda error: _importable_hint(module_name, error, Path.cwd(), imports),
    )
    target: Any = module
    for part in attribute.split("."):
        found = _users_code(spec, f"reading {attribute!r}:", getattr, target, part, _MISSING)
        if found is _MISSING:
            raise ConfigError(f"{spec}: module {module_name!r} has no attribute {attribute!r}")
        target = found
    style = _users_code(spec, f"inspecting {attribute!r}:", agent_style, target)
    if style is not None and not inspect.isclass(target):
        raise ConfigError(
            f"{spec}: names an agent object, not a factory; name a class or a function that "
            "returns a fresh agent (one per scenario and trial)"
        )
    if not callable(target):
        raise ConfigError(f"{spec}: {type(target).__name__} object is not callable")
    if inspect.isclass(target):
        _check_no_arguments_needed(spec, target)
    factory: AgentFactory = target
    probe: object = (
        target if inspect.isclass(target) else _users_code(spec, "the factory raised", target)
    )
    if _users_code(spec, "inspecting the agent:", agent_style, probe) is None:
        raise ConfigError(
            f"{spec}: {_kind(probe)} has neither respond(messages, tools) nor "
            "converse(messages, toolbox); see the agent contract in docs/agents.md"
        )
    if not inspect.isclass(target) and _users_code(spec, "the factory raised", target) is probe:
        raise ConfigError(
            f"{spec}: the factory returned the same {type(probe).__name__} object twice: "
            "every scenario would share it; return a fresh agent from each call (e.g. name "
            "the agent's class)"
        )
    return factory, AgentIdentity.of(spec, probe)


_MISSING: Final = object()


def _check_no_arguments_needed(spec: str, cls: type) -> None:
    """A class is not called at start-up (only inspected), but every scenario calls it with no
    arguments: one whose ``__init__`` needs some is refused here rather than failing each
    scenario as ``agent_error``, as a function factory needing them is when called."""
    try:
        signature = inspect.signature(cls)
    except (ValueError, TypeError):  # no signature to read (a builtin's): the call will tell
        return
    try:
        signature.bind()
    except TypeError:
        required = [
            name
            for name, parameter in signature.parameters.items()
            if parameter.default is inspect.Parameter.empty
            and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
        ]
        raise ConfigError(
            f"{spec}: class {cls.__name__} needs arguments ({', '.join(required)}), but each "
            "scenario's agent is made with none; give them defaults, or name a function that "
            f"makes the agent (e.g. def make_agent(): return {cls.__name__}(...))"
        ) from None


def _users_code(
    spec: str,
    what: str,
    call: Callable[..., Any],
    *args: Any,
    hint: Callable[[BaseException], str] | None = None,
) -> Any:
    """``call(*args)``, the user's code at start-up (importing the module, reading the name,
    calling the factory): what it raises, ``SystemExit`` included (a script's guard run at
    import), is a ``ConfigError`` saying ``what`` (and ``hint(error)``; Ctrl-C still stops)."""
    try:
        return call(*args)
    except (Exception, SystemExit) as error:
        fix = hint(error) if hint is not None else ""
        raise ConfigError(f"{spec}: {what} {type(error).__name__}: {error}{fix}") from error


def _importable_hint(
    module_name: str, error: BaseException, where: Path, imports: ImportRoute
) -> str:
    """When ``error`` says the agent's own top-level package is missing, how to make it
    importable (docs/agents.md), naming where it is when ``where`` holds it: a src layout's
    ``src/``, or a flat layout's folder. Empty for any other error (a dependency the agent
    imports is missing: its own error says which)."""
    package = module_name.partition(".")[0]
    if not isinstance(error, ModuleNotFoundError) or error.name != package:
        return ""
    in_src = _package_in(where / "src", package)
    if in_src is not None:
        return (
            f"; it is in src/{in_src}, but src is not on sys.path: install your project "
            f"(pip install -e .) or add src to {imports.path_setting}"
        )
    if _package_in(where, package) is not None:
        return (
            f"; it is in {where}, which is not on sys.path: run {imports.command} from there, "
            f"install your project (pip install -e .) or add . to {imports.path_setting}"
        )
    return (
        "; install the agent's package into this Python (pip install -e .), add the folder "
        f"holding it to {imports.path_setting}, or run {imports.command} from that folder"
    )


def _package_in(folder: Path, package: str) -> str | None:
    """The name of ``package``'s folder or module file in ``folder``, if it has one."""
    for path in (folder / package, folder / f"{package}.py"):
        if path.exists():
            return path.name
    return None


def _kind(value: object) -> str:
    if inspect.isclass(value):
        return f"class {value.__name__}"
    return f"the factory's {type(value).__name__} object"
