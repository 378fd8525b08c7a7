"""Memory reads and forgetting, lists of documents / chunks / memories, and profiles."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from engram_index.supermemory.documents import recallable_count
from engram_index.supermemory.errors import Missing, invalid
from engram_index.supermemory.face import Face, stamp
from engram_index.supermemory.expiry import retagged
from engram_index.supermemory.related import related
from engram_index.supermemory.search import candidates, doc_filter
from engram_index.supermemory.tables import (
    CHUNK_COLUMNS, DOC_COLUMNS, MEMORY_COLUMNS, ChunkRow, DocRow, MemoryRow, memories_collection,
)
from engram_index.supermemory.views import chunk_view, document_row, included_document, memory_view

# A semantic forget selects the memories at least this similar to its description (at most 100:
# the legacy maxForget default), so a vague description does not sweep the namespace.
FORGET_THRESHOLD = 0.6
FORGET_LIMIT = 100
STATIC_LIMIT = 50
DYNAMIC_LIMIT = 20
# A list whose filter passes at most 1 / BY_DOCUMENT_SHARE of the namespace's documents reads their items
# through the document index; a wider one walks the namespace's items in order (fewer reads then).
BY_DOCUMENT_SHARE = 4


def get_memory(face: Face, ns: str, memory_id: str, include: Sequence[str], related_limit: int) -> dict[str, Any]:
    """A memory (forgotten ones too), with related memories and its document when asked."""
    memory = face.memories(ns, [memory_id]).get(memory_id)
    if memory is None:
        raise Missing("memory not found", f"no memory {memory_id!r} in namespace {ns!r}")
    now = stamp()
    doc = face.documents(ns, [memory.doc_id]).get(memory.doc_id)
    out = memory_view(memory, doc, now)
    included: dict[str, Any] = {}
    if "related" in include:
        included["related"] = related(face, ns, memory.id, related_limit, now,
                                      with_documents="documents" in include)
    if "documents" in include and doc is not None:
        included["document"] = included_document(doc)
    if included:
        out["included"] = included
    return out


def forget(face: Face, ns: str, ids: Sequence[str]) -> dict[str, Any]:
    """Forget memories by exact id (soft: they leave normal recall, their history stays)."""
    face.writable()
    found = face.memories(ns, ids)
    matches = [{"id": found[i].id, "memory": found[i].memory} for i in dict.fromkeys(ids) if i in found]
    errors = [{"id": i, "error": "memory not found"} for i in dict.fromkeys(ids) if i not in found]
    _mark_forgotten(face, ns, [found[m["id"]] for m in matches])
    return {"count": len(matches), "matches": matches, "errors": errors}


def forget_semantic(face: Face, ns: str, query: str, dry_run: bool) -> dict[str, Any]:
    """Forget (or, dry run, only select) the current memories that match a description."""
    if not dry_run:
        face.writable()
    now = stamp()
    selected = [c for c in candidates(face, ns, query, "memories", FORGET_LIMIT, doc_filter(face, ns, None)[0],
                                      False, now) if c.similarity >= FORGET_THRESHOLD]
    selected.sort(key=lambda c: (-c.similarity, c.id))
    rows = face.memories(ns, [c.id for c in selected[:FORGET_LIMIT]])
    matches = [{"id": m.id, "memory": m.memory} for m in rows.values()]
    if not dry_run:
        _mark_forgotten(face, ns, list(rows.values()))
    return {"count": len(matches), "matches": matches, "errors": []}


def _mark_forgotten(face: Face, ns: str, memories: list[MemoryRow]) -> None:
    """Set the memories forgotten and retag their records, in one transaction."""
    fresh = [m for m in memories if m.forgotten_ms is None]
    if not fresh:
        return
    now = stamp()
    with face.ns_lock(ns):
        for memory in fresh:
            memory.forgotten_ms = now
        puts = retagged(face, ns, fresh)
        rows = [("UPDATE sm_memories SET forgotten_ms=?, updated_ms=? WHERE ns=? AND id=?", (now, now, ns, m.id))
                for m in fresh]
        face.collections.write(memories_collection(ns), puts, (), also=rows)


def _page(total: int, page: int, limit: int) -> dict[str, Any]:
    """The pagination block."""
    return {"currentPage": page, "limit": limit, "totalItems": total, "totalPages": max(1, math.ceil(total / limit))}


def list_items(face: Face, ns: str, kind: str, query: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """One page of a namespace's documents, chunks or memories (filter before paging)."""
    page, limit = query.get("page", 1), query.get("limit", 10)
    sort, order = query.get("sort", "createdAt"), query.get("order", "desc")
    include = body.get("include", {})
    if sort == "position" and kind != "chunks":
        raise invalid("sort position is for chunks only", "query", "sort")
    if include.get("forgotten") and kind != "memories":
        raise invalid("include.forgotten applies to memories only", "include", "forgotten")
    # The documents a filter passes, compiled once while the namespace's documents stand (as searches do).
    passing = doc_filter(face, ns, body.get("filter"))[1]
    metadata = face.metadata(ns) if passing is not None else {}
    # A chunk is never updated in place (a revision writes new chunks): its updatedAt is its createdAt.
    column = {"createdAt": "created_ms", "updatedAt": "created_ms" if kind == "chunks" else "updated_ms",
              "position": "doc_id, position"}[sort]
    direction = "ASC" if order == "asc" else "DESC"
    if kind == "chunks" and sort == "position":
        order_by = f"doc_id {direction}, position {direction}"
    else:
        order_by = f"{column} {direction}, id {direction}"
    now = stamp()
    table, columns, doc_column = {
        "documents": ("sm_documents", DOC_COLUMNS, "id"),
        "chunks": ("sm_chunks", CHUNK_COLUMNS, "doc_id"),
        "memories": ("sm_memories", MEMORY_COLUMNS, "doc_id"),
    }[kind]
    where = "ns=?"
    params: list[Any] = [ns]
    if kind == "memories" and not include.get("forgotten"):
        where += " AND forgotten_ms IS NULL AND (forget_after_ms IS NULL OR forget_after_ms > ?)"
        params.append(now)
    if passing is None:  # the page's ids from an index that holds what is tested (the items before it skipped
        # there, not each read from the table), then its rows
        total = int(face.store.query(f"SELECT count(*) FROM {table} WHERE {where}", tuple(params))[0][0])
        wanted = [r[0] for r in face.store.query(f"SELECT id FROM {table} WHERE {where} ORDER BY {order_by}"
                                                 " LIMIT ? OFFSET ?", (*params, limit, (page - 1) * limit))]
    else:  # filtered: the ids in order first (light), then the page's rows
        if len(passing) * BY_DOCUMENT_SHARE > len(metadata):
            kept = [r[0] for r in face.store.query(f"SELECT id, {doc_column} FROM {table} WHERE {where}"
                                                   f" ORDER BY {order_by}", tuple(params)) if r[1] in passing]
        else:  # few documents pass: their items through the document index, ordered here as ORDER BY would
            keys = "doc_id, position" if kind == "chunks" and sort == "position" else f"{column}, id"
            found_keys: list[tuple[Any, ...]] = []
            passing_docs = sorted(passing)
            for start in range(0, len(passing_docs), 500):
                part = passing_docs[start:start + 500]
                # The ids from the document index first (see tables.document_memories), then each one's keys.
                found_keys += face.store.query(
                    f"SELECT {keys}, id FROM {table} WHERE ns=? AND id IN (SELECT id FROM {table} WHERE {where}"
                    f" AND {doc_column} IN ({','.join('?' * len(part))}))", (ns, *params, *part))
            found_keys.sort(key=lambda r: r[:2], reverse=direction == "DESC")
            kept = [r[2] for r in found_keys]
        total = len(kept)
        wanted = kept[(page - 1) * limit: page * limit]
    marks = ",".join("?" * len(wanted)) or "NULL"
    at = 1 if kind == "documents" else 0  # (a document's row begins with its namespace)
    found = {r[at]: r for r in face.store.query(
        f"SELECT {columns} FROM {table} WHERE ns=? AND id IN ({marks})", (ns, *wanted))}
    rows = [found[i] for i in wanted if i in found]
    out: dict[str, Any] = {"documents": [], "chunks": [], "memories": []}
    if kind == "documents":
        out["documents"] = [document_row(d, content=bool(include.get("content")),
                                         memory_count=recallable_count(face, ns, now, d.id)
                                         if include.get("memoryCount") else None)
                            for d in (DocRow.from_row(r) for r in rows)]
    elif kind == "chunks":
        chunks = [ChunkRow(*r) for r in rows]
        docs = face.documents(ns, [c.doc_id for c in chunks])
        out["chunks"] = [chunk_view(c, docs.get(c.doc_id), with_document=True) for c in chunks]
    else:
        memories = [MemoryRow.from_row(r) for r in rows]
        docs = face.documents(ns, [m.doc_id for m in memories])
        out["memories"] = [memory_view(m, docs.get(m.doc_id), now) for m in memories]
    out["pagination"] = _page(total, page, limit)
    return out


