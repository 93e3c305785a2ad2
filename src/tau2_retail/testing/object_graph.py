"""Everything an object lets its holder reach: for the tests that check what an agent given as
code can reach from what it is handed (docs/agents.md, "What the agent sees").

``reachable(roots)`` follows every reference the interpreter knows (``gc.get_referents``):
instance dictionaries and slots, containers, closures and their cells, bound methods'
``__self__``, default arguments, classes and their attributes, frames, tracebacks and
exceptions' causes. Not followed: modules and module namespaces (a function's ``__globals__``),
since any code reaches those by ``import`` anyway; the interpreter's registries that are not
references from an object (``gc.get_objects()``, ``sys._getframe()``, the running event loop)
are out of scope for the same reason: code run in the process is trusted (docs/agents.md).
"""

from __future__ import annotations

import gc
import sys
import types
from collections.abc import Iterable, Iterator
from typing import Final

__all__ = ["reachable", "type_name"]

_LIMIT: Final = 5_000_000


def type_name(value: object) -> str:
    """``module.QualifiedName`` of ``value``'s class."""
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


def reachable(roots: Iterable[object], *, limit: int = _LIMIT) -> Iterator[object]:
    """Each object reachable from ``roots`` (the roots included), once; see the module doc.

    Raises ``RuntimeError`` past ``limit`` objects (a walk that escaped into the whole
    interpreter would say nothing)."""
    # (sys.modules may hold None or a stand-in: getattr)
    namespaces = {id(getattr(module, "__dict__", None)) for module in list(sys.modules.values())}
    namespaces.add(id(vars(sys.modules["builtins"])))
    seen: set[int] = set()
    pending = list(roots)
    while pending:
        value = pending.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, types.ModuleType) or (
            isinstance(value, dict) and id(value) in namespaces
        ):
            continue
        if len(seen) > limit:
            raise RuntimeError(f"more than {limit} objects reachable: the walk escaped")
        yield value
        pending.extend(gc.get_referents(value))
