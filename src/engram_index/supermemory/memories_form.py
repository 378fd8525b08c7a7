"""How a processed document's chunks and memories are written: one transaction for both collections.

`form` decides what a revision does to the document's memories (the deterministic extractor, or
the LLM when one is configured); `index` writes the batch's chunks and its memories with their
version chains, relations and the documents' `done` in one transaction, under the namespace's lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


from engram_index.engine.types import Document
from engram_index.store.base import Statement, StoredDocument
from engram_index.supermemory import extract, statements
from engram_index.supermemory.expiry import moved, retagged
from engram_index.supermemory.face import Face, doc_tag, f16, stamp
from engram_index.supermemory.forming import Formed, Job, NewMemory
from engram_index.supermemory.tables import (
    DocRow, MemoryRow, chunk_id, chunks_collection, document_memories, memories_collection, parse_iso_ms,
)

FORGET_AFTER_KEY = "forgetAfter"


def forget_after(metadata: dict[str, Any]) -> int | None:
    """When a document's memories expire: its metadata's forgetAfter (ISO 8601), if any."""
    value = metadata.get(FORGET_AFTER_KEY)
    if not isinstance(value, str):
        return None
    try:
        return parse_iso_ms(value)
    except ValueError:
        return None


def latest_of(face: Face, ns: str, doc_id: str) -> list[MemoryRow]:
    """A document's memories that are still latest."""
    return [MemoryRow.from_row(r) for r in face.store.query(document_memories(latest=True), (ns, ns, doc_id))]


def form(face: Face, ns: str, doc: DocRow, text: str) -> Formed:
    """Relate the revision's statements to the document's latest memories."""
    known = latest_of(face, ns, doc.id)
    if doc.task_type == "superrag":
        return Formed(retire=[m.id for m in known])
    if face.llm is not None:
        from engram_index.supermemory.llm_memories import form_with_llm

        return form_with_llm(face, ns, doc, text, known)
    by_id = {m.id: m for m in known}
    decided = extract.plan([extract.Known(m.id, m.memory, m.version) for m in known], extract.statements(text))
    out = Formed(retire=decided.retire)
    for statement, parent in decided.create:
        out.new.append(NewMemory(statement.text, statement.is_static, False,
                                 "updates" if parent else None, by_id[parent.id] if parent else None))
    return out


def _chunk_writes(face: Face, ns: str, job: Job, now: int) -> tuple[list[StoredDocument], list[str], list[Statement]]:
    """A job's chunk records, the old chunks to delete, and the chunk rows. Each record names, as its author,
    the memories of its document whose statement it holds once the job is written (statements.py)."""
    doc = job.doc
    ids = [chunk_id(doc.id, i) for i in range(len(job.chunks))]
    old = {r[0] for r in face.store.query("SELECT id FROM sm_chunks WHERE ns=? AND doc_id=?", (ns, doc.id))}
    latest = _latest_after(face, ns, job)
    puts: list[StoredDocument] = []
    for i, (cid, span, vec) in enumerate(zip(ids, job.chunks, job.chunk_vectors)):
        author = statements.chunk_author(statements.held_in(span.text, latest))
        puts.append(StoredDocument(Document(cid, author, span.text, (doc_tag(doc.id),), None, now,
                                            metadata={"doc": doc.id, "position": i}, vector=f16(vec))))
    rows: list[Statement] = [("DELETE FROM sm_chunks WHERE ns=? AND doc_id=?", (ns, doc.id))]
    rows += [("INSERT INTO sm_chunks(ns, id, doc_id, position, content, created_ms) VALUES (?, ?, ?, ?, ?, ?)",
              (ns, cid, doc.id, i, span.text, now)) for i, (cid, span) in enumerate(zip(ids, job.chunks))]
    return puts, sorted(old - set(ids)), rows


def _latest_after(face: Face, ns: str, job: Job) -> list[tuple[str, str]]:
    """The id and text of each of the document's latest memories once the job is written (`_memory_writes`):
    those latest now and the ones it forms, less those it retires or supersedes."""
    doc, formed = job.doc, job.formed
    latest = {m.id: m.memory for m in latest_of(face, ns, doc.id)}
    if formed is None:
        return list(latest.items())
    for memory in formed.new:
        latest[extract.memory_id(ns, doc.id, doc.revision, memory.text)] = memory.text
    for gone in [*formed.retire, *(m.target.id for m in formed.new if m.target is not None and m.relation == "updates")]:
        latest.pop(gone, None)
    return list(latest.items())


