"""What credential checks must remember: revoked credentials and the nonces already used.

Kept in a small SQLite file of its own in the data directory, so that it survives restarts
and is shared by every `serve --workers` process (each may write; SQLite serialises them), and
so that a replayed nonce is caught whichever process the replay reaches. Rows expire with the
credential they belong to.

A credential found not revoked is remembered, so that a member's next requests skip the SQLite
read (in a served search, with the caches cold after the engine's work, a read transaction costs
~0.1 ms of CPU). Every revocation, from any process, writes a fresh random value into a
small file every process maps (`<file>-revocations`), and a remembered answer holds only while
that value is the one read before the answer's SELECT, and for at most REMEMBER_S seconds.
"""

from __future__ import annotations

import mmap
import os
import sqlite3
import threading
import time
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS revoked (issuer TEXT NOT NULL, jti TEXT NOT NULL, until REAL NOT NULL,
                                    PRIMARY KEY (issuer, jti)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS nonces (owner TEXT NOT NULL, nonce TEXT NOT NULL, until REAL NOT NULL,
                                   PRIMARY KEY (owner, nonce)) WITHOUT ROWID;
"""
_PRUNE_EVERY = 1000
REMEMBER_S = 1.0  # the longest a credential found not revoked is believed without reading again
MAX_REMEMBERED = 4096  # credentials remembered at most (more: start over)
_GENERATION_BYTES = 8
_clock = time.monotonic  # when an answer was read (replaced by tests)


class AuthState:
    """Revoked credential ids and used nonces, each kept until the credential would have expired."""

    def __init__(self, path: Path | None = None) -> None:
        self._db = sqlite3.connect(str(path) if path else ":memory:", check_same_thread=False,
                                   isolation_level=None, timeout=10)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            # A process crash loses nothing (WAL); only a power loss could forget a nonce, and a
            # nonce is an extra guard on top of a short-lived credential.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        self._writes = 0
        self._generation = _generation(path)
        self._clear: dict[tuple[str, str], tuple[bytes, float]] = {}  # found not revoked: (generation, when)

    def revoke(self, issuer: str, jti: str, until: float) -> None:
        """Refuse credential `jti` of `issuer` until `until` (unix seconds)."""
        with self._lock:
            self._db.execute(
                "INSERT INTO revoked VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET until = max(until, excluded.until)",
                (issuer, jti, until),
            )
            # After the commit: an answer read before it was remembered with the value replaced here.
            self._generation[:_GENERATION_BYTES] = os.urandom(_GENERATION_BYTES)
            self._maybe_prune()

    def is_revoked(self, issuer: str, jti: str) -> bool:
        """Whether the authority revoked this credential (remembered while no revocation was written)."""
        key = (issuer, jti)
        generation = bytes(self._generation[:_GENERATION_BYTES])  # before the read: a later revocation changes it
        now = _clock()
        remembered = self._clear.get(key)
        if remembered is not None and remembered[0] == generation and now - remembered[1] < REMEMBER_S:
            return False
        with self._lock:
            row = self._db.execute("SELECT 1 FROM revoked WHERE issuer = ? AND jti = ?", key).fetchone()
        if row is not None:
            return True
        if len(self._clear) >= MAX_REMEMBERED:
            self._clear = {}
        self._clear[key] = (generation, now)
        return False

    def use_nonce(self, owner: str, nonce: str, until: float) -> bool:
        """Record a nonce for `owner`; False when it was already used (a replay)."""
        with self._lock:
            try:
                self._db.execute("INSERT INTO nonces VALUES (?, ?, ?)", (owner, nonce, until))
            except sqlite3.IntegrityError:
                expired = self._db.execute(
                    "UPDATE nonces SET until = ? WHERE owner = ? AND nonce = ? AND until < ?",
                    (until, owner, nonce, time.time()),
                ).rowcount
                return expired == 1  # an expired row may be reused; a live one is a replay
            self._maybe_prune()
        return True

    def _maybe_prune(self) -> None:
        self._writes += 1
        if self._writes % _PRUNE_EVERY == 0:
            now = time.time()
            self._db.execute("DELETE FROM revoked WHERE until < ?", (now,))
            self._db.execute("DELETE FROM nonces WHERE until < ?", (now,))

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()
            if isinstance(self._generation, mmap.mmap):
                self._generation.close()


def _generation(path: Path | None) -> mmap.mmap | bytearray:
    """The revocations' shared value: the file beside `path` that every process maps (in memory: this one's)."""
    if path is None:
        return bytearray(_GENERATION_BYTES)
    fd = os.open(f"{path}-revocations", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size < _GENERATION_BYTES:
            os.ftruncate(fd, _GENERATION_BYTES)  # never shrinks: a value written meanwhile stays
        return mmap.mmap(fd, _GENERATION_BYTES)
    finally:
        os.close(fd)
