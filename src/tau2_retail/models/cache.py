"""The response cache: every completion of an endpoint model kept in one SQLite file.

``ResponseCache`` is the file (standard-library ``sqlite3``, WAL mode: several xdist workers
and several runs read and write it at once); ``CachedChatModel``
(``tau2_retail.models.cached_model``) is one scenario's view of an ``OpenAIChatModel`` through
it, and ``tau2_retail.models.cache_entry`` the reply an entry holds. A reply is found again by
the digest of

- ``CACHE_FORMAT`` (a cache written by another version of the request format misses rather
  than returns a wrong reply),
- the role, the model id and the endpoint's host (scheme, host, port and path of the base URL
  the requests go to, ``OPENAI_BASE_URL`` for a role without one: never its credentials)
  with, when the role sends headers of its own, a digest of them (a gateway's routing header
  may pick another model; the digest tells nothing of the values),
- the exact request body the client sends (messages, tools, sampling parameters, seed, extra
  body) -- the API key is not part of the body and never enters the cache,
- the trial (trials stay independent even without a seed) and the occurrence of the same
  request within the scenario (a request asked again after an empty or unreadable reply gets
  the reply it got the first time round, not the first reply again).

Only the digest, the role, the model, the host and the reply are stored: no prompt text. The
reply is stored with the roles' API keys masked (``tau2_retail.models.masking``), like any file
a run writes.

Modes: ``read-write`` (a hit is served, a miss goes to the endpoint and is stored), ``replay``
(never contacts an endpoint: a miss is a ``CacheMiss``, an infra error naming the request
digest; the file is opened read-only, from a read-only folder or mount too) and ``off``. A hit
costs nothing: its usage counts it in ``cache_hits`` with its tokens. A stored reply passes
the bounds of a live one (size, token counts; see ``ResponseCache.lookup``) and is masked where
it is written or shown, as a live one is.

Faults never cost a scenario: a cache file that is locked for longer than the busy timeout,
corrupted, or full (``sqlite3.Error`` of any kind) turns the cache off for the rest of the
process, and ``warn`` is called once with one line saying so.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from tau2_retail.errors import ArtifactError
from tau2_retail.models.bounded import DEFAULT_MAX_REPLY_BYTES
from tau2_retail.models.cache_entry import reply_json, turn_from_reply
from tau2_retail.models.masking import Masker
from tau2_retail.models.messages import AssistantTurn

__all__ = [
    "CACHE_FORMAT",
    "CacheMode",
    "CacheStats",
    "ResponseCache",
    "cache_stats",
    "prune_cache",
    "request_digest",
]

CACHE_FORMAT: Final = 1
"""Version of the request format and of the stored reply; part of every key."""

DEFAULT_BUSY_SECONDS: Final = 5.0
"""How long a write waits for another writer's lock before the cache counts as locked."""

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS responses (
    digest TEXT PRIMARY KEY,
    format INTEGER NOT NULL,
    role TEXT NOT NULL,
    model TEXT NOT NULL,
    host TEXT NOT NULL,
    reply TEXT NOT NULL,
    created REAL NOT NULL,
    last_used REAL NOT NULL,
    hits INTEGER NOT NULL DEFAULT 0
)
"""


# the cheapest statement that fails when the file or its table cannot be read
_PROBE: Final = "SELECT count(*) FROM responses WHERE 0"
# an entry over the size limit is not handed to Python at all (NULL), only its size
_SELECT_REPLY: Final = (
    "SELECT CASE WHEN length(CAST(reply AS BLOB)) <= ? THEN reply END, "
    "length(CAST(reply AS BLOB)) FROM responses WHERE digest = ? AND format = ?"
)


class CacheMode(StrEnum):
    READ_WRITE = "read-write"
    REPLAY = "replay"
    OFF = "off"


def endpoint_host(base_url: str | None, headers: Mapping[str, str] | None = None) -> str:
    """Where requests go, without credentials: ``scheme://host:port/path`` (``default`` for
    the ``openai`` package's own URL), then `` headers:DIGEST`` when the endpoint is sent
    ``headers`` of a team's own (names in any case, values as given)."""
    if not base_url:
        where = "default"
    else:
        parts = urlsplit(base_url)
        port = f":{parts.port}" if parts.port else ""
        where = f"{parts.scheme}://{parts.hostname or ''}{port}{parts.path.rstrip('/')}"
    if not headers:
        return where
    pairs = sorted((name.lower(), value) for name, value in headers.items())
    digest = hashlib.sha256(json.dumps(pairs).encode()).hexdigest()[:16]
    return f"{where} headers:{digest}"


