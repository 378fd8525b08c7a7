"""Idempotency-Key for every POST/PUT/PATCH/DELETE (API-ROUTE-CONVENTIONS §3.1).

A key is the caller's own: tenant + caller identity + `METHOD:path` + the key. The body is
compared by the sha256 of its bytes. Answers with a status below 400 are kept for 24 hours in the
record store (a fact's change and its kept answer commit in one transaction, so a retry after a
crash can neither run the change twice nor miss its answer) and replayed byte-identical with
`X-Idempotent-Replay: true`; another body under the key is 409 idempotency-key-body-mismatch.

While a request runs its key is held in this process's memory: a repeat meanwhile is 409
idempotency-key-in-flight with Retry-After. One process owns a data directory (its lock), so a
crashed request frees its key with the process, and an error answer (≥ 400) frees it at once.

A retrieve changes nothing, so its answer is kept behind the response: it is held in memory (and
replayed from there) until a background thread writes it with the others of the next
`GATHER_S` in one transaction. This spares every retrieve a synchronous commit (bench/retrieve.py:
~8 ms of a 10 ms retrieve on a busy disk) and a sequential client a commit per request (a fifth
of the server's CPU for keyword retrieves, one transaction each, before the gathering); a crash
before the write loses only the right to replay a read, which then runs again.

Such an answer names the facts it holds. One that read a fact just before an erasure deleted it
can reach the writer after the erasure withheld the kept answers naming the fact; so the writer
decides inside its own transaction: an answer naming a fact that is no longer stored (erased) is
written withheld. An erasure's deletion commits either before that transaction (the fact is gone
there) or after it, and then its withhold step, queued behind the write, finds the answer written.
A replay from memory checks the same.

Nearly every key is new (the SDK sends a fresh one with each request). Once this process has read
every key the store keeps (in the background, at start) and remembers each key it claims since,
a key it has never seen is claimed without a store read (kindgi/seen_keys.py); the others are
looked up as before. Over a shared store another node may keep an answer for any key, so there
every key is looked up.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from engram_index.kindgi.errors import KindgiError
from engram_index.kindgi.models import format_ms
from engram_index.kindgi.seen_keys import SeenKeys
from engram_index.kindgi.wire import JSON, dumps
from engram_index.store.base import RecordStore, Statement

KEEP_MS = 24 * 3600 * 1000
# How long the background writer gathers kept retrieve answers into one transaction.
GATHER_S = 0.2
SCRUB_IDS_PER_PASS = 200  # fact ids an erasure's scrub looks for in one pass over the kept answers
RETRY_AFTER_S = 5
HEADER = "Idempotency-Key"
REPLAY_HEADER = "X-Idempotent-Replay"
# The content type of a kept answer whose body an erasure removed: the key stays taken, its
# answer is withheld (409 idempotency-key-replay-withheld), so a retry cannot run the write again.
WITHHELD = "withheld"
METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_INSERT = ("INSERT OR REPLACE INTO kindgi_idempotency(key, body_sha, status, content_type, body, created_ms)"
           " VALUES (?, ?, ?, ?, ?, ?)")
# True when a fact of the JSON array of ids (first parameter) is not stored for the tenant (second):
# erasures are the only deletion of a fact's rows (a delete keeps its revisions as a tombstone).
_GONE = ("EXISTS (SELECT 1 FROM json_each(?) AS named WHERE NOT EXISTS"
         " (SELECT 1 FROM kindgi_revisions WHERE tenant=? AND fact_id=named.value))")
# _INSERT for an answer naming facts: withheld, inside the writing transaction, when one is gone.
_INSERT_NAMING = ("INSERT OR REPLACE INTO kindgi_idempotency(key, body_sha, status, content_type, body, created_ms)"
                  f" SELECT ?, ?, ?, CASE WHEN gone THEN '{WITHHELD}' ELSE ? END, CASE WHEN gone THEN x'' ELSE ? END, ?"
                  f" FROM (SELECT {_GONE} AS gone) AS checked")  # PostgreSQL before 16 needs the alias
log = logging.getLogger(__name__)


@dataclass
class Claim:
    """A key held by the request that runs under it; `answer` is the kept answer once sealed."""

    key: str
    body_sha: str
    answer: tuple[int, bytes] | None = field(default=None)
    sealed: bool = False
    # The tenant and the facts the answer holds (a retrieve's), when it is kept behind the response.
    facts: tuple[str, tuple[str, ...]] | None = None
    scrubs: int = 0  # erasures' withhold steps run before the request read any fact (Idempotency.scrubs)


@dataclass(frozen=True)
class _Behind:
    """A kept answer not yet written: its row as _INSERT takes it, and the facts it names."""

    row: tuple[Any, ...]
    facts: tuple[str, tuple[str, ...]] | None
    checked: bool = True  # its write looks the facts it names up (see keep_behind)

    def gone(self) -> tuple[str, str] | None:
        """The parameters of _GONE for the facts it names (None when it names none)."""
        if self.facts is None:
            return None
        return orjson.dumps(self.facts[1]).decode(), self.facts[0]

    def statement(self) -> Statement:
        """The statement that writes it (withheld when a fact it names is gone by then)."""
        gone = self.gone() if self.checked else None
        return (_INSERT, self.row) if gone is None else (_INSERT_NAMING, (*self.row, *gone))


@dataclass
class _Scrub:
    """A request to the background writer: withhold every kept answer that names one of `ids`."""

    ids: tuple[str, ...]
    done: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class Replay:
    """A kept answer to send again."""

    status: int
    content_type: str
    body: bytes


class Idempotency:
    """The kept answers (SQLite) and the keys held by running requests (memory)."""

    def __init__(self, store: RecordStore, clock: Any = lambda: int(time.time() * 1000), shared: bool = False) -> None:
        """Keep answers in `store`; forget those older than 24 hours. `shared`: other processes keep
        answers in it too (a PostgreSQL store of several nodes), so every key is looked up in it."""
        self.store = store
        self.clock = clock
        self._shared = shared
        self._scrubs = 0  # erasures' withhold steps run on the kept answers in memory
        self._seen = SeenKeys()
        self._knows = threading.Event()  # set once every key the store keeps is in `_seen`
        self._running: dict[str, str] = {}
        # Answers kept behind their response, not yet written, by key.
        self._unwritten: dict[str, _Behind] = {}
        self._queue: queue.Queue[str | _Scrub | None] = queue.Queue()
        self._lock = threading.Lock()
        self.purge()
        self._writer = threading.Thread(target=self._write_behind, daemon=True, name="idempotency")
        self._writer.start()
        self._closing = threading.Event()
        self._loader: threading.Thread | None = None
        if not shared:
            self._loader = threading.Thread(target=self._load_keys, daemon=True, name="idempotency-keys")
            self._loader.start()

    def _load_keys(self, chunk: int = 10_000) -> None:
        """Remember every key the store keeps (those claimed meanwhile are remembered as they are)."""
        after = ""
        try:
            while not self._closing.is_set():
                rows = self.store.query("SELECT key FROM kindgi_idempotency WHERE key > ? ORDER BY key LIMIT ?",
                                        (after, chunk))
                with self._lock:
                    for (key,) in rows:
                        self._seen.add(str(key))
                if len(rows) < chunk:
                    self._knows.set()
                    return
                after = str(rows[-1][0])
        except Exception:  # every key is then looked up in the store, as before
            log.exception("reading the kept Idempotency-Keys failed")

    def knows_every_key(self) -> bool:
        """Whether a key this process has not seen is known not to be kept (no store read needed)."""
        return self._knows.is_set()

    def purge(self) -> None:
        """Drop the answers kept longer than 24 hours."""
        self.store.execute([("DELETE FROM kindgi_idempotency WHERE created_ms < ?", (self.clock() - KEEP_MS,))])

    @staticmethod
    def scoped(tenant: str, caller: str, method: str, path: str, key: str) -> str:
        """The stored form of a caller's key for one route."""
        return hashlib.sha256("\0".join((tenant, caller, f"{method}:{path}", key)).encode()).hexdigest()

    @property
    def scrubs(self) -> int:
        """How many erasures' withhold steps have run on the kept answers in memory: read it before a
        request reads any fact, and give it to `begin` (see keep_behind)."""
        return self._scrubs

    def begin(self, key: str, body: bytes, scrubs: int | None = None) -> Claim | Replay:
        """Hold the key for a request, or the kept answer to replay; 409 when it cannot be either.
        `scrubs`: `self.scrubs` as it was before the request read any fact (now, when not given)."""
        sha = hashlib.sha256(body).hexdigest()
        with self._lock:
            unwritten = self._unwritten.get(key)
            if unwritten is not None:
                row = unwritten.row
                gone = unwritten.gone()
                content_type = str(row[3])
                if gone is not None and self.store.query(f"SELECT {_GONE}", gone)[0][0]:
                    content_type = WITHHELD  # a fact it holds was erased after it was read
                return _replay(sha, row[1], int(row[2]), content_type, bytes(row[4]), int(row[5]))
            # A key never seen since every kept one was read cannot be kept (the store's read is skipped).
            unseen = self._knows.is_set() and not self._seen.may_hold(key)
            rows = [] if unseen else self.store.query(
                "SELECT body_sha, status, content_type, body, created_ms FROM kindgi_idempotency"
                " WHERE key=? AND created_ms >= ?", (key, self.clock() - KEEP_MS))
            if rows:
                kept_sha, status, content_type, kept, created = rows[0]
                return _replay(sha, kept_sha, int(status), str(content_type), bytes(kept), int(created))
            held = self._running.get(key)
            if held is not None:
                if held != sha:
                    raise _mismatch()
                raise KindgiError(
                    "idempotency-key-in-flight",
                    "A request with this Idempotency-Key is still running: retry after it.",
                    {"retryAfterSeconds": RETRY_AFTER_S})
            self._running[key] = sha
            self._seen.add(key)  # before anything can keep an answer for it
        return Claim(key, sha, scrubs=self._scrubs if scrubs is None else scrubs)

    def seal(self, claim: Claim | None, status: int, payload: dict[str, Any]) -> list[Statement]:
        """Render an answer and give the statements that keep it (to run in the change's transaction)."""
        body = dumps(payload)
        if claim is None:
            return []
        claim.answer = (status, body)
        if status >= 400:
            return []
        claim.sealed = True
        return [(_INSERT, self._row(claim, status, body))]

    def _row(self, claim: Claim, status: int, body: bytes) -> tuple[Any, ...]:
        """The kept answer's row, as _INSERT takes it."""
        return claim.key, claim.body_sha, status, JSON, body, self.clock()

    def keep(self, claim: Claim, status: int, body: bytes) -> None:
        """Keep an answer that was not sealed inside a change (an erasure's start), now."""
        if status < 400 and not claim.sealed:
            self.store.execute([(_INSERT, self._row(claim, status, body))])
            claim.sealed = True

    def keep_behind(self, claim: Claim, status: int, body: bytes) -> None:
        """Keep the answer of a request that changed nothing: replayable at once, written shortly after."""
        if status >= 400 or claim.sealed:
            return
        with self._lock:
            # An erasure whose withhold step ran before this (under this lock) has not seen this answer,
            # which may have read a fact just before the erasure deleted it: its write checks the
            # facts it names. Otherwise that step is still to come and finds it (in memory or stored),
            # and the check is skipped, but over a shared store (another node's erasure is not counted).
            checked = self._shared or self._scrubs != claim.scrubs
            self._unwritten[claim.key] = _Behind(self._row(claim, status, body), claim.facts, checked)
        claim.sealed = True
        self._queue.put(claim.key)

    def withhold(self, ids: Sequence[str]) -> None:
        """Withhold every kept answer (written or not yet) whose body names one of these fact ids:
        an erased fact must not live on in the answer that created or retrieved it, and a retry of
        its write must not create it again (the key stays taken; its replay is a 409)."""
        if not ids:
            return
        scrub = _Scrub(tuple(ids))
        # Through the writer, in order: an answer it has already taken is written before the scrub.
        self._queue.put(scrub)
        if self._writer.is_alive():
            scrub.done.wait(60)
        else:
            self._scrub(scrub)

    def _scrub(self, scrub: _Scrub) -> None:
        """Withhold the answers naming the scrub's ids, in memory and in the store."""
        needles = [i.encode() for i in scrub.ids]
        with self._lock:
            self._scrubs += 1  # an answer kept from now on may have escaped it: see keep_behind
            for key, behind in list(self._unwritten.items()):
                row = behind.row
                if any(n in row[4] for n in needles):
                    self._unwritten[key] = _Behind((*row[:3], WITHHELD, b"", *row[5:]), behind.facts, behind.checked)
        # One pass over the kept answers for many ids at once: they are every keyed request's of a day, and a
        # pass reads them all (~2 s at 115k answers of 7 KB), where a statement per id made a pass each.
        parts = [needles[i:i + SCRUB_IDS_PER_PASS] for i in range(0, len(needles), SCRUB_IDS_PER_PASS)]
        self.store.execute([(f"UPDATE kindgi_idempotency SET content_type='{WITHHELD}', body=x'' WHERE "
                             + " OR ".join(["instr(body, ?) > 0"] * len(part)), tuple(part)) for part in parts])
        scrub.done.set()

    def _write_behind(self) -> None:
        """Write the answers kept behind their responses, many to a transaction, until closed."""
        while True:
            first = self._queue.get()
            if isinstance(first, str):
                time.sleep(GATHER_S)  # let the answers of the next moments join this transaction
            items = [first]
            while not self._queue.empty() and len(items) < 2000 and not isinstance(items[-1], _Scrub):
                items.append(self._queue.get_nowait())
            live = [k for k in items if isinstance(k, str)]
            with self._lock:
                rows = [self._unwritten[k] for k in live if k in self._unwritten]
            try:
                if rows:
                    self.store.execute([behind.statement() for behind in rows])
            except Exception:  # the answers stay replayable from memory; the next batch tries again
                log.exception("keeping idempotent answers failed")
            else:
                with self._lock:
                    for behind in rows:
                        if self._unwritten.get(behind.row[0]) is behind:
                            del self._unwritten[behind.row[0]]
            for item in items:
                if isinstance(item, _Scrub):
                    try:
                        self._scrub(item)
                    except Exception:  # the erasure waiting on it times out and is marked failed
                        log.exception("withholding idempotent answers failed")
            if None in items:
                return

    def close(self) -> None:
        """Write every answer still held in memory, then stop the background threads."""
        self._closing.set()
        if self._loader is not None:
            self._loader.join(30)
        self._queue.put(None)
        self._writer.join(30)

    def release(self, claim: Claim) -> None:
        """Let the key go (after its answer is kept, or after an error answer that is not)."""
        with self._lock:
            self._running.pop(claim.key, None)


def _replay(sha: str, kept_sha: str, status: int, content_type: str, body: bytes, created_ms: int) -> Replay:
    """The kept answer to send again; 409 for another body, or for an answer an erasure withheld."""
    if kept_sha != sha:
        raise _mismatch()
    if content_type == WITHHELD:
        raise KindgiError("idempotency-key-replay-withheld",
                          "This Idempotency-Key's answer is withheld: it named data since erased.",
                          {"status": status, "at": format_ms(created_ms)})
    return Replay(status, content_type, body)


def _mismatch() -> KindgiError:
    """The 409 for a key reused with another body."""
    return KindgiError("idempotency-key-body-mismatch",
                       "This Idempotency-Key was used with another request body.")
