"""The canonical form and hash of a database (spec: retail_domain.md, section 5).

Canonical form: whole-number finite floats become integers, the strings ``none``/``null``
(any case, stripped) become ``null``, orders carry all optional fields (``null`` when unset,
as upstream's model dump does), keys are sorted and separators are ``(",", ":")``. The hash is
the SHA-256 hex digest of that text. A record's canonical text is also its identity for
equality, so two databases are equal exactly when their records' canonical texts are.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tau2_retail.tools.record_shapes import Record, order_view

__all__ = ["canonical_record_text", "canonical_value", "record_entry"]

_NULL_WORDS = frozenset({"none", "null"})


def canonical_value(value: Any) -> Any:
    """Normalize a JSON tree for hashing and comparison."""
    if isinstance(value, dict):
        return {key: canonical_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [canonical_value(item) for item in value]
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return int(value)
        return value
    if isinstance(value, str) and value.strip().lower() in _NULL_WORDS:
        return None
    return value


def canonical_record_text(table: str, record: Record) -> str:
    """The canonical JSON text of one record of ``table``."""
    shown = order_view(record) if table == "orders" else record
    return json.dumps(canonical_value(shown), sort_keys=True, separators=(",", ":"))


def record_entry(key: str, text: str) -> str:
    """The ``"key":value`` member a record contributes to the whole database's canonical text."""
    return json.dumps(key) + ":" + text