def index(face: Face, ns: str, jobs: Sequence[Job]) -> None:
    """Write the batch's chunks, memories and statuses in one transaction (skipping documents changed meanwhile).

    One transaction, so that no reader and no restart after a kill ever sees a revision's new
    chunks beside the memories of the one before.
    """
    with face.ns_lock(ns):
        current = face.documents(ns, [j.doc.id for j in jobs])
        jobs = [j for j in jobs if j.doc.id in current and current[j.doc.id].revision == j.doc.revision]
        if not jobs:
            return
        face.ensure_collections(ns)
        now = stamp()
        puts: list[StoredDocument] = []
        deletes: list[str] = []
        rows: list[Statement] = []
        for job in jobs:
            p, d, r = _chunk_writes(face, ns, job, now)
            puts += p
            deletes += d
            rows += r
        memory_puts: list[StoredDocument] = []
        for job in jobs:
            p, r = _memory_writes(face, ns, job, now)
            memory_puts += p
            rows += r
            rows.append(("UPDATE sm_documents SET status='done', error=NULL, updated_ms=? WHERE ns=? AND id=?"
                         " AND revision=?", (now, ns, job.doc.id, job.doc.revision)))
        face.collections.write_many([(chunks_collection(ns), puts, deletes),
                                     (memories_collection(ns), memory_puts, ())], also=rows)
    # No `face.changed`: what the face keeps of a namespace is of its documents (their metadata, groups and
    # dates, the filters compiled from them), and forming their chunks and memories changes none of it.


def _memory_writes(face: Face, ns: str, job: Job, now: int) -> tuple[list[StoredDocument], list[Statement]]:
    """A job's new memories, the memories it supersedes or retires, and their rows and relations."""
    formed = job.formed
    if formed is None:
        return [], []
    doc = job.doc
    expiry = forget_after(doc.metadata)
    puts: list[StoredDocument] = []
    back, rows = moved(face, ns, doc.id, expiry, now)  # its memories' expiry, which its metadata may have moved
    superseded: dict[str, MemoryRow] = {}
    for memory, vector in zip(formed.new, formed.vectors):
        mid = extract.memory_id(ns, doc.id, doc.revision, memory.text)
        version = 1
        if memory.target is not None:
            rows.append(("INSERT OR REPLACE INTO sm_relations(ns, src, dst, relation) VALUES (?, ?, ?, ?)",
                         (ns, mid, memory.target.id, memory.relation)))
            if memory.relation == "updates":
                version = memory.target.version + 1
                superseded[memory.target.id] = memory.target
        row = MemoryRow(mid, doc.id, memory.text, memory.is_static, memory.is_inference, True, None, expiry,
                        version, now, now)
        rows.append((
            "INSERT OR REPLACE INTO sm_memories(ns, id, doc_id, memory, is_static, is_inference, is_latest,"
            " forgotten_ms, forget_after_ms, version, created_ms, updated_ms) VALUES (?, ?, ?, ?, ?, ?, 1, NULL, ?, ?,"
            " ?, ?)", (ns, mid, doc.id, memory.text, int(memory.is_static), int(memory.is_inference), expiry, version,
                       now, now)))
        # Its document as its author: a column the keyword index does not tokenise, so that a search judges
        # whether two memories are of one document without reading either (context.in_context).
        puts.append(StoredDocument(Document(mid, doc.id, memory.text, face.memory_tags(row), None, now,
                                            metadata={"doc": doc.id}, vector=f16(vector))))
    retired = face.memories(ns, [*formed.retire, *[i for i in superseded if i not in formed.retire]])
    for old in retired.values():
        rows.append(("UPDATE sm_memories SET is_latest=0, updated_ms=? WHERE ns=? AND id=?", (now, ns, old.id)))
        old.is_latest = False
        old.expiry_tagged = old.expiry_tagged and old.id not in back
    puts += retagged(face, ns, [*retired.values(), *(m for mid, m in back.items() if mid not in retired)])
    return [p for p in puts if p is not None], rows
