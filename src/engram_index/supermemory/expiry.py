"""Expired memories tagged in their collection's index, so that a search reads by id only those expired since.

A memory expires at its document's `forgetAfter` (memories_form.forget_after) and is judged expired at
query time. A search leaves expired memories out two ways: those whose record carries the EXPIRED tag
by the engine's tag filter (a mask the engine caches), and those expired since by id (`unswept`, read
through the partial index sm_memories_unswept). A sweep tags the latter: a search that met any
schedules one (`sweep_later`), at most once a second per namespace, on the face's sweep thread. So the
set a search reads no longer grows with every memory that ever expired.

A memory's `expiry_tagged` column says when its record was given the tag (0: it does not carry it);
the two are written in one transaction, under the namespace's lock, as every write of a namespace's
records is. A process that does not make every write (a node over a shared store) also reads by id the
memories swept in the last `CAUGHT_UP_S` seconds, which its index may not have caught up on. A
document whose `forgetAfter` moves later (a metadata change, a resubmission, its reprocessing) untags
the memories it brings back (`moved`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

from engram_index.engine.types import Document
from engram_index.store.base import Statement, StoredDocument
from engram_index.supermemory.face import Face, stamp
from engram_index.supermemory.tables import MEMORY_COLUMNS, MemoryRow, document_memories, memories_collection

log = logging.getLogger(__name__)

SWEEP_BATCH = 500  # memories tagged per transaction: the namespace's lock is let go between batches
SWEEP_EVERY_S = 1.0  # the least time between two sweeps of one namespace
# How long after a sweep another process's index may still hold the records as they were (it catches up on
# every change notification, at worst every collections.TAIL_POLL_S): its searches read those ids too.
CAUGHT_UP_S = 30.0
# The condition of the partial index sm_memories_unswept, spelled as it is, so that SQLite reads that index.
_UNSWEPT = "ns=? AND forget_after_ms IS NOT NULL AND expiry_tagged = 0 AND forgotten_ms IS NULL"


def retagged(face: Face, ns: str, memories: Iterable[MemoryRow]) -> list[StoredDocument]:
    """The memories' records again, with the tags of their state now (their texts and vectors kept)."""
    memories = list(memories)
    if not memories:  # (no read of the collection's declaration)
        return []
    space = face.collections.info(memories_collection(ns)).id  # (once: a node over a shared store reads it)
    out: list[StoredDocument] = []
    for memory in memories:
        found = face.store.document_by_id(space, memory.id)
        vector = found[1].vector if found is not None else None
        metadata: dict[str, Any] = {"doc": memory.doc_id}
        out.append(StoredDocument(Document(memory.id, memory.doc_id, memory.memory, face.memory_tags(memory), None,
                                           memory.created_ms, metadata=metadata, vector=vector)))
    return out


def unswept(face: Face, ns: str, at_ms: int) -> set[str]:
    """The ids of the namespace's memories expired by `at_ms` whose records do not carry the EXPIRED tag: in
    a process that does not make every write, also those swept within the last `CAUGHT_UP_S` seconds, whose
    records its index may hold as they were before another process's sweep."""
    ids = {r[0] for r in face.store.query(f"SELECT id FROM sm_memories WHERE {_UNSWEPT} AND forget_after_ms <= ?",
                                          (ns, at_ms))}
    if not face.sole_writer:
        ids.update(r[0] for r in face.store.query(
            "SELECT id FROM sm_memories WHERE ns=? AND expiry_tagged > 0 AND expiry_tagged > ?"
            " AND forgotten_ms IS NULL AND forget_after_ms <= ?", (ns, at_ms - int(CAUGHT_UP_S * 1000), at_ms)))
    return ids


def sweep_later(face: Face, ns: str) -> None:
    """Sweep the namespace on the face's sweep thread, unless one began within the last second (or the
    process is read-only: it writes nothing)."""
    if face.read_only:
        return
    now = time.monotonic()
    with face.swept_lock:  # (not the namespace's lock, which a long write may hold: a search never waits here)
        if now - face.swept.get(ns, -SWEEP_EVERY_S) < SWEEP_EVERY_S:
            return
        face.swept[ns] = now
    try:
        face.sweeps.submit(_sweep_logged, face, ns)
    except RuntimeError:  # the face is closing: the next process's searches sweep
        pass


def _sweep_logged(face: Face, ns: str) -> None:
    """A sweep whose failure is logged (the next search that meets the memories tries again)."""
    try:
        sweep(face, ns, stamp())
    except Exception:
        log.exception("sweeping the expired memories of %s failed", ns)
        with face.swept_lock:
            face.swept.pop(ns, None)


def sweep(face: Face, ns: str, at_ms: int) -> int:
    """Tag the records of the namespace's memories expired by `at_ms` and not yet tagged; how many."""
    done = 0
    while True:
        with face.ns_lock(ns):  # (read and written under the lock: a document's move of its expiry waits)
            rows = [MemoryRow.from_row(r) for r in face.store.query(
                f"SELECT {MEMORY_COLUMNS} FROM sm_memories WHERE ns=? AND id IN (SELECT id FROM sm_memories"
                f" WHERE {_UNSWEPT} AND forget_after_ms <= ? LIMIT ?)", (ns, ns, at_ms, SWEEP_BATCH))]
            if not rows:
                return done
            for memory in rows:
                memory.expiry_tagged = True
            puts = retagged(face, ns, rows)
            tagged = max(stamp(), 1)  # (when: see CAUGHT_UP_S)
            marks = [("UPDATE sm_memories SET expiry_tagged=? WHERE ns=? AND id=?", (tagged, ns, m.id)) for m in rows]
            face.collections.write(memories_collection(ns), puts, (), also=marks)
        done += len(rows)


def moved(face: Face, ns: str, doc_id: str, expiry: int | None, now: int) -> tuple[dict[str, MemoryRow],
                                                                                    list[Statement]]:
    """A document's memories' new expiry: the statements that set it, and the memories whose records must lose
    the EXPIRED tag (tagged, and not expired at `now` any more), already marked untagged. The caller writes
    both in one transaction, under the namespace's lock."""
    statements: list[Statement] = [
        ("UPDATE sm_memories SET forget_after_ms=? WHERE ns=? AND doc_id=?", (expiry, ns, doc_id))]
    if expiry is not None and expiry <= now:
        return {}, statements
    back: dict[str, MemoryRow] = {}
    for row in face.store.query(document_memories(), (ns, ns, doc_id)):
        memory = MemoryRow.from_row(row)
        if memory.expiry_tagged:
            memory.expiry_tagged = False
            memory.forget_after_ms = expiry
            back[memory.id] = memory
    if back:
        statements.append((f"UPDATE sm_memories SET expiry_tagged=0 WHERE ns=? AND id IN"
                           f" ({','.join('?' * len(back))})", (ns, *back)))
    return back, statements


def write_moved(face: Face, ns: str, moves: Sequence[tuple[str, int | None]], now: int,
                also: list[Statement]) -> None:
    """Write `also` with some documents' memories' new expiry (`moves`: document id, expiry), in one transaction
    (under the namespace's lock when any expiry moves)."""
    if not moves:
        face.store.execute(also)
        return
    with face.ns_lock(ns):
        back: dict[str, MemoryRow] = {}
        statements = list(also)
        for doc_id, expiry in moves:
            untagged, moving = moved(face, ns, doc_id, expiry, now)
            back.update(untagged)
            statements += moving
        if not back:
            face.store.execute(statements)
            return
        puts = retagged(face, ns, back.values())
        face.collections.write(memories_collection(ns), puts, (), also=statements)
