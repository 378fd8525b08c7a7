"""Document writes and reads: add (text or a URL), batch, files, patch, replace, delete, get, counts.

A write is acknowledged once its row is committed with status `queued`; the pipeline does the
rest in the background, and resumes every unfinished document after a restart. Reusing a caller
id updates the same document: identical content is a no-op (its current status comes back),
content that extends the stored content (a conversation that grew) replaces it, and anything else
is appended after a blank line, so a source is never silently replaced (PATCH replaces it).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from typing import Any

from engram_index.store.base import Statement, StoredDocument
from engram_index.supermemory.errors import Conflict, V5Error, invalid
from engram_index.supermemory.face import PROCESSING, Face, doc_tag, stamp
from engram_index.supermemory.expiry import write_moved
from engram_index.supermemory.memories_form import forget_after
from engram_index.supermemory.models import CHANGES, is_url
from engram_index.supermemory.tables import (
    CHUNK_COLUMNS, ChunkRow, DocRow, MemoryRow, chunks_collection, document_memories, memories_collection,
)
from engram_index.supermemory.views import chunk_view, document_view, memory_view

MAX_FILE_BYTES = 50 * 1024 * 1024


def new_id() -> str:
    """A fresh document id (letters and digits only)."""
    return "d" + secrets.token_hex(10)


def merged_content(old: str, new: str) -> str | None:
    """What a resubmission under the same id makes the content (None: nothing changes)."""
    if new == old or (old and new in old):
        return None
    if not old or new.startswith(old):
        return new
    return old + "\n\n" + new


def add(face: Face, ns: str, item: dict[str, Any], task_type: str | None, *, file: tuple[bytes, str, str] | None = None,
        file_type: str | None = None) -> tuple[str, str]:
    """Add (or resubmit under its id) one document; returns its id and status."""
    face.writable()
    face.ensure_collections(ns)
    with face.intake:
        now = stamp()
        doc_id, status, statements, moves = _prepare(face, ns, item, task_type, now, file, file_type)
        if statements:
            writes = [face.namespace_statement(ns, now), *statements, *face.documents_changed(ns, [doc_id])]
            write_moved(face, ns, moves, now, writes)
    face.changed(ns, [doc_id])
    if status == "queued":
        face.on_queued(ns, doc_id)
    return doc_id, status


def _prepare(face: Face, ns: str, item: dict[str, Any], task_type: str | None, now: int,
             file: tuple[bytes, str, str] | None = None, file_type: str | None = None
             ) -> tuple[str, str, list[Statement], list[tuple[str, int | None]]]:
    """The id, status and statements of one add (no statements: an unchanged resubmission), and its memories'
    new expiry (document id, expiry) when a resubmission changed its metadata: they follow its forgetAfter."""
    content = item.get("content", "")
    doc = face.document(ns, item["id"]) if item.get("id") else None
    url = content.strip() if file is None and is_url(content) else None
    if doc is None:
        doc_id = new_id()
        kind = _file_kind(file, file_type) if file is not None else ("webpage" if url else "text")
        return doc_id, "queued", [(
            "INSERT INTO sm_documents(ns, id, custom_id, content, type, url, metadata, grp, supporting_context,"
            " date, task_type, status, raw, filename, content_type, created_ms, updated_ms)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?)",
            (ns, doc_id, item.get("id"), "" if (url or file) else content, kind, url,
             json.dumps(item.get("metadata") or {}), json.dumps(item.get("group") or {}),
             item.get("supportingContext"), item.get("date"), task_type or "memory",
             file[0] if file else None, file[1] if file else None, file[2] if file else None, now, now),
        )], []
    fields = _fields(doc, item, task_type)
    new_content = merged_content(doc.content, content) if not url else (None if url == doc.url else "")
    if new_content is None and not fields:
        return doc.id, doc.status, [], []
    sets = [f"{k}=?" for k in fields] + ["updated_ms=?"]
    params: list[Any] = [*fields.values(), now]
    if new_content is not None:
        sets += ["content=?", "url=?", "revision=revision+1", "status='queued'", "error=NULL"]
        params += [new_content if not url else "", url]
    statement = (f"UPDATE sm_documents SET {', '.join(sets)} WHERE ns=? AND id=?", (*params, ns, doc.id))
    moves = [(doc.id, forget_after(json.loads(fields["metadata"])))] if "metadata" in fields else []
    return doc.id, "queued" if new_content is not None else doc.status, [statement], moves


def _fields(doc: DocRow, item: dict[str, Any], task_type: str | None) -> dict[str, Any]:
    """The stored fields a resubmission changes (content aside)."""
    out: dict[str, Any] = {}
    if "metadata" in item and item["metadata"] != doc.metadata:
        out["metadata"] = json.dumps(item["metadata"])
    if "group" in item and item["group"] != doc.group:
        out["grp"] = json.dumps(item["group"])
    if "supportingContext" in item and item["supportingContext"] != doc.supporting_context:
        out["supporting_context"] = item["supportingContext"]
    if "date" in item and item["date"] != doc.date:
        out["date"] = item["date"]
    if task_type is not None and task_type != doc.task_type:
        out["task_type"] = task_type
    return out


def _file_kind(file: tuple[bytes, str, str], file_type: str | None) -> str:
    """A file document's type, from what the caller said or the file's name and media type."""
    _, name, media = file
    lowered = name.lower()
    if file_type == "pdf" or lowered.endswith(".pdf") or media == "application/pdf":
        return "pdf"
    if lowered.endswith((".md", ".markdown")) or media == "text/markdown":
        return "markdown"
    if lowered.endswith((".html", ".htm")) or media == "text/html":
        return "webpage"
    return file_type or "text"


def batch(face: Face, ns: str, body: dict[str, Any]) -> dict[str, Any]:
    """Add up to 600 documents in one transaction; each succeeds or fails alone, results in request order.

    An id given twice is committed at its second sight first, so that the second one finds the
    first and updates it as a resubmission would.
    """
    face.writable()
    face.ensure_collections(ns)
    results: list[dict[str, Any]] = []
    queued: list[str] = []
    failed = 0
    with face.intake:
        now = stamp()
        pending: list[Statement] = []
        named: list[str] = []  # the documents the pending statements add or change
        moves: list[tuple[str, int | None]] = []  # resubmissions' new expiries
        ids: set[str] = set()
        for item in body["documents"]:
            if item.get("id") in ids:
                write_moved(face, ns, moves, now, [face.namespace_statement(ns, now), *pending,
                                                   *face.documents_changed(ns, named)])
                pending, named, moves, ids = [], [], [], set()
            try:
                doc_id, status, statements, move = _prepare(face, ns, item, body.get("taskType"), now)
            except V5Error as exc:
                failed += 1
                results.append({"id": item.get("id", ""), "status": "error", "error": exc.message,
                                **({"details": exc.details} if exc.details else {})})
                continue
            if item.get("id"):
                ids.add(item["id"])
            pending += statements
            named += [doc_id] if statements else []
            moves += move
            if status == "queued":
                queued.append(doc_id)
            results.append({"id": doc_id, "status": status})
        if pending:
            write_moved(face, ns, moves, now, [face.namespace_statement(ns, now), *pending,
                                               *face.documents_changed(ns, named)])
    face.changed(ns, [r["id"] for r in results if r["status"] != "error"])
    for doc_id in dict.fromkeys(queued):
        face.on_queued(ns, doc_id)
    return {"results": results, "count": len(results) - failed, "failed": failed}


def patch(face: Face, ns: str, ref: str, body: dict[str, Any], *, merge_metadata: bool = False,
          file: tuple[bytes, str, str] | None = None, replace: bool = False,
          file_type: str | None = None) -> tuple[str, str]:
    """Update a document's fields, or replace its content (reprocessing it); 409 while it processes."""
    face.writable()
    if not replace and file is None and not any(k in body for k in CHANGES):
        raise invalid("set at least one of content, supportingContext, metadata, group or date "
                      "(taskType and dreaming alone change nothing)")
    doc = face.require_document(ns, ref)
    if doc.status in PROCESSING:
        raise Conflict("document is still processing", f"document {doc.id!r} is {doc.status}: retry once it is"
                       " done or failed")
    now = stamp()
    sets: dict[str, Any] = {}
    if replace:  # a full replacement clears what it does not give
        sets.update(metadata="{}", grp="{}", supporting_context=None, date=None)
    if "metadata" in body:
        sets["metadata"] = json.dumps({**doc.metadata, **body["metadata"]} if merge_metadata else body["metadata"])
    if "group" in body:
        sets["grp"] = json.dumps(body["group"])
    if "supportingContext" in body:
        sets["supporting_context"] = body["supportingContext"]
    if "date" in body:
        sets["date"] = body["date"]
    if "taskType" in body:
        sets["task_type"] = body["taskType"]
    reprocess = False
    if file is not None:
        sets.update(raw=file[0], filename=file[1], content_type=file[2], content="", url=None,
                    type=_file_kind(file, file_type))
        reprocess = True
    elif "content" in body and body["content"] != doc.content:
        url = body["content"].strip() if is_url(body["content"]) else None
        sets.update(content="" if url else body["content"], url=url, raw=None, filename=None, content_type=None,
                    type="webpage" if url else "text")
        reprocess = True
    assignments = [f"{k}=?" for k in sets] + ["updated_ms=?"]
    params: list[Any] = [*sets.values(), now]
    if reprocess:
        assignments += ["revision=revision+1", "status='queued'", "error=NULL"]
    statements: list[Statement] = [
        (f"UPDATE sm_documents SET {', '.join(assignments)} WHERE ns=? AND id=?", (*params, ns, doc.id))]
    if "metadata" in sets:  # the memories' expiry follows the document's forgetAfter
        write_moved(face, ns, [(doc.id, forget_after(json.loads(sets["metadata"])))], now,
                    [*statements, *face.documents_changed(ns, [doc.id])])
    else:
        face.store.execute([*statements, *face.documents_changed(ns, [doc.id])])
    face.changed(ns, [doc.id])
    if reprocess:
        face.on_queued(ns, doc.id)
        return doc.id, "queued"
    return doc.id, doc.status


