"""Record shapes: upstream field order, and the view of a record the model is shown.

Stored records are plain JSON values (dicts, lists, str, float, bool) in upstream field order.
An order in ``db.json`` omits its seven optional fields; upstream always shows them, as
``null`` until set, so ``order_view`` fills them for tool output and the canonical hash.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = [
    "ORDER_OPTIONAL_FIELDS",
    "TABLES",
    "Record",
    "address_record",
    "deep_copy",
    "dump_for_model",
    "freeze",
    "order_view",
    "thaw",
]

Record = dict[str, Any]

TABLES: tuple[str, ...] = ("orders", "products", "users")

ORDER_BASE_FIELDS: tuple[str, ...] = (
    "order_id",
    "user_id",
    "address",
    "items",
    "status",
    "fulfillments",
    "payment_history",
)
ORDER_OPTIONAL_FIELDS: tuple[str, ...] = (
    "cancel_reason",
    "exchange_items",
    "exchange_new_items",
    "exchange_payment_method_id",
    "exchange_price_difference",
    "return_items",
    "return_payment_method_id",
)


def order_view(order: Record) -> Record:
    """The order as upstream serializes it: base fields, then every optional field."""
    view = {name: order[name] for name in ORDER_BASE_FIELDS}
    for name in ORDER_OPTIONAL_FIELDS:
        view[name] = order.get(name)
    return view


def address_record(
    *, address1: str, address2: str, city: str, country: str, state: str, zip: str
) -> Record:
    """An address in upstream field order (whatever order the arguments came in)."""
    return {
        "address1": address1,
        "address2": address2,
        "city": city,
        "country": country,
        "state": state,
        "zip": zip,
    }


def dump_for_model(value: Any) -> str:
    """Tool output text: Python ``json.dumps`` defaults (``", "``/``": "``, ASCII-escaped)."""
    return json.dumps(value)


def freeze(value: Any) -> Any:
    """A read-only deep copy of a JSON value: objects become mapping proxies, arrays tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({key: freeze(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(item) for item in value)
    return value


def thaw(value: Any) -> Any:
    """The inverse of :func:`freeze`: plain, mutable dicts and lists again."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [thaw(item) for item in value]
    return value


def deep_copy(value: Any) -> Any:
    """Copy a JSON tree (dicts, lists, scalars); several times faster than ``copy.deepcopy``."""
    if isinstance(value, dict):
        return {key: deep_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [deep_copy(item) for item in value]
    return value
