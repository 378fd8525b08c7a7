"""The SQLite store's own tables (spaces, documents: the generic collections and their change log), made by
numbered, append-only migrations counted in `PRAGMA user_version`, and the page size of new stores."""

from __future__ import annotations

# Append-only: a database at user_version N has run migrations [0, N).
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE spaces (
        id INTEGER PRIMARY KEY,
        uri TEXT NOT NULL UNIQUE,
        model TEXT, model_digest TEXT, dims INTEGER,
        document_prefix TEXT NOT NULL DEFAULT '',
        query_prefix TEXT NOT NULL DEFAULT '',
        seq INTEGER NOT NULL DEFAULT 0,
        next_ord INTEGER NOT NULL DEFAULT 0,
        created_ms INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE documents (
        space_id INTEGER NOT NULL REFERENCES spaces(id),
        ord INTEGER NOT NULL,
        doc_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        deleted INTEGER NOT NULL DEFAULT 0,
        author TEXT NOT NULL DEFAULT '',
        text TEXT NOT NULL DEFAULT '',
        tags TEXT NOT NULL DEFAULT '[]',
        source TEXT,
        created_ms INTEGER NOT NULL DEFAULT 0,
        indexed_ms INTEGER NOT NULL DEFAULT 0,
        metadata TEXT,
        vector BLOB,
        skip_reason TEXT,
        PRIMARY KEY (space_id, ord)
    ) WITHOUT ROWID;
    CREATE UNIQUE INDEX documents_by_id ON documents(space_id, doc_id);
    CREATE INDEX documents_by_seq ON documents(space_id, seq);
    CREATE INDEX documents_by_created ON documents(space_id, deleted, created_ms);
    """,
    # Was the garden face's sync tables, which are its own migrations now (engram/syncstate.py, which
    # adopts the tables that stores migrated before it made): kept, empty, so that the numbering holds.
    "SELECT 1",
    # A space moving to a new model: the model it moves to, and each memory's vector for it.
    """
    ALTER TABLE documents ADD COLUMN next_vector BLOB;
    ALTER TABLE spaces ADD COLUMN next_model TEXT;
    ALTER TABLE spaces ADD COLUMN next_digest TEXT;
    ALTER TABLE spaces ADD COLUMN next_dims INTEGER;
    """,
)

# The page size of new stores (an existing one keeps its own until `engram-index repack`).
PAGE_SIZE = 16384
