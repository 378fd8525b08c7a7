"""The PostgreSQL store's own tables, made by numbered, append-only migrations (apart from SQLite's)."""

from __future__ import annotations

from engram_index.store.dialect import SUPPORT_FUNCTIONS

# Append-only: a database whose store_schema says N has run migrations [0, N). PostgreSQL's own
# numbering, apart from SQLite's: the first one is SQLite's three as they stand today.
MIGRATIONS: tuple[str, ...] = (
    SUPPORT_FUNCTIONS + """
    CREATE TABLE store_identity (id TEXT NOT NULL);
    CREATE TABLE spaces (
        id BIGSERIAL PRIMARY KEY,
        uri TEXT NOT NULL UNIQUE,
        model TEXT, model_digest TEXT, dims BIGINT,
        document_prefix TEXT NOT NULL DEFAULT '',
        query_prefix TEXT NOT NULL DEFAULT '',
        seq BIGINT NOT NULL DEFAULT 0,
        next_ord BIGINT NOT NULL DEFAULT 0,
        created_ms BIGINT NOT NULL DEFAULT 0,
        next_model TEXT, next_digest TEXT, next_dims BIGINT
    );
    CREATE TABLE documents (
        space_id BIGINT NOT NULL REFERENCES spaces(id),
        ord BIGINT NOT NULL,
        doc_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        deleted BIGINT NOT NULL DEFAULT 0,
        author TEXT NOT NULL DEFAULT '',
        text TEXT NOT NULL DEFAULT '',
        tags TEXT NOT NULL DEFAULT '[]',
        source TEXT,
        created_ms BIGINT NOT NULL DEFAULT 0,
        indexed_ms BIGINT NOT NULL DEFAULT 0,
        metadata TEXT,
        vector BYTEA,
        skip_reason TEXT,
        next_vector BYTEA,
        PRIMARY KEY (space_id, ord)
    );
    CREATE UNIQUE INDEX documents_by_id ON documents(space_id, doc_id);
    CREATE INDEX documents_by_seq ON documents(space_id, seq, ord);
    CREATE INDEX documents_by_created ON documents(space_id, deleted, created_ms);
    -- The garden face's sync tables are its own migrations (engram/syncstate.py); databases made
    -- before that have them from here, and the face adopts them as they are.
    -- The bearer keys of the supermemory and Kindgi faces (keys.py), hashes only.
    CREATE TABLE keys (
        id TEXT PRIMARY KEY,
        face TEXT NOT NULL,
        hash BYTEA NOT NULL UNIQUE,
        label TEXT,
        grants TEXT NOT NULL,
        created_ms BIGINT NOT NULL,
        expires_ms BIGINT,
        revoked_ms BIGINT
    );
    """,
    # 1: an erasure's mark that every node purges its cache of the collection (Collections.purge).
    "ALTER TABLE spaces ADD COLUMN purged_seq BIGINT NOT NULL DEFAULT 0",
)
