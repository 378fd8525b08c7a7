"""Facts and their revisions: write, supersede, verify, delete, and every read of them.

Each change commits the revision rows, the index document (`Collections.write`, so the fact is
searchable by vector at once) and the answer kept for its Idempotency-Key in ONE transaction. A
tenant's facts are one collection, `kindgi:<tenant>`, holding each fact's current, retrievable
revision only; every revision stays in `kindgi_revisions`.
"""

from __future__ import annotations

import base64
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import orjson

from engram_index.collections import Collections
from engram_index.embed.base import Embedder
from engram_index.engine.types import Document
from engram_index.errors import UnknownSpace
from engram_index.kindgi import revisions as rev
from engram_index.kindgi.auth import Principal
from engram_index.kindgi.errors import KindgiError, not_found
from engram_index.kindgi.models import FactFields, SupersedeBody, WriteBody, format_ms
from engram_index.kindgi.scope import can_read, sql_scope_filter, sql_visible, write_problem
from engram_index.remodel import declare_model
from engram_index.store.base import Statement, StoredDocument

# Given the answer's status and body, the statements that keep it for its Idempotency-Key.
Seal = Callable[[int, dict[str, Any]], list[Statement]]
LIVE = "(expires_ms IS NULL OR expires_ms > ?)"
DEFAULT_PAGE, MAX_PAGE = 25, 100


SPACE_PREFIX = "kindgi:"


def space_name(tenant: str) -> str:
    """The collection of a tenant's facts (never `at://`, which the garden face reads)."""
    return SPACE_PREFIX + tenant


def _no_seal(status: int, payload: dict[str, Any]) -> list[Statement]:
    """Keep no answer (a change made without an Idempotency-Key)."""
    return []