def request_digest(
    *,
    role: str,
    model: str,
    host: str,
    body: Mapping[str, Any],
    trial: int,
    occurrence: int = 0,
) -> str:
    """The key of one request (see the module docstring), a sha256 hex digest."""
    key = {
        "format": CACHE_FORMAT,
        "role": role,
        "model": model,
        "host": host,
        "trial": trial,
        "occurrence": occurrence,
        "body": body,
    }
    text = json.dumps(key, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _connect(path: Path, *, read_only: bool, busy_seconds: float) -> sqlite3.Connection:
    """A connection to the cache file (tests wrap this to inject faults)."""
    if read_only:
        connection = _open_read_only(path, busy_seconds=busy_seconds)
    else:
        connection = sqlite3.connect(path, timeout=busy_seconds)
    # autocommit: each statement is its own short transaction (no lock held between them)
    connection.isolation_level = None
    return connection


def _open_read_only(path: Path, *, busy_seconds: float) -> sqlite3.Connection:
    """The file opened for reading only; from a read-only folder or mount, as immutable.

    A cache in WAL mode is read through a shared-memory file beside it, which a read-only
    folder cannot hold ("unable to open database file", "attempt to write a readonly
    database"); a file that nobody writes can be read without it (``immutable=1``: no locks,
    no shared memory). Replies still in a ``-wal`` file beside it are then not seen: the last
    connection of the run that wrote the cache folds them into the file when it ends.
    """
    uri = path.absolute().as_uri()
    connection = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=busy_seconds)
    try:
        connection.execute(_PROBE).fetchall()
    except sqlite3.Error:
        connection.close()
        return sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, timeout=busy_seconds)
    return connection


