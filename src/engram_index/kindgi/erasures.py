"""Erasures: one fact, a person (a participant or an external subject) or a conversation, gone.

`POST /v1/memory/erasures` (tenant admin only) checks for legal holds at once (409 legal-hold with
the held facts' ids), records the erasure as pending and answers 202; a background thread then
deletes every revision of every fact it reaches, their subject rows and their index documents in
one transaction, and rebuilds the tenant's keyword index so that no segment keeps the words. The
answers kept for Idempotency-Key replays that name the facts are then withheld (a retry under
such a key is a 409, never the write again), the database file is rewritten (deleted rows are
zeroed in place by secure_delete, but a rebalanced page can keep older bytes in its gap) and the
write-ahead log is emptied, so that no byte of an erased fact is left in the data directory. A
completed erasure keeps no identifier: its selector is cleared, its counts stay. No ledger key
is held, so `matchable` is false and a replay after a restore is not offered (501).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from engram_index.kindgi.auth import Principal
from engram_index.kindgi.errors import KindgiError
from engram_index.kindgi.facts import Facts, Seal, _no_seal, decode_cursor, encode_cursor
from engram_index.kindgi.idempotency import Idempotency
from engram_index.kindgi.models import format_ms
from engram_index.store.base import Statement

log = logging.getLogger(__name__)
UNMATCHABLE = {"code": "erasure-unmatchable",
               "message": "This deployment keeps no erasure ledger key: a replay after a backup restore cannot"
                          " find this person again."}
# Where a running erasure keeps the ids of the facts it deleted, inside its stored selector.
REACHED = "_reached"
_COLUMNS = ("id, selector_kind, selector, status, phase, requested_by, counts, attempts, last_error,"
            " created_ms, started_ms, completed_ms")
_NAMES = tuple(c.strip() for c in _COLUMNS.split(","))


def require_admin(principal: Principal) -> None:
    """403 permission-denied unless the caller is a tenant admin (every erasure route needs it)."""
    if not principal.admin:
        raise KindgiError("permission-denied", "Erasures need admin on the tenant.")


def _view(row: tuple[Any, ...]) -> dict[str, Any]:
    """An erasure row as the API shows it (absent fields left out)."""
    (eid, kind, selector, status, phase, by, counts, attempts, last_error, created, started, completed) = row
    out: dict[str, Any] = {"id": eid, "selectorKind": kind}
    if selector is not None:
        out["selector"] = {k: v for k, v in orjson.loads(selector).items() if k != REACHED}
    out.update(status=status, phase=phase, requestedBy=by, matchable=False, counts=orjson.loads(counts),
               attempts=attempts)
    if last_error is not None:
        out["lastError"] = last_error
    out["createdAt"] = format_ms(created)
    if started is not None:
        out["startedAt"] = format_ms(started)
    if completed is not None:
        out["completedAt"] = format_ms(completed)
    return out


class Erasures:
    """Every tenant's erasures, run in the background."""

    def __init__(self, facts: Facts, idempotency: Idempotency | None = None,
                 clock: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        """Erase from `facts` (and from the answers `idempotency` keeps); pending erasures of an
        earlier process are resumed by `resume_pending`."""
        self.facts = facts
        self.idempotency = idempotency
        self.store = facts.store
        self.clock = clock
        self._threads: list[threading.Thread] = []
        # One run of an erasure at a time (its own thread, a resume, a restart's): a second run that
        # read the erasure before the first deleted its facts would find nothing and complete it
        # while the first still compacts and rewrites (one small lock per erasure this process ran).
        self._runs: dict[str, threading.Lock] = {}
        self._runs_guard = threading.Lock()

    def _reached(self, tenant: str, selector: dict[str, Any]) -> list[str]:
        """The ids of the facts a selector reaches."""
        q = self.store.query
        if "factId" in selector:
            rows = q("SELECT DISTINCT fact_id FROM kindgi_revisions WHERE tenant=? AND fact_id=?",
                     (tenant, selector["factId"]))
        elif "conversationId" in selector:
            cid = selector["conversationId"]
            rows = q("SELECT fact_id FROM kindgi_revisions WHERE tenant=? AND thread_id=?"
                     " UNION SELECT fact_id FROM kindgi_revisions WHERE tenant=? AND session_id=?",
                     (tenant, cid, tenant, cid))
        else:
            s = selector["subject"]
            rows = q("SELECT fact_id FROM kindgi_subjects WHERE tenant=? AND kind=? AND id=?", (tenant, s["kind"], s["id"]))
            if s["kind"] == "participant":
                rows += q("SELECT fact_id FROM kindgi_revisions WHERE tenant=? AND participant_id=?", (tenant, s["id"]))
        return sorted({str(r[0]) for r in rows})

    def _held(self, tenant: str, ids: list[str]) -> list[str]:
        """Those of the facts whose current revision is under legal hold."""
        held: list[str] = []
        for start in range(0, len(ids), 400):
            chunk = ids[start:start + 400]
            held += [str(r[0]) for r in self.store.query(
                f"SELECT fact_id FROM kindgi_revisions WHERE tenant=? AND legal_hold=1 AND invalidated_ms IS NULL"
                f" AND fact_id IN ({','.join('?' * len(chunk))})", (tenant, *chunk))]
        return held

    def create(self, principal: Principal, selector: dict[str, Any], seal: Seal = _no_seal) -> dict[str, Any]:
        """Record an erasure (after the legal-hold check) and start it; its answer, with warnings.

        The answer is kept for its Idempotency-Key in the transaction that records the erasure:
        a crash between the two would let a retry under the key record a second erasure.
        """
        require_admin(principal)
        held = self._held(principal.tenant, self._reached(principal.tenant, selector))
        if held:
            raise KindgiError("legal-hold", "A fact this erasure reaches is under legal hold.", {"factIds": held})
        eid = str(uuid.uuid4())
        kind = "fact" if "factId" in selector else "conversation" if "conversationId" in selector \
            else selector["subject"]["kind"]
        raw = orjson.dumps(selector).decode()
        now = self.clock()
        row = (eid, kind, raw, "pending", "seed", principal.ref, "{}", 0, None, now, None, None)
        answer = {**_view(row), "warnings": [UNMATCHABLE]}
        self.store.execute([(
            "INSERT INTO kindgi_erasures(tenant, id, selector_kind, selector, status, phase, requested_by, created_ms)"
            " VALUES (?, ?, ?, ?, 'pending', 'seed', ?, ?)", (principal.tenant, eid, kind, raw, principal.ref, now)),
            *seal(202, answer)])
        self._start(principal.tenant, eid)
        return answer

    def _start(self, tenant: str, eid: str) -> None:
        """Run an erasure on a thread of its own."""
        thread = threading.Thread(target=self._run, args=(tenant, eid), daemon=True, name="erasure")
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _run(self, tenant: str, eid: str, seal: Seal = _no_seal) -> dict[str, Any] | None:
        """Erase what the selector reaches, then forget the selector; the erasure as it ends (None
        when there was nothing left to run).

        The answer is kept for a resume's Idempotency-Key in the transaction of the final state
        change: kept after it, a crash in between let a retry under the key run the erasure again
        as a fresh request instead of replaying.
        """
        with self._runs_guard:
            lock = self._runs.setdefault(eid, threading.Lock())
        with lock:  # a run waiting here reads the erasure as the one before left it
            return self._run_alone(tenant, eid, seal)

    def _run_alone(self, tenant: str, eid: str, seal: Seal) -> dict[str, Any] | None:
        """`_run`, with no other run of the erasure at the same time."""
        rows = self.store.query("SELECT selector FROM kindgi_erasures WHERE tenant=? AND id=?", (tenant, eid))
        if not rows or rows[0][0] is None:
            return None
        selector = orjson.loads(rows[0][0])
        # The facts an earlier run deleted before it was cut short: the steps after still need them.
        settled = [str(i) for i in selector.pop(REACHED, [])]
        now = self.clock()
        self.store.execute([("UPDATE kindgi_erasures SET status='running', phase='erase', started_ms=?,"
                             " attempts=attempts WHERE tenant=? AND id=?", (now, tenant, eid))])
        try:
            with self.facts.tenant_lock(tenant):  # no change of these facts lands in between
                ids = self._erase(tenant, eid, selector) or settled
            if ids:
                if self.facts.has_space(tenant):
                    # No keyword segment keeps the words, here nor (marked in a shared store) on other nodes.
                    self.facts.collections.purge(self.facts.space(tenant))
                if self.idempotency is not None:
                    self.idempotency.withhold(ids)  # nor a kept answer that created or retrieved them
                self.store.rewrite()  # nor a fragment in a page's unused space (the crash path's byte check)
                if not self.store.truncate_log():  # nor an older page image in the write-ahead log
                    raise RuntimeError("the write-ahead log stayed busy")
            # Completed only now: a restart before this runs it again (finding nothing more to delete).
            return self._finish(tenant, eid, seal, status="completed", phase="done", selector=None,
                                completed_ms=self.clock())
        except Exception as exc:  # recorded on the erasure; `resume` runs it again
            log.exception("erasure %s failed", eid)
            attempts = int(self.store.query("SELECT attempts FROM kindgi_erasures WHERE tenant=? AND id=?",
                                            (tenant, eid))[0][0])
            return self._finish(tenant, eid, seal, status="failed", attempts=attempts + 1,
                                last_error=type(exc).__name__)

    def _finish(self, tenant: str, eid: str, seal: Seal, **changes: Any) -> dict[str, Any]:
        """Set an erasure's final state and keep the answer showing it, in one transaction."""
        row = dict(zip(_NAMES, self.store.query(f"SELECT {_COLUMNS} FROM kindgi_erasures WHERE tenant=? AND id=?",
                                                 (tenant, eid))[0]))
        row.update(changes)
        view = _view(tuple(row.values()))
        self.store.execute([(f"UPDATE kindgi_erasures SET {', '.join(f'{c}=?' for c in changes)} WHERE tenant=? AND id=?",
                             (*changes.values(), tenant, eid)), *seal(200, view)])
        return view

    def _erase(self, tenant: str, eid: str, selector: dict[str, Any]) -> list[str]:
        """Delete the reached facts' rows and index documents and record the counts, in one transaction."""
        ids = self._reached(tenant, selector)
        revisions = 0
        statements: list[Statement] = []
        for start in range(0, len(ids), 400):
            chunk = ids[start:start + 400]
            marks = ",".join("?" * len(chunk))
            revisions += int(self.store.query(
                f"SELECT count(*) FROM kindgi_revisions WHERE tenant=? AND fact_id IN ({marks})", (tenant, *chunk))[0][0])
            statements += [(f"DELETE FROM kindgi_revisions WHERE tenant=? AND fact_id IN ({marks})", (tenant, *chunk)),
                           (f"DELETE FROM kindgi_subjects WHERE tenant=? AND fact_id IN ({marks})", (tenant, *chunk))]
        if ids:  # a run again after a restart finds nothing and keeps the first run's counts
            counts = {"facts": len(ids), "revisions": revisions}
            # The ids stay beside the selector (both cleared at completion): a run again after a crash
            # finds no rows, yet must still compact, drop the kept answers and empty the log for them.
            statements.append(("UPDATE kindgi_erasures SET phase='settle', counts=?, selector=? WHERE tenant=? AND id=?",
                               (orjson.dumps(counts).decode(), orjson.dumps({**selector, REACHED: ids}).decode(),
                                tenant, eid)))
        if self.facts.has_space(tenant):
            self.facts.collections.write(self.facts.space(tenant), [], ids, also=statements)
        else:
            self.store.execute(statements)
        return ids

    def get(self, principal: Principal, eid: str) -> dict[str, Any]:
        """One erasure of the caller's tenant, or 404 not-found."""
        require_admin(principal)
        rows = self.store.query(f"SELECT {_COLUMNS} FROM kindgi_erasures WHERE tenant=? AND id=?", (principal.tenant, eid))
        if not rows:
            raise KindgiError("not-found", f"No erasure {eid}", {"id": eid})
        return _view(rows[0])

    def page(self, principal: Principal, limit: int, cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        """Erasures newest first, one page, and the next page's cursor."""
        require_admin(principal)
        where = "tenant=?"
        params: list[Any] = [principal.tenant]
        if cursor is not None:
            at, last = decode_cursor(cursor)
            where += " AND created_ms <= ? AND (created_ms, id) < (?, ?)"
            params += [at, at, last]
        rows = self.store.query(f"SELECT {_COLUMNS} FROM kindgi_erasures WHERE {where}"
                                " ORDER BY created_ms DESC, id DESC LIMIT ?", (*params, limit + 1))
        more = len(rows) > limit
        return [_view(r) for r in rows[:limit]], encode_cursor(rows[limit - 1][9], rows[limit - 1][0]) if more else None

    def ledger(self, principal: Principal) -> list[dict[str, Any]]:
        """The whole ledger, oldest first, content-free."""
        require_admin(principal)
        out = []
        for row in self.store.query(f"SELECT {_COLUMNS} FROM kindgi_erasures WHERE tenant=? ORDER BY created_ms, id",
                                    (principal.tenant,)):
            view = _view(row)
            entry = {k: view[k] for k in ("id", "selectorKind", "requestedBy", "status", "createdAt")}
            if "completedAt" in view:
                entry["completedAt"] = view["completedAt"]
            out.append(entry)
        return out

    def resume(self, principal: Principal, eid: str, seal: Seal = _no_seal) -> dict[str, Any]:
        """Run an unfinished erasure again now; a finished one comes back as it is.

        A run's answer is kept for its Idempotency-Key with the run's final state change (`_run`);
        one that ran nothing is kept after the answer (nothing changed, so nothing can run twice).
        """
        view = self.get(principal, eid)
        if view["status"] in ("pending", "failed", "running"):
            # A running one is waited for (its run holds the erasure's lock): its view names the fact
            # in its selector, and kept for the key after the run withheld such answers it would
            # outlive the erasure, which keeps no identifier once complete.
            view = self._run(principal.tenant, eid, seal) or self.get(principal, eid)
        return view

    def resume_pending(self) -> None:
        """Start the erasures an earlier process left unfinished (it stopped while they ran)."""
        for tenant, eid in self.store.query(
                "SELECT tenant, id FROM kindgi_erasures WHERE status IN ('pending', 'running')"):
            self._start(str(tenant), str(eid))

    def join(self, timeout: float = 10.0) -> None:
        """Wait for running erasures (at shutdown)."""
        for thread in self._threads:
            thread.join(timeout)
