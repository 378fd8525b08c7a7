"""Namespaces (listed, read, described, deleted or moved), the organization's context, and feedback."""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Callable
from typing import Any

from engram_index.store.base import StoredDocument
from engram_index.supermemory.documents import recallable_count
from engram_index.supermemory.errors import Conflict, Forbidden, Missing, invalid
from engram_index.supermemory.face import Face, stamp
from engram_index.supermemory.tables import chunks_collection, iso, memories_collection

FEEDBACK_PER_DAY = 20

Reach = Callable[[str], bool]  # whether the caller's key reaches a namespace


def _row(face: Face, name: str, context: str | None, created: int, updated: int, at_ms: int) -> dict[str, Any]:
    """One namespace in the list."""
    docs = int(face.store.query("SELECT count(*) FROM sm_documents WHERE ns=?", (name,))[0][0])
    return {
        "id": name, "namespace": name, "documentCount": docs, "memoryCount": recallable_count(face, name, at_ms),
        "description": context, "system": {"createdAt": iso(created), "updatedAt": iso(updated)},
    }


def list_namespaces(face: Face, query: dict[str, Any], reach: Reach) -> dict[str, Any]:
    """The namespaces the key reaches, newest first, with counts (q: a case-insensitive substring)."""
    page, limit, q = query.get("page", 1), query.get("limit", 10), query.get("q", "")
    rows = [r for r in face.store.query(
        "SELECT name, supporting_context, created_ms, updated_ms FROM sm_namespaces ORDER BY created_ms DESC, name")
        if reach(r[0]) and q.casefold() in r[0].casefold()]
    now = stamp()
    part = rows[(page - 1) * limit: page * limit]
    return {
        "namespaces": [_row(face, r[0], r[1], r[2], r[3], now) for r in part],
        "pagination": {"currentPage": page, "limit": limit, "totalItems": len(rows),
                       "totalPages": max(1, math.ceil(len(rows) / limit))},
    }


def get_namespace(face: Face, ns: str) -> dict[str, Any]:
    """A namespace's settings, or 404."""
    rows = face.store.query("SELECT supporting_context, created_ms, updated_ms FROM sm_namespaces WHERE name=?", (ns,))
    if not rows:
        raise Missing("namespace not found", f"no namespace {ns!r}: namespaces are created by their first document")
    context, created, updated = rows[0]
    return {"namespace": ns, "supportingContext": context,
            "system": {"createdAt": iso(created), "updatedAt": iso(updated)}}


def patch_namespace(face: Face, ns: str, context: str | None) -> dict[str, Any]:
    """Set (or, with null, clear) a namespace's supporting context."""
    face.writable()
    get_namespace(face, ns)
    face.store.execute([("UPDATE sm_namespaces SET supporting_context=?, updated_ms=? WHERE name=?",
                         (context, stamp(), ns))])
    return get_namespace(face, ns)


def delete_namespace(face: Face, ns: str, move_to: str | None, reach: Reach) -> tuple[int, dict[str, Any]]:
    """Delete a namespace with everything in it, or move its documents to another first (202)."""
    face.writable()
    get_namespace(face, ns)
    if move_to is not None:
        return 202, _move(face, ns, move_to, reach)
    docs = int(face.store.query("SELECT count(*) FROM sm_documents WHERE ns=?", (ns,))[0][0])
    memories = recallable_count(face, ns, stamp())
    _drop(face, ns)
    return 200, {"status": "deleted", "namespace": ns, "deletedDocumentsCount": docs,
                 "deletedMemoriesCount": memories}


def _drop(face: Face, ns: str) -> None:
    """Remove a namespace's collections and rows."""
    with face.ns_lock(ns):
        for name in (chunks_collection(ns), memories_collection(ns)):
            if face.searchable(name):
                face.collections.drop(name)
        face.store.execute([(f"DELETE FROM {table} WHERE {column}=?", (ns,)) for table, column in (
            ("sm_relations", "ns"), ("sm_memories", "ns"), ("sm_chunks", "ns"), ("sm_documents", "ns"),
            ("sm_buckets", "ns"), ("sm_doc_changes", "ns"), ("sm_namespaces", "name"))])
    face.forget_namespace(ns)