class Facts:
    """Every tenant's facts over the shared store and index."""

    def __init__(self, collections: Collections, embedder: Embedder | None,
                 clock: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        """Serve facts from `collections`, embedding them with `embedder` (None: keyword and list only)."""
        self.collections = collections
        self.store = collections.store
        self.embedder = embedder
        self.clock = clock
        self._ensured: set[str] = set()
        self.reembedding: threading.Thread | None = None  # tenants of another model moving to this one
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def tenant_lock(self, tenant: str) -> threading.Lock:
        """The lock that orders a tenant's read-check-write changes (erasures take it too)."""
        with self._guard:
            return self._locks.setdefault(tenant, threading.Lock())

    def space(self, tenant: str) -> str:
        """The tenant's collection, declared (with the deployment's model) once per process."""
        name = space_name(tenant)
        if name not in self._ensured:
            declare_model(self.collections, name, self.embedder, rev.embedding_text)  # another model's collection is re-embedded
            self._ensured.add(name)
        return name

    def declared(self, tenant: str) -> bool:
        """Whether `space` has declared the tenant's collection in this process (so it will not write or
        re-embed: a caller on the event loop may call it)."""
        return space_name(tenant) in self._ensured

    def has_space(self, tenant: str) -> bool:
        """Whether the tenant has ever written a fact."""
        try:
            self.collections.info(space_name(tenant))
            return True
        except UnknownSpace:
            return False

    # -- reads ----------------------------------------------------------------------------

    def _bodies(self, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        """The answers (Fact JSON) of the rows a query selects."""
        return [orjson.loads(r[0]) for r in self.store.query(sql, tuple(params))]

    def current(self, principal: Principal, fact_id: str, *, version: int | None = None,
                as_of: int | None = None) -> dict[str, Any]:
        """The fact's current revision (or that version, or the one current at `as_of`) as the caller sees it."""
        now = self.clock()
        sql = f"SELECT body FROM kindgi_revisions WHERE tenant=? AND fact_id=? AND {LIVE}"
        params: list[Any] = [principal.tenant, fact_id, now]
        if version is not None:
            sql += " AND version=?"
            params.append(version)
        elif as_of is not None:
            sql += " AND created_ms <= ? AND (invalidated_ms IS NULL OR invalidated_ms > ?) ORDER BY version DESC LIMIT 1"
            params += [as_of, as_of]
        else:
            sql += " AND current=1"
        rows = self._bodies(sql, params)
        if not rows or not can_read(principal, rows[0]["scope"]):
            raise not_found(fact_id)
        return rows[0]

    def revisions(self, principal: Principal, fact_id: str) -> list[dict[str, Any]]:
        """Every readable revision of a fact, newest first."""
        rows = self._bodies(
            f"SELECT body FROM kindgi_revisions WHERE tenant=? AND fact_id=? AND {LIVE} ORDER BY version DESC",
            (principal.tenant, fact_id, self.clock()))
        if not rows or not can_read(principal, rows[0]["scope"]):
            raise not_found(fact_id)
        return rows

    def page(self, principal: Principal, *, limit: int = DEFAULT_PAGE, cursor: str | None = None,
             type_: str | None = None, scope: dict[str, Any] | None = None,
             platform: tuple[str, list[Any]] = ("TRUE", []),
             as_of: int | None = None) -> tuple[list[dict[str, Any]], str | None]:
        """One page of the facts the caller may see, newest first, and the cursor of the next."""
        where, params = ["review=0", LIVE], list[Any]([self.clock()])
        where.append(sql_visible(principal, params))
        if scope:
            where.append(sql_scope_filter(scope, params))
        if type_ is not None:
            where.append("type=?")
            params.append(type_)
        where.append(platform[0])
        params += platform[1]
        if cursor is not None:
            at, last = decode_cursor(cursor)
            where.append("created_ms <= ? AND (created_ms, fact_id) < (?, ?)")
            params += [at, at, last]
        # The page's keys first, from the time index alone (it holds every column the filters name but a
        # forward-compatible scope key's), then only their bodies: the facts skipped cost no table read.
        # As of a time, every revision alive then counts: the current ones and those closed since, each
        # set newest first in the index, merged (one scan of the tenant's rows and a sort otherwise).
        arms: list[tuple[str, list[Any]]] = [("current=1", [])]
        if as_of is not None:
            alive = "created_ms <= ? AND (invalidated_ms IS NULL OR invalidated_ms > ?)"
            arms = [(f"current={c} AND {alive}", [as_of, as_of]) for c in (1, 0)]
        keys = " UNION ALL ".join(
            f"SELECT fact_id, version, created_ms FROM kindgi_revisions WHERE tenant=? AND {arm} AND {' AND '.join(where)}"
            for arm, _ in arms)
        rows = self.store.query(
            f"SELECT r.body, k.created_ms, k.fact_id FROM ({keys} ORDER BY created_ms DESC, fact_id DESC LIMIT ?) AS k"
            " JOIN kindgi_revisions AS r ON r.tenant = ? AND r.fact_id = k.fact_id AND r.version = k.version"
            " ORDER BY k.created_ms DESC, k.fact_id DESC",
            (*[v for _, fixed in arms for v in (principal.tenant, *fixed, *params)], limit + 1, principal.tenant))
        facts = [orjson.loads(r[0]) for r in rows[:limit]]
        more = len(rows) > limit
        return facts, encode_cursor(rows[limit - 1][1], rows[limit - 1][2]) if more else None

    def retrievable(self, tenant: str, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The current, retrievable revisions of these facts, by id."""
        out: dict[str, dict[str, Any]] = {}
        now = self.clock()
        for start in range(0, len(ids), 400):
            chunk = list(ids[start:start + 400])
            for body in self._bodies(
                    f"SELECT body FROM kindgi_revisions WHERE tenant=? AND current=1 AND review=0 AND {LIVE}"
                    f" AND fact_id IN ({','.join('?' * len(chunk))})", (tenant, now, *chunk)):
                out[body["id"]] = body
        return out

    # -- writes ---------------------------------------------------------------------------

    def _vector(self, doc: Document) -> Any:
        """The embedding of a fact's index document (rev.embedding_text), or None without an embedder or words."""
        if self.embedder is None or not doc.text.strip():
            return None
        return self.embedder.embed_documents([rev.embedding_text(doc)])[0]

    def _commit(self, tenant: str, fact: dict[str, Any], created_ms: int, statements: list[Statement],
                status: int, answer: dict[str, Any], seal: Seal) -> None:
        """Write the rows, the fact's index document (or its removal) and the kept answer together."""
        name = self.space(tenant)
        also = statements + seal(status, answer)
        if fact.get("invalidatedAt") is None and rev.retrievable(fact):
            doc = rev.document(fact, created_ms, None)
            vector = self._vector(doc)
            if vector is not None:
                doc.vector = np.asarray(vector, "<f2").tobytes()
            self.collections.write(name, [StoredDocument(doc)], also=also)
        else:
            self.collections.write(name, [], [fact["id"]], also=also)

    def write(self, principal: Principal, body: WriteBody, seal: Seal = _no_seal) -> dict[str, Any]:
        """A new fact (version 1), attributed to the caller."""
        if body.scope["tenantId"] != principal.tenant:
            raise KindgiError("scope-mismatch", "`scope.tenantId` does not match the caller tenant.")
        problem = write_problem(principal, body.scope)
        if problem is not None:
            raise KindgiError("permission-denied", problem)
        now = self.clock()
        fact_id = str(uuid.uuid4())
        fields = body.fields
        fact = rev.ordered({
            "id": fact_id, "type": body.type, "scope": body.scope, "version": 1, "createdAt": format_ms(now),
            "content": body.content, **rev.content_facts(body.content),
            "embeddingModel": self.embedder.identity.model if self.embedder else None,
            "retention": fields.retention or None, "source": body.source, "trust": "asserted",
            "attributedTo": principal.attribution(), "generatedBy": body.generated_by,
            "subjects": fields.subjects, **{k: format_ms(v) for k, v in fields.times.items()},
            "review": "pending" if body.review else None,
        })
        expiry = rev.expires_ms(fact.get("retention"), now)
        if expiry is not None:
            fact["expiresAt"] = format_ms(expiry)
        statements = [rev.insert_row(principal.tenant, fact, created_ms=now, first_ms=now, current=True),
                      *rev.subject_rows(principal.tenant, fact_id, fields.subjects)]
        self._commit(principal.tenant, fact, now, statements, 201, fact, seal)
        return fact

    def _writable(self, principal: Principal, fact_id: str, expect: int | None) -> tuple[dict[str, Any], int]:
        """The current revision the caller may change, and its fact's first write time."""
        current = self.current(principal, fact_id)
        problem = write_problem(principal, current["scope"])
        if problem is not None:
            raise KindgiError("permission-denied", problem)
        if expect is not None and expect != current["version"]:
            raise KindgiError(
                "fact-changed",
                f'Fact "{fact_id}" is at revision {current["version"]} now: read it again, then retry.',
                {"factId": fact_id, "currentVersion": current["version"]})
        first = self.store.query("SELECT first_ms FROM kindgi_revisions WHERE tenant=? AND fact_id=? AND version=?",
                                 (principal.tenant, fact_id, current["version"]))
        return current, int(first[0][0])

    def _next(self, principal: Principal, fact_id: str, expect: int | None, seal: Seal,
              change: Callable[[dict[str, Any], int], dict[str, Any]]) -> dict[str, Any]:
        """Write the revision after the current one (`change` makes it) and close the current one."""
        with self.tenant_lock(principal.tenant):
            current, first_ms = self._writable(principal, fact_id, expect)
            now = max(self.clock(), rev_ms(current) + 1)  # revisions never share a time: asOf stays exact
            _, close = rev.close_row(principal.tenant, current, now, principal.ref, "superseded")
            fact = change(current, now)
            fact.update(id=fact_id, revisionId=str(uuid.uuid4()), version=current["version"] + 1,
                        createdAt=format_ms(now), supersedes=current.get("revisionId", fact_id))
            fact = rev.ordered(fact)
            expiry = rev.expires_ms(fact.get("retention"), first_ms)
            fact["expiresAt"] = format_ms(expiry) if expiry is not None else None
            fact = rev.ordered(fact)
            statements = [close, rev.insert_row(principal.tenant, fact, created_ms=now, first_ms=first_ms, current=True),
                          *rev.subject_rows(principal.tenant, fact_id, fact.get("subjects"))]
            self._commit(principal.tenant, fact, now, statements, 200, fact, seal)
            return fact

    def supersede(self, principal: Principal, fact_id: str, body: SupersedeBody, seal: Seal = _no_seal) -> dict[str, Any]:
        """The fact's next content: same id, version + 1, the old revision closed as superseded."""

        def change(current: dict[str, Any], now: int) -> dict[str, Any]:
            """The next revision's fields, from the current one."""
            fields: FactFields = body.fields
            nxt = {k: v for k, v in current.items() if k not in _PER_REVISION}
            nxt.update(content=body.content, **rev.content_facts(body.content), trust="asserted",
                       attributedTo=principal.attribution(),
                       embeddingModel=self.embedder.identity.model if self.embedder else None)
            if fields.retention is not None:
                nxt["retention"] = fields.retention or None
            if fields.subjects is not None:
                nxt["subjects"] = fields.subjects
            nxt.update({k: format_ms(v) for k, v in fields.times.items()})
            return nxt

        return self._next(principal, fact_id, body.expect_version, seal, change)

    def verify(self, principal: Principal, fact_id: str, expect: int | None, seal: Seal = _no_seal) -> dict[str, Any]:
        """The next revision, same content, `trust: verified` by the caller (approving a pending review)."""

        def change(current: dict[str, Any], now: int) -> dict[str, Any]:
            """The next revision's fields, from the current one."""
            nxt = {k: v for k, v in current.items() if k not in _PER_REVISION and k != "review"}
            nxt.update(trust="verified", verifiedBy=principal.ref, verifiedAt=format_ms(now))
            return nxt

        return self._next(principal, fact_id, expect, seal, change)

    def delete(self, principal: Principal, fact_id: str, expect: int | None, seal: Seal = _no_seal) -> dict[str, Any]:
        """Close the current revision as deleted (a tombstone): no read finds the fact after."""
        with self.tenant_lock(principal.tenant):
            current, _ = self._writable(principal, fact_id, expect)
            if (current.get("retention") or {}).get("legalHold"):
                raise KindgiError("legal-hold", f'Fact "{fact_id}" is under legal hold: it cannot be deleted.',
                                  {"factId": fact_id})
            now = max(self.clock(), rev_ms(current) + 1)
            closed, close = rev.close_row(principal.tenant, current, now, principal.ref, "deleted")
            self._commit(principal.tenant, closed, now, [close], 200, closed, seal)
            return closed

    def expire_due(self, tenant: str) -> int:
        """Close the current revisions whose retention ended (reads already skip them) and unindex them."""
        now = self.clock()
        rows = self.store.query(
            "SELECT body, expires_ms FROM kindgi_revisions WHERE tenant=? AND current = 1"
            " AND expires_ms IS NOT NULL AND expires_ms <= ?", (tenant, now))
        if not rows:
            return 0
        with self.tenant_lock(tenant):
            statements = [rev.close_row(tenant, orjson.loads(body), int(at), "service:retention", "expired")[1]
                          for body, at in rows]
            ids = [orjson.loads(body)["id"] for body, _ in rows]
            self.collections.write(self.space(tenant), [], ids, also=statements)
        return len(rows)


# Fields that belong to one revision and are never carried to the next.
_PER_REVISION = frozenset({"revisionId", "supersedes", "verifiedBy", "verifiedAt", "invalidatedAt",
                           "invalidatedBy", "invalidationReason", "expiresAt", "createdAt", "trust"})


def rev_ms(fact: dict[str, Any]) -> int:
    """A revision's creation time in milliseconds."""
    from engram_index.kindgi.models import parse_time

    return parse_time(fact["createdAt"], "createdAt") or 0


def encode_cursor(created_ms: int, fact_id: str) -> str:
    """An opaque list position: after the fact written at this time with this id."""
    return base64.urlsafe_b64encode(orjson.dumps({"t": created_ms, "id": fact_id})).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    """A list position back from its cursor, or 400 bad-input."""
    try:
        value = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        at, last = value["t"], value["id"]
        # The time is compared as a SQLite INTEGER: a forged one past 64 bits is no cursor of ours.
        if not isinstance(at, bool) and isinstance(at, int) and -(2**63) <= at < 2**63 and isinstance(last, str):
            return at, last
    except (ValueError, KeyError, TypeError):
        pass
    raise KindgiError("bad-input", "Query parameter `cursor` is not one this list issued", {"parameter": "cursor"})
