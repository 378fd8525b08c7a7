"""The v5 face's own tables in the record store, their numbered migrations, and typed rows.

Documents, chunks, memories and their relations live here; the chunks and memories are also
records of two collections per namespace (`supermemory:{ns}:chunks`, `supermemory:{ns}:memories`),
written in the same transactions (`Collections.write(..., also=...)`), which the engine searches.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from engram_index.store import migrations
from engram_index.store.base import RecordStore

# Append-only: a store whose sm_schema says N has run migrations [0, N).
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE sm_namespaces (
        name TEXT PRIMARY KEY,
        supporting_context TEXT,
        created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE sm_documents (
        ns TEXT NOT NULL,
        id TEXT NOT NULL,
        custom_id TEXT,
        content TEXT NOT NULL DEFAULT '',
        title TEXT,
        type TEXT NOT NULL DEFAULT 'text',
        url TEXT,
        summary TEXT,
        metadata TEXT NOT NULL DEFAULT '{}',
        grp TEXT NOT NULL DEFAULT '{}',
        supporting_context TEXT,
        date TEXT,
        task_type TEXT NOT NULL DEFAULT 'memory',
        status TEXT NOT NULL,
        error TEXT,
        revision INTEGER NOT NULL DEFAULT 1,
        raw BLOB,
        filename TEXT,
        content_type TEXT,
        created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL,
        PRIMARY KEY (ns, id)
    ) WITHOUT ROWID;
    CREATE UNIQUE INDEX sm_documents_custom ON sm_documents(ns, custom_id) WHERE custom_id IS NOT NULL;
    CREATE INDEX sm_documents_status ON sm_documents(status) WHERE status NOT IN ('done', 'failed');
    CREATE INDEX sm_documents_created ON sm_documents(ns, created_ms);
    CREATE TABLE sm_chunks (
        ns TEXT NOT NULL,
        id TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        content TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        PRIMARY KEY (ns, id)
    ) WITHOUT ROWID;
    CREATE INDEX sm_chunks_doc ON sm_chunks(ns, doc_id, position);
    CREATE TABLE sm_memories (
        ns TEXT NOT NULL,
        id TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        memory TEXT NOT NULL,
        is_static INTEGER NOT NULL DEFAULT 0,
        is_inference INTEGER NOT NULL DEFAULT 0,
        is_latest INTEGER NOT NULL DEFAULT 1,
        forgotten_ms INTEGER,
        forget_after_ms INTEGER,
        version INTEGER NOT NULL DEFAULT 1,
        created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL,
        PRIMARY KEY (ns, id)
    ) WITHOUT ROWID;
    CREATE INDEX sm_memories_doc ON sm_memories(ns, doc_id);
    CREATE INDEX sm_memories_created ON sm_memories(ns, created_ms);
    CREATE INDEX sm_memories_expiry ON sm_memories(ns, forget_after_ms) WHERE forget_after_ms IS NOT NULL;
    CREATE TABLE sm_relations (
        ns TEXT NOT NULL,
        src TEXT NOT NULL,
        dst TEXT NOT NULL,
        relation TEXT NOT NULL,
        PRIMARY KEY (ns, src, dst)
    ) WITHOUT ROWID;
    CREATE INDEX sm_relations_dst ON sm_relations(ns, dst);
    CREATE TABLE sm_buckets (
        ns TEXT NOT NULL,
        name TEXT NOT NULL,
        description TEXT NOT NULL,
        PRIMARY KEY (ns, name)
    ) WITHOUT ROWID;
    CREATE TABLE sm_settings (name TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
    CREATE TABLE sm_feedback (
        id TEXT PRIMARY KEY, key_id TEXT, body TEXT NOT NULL, created_ms INTEGER NOT NULL
    ) WITHOUT ROWID;
    """,
    # Lists sort by creation or update time: an index for each order a list can ask for.
    """
    CREATE INDEX sm_documents_updated ON sm_documents(ns, updated_ms);
    CREATE INDEX sm_memories_updated ON sm_memories(ns, updated_ms);
    CREATE INDEX sm_chunks_created ON sm_chunks(ns, created_ms);
    """,
    # Whether any document of a namespace has a date, without reading its documents (Face.dates).
    """
    CREATE INDEX sm_documents_dated ON sm_documents(ns, date) WHERE date IS NOT NULL;
    """,
    # A document's memories and a memory's relations by indexes that hold what their reads test: SQLite,
    # planning without statistics, walked the whole namespace by its primary key or its creation index
    # rather than read a narrow index's rows to test `is_latest` or `relation` (tests/supermemory/test_query_plans.py).
    """
    DROP INDEX sm_memories_doc;
    CREATE INDEX sm_memories_doc ON sm_memories(ns, doc_id, is_latest, forgotten_ms, forget_after_ms, created_ms);
    DROP INDEX sm_relations_dst;
    CREATE INDEX sm_relations_dst ON sm_relations(ns, dst, relation);
    """,
    # A profile's sections, newest first (memories.profile): each recallable latest memory by whether it is
    # static, then in the profile's order, with what the profile tests of it beside (the condition's columns
    # too: SQLite reads the row for a column the condition implies but the index does not hold).
    """
    CREATE INDEX sm_memories_profile ON sm_memories(ns, is_static, updated_ms DESC, id, forget_after_ms, doc_id,
        is_latest, forgotten_ms) WHERE is_latest = 1 AND forgotten_ms IS NULL;
    """,
    # A list's orders of memories with what a list tests of each (forgotten, expired) beside, so that a deep
    # page skips the memories before it in the index (memories.list_items).
    """
    DROP INDEX sm_memories_created;
    CREATE INDEX sm_memories_created ON sm_memories(ns, created_ms, id, forgotten_ms, forget_after_ms);
    DROP INDEX sm_memories_updated;
    CREATE INDEX sm_memories_updated ON sm_memories(ns, updated_ms, id, forgotten_ms, forget_after_ms);
    """,
    # A key's feedback of the day, counted at each submission (namespaces.feedback): feedback is never dropped.
    """
    CREATE INDEX sm_feedback_key ON sm_feedback(key_id, created_ms);
    """,
    # How often a namespace's documents changed (added, removed, their metadata or group): a process that
    # does not make every write of its store keeps what filters know of them while it stands (Face.metadata).
    """
    ALTER TABLE sm_namespaces ADD COLUMN docs_changed INTEGER NOT NULL DEFAULT 0;
    """,
    # When a memory's record was given the EXPIRED tag (0: it does not carry it; supermemory/expiry.py): a search
    # leaves those out by the tag and reads by id only the expired memories the index holds without it.
    """
    ALTER TABLE sm_memories ADD COLUMN expiry_tagged INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX sm_memories_unswept ON sm_memories(ns, forget_after_ms)
        WHERE forget_after_ms IS NOT NULL AND expiry_tagged = 0 AND forgotten_ms IS NULL;
    """,
    # The documents each change of a namespace's documents named, by its docs_changed count: a process that
    # does not make every write reads those again, not every document (known.py).
    """
    CREATE TABLE sm_doc_changes (
        ns TEXT NOT NULL,
        seq INTEGER NOT NULL,
        doc_id TEXT NOT NULL,
        PRIMARY KEY (ns, seq, doc_id)
    ) WITHOUT ROWID;
    """,
    # The memories swept lately: a process that does not make every write reads those by id too, until its
    # index has caught up on the sweep's records (supermemory/expiry.py).
    """
    CREATE INDEX sm_memories_swept ON sm_memories(ns, expiry_tagged) WHERE expiry_tagged > 0;
    """,
)


