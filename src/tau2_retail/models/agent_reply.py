"""What an agent given as code returns, made plain in its own thread.

A reply (a ``str``, a dict, an ``openai`` message or completion, anything with
``model_dump()``) is turned into plain JSON-like builtins where the agent's code runs (its
:class:`~tau2_retail.models.agent_thread.AgentThread`): the harness then reads values that
hold nothing of the agent's classes, so no code of the agent (a ``model_dump()``, a ``Mapping``
of its own, a ``str`` subclass) ever runs on the harness's loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["Unreadable", "a_type", "plain_reply"]


def a_type(value: object) -> str:
    """``value``'s type with its article: ``an int``, ``a dict``."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


class Unreadable(Exception):
    """What the agent returned could not be turned into plain values (its ``model_dump()``
    raised, or it is not a kind of value a reply holds): raised in the agent's thread."""


def _plain(value: object) -> Any:
    """``value`` as plain JSON-like builtins (in the agent's thread): a reply the harness reads
    holds nothing of the agent's classes, so no code of the agent runs on the harness's loop."""
    kind = type(value)
    if value is None or kind in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):  # a subclass (bool has none): its plain value
        return int.__index__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {
            key: _plain(item) for raw, item in value.items() if isinstance(key := _plain(raw), str)
        }
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    raise Unreadable(f"holds {a_type(value)}")


def plain_reply(reply: object) -> Any:
    """A reply (``str``, dict, or an object with ``model_dump()``) as plain values."""
    dump = getattr(reply, "model_dump", None)
    if callable(dump) and not isinstance(reply, (Mapping, str)):
        try:
            reply = dump()
        except KeyboardInterrupt:
            raise
        except BaseException as error:  # the agent's object: its failure, with its traceback
            raise Unreadable(
                f"returned {a_type(reply)} whose model_dump() raised "
                f"{type(error).__name__}: {error}"
            ) from error
    try:
        return _plain(reply)
    except RecursionError:  # a dict holding itself (or nested beyond any reply's depth)
        why = "it holds itself, or is nested too deeply"
    except Unreadable as error:
        why = str(error)
    raise Unreadable(
        f"returned {a_type(reply)} that is not an assistant turn ({why}); "
        "expected a str, an assistant message dict or a chat completion"
    )
