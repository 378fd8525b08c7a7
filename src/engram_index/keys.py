"""Bearer keys for the faces that take them (supermemory, kindgi): minted once, stored hashed, revocable live.

A key is `<prefix>_<id>_<secret>`: the id names it in `keys list` and `keys revoke`, the secret
(32 random bytes) makes it unguessable, and only the SHA-256 of the whole key is stored. Each face
gives its keys' `grants` their meaning (the namespaces a supermemory key reaches; the tenant,
user, orgs and projects of a Kindgi token). The keys live in their own SQLite file, apart from the
data directory's lock, so that `engram-index keys` works while the service runs: a revocation
holds from the next request on. A key found once is remembered by each thread until the file
changes (SQLite's data_version moves with every other connection's commit, this thread's own
writes empty it): one PRAGMA instead of an indexed read and its grants' JSON per request. With a
PostgreSQL record store they live in its `keys` table instead, so that every node knows every key,
and every request reads its key there.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from engram_index.errors import InvalidInput
from engram_index.store.base import RecordStore

KEYS_FILE = "keys.sqlite"
MAX_REMEMBERED = 4096  # keys a thread remembers at most (more: it starts over)
PREFIXES = {"supermemory": "sm", "kindgi": "kg"}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS keys (
  id TEXT PRIMARY KEY,
  face TEXT NOT NULL,
  hash BLOB NOT NULL UNIQUE,
  label TEXT,
  grants TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  expires_ms INTEGER,
  revoked_ms INTEGER
)
"""


class KeyState(Enum):
    """What a presented key turned out to be (MISSING and MALFORMED: no key was presented)."""

    VALID = "valid"
    UNKNOWN = "unknown"
    EXPIRED = "expired"
    REVOKED = "revoked"
    MISSING = "missing"  # no Authorization header
    MALFORMED = "malformed"  # an Authorization header that is not `Bearer <token>`


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """One key as stored (never its secret)."""

    id: str
    face: str
    label: str | None
    grants: dict[str, Any]
    created_ms: int
    expires_ms: int | None
    revoked_ms: int | None

    def state(self, now_ms: int) -> KeyState:
        """Whether the key is usable at `now_ms`."""
        if self.revoked_ms is not None:
            return KeyState.REVOKED
        if self.expires_ms is not None and now_ms >= self.expires_ms:
            return KeyState.EXPIRED
        return KeyState.VALID


