"""A scenario's database: a copy-on-write overlay over the shared seed.

Reading returns the seed's record until the record is first written; ``writable`` copies it
into the overlay then. Creating a store costs nothing, comparing two stores looks only at the
records either touched, and the seed is never mutated. Tools never add or remove records, so
every store has the seed's keys, in the seed's order.
"""

from __future__ import annotations

from collections.abc import Iterator

from tau2_retail.tools.canonical import canonical_record_text
from tau2_retail.tools.database import RecordKey, SeedDatabase
from tau2_retail.tools.record_shapes import TABLES, Record, deep_copy

__all__ = ["Store"]


class Store:
    """One scenario's private, mutable view of the database."""

    __slots__ = ("_overlay", "seed")

    def __init__(self, seed: SeedDatabase) -> None:
        self.seed = seed
        self._overlay: dict[RecordKey, Record] = {}

    def get(self, table: str, key: str) -> Record | None:
        """The current record, or ``None``. Callers must not mutate it (use ``writable``)."""
        record = self._overlay.get((table, key))
        if record is not None:
            return record
        return self.seed.tables[table].get(key)

    def writable(self, table: str, key: str) -> Record:
        """The record, copied into this store on first write; ``KeyError`` when absent."""
        record = self._overlay.get((table, key))
        if record is None:
            record = deep_copy(self.seed.tables[table][key])
            self._overlay[(table, key)] = record
        return record

    def items(self, table: str) -> Iterator[tuple[str, Record]]:
        """Every ``(key, record)`` of ``table`` in seed (file) order."""
        overlay = self._overlay
        for key, record in self.seed.tables[table].items():
            yield key, overlay.get((table, key), record)

    def keys(self, table: str) -> Iterator[str]:
        return iter(self.seed.tables[table])

    def copy(self) -> Store:
        """An independent store in the same state."""
        clone = Store(self.seed)
        clone._overlay = {key: deep_copy(record) for key, record in self._overlay.items()}
        return clone

    def _changed_texts(self) -> dict[RecordKey, str]:
        changed: dict[RecordKey, str] = {}
        for (table, key), record in self._overlay.items():
            text = canonical_record_text(table, record)
            if text != self.seed.canonical_text(table, key):
                changed[(table, key)] = text
        return changed

    def changed_keys(self) -> list[RecordKey]:
        """Records whose canonical form differs from the seed, in table then key order."""
        return sorted(self._changed_texts())

    def diff_from_seed(self) -> dict[str, dict[str, Record]]:
        """``{table: {key: current record}}`` for every record that differs from the seed."""
        diff: dict[str, dict[str, Record]] = {}
        for table, key in self.changed_keys():
            diff.setdefault(table, {})[key] = deep_copy(self._overlay[(table, key)])
        return diff

    def differing_keys(self, other: Store) -> list[RecordKey]:
        """Records whose canonical forms differ between the two stores (same seed required)."""
        if other.seed is not self.seed:
            raise ValueError("stores over different seed databases cannot be compared")
        differing = []
        for table, key in sorted(self._overlay.keys() | other._overlay.keys()):
            mine = self._canonical(table, key)
            theirs = other._canonical(table, key)
            if mine != theirs:
                differing.append((table, key))
        return differing

    def matches(self, other: Store) -> bool:
        """Canonical equality of the whole databases."""
        return not self.differing_keys(other)

    def _canonical(self, table: str, key: str) -> str:
        record = self._overlay.get((table, key))
        if record is None:
            return self.seed.canonical_text(table, key)
        return canonical_record_text(table, record)

    def hash(self) -> str:
        """The canonical hash of the whole database (spec section 5)."""
        return self.seed.hash_with(self._changed_texts())

    def tables(self) -> tuple[str, ...]:
        return TABLES