def migrate(store: RecordStore) -> None:
    """Run the face's migrations the store has not run yet (each in one transaction)."""
    migrations.run(store, "sm", [migrations.statements(script) for script in MIGRATIONS])


def now_ms() -> int:
    """Milliseconds since the epoch."""
    return int(time.time() * 1000)


@functools.lru_cache(maxsize=4096)  # a search page formats a few dozen, mostly alike (a document's chunks)
def iso(ms: int) -> str:
    """An ISO 8601 UTC timestamp with milliseconds and a Z."""
    dt = datetime.fromtimestamp(ms / 1000, timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def parse_iso_ms(text: str) -> int:
    """Milliseconds since the epoch of an ISO 8601 date or date-time (UTC when no zone is given)."""
    dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    if not datetime(1, 1, 1, tzinfo=timezone.utc) <= dt <= datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc):
        raise ValueError("outside years 1-9999 in UTC")  # iso() could not write it back
    return int(dt.timestamp() * 1000)


def chunks_collection(ns: str) -> str:
    """The collection holding a namespace's chunks."""
    return f"supermemory:{ns}:chunks"


def memories_collection(ns: str) -> str:
    """The collection holding a namespace's memories."""
    return f"supermemory:{ns}:memories"


def chunk_id(doc_id: str, position: int) -> str:
    """The id of a document's chunk at a position: the document's id, `c`, the position."""
    return f"{doc_id}c{position}"