def _digest(token: str) -> bytes:
    """The stored form of a key."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def _now_ms() -> int:
    """Milliseconds since the epoch."""
    return int(time.time() * 1000)


class KeyStore:
    """The keys of one data directory."""

    def __init__(self, data_dir: Path, store: RecordStore | None = None) -> None:
        """Open (creating when new) the keys file of a data directory, or the keys table of a shared `store`."""
        self.path = data_dir / KEYS_FILE
        self._local = threading.local()
        self._store = store
        if store is None:
            data_dir.mkdir(parents=True, exist_ok=True)
            with self._conn() as conn:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(_SCHEMA)

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Rows of a read, on this thread's connection or the shared store (writes go through `_write`)."""
        if self._store is not None:
            return self._store.query(sql, params)
        return self._conn().execute(sql, params).fetchall()

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        """Change the keys, on this thread's connection or the shared store, forgetting this thread's found keys."""
        if self._store is not None:
            self._store.execute([(sql, params)])
            return
        self._local.seen = {}  # this connection's own commits do not move its data_version
        self._conn().execute(sql, params)

    def _remembered(self) -> dict[bytes, KeyRecord] | None:
        """This thread's keys found since the keys file last changed (None: a shared store, never remembered)."""
        if self._store is not None:
            return None
        version = self._conn().execute("PRAGMA data_version").fetchone()[0]
        seen: dict[bytes, KeyRecord] | None = getattr(self._local, "seen", None)
        if seen is None or getattr(self._local, "version", None) != version or len(seen) >= MAX_REMEMBERED:
            seen = self._local.seen = {}
            self._local.version = version
        return seen

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection (SQLite connections are not shared across threads)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
            conn.execute("PRAGMA synchronous=FULL")
            self._local.conn = conn
        return conn

    def create(
        self, face: str, grants: dict[str, Any], *, label: str | None = None, expires_ms: int | None = None
    ) -> tuple[str, KeyRecord]:
        """Mint a key for a face; returns the key itself (shown once) and its record."""
        prefix = PREFIXES.get(face)
        if prefix is None:
            raise InvalidInput(f"unknown face {face!r}: one of {', '.join(sorted(PREFIXES))}")
        key_id = secrets.token_hex(6)
        token = f"{prefix}_{key_id}_{secrets.token_urlsafe(32)}"
        record = KeyRecord(key_id, face, label, grants, _now_ms(), expires_ms, None)
        self._write(
            "INSERT INTO keys(id, face, hash, label, grants, created_ms, expires_ms) VALUES (?,?,?,?,?,?,?)",
            (key_id, face, _digest(token), label, json.dumps(grants, sort_keys=True), record.created_ms, expires_ms),
        )
        return token, record

    def lookup(self, face: str, token: str) -> tuple[KeyState, KeyRecord | None]:
        """What a presented key is for this face: UNKNOWN (also a key of another face), or its record and state.

        The record may be shared with other requests presenting the same key: read it, never change it.
        """
        digest = _digest(token)
        seen = self._remembered()
        record = seen.get(digest) if seen is not None else None
        if record is None:
            rows = self._rows(
                "SELECT id, face, label, grants, created_ms, expires_ms, revoked_ms, hash FROM keys WHERE hash=?",
                (digest,),
            )
            row = rows[0] if rows else None
            # The hash matched by index; compare once more in constant time for the belt and braces.
            if row is None or not hmac.compare_digest(row[7], digest):
                return KeyState.UNKNOWN, None
            record = _record(row)
            if seen is not None:
                seen[digest] = record
        if record.face != face:
            return KeyState.UNKNOWN, None
        return record.state(_now_ms()), record

    def list(self, face: str | None = None) -> list[KeyRecord]:
        """Every key (of one face when given), oldest first."""
        sql = "SELECT id, face, label, grants, created_ms, expires_ms, revoked_ms FROM keys"
        params: tuple[Any, ...] = ()
        if face is not None:
            sql += " WHERE face=?"
            params = (face,)
        return [_record(r) for r in self._rows(sql + " ORDER BY created_ms, id", params)]

    def revoke(self, key_id: str) -> KeyRecord:
        """Revoke a key by its id (revoking twice keeps the first time); its next request is refused."""
        self._write("UPDATE keys SET revoked_ms=? WHERE id=? AND revoked_ms IS NULL", (_now_ms(), key_id))
        rows = self._rows(
            "SELECT id, face, label, grants, created_ms, expires_ms, revoked_ms FROM keys WHERE id=?", (key_id,))
        if not rows:
            raise InvalidInput(f"no key with id {key_id!r}")
        return _record(rows[0])

    def close(self) -> None:
        """Close this thread's connection (a shared store is closed by its owner)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def _record(row: tuple[Any, ...]) -> KeyRecord:
    """A keys row as a record."""
    key_id, face, label, grants, created, expires, revoked = row[:7]
    return KeyRecord(key_id, face, label, json.loads(grants), created, expires, revoked)


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (None when there is none or it is not that)."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def bearer(authorization: str | None, keys: KeyStore, face: str) -> tuple[KeyState, KeyRecord | None]:
    """The bearer key an Authorization header presents for `face`, and what it turned out to be.

    The one parse of `Authorization: Bearer <token>` for every face that takes keys; each face
    answers each state in its own envelope.
    """
    if authorization is None:
        return KeyState.MISSING, None
    token = bearer_token(authorization)
    if token is None:
        return KeyState.MALFORMED, None
    return keys.lookup(face, token)