class ResponseCache:
    """One process's connection to a cache file; see the module docstring.

    ``warn`` receives the one line said when the cache turns itself off. The connection is
    opened on first use (nothing happens at construction).
    """

    def __init__(
        self,
        path: Path,
        *,
        mode: CacheMode = CacheMode.READ_WRITE,
        warn: Callable[[str], None] = lambda line: None,
        busy_seconds: float = DEFAULT_BUSY_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path
        self.mode = mode
        self._warn = warn
        self._busy_seconds = busy_seconds
        self._clock = clock
        self._connection: sqlite3.Connection | None = None
        #: why the cache turned itself off (None while it works)
        self.disabled: str | None = None
        self.hits = 0
        self.misses = 0
        self.stored = 0
        #: why the last lookup refused the entry it found (None: it refused nothing)
        self.refused: str | None = None

    @property
    def active(self) -> bool:
        return self.mode is not CacheMode.OFF and self.disabled is None

    def _db(self) -> sqlite3.Connection:
        if self._connection is None:
            read_only = self.mode is CacheMode.REPLAY
            if not read_only:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = _connect(self.path, read_only=read_only, busy_seconds=self._busy_seconds)
            try:
                if not read_only:
                    connection.execute("PRAGMA journal_mode=WAL")
                    # WAL with NORMAL never corrupts the file; a power cut may only lose the
                    # last replies stored (asked again next time). FULL syncs on every
                    # store: 6.5 ms per completion on the event loop (median), 0.06 ms with NORMAL.
                    connection.execute("PRAGMA synchronous=NORMAL")
                    connection.execute(_SCHEMA)
                connection.execute(_PROBE).fetchall()
            except BaseException:
                connection.close()
                raise
            self._connection = connection
        return self._connection

    def _fail(self, error: sqlite3.Error | OSError) -> None:
        self.disabled = f"{type(error).__name__}: {error}"
        if self._connection is not None:
            with contextlib.suppress(sqlite3.Error):
                self._connection.close()
            self._connection = None
        self._warn(
            f"tau2: response cache {self.path} unusable ({self.disabled}); continuing without "
            "the cache (every request goes to its endpoint)"
        )

    def lookup(
        self, digest: str, *, max_bytes: int = DEFAULT_MAX_REPLY_BYTES
    ) -> AssistantTurn | None:
        """The stored reply of ``digest``, or None (a miss, or the cache is off).

        An entry is held to the bounds of a live reply: one over ``max_bytes`` (the role's
        ``max_reply_bytes``) is not even read, one with a negative token count or a tool call
        without a name is refused; either is a miss (asked again, and overwritten, in
        read-write mode) and ``refused`` says why until the next lookup.
        """
        self.refused = None
        if not self.active:
            return None
        try:
            db = self._db()
            row = db.execute(_SELECT_REPLY, (max_bytes, digest, CACHE_FORMAT)).fetchone()
            if row is not None and self.mode is CacheMode.READ_WRITE:
                db.execute(
                    "UPDATE responses SET hits = hits + 1, last_used = ? WHERE digest = ?",
                    (self._clock(), digest),
                )
        except (sqlite3.Error, OSError) as error:
            self._fail(error)
            return None
        if row is None:
            self.misses += 1
            return None
        text, size = row
        if text is None:
            self.misses += 1
            self.refused = f"its entry of {size:,} bytes is over the {max_bytes:,}-byte limit"
            return None
        try:
            turn = turn_from_reply(text)
        except ArtifactError as error:
            self.misses += 1  # a damaged row: asked again (and overwritten) like a miss
            self.refused = f"its entry is refused ({error})"
            return None
        self.hits += 1
        return turn

    def store(
        self,
        digest: str,
        *,
        role: str,
        model: str,
        host: str,
        turn: AssistantTurn,
        masker: Masker | None = None,
    ) -> None:
        """Keep ``turn`` under ``digest`` (read-write mode only), its keys masked by
        ``masker`` (the file is written, like an artifact)."""
        if not self.active or self.mode is not CacheMode.READ_WRITE:
            return
        reply = reply_json(turn)
        if masker is not None:
            reply = masker.text(reply)
        now = self._clock()
        try:
            self._db().execute(
                "INSERT OR REPLACE INTO responses "
                "(digest, format, role, model, host, reply, created, last_used, hits) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)",
                (digest, CACHE_FORMAT, role, model, host, reply, now, now),
            )
        except (sqlite3.Error, OSError) as error:
            self._fail(error)
            return
        self.stored += 1

    def close(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(sqlite3.Error):
                self._connection.close()
            self._connection = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheStats:
    """What ``python -m tau2_retail cache stats`` prints."""

    path: str
    size_bytes: int
    entries: int
    hits: int
    other_format: int
    by_role: Mapping[str, int]
    by_model: Mapping[str, int]
    format: int = field(init=False, default=CACHE_FORMAT)


def _size(path: Path) -> int:
    """The database and its write-ahead log (the ``-shm`` index holds no data)."""
    return sum(
        file.stat().st_size for file in (path, path.with_name(path.name + "-wal")) if file.exists()
    )


def cache_stats(path: Path) -> CacheStats:
    """Size, entries and hits of a cache file; raises ``sqlite3.Error`` for a damaged one."""
    connection = _connect(path, read_only=True, busy_seconds=DEFAULT_BUSY_SECONDS)
    try:
        entries, hits = connection.execute(
            "SELECT count(*), coalesce(sum(hits), 0) FROM responses"
        ).fetchone()
        other = connection.execute(
            "SELECT count(*) FROM responses WHERE format != ?", (CACHE_FORMAT,)
        ).fetchone()[0]
        by_role = dict(
            connection.execute("SELECT role, count(*) FROM responses GROUP BY role ORDER BY role")
        )
        by_model = dict(
            connection.execute(
                "SELECT model, count(*) FROM responses GROUP BY model ORDER BY model"
            )
        )
    finally:
        connection.close()
    return CacheStats(
        path=str(path),
        size_bytes=_size(path),
        entries=int(entries),
        hits=int(hits),
        other_format=int(other),
        by_role=by_role,
        by_model=by_model,
    )


def prune_cache(
    path: Path, *, older_than_days: float | None = None, clock: Callable[[], float] = time.time
) -> tuple[int, int, int]:
    """Remove the entries of other formats, and with ``older_than_days`` those not used for
    that long; compact the file. Returns (removed entries, size before, size after)."""
    before = _size(path)
    connection = _connect(path, read_only=False, busy_seconds=DEFAULT_BUSY_SECONDS)
    try:
        removed = connection.execute(
            "DELETE FROM responses WHERE format != ?", (CACHE_FORMAT,)
        ).rowcount
        if older_than_days is not None:
            cutoff = clock() - older_than_days * 86400
            removed += connection.execute(
                "DELETE FROM responses WHERE last_used < ?", (cutoff,)
            ).rowcount
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.execute("VACUUM")
    finally:
        connection.close()
    return removed, before, _size(path)