def delete(face: Face, ns: str, refs: Sequence[str]) -> dict[str, Any]:
    """Delete documents with their chunks and memories; each id alone, successes kept."""
    face.writable()
    count = 0
    errors: list[dict[str, str]] = []
    for ref in refs:
        doc = face.document(ns, ref)
        if doc is None:
            errors.append({"id": ref, "error": "document not found"})
            continue
        remove(face, ns, doc.id)
        count += 1
    return {"count": count, "errors": errors}


def remove(face: Face, ns: str, doc_id: str) -> None:
    """Delete one document and everything derived from it in one transaction (under the namespace's lock).

    One transaction, because a kill between a delete's writes would leave half a document: its
    row and memories without its chunks.
    """
    with face.ns_lock(ns):
        chunk_ids = [r[0] for r in face.store.query("SELECT id FROM sm_chunks WHERE ns=? AND doc_id=?", (ns, doc_id))]
        memory_ids = [r[0] for r in face.store.query("SELECT id FROM sm_memories WHERE ns=? AND doc_id=?", (ns, doc_id))]
        marks = ",".join("?" * len(memory_ids))
        also: list[Statement] = [
            ("DELETE FROM sm_chunks WHERE ns=? AND doc_id=?", (ns, doc_id)),
            ("DELETE FROM sm_memories WHERE ns=? AND doc_id=?", (ns, doc_id)),
            ("DELETE FROM sm_documents WHERE ns=? AND id=?", (ns, doc_id)),
            *face.documents_changed(ns, [doc_id]),
        ]
        if memory_ids:
            also += [(f"DELETE FROM sm_relations WHERE ns=? AND src IN ({marks})", (ns, *memory_ids)),
                     (f"DELETE FROM sm_relations WHERE ns=? AND dst IN ({marks})", (ns, *memory_ids))]
        none: list[StoredDocument] = []
        writes = [(name, none, ids) for name, ids in ((chunks_collection(ns), chunk_ids),
                                                     (memories_collection(ns), memory_ids))
                  if ids and face.searchable(name)]
        face.collections.write_many(writes, also=also)
    face.changed(ns, [doc_id])


