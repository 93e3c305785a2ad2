"""Lookup normalization of identifiers spelled by people or speech recognition (spec §3).

Only lookups normalize: keys and values written to the database keep their stored form.
"""

from __future__ import annotations

__all__ = ["normalize_order_id", "normalize_user_id", "same_text"]


def normalize_order_id(order_id: str) -> str:
    """``w2378156``, `` #w2378156 `` and ``#W2378156`` all become ``#W2378156``."""
    normalized = order_id.strip().upper()
    if not normalized.startswith("#"):
        normalized = "#" + normalized
    return normalized


def normalize_user_id(user_id: str) -> str:
    """User ids are stored lowercase: strip white space and lowercase."""
    return user_id.strip().lower()


def same_text(stored: str, given: str) -> bool:
    """Upstream's case-insensitive comparison of names and emails."""
    return stored.lower() == given.lower()