def profile(face: Face, ns: str, body: dict[str, Any]) -> dict[str, Any]:
    """The profile: static facts, recent dynamic context and buckets, from the latest recallable memories."""
    from engram_index.supermemory.buckets import effective_buckets, members

    wanted = body.get("buckets")
    buckets = effective_buckets(face, ns)
    if wanted is not None:
        unknown = [b for b in wanted if b not in buckets]
        if unknown:
            raise invalid(f"unknown bucket {unknown[0]!r}", "buckets")
        buckets = {b: buckets[b] for b in wanted}
    # The documents a filter passes, compiled once while the namespace's documents stand (as searches do).
    selected, passing, _ = doc_filter(face, ns, body.get("filter"))
    now = stamp()

    def fact(m: MemoryRow) -> dict[str, str]:
        return {"id": m.id, "memory": m.memory}

    # Each section's newest alone, through their index; each bucket's members through the keyword index.
    held = members(face, ns, buckets, selected, passing, now)
    return {"profile": {
        "static": [fact(m) for m in _newest(face, ns, True, STATIC_LIMIT, now, passing)],
        "dynamic": [fact(m) for m in _newest(face, ns, False, DYNAMIC_LIMIT, now, passing)],
        "buckets": {name: [fact(m) for m in facts] for name, facts in held.items()},
    }}