def get(face: Face, ns: str, ref: str, include: Sequence[str]) -> dict[str, Any]:
    """A document, with its chunks and memories when asked ([] when asked and none)."""
    doc = face.require_document(ns, ref)
    out = document_view(doc)
    if "chunks" in include:
        out["chunks"] = [chunk_view(c, doc) for c in chunks_of(face, ns, doc.id)]
    if "memories" in include:
        now = stamp()
        out["memories"] = [memory_view(m, doc, now) for m in memories_of(face, ns, doc.id)]
    return out


def chunks_of(face: Face, ns: str, doc_id: str) -> list[ChunkRow]:
    """A document's chunks in order."""
    return [ChunkRow(*r) for r in face.store.query(
        f"SELECT {CHUNK_COLUMNS} FROM sm_chunks WHERE ns=? AND doc_id=? ORDER BY position", (ns, doc_id))]


def memories_of(face: Face, ns: str, doc_id: str) -> list[MemoryRow]:
    """Every memory formed from a document, oldest first."""
    # Sorted here, not in SQL: asked for that order, SQLite walks the namespace's creation index instead of
    # seeking the document's few memories (tests/supermemory/test_query_plans.py).
    rows = [MemoryRow.from_row(r) for r in face.store.query(document_memories(), (ns, ns, doc_id))]
    return sorted(rows, key=lambda m: (m.created_ms, m.id))


def memory_counts(face: Face, ns: str, refs: Sequence[str]) -> dict[str, Any]:
    """How many current, recallable memories each known document has (unknown ids left out)."""
    counts = []
    now = stamp()
    for ref in dict.fromkeys(refs):
        doc = face.document(ns, ref)
        if doc is not None:
            counts.append({"id": ref, "memoryCount": recallable_count(face, ns, now, doc_id=doc.id)})
    return {"counts": counts}


def recallable_count(face: Face, ns: str, at_ms: int, doc_id: str | None = None) -> int:
    """Memories that are latest, not forgotten and not expired (of one document when given)."""
    sql = ("SELECT count(*) FROM sm_memories WHERE ns=? AND is_latest=1 AND forgotten_ms IS NULL"
           " AND (forget_after_ms IS NULL OR forget_after_ms > ?)")
    params: tuple[Any, ...] = (ns, at_ms)
    if doc_id is not None:
        sql += " AND doc_id=?"
        params += (doc_id,)
    return int(face.store.query(sql, params)[0][0])


__all__ = ["MAX_FILE_BYTES", "doc_tag"]