def chunk_document(chunk: str) -> str:
    """The document id a chunk id was made of (`chunk_id`'s inverse: its suffix holds the only `c` after the
    document's id), so that a search knows a chunk's document without reading it."""
    return chunk.rpartition("c")[0]


DOC_COLUMNS = ("ns, id, custom_id, content, title, type, url, summary, metadata, grp, supporting_context, date,"
               " task_type, status, error, revision, filename, content_type, created_ms, updated_ms")


@dataclass(slots=True)
class DocRow:
    """One document as stored (without its raw file bytes)."""

    ns: str
    id: str
    custom_id: str | None
    content: str
    title: str | None
    type: str
    url: str | None
    summary: str | None
    metadata: dict[str, Any]
    group: dict[str, Any]
    supporting_context: str | None
    date: str | None
    task_type: str
    status: str
    error: str | None
    revision: int
    filename: str | None
    content_type: str | None
    created_ms: int
    updated_ms: int

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> DocRow:
        """A row of DOC_COLUMNS."""
        values = list(row)
        values[8] = json.loads(values[8])
        values[9] = json.loads(values[9])
        return cls(*values)

    def filterable(self) -> dict[str, Any]:
        """What filters see: the group's keys, then the metadata's (metadata wins a clash)."""
        return {**self.group, **self.metadata}


MEMORY_COLUMNS = ("id, doc_id, memory, is_static, is_inference, is_latest, forgotten_ms, forget_after_ms, version,"
                  " created_ms, updated_ms, expiry_tagged")


@dataclass(slots=True)
class MemoryRow:
    """One memory as stored."""

    id: str
    doc_id: str
    memory: str
    is_static: bool
    is_inference: bool
    is_latest: bool
    forgotten_ms: int | None
    forget_after_ms: int | None
    version: int
    created_ms: int
    updated_ms: int
    expiry_tagged: bool = False  # its record carries the EXPIRED tag (supermemory/expiry.py)

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> MemoryRow:
        """A row of MEMORY_COLUMNS."""
        r = list(row)
        return cls(r[0], r[1], r[2], bool(r[3]), bool(r[4]), bool(r[5]), r[6], r[7], r[8], r[9], r[10], bool(r[11]))

    def forgotten(self, at_ms: int) -> bool:
        """Forgotten outright, or expired by `at_ms`."""
        return self.forgotten_ms is not None or (self.forget_after_ms is not None and self.forget_after_ms <= at_ms)


def document_memories(latest: bool = False) -> str:
    """The SELECT (params: ns, ns, doc_id) of a document's memory rows, or of its latest alone."""
    # The ids from the document index first: asked for the rows by document, SQLite (planning without
    # statistics) walks the namespace by its primary key instead (tests/supermemory/test_query_plans.py).
    return (f"SELECT {MEMORY_COLUMNS} FROM sm_memories WHERE ns=? AND id IN (SELECT id FROM sm_memories"
            f" WHERE ns=? AND doc_id=?{' AND is_latest=1' if latest else ''})")


CHUNK_COLUMNS = "id, doc_id, position, content, created_ms"


@dataclass(slots=True)
class ChunkRow:
    """One chunk as stored."""

    id: str
    doc_id: str
    position: int
    content: str
    created_ms: int
