"""The seed database: parsed once per process, shared by every store, never mutated.

Besides the tables it keeps, lazily, each record's canonical text and the SHA-256 states at
every record boundary of the whole canonical text. A store that changed a few records hashes
from the state just before its first changed record, so reporting the exact full hash never
re-serializes the 2.8 MB database.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from tau2_retail.tools.canonical import canonical_record_text, record_entry
from tau2_retail.tools.record_shapes import TABLES, Record

__all__ = ["RecordKey", "SeedDatabase"]

RecordKey = tuple[str, str]


class _HashIndex:
    """The whole canonical text cut at record boundaries, with a hash state before each piece."""

    __slots__ = ("full_hash", "offsets", "pieces", "position", "separators", "states", "text")

    def __init__(self, seed: SeedDatabase) -> None:
        self.pieces: list[bytes] = []
        self.separators: list[bytes] = []
        self.position: dict[RecordKey, int] = {}
        self.states: list[Any] = []
        hasher = hashlib.sha256()
        # ``pending``: canonical text not yet emitted (table openings and closings); the first
        # record after it carries it as its separator, so empty tables are kept too.
        pending = b"{"
        for number, table in enumerate(sorted(seed.tables)):
            pending += (b"," if number else b"") + json.dumps(table).encode() + b":{"
            for key in sorted(seed.tables[table]):
                separator = pending or b","
                pending = b""
                self.position[(table, key)] = len(self.pieces)
                self.states.append(hasher.copy())
                entry = record_entry(key, seed.canonical_text(table, key)).encode()
                self.separators.append(separator)
                self.pieces.append(separator + entry)
                hasher.update(self.pieces[-1])
            pending += b"}"
        closing = pending + b"}"
        self.separators.append(b"")
        self.pieces.append(closing)
        self.states.append(hasher.copy())
        hasher.update(closing)
        self.full_hash = hasher.hexdigest()
        # The whole text once more, with each piece's start, so unchanged runs of records are
        # hashed in one call each instead of one call per record.
        self.text = memoryview(b"".join(self.pieces))
        self.offsets: list[int] = []
        offset = 0
        for piece in self.pieces:
            self.offsets.append(offset)
            offset += len(piece)
        self.offsets.append(offset)


class SeedDatabase:
    """The seed tables (``orders``, ``products``, ``users``), each a dict keyed by id."""

    __slots__ = ("_hash_index", "_texts", "tables")

    def __init__(self, tables: Mapping[str, dict[str, Record]]) -> None:
        missing = [name for name in TABLES if not isinstance(tables.get(name), dict)]
        if missing:
            raise ValueError(f"database has no table(s) {', '.join(missing)}")
        self.tables: dict[str, dict[str, Record]] = {name: tables[name] for name in TABLES}
        self._texts: dict[RecordKey, str] = {}
        self._hash_index: _HashIndex | None = None

    @classmethod
    def from_json(cls, raw: bytes | str) -> SeedDatabase:
        """Parse ``db.json``; raises ``ValueError`` describing what is wrong."""
        try:
            tables = json.loads(raw)
        except json.JSONDecodeError as error:
            raise ValueError(f"invalid JSON: {error}") from error
        if not isinstance(tables, dict):
            raise ValueError("top level is not a JSON object")
        return cls(tables)

    def canonical_text(self, table: str, key: str) -> str:
        """Canonical text of a seed record, computed once."""
        text = self._texts.get((table, key))
        if text is None:
            text = canonical_record_text(table, self.tables[table][key])
            self._texts[(table, key)] = text
        return text

    def _index(self) -> _HashIndex:
        if self._hash_index is None:
            self._hash_index = _HashIndex(self)
        return self._hash_index

    @property
    def hash(self) -> str:
        """The canonical hash of the seed database."""
        return self._index().full_hash

    def hash_with(self, replaced: Mapping[RecordKey, str]) -> str:
        """The canonical hash of the seed with some records' canonical texts replaced."""
        index = self._index()
        if not replaced:
            return index.full_hash
        positions = sorted(
            (index.position[key], record_entry(key[1], text)) for key, text in replaced.items()
        )
        hasher = index.states[positions[0][0]].copy()
        offsets = index.offsets
        for number, (position, entry) in enumerate(positions):
            hasher.update(index.separators[position] + entry.encode())
            following = positions[number + 1][0] if number + 1 < len(positions) else None
            end = offsets[following] if following is not None else offsets[-1]
            hasher.update(index.text[offsets[position + 1] : end])
        digest: str = hasher.hexdigest()
        return digest