def _move(face: Face, ns: str, move_to: str, reach: Reach) -> dict[str, Any]:
    """Move every document, chunk and memory to `move_to`, then delete the source.

    Chunks and memories move as they are (ids, vectors, versions, forgetting, expiry, relations):
    re-deriving them in the destination would re-embed everything and bring forgotten memories
    back. They are not judged against the destination's own memories: a move merges, it does not
    reconcile. Run again after a crash, a move finishes what it began (the copies are idempotent).
    """
    if move_to == ns:
        raise invalid("moveTo must name another namespace", "query", "moveTo")
    if not reach(move_to):
        raise Forbidden("namespace write access denied", f"this key does not reach {move_to!r}")
    busy = face.unfinished(ns)
    if busy:
        raise Conflict("namespace busy", f"{busy} documents of {ns!r} are still processing: retry once they are done")
    clash = face.store.query(
        "SELECT a.custom_id FROM sm_documents a JOIN sm_documents b ON a.custom_id=b.custom_id"
        " WHERE a.ns=? AND b.ns=? LIMIT 1", (ns, move_to))
    if clash:
        raise Conflict("namespace merge conflict", f"both namespaces hold a document with id {clash[0][0]!r}")
    now = stamp()
    face.ensure_collections(move_to)
    with face.ns_lock(ns), face.ns_lock(move_to):
        # The destination's index gets the items first: until their rows follow, it finds
        # records it cannot show (and skips them), never rows it cannot find.
        for src, dst in ((chunks_collection(ns), chunks_collection(move_to)),
                         (memories_collection(ns), memories_collection(move_to))):
            if face.searchable(src):
                _copy_items(face, src, dst)
        face.store.execute([
            *[(f"UPDATE {table} SET ns=? WHERE ns=?", (move_to, ns)) for table in ("sm_chunks", "sm_memories",
                                                                                "sm_relations")],
            ("UPDATE sm_documents SET ns=?, updated_ms=? WHERE ns=?", (move_to, now, ns)),
            face.namespace_statement(move_to, now),
            *face.documents_changed(move_to),  # (every document of the namespace moved in: none named)
        ])
        _drop(face, ns)
    face.changed(move_to)
    return {"status": "queued", "operationId": "op_" + secrets.token_hex(8), "namespace": ns, "moveTo": move_to}


def _copy_items(face: Face, src: str, dst: str) -> None:
    """Write every live item of one collection (with its vector) into another."""
    for batch in face.store.changes_since(face.collections.info(src).id, 0, batch=500):
        puts = [StoredDocument(change.document) for change in batch if change.document is not None]
        if puts:
            face.collections.write(dst, puts)


def get_organization(face: Face, reach: Reach) -> dict[str, Any]:
    """The organization's context and how many namespaces the key reaches."""
    rows = face.store.query("SELECT value FROM sm_settings WHERE name='organizationalContext'")
    count = sum(1 for (name,) in face.store.query("SELECT name FROM sm_namespaces") if reach(name))
    return {"organizationalContext": rows[0][0] if rows else None, "namespaceCount": count}


def patch_organization(face: Face, context: str | None, admin: bool, reach: Reach) -> dict[str, Any]:
    """Replace the organization's context (keys that reach every namespace are its admins)."""
    face.writable()
    if not admin:
        raise Forbidden("admin access required", "only a key minted without --namespace may change the organization")
    face.store.execute([("INSERT OR REPLACE INTO sm_settings(name, value) VALUES ('organizationalContext', ?)",
                         (context,))])
    return get_organization(face, reach)


def feedback(face: Face, key_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """Keep a caller's feedback; each key may send FEEDBACK_PER_DAY a day (UTC)."""
    face.writable()
    now = stamp()
    day_start = now - now % 86_400_000
    used = int(face.store.query("SELECT count(*) FROM sm_feedback WHERE key_id=? AND created_ms>=?",
                                (key_id, day_start))[0][0])
    if used >= FEEDBACK_PER_DAY:
        from engram_index.errors import RateLimited

        raise RateLimited(f"at most {FEEDBACK_PER_DAY} feedback submissions a day")
    fid = "fb_" + secrets.token_hex(8)
    face.store.execute([("INSERT INTO sm_feedback(id, key_id, body, created_ms) VALUES (?, ?, ?, ?)",
                         (fid, key_id, json.dumps(body), now))])
    return {"id": fid, "remaining": FEEDBACK_PER_DAY - used - 1}