def _newest(face: Face, ns: str, static: bool, limit: int, now: int, passing: set[str] | None) -> list[MemoryRow]:
    """The `limit` most recently updated recallable latest memories of one profile section (of the documents
    `passing` names, when given), newest first and equal times by id, as the full read orders them."""
    # sm_memories_profile holds what is tested (expiry, document), so the memories skipped cost no row read;
    # with a filter, the ids come in growing batches after the last one read until enough pass.
    sql = ("SELECT id, doc_id, updated_ms FROM sm_memories WHERE ns=? AND is_static=? AND is_latest=1"
           " AND forgotten_ms IS NULL AND (forget_after_ms IS NULL OR forget_after_ms > ?){after}"
           " ORDER BY updated_ms DESC, id LIMIT ?")
    if passing is not None and not passing:
        return []
    chosen: list[str] = []
    after: tuple[Any, ...] = ()
    batch = limit if passing is None else 4 * limit
    while len(chosen) < limit:
        rows = face.store.query(sql.format(after=" AND updated_ms <= ? AND (updated_ms < ? OR id > ?)" if after
                                           else ""), (ns, int(static), now, *after, batch))
        chosen += [mid for mid, doc_id, _ in rows if passing is None or doc_id in passing][:limit - len(chosen)]
        if len(rows) < batch:
            break
        after = (rows[-1][2], rows[-1][2], rows[-1][0])  # after the last read: (updated_ms, id) beyond it
        batch *= 2
    found = face.memories(ns, chosen)
    return [found[i] for i in chosen if i in found]


def profile_markdown(result: dict[str, Any]) -> str:
    """The profile as Markdown (Accept: text/markdown)."""
    p = result["profile"]
    lines = ["# Profile", "", "## Static", ""]
    lines += [f"- {f['memory']}" for f in p["static"]] or ["(none)"]
    lines += ["", "## Dynamic", ""]
    lines += [f"- {f['memory']}" for f in p["dynamic"]] or ["(none)"]
    for name, facts in p["buckets"].items():
        lines += ["", f"## {name}", ""]
        lines += [f"- {f['memory']}" for f in facts] or ["(none)"]
    return "\n".join(lines) + "\n"
