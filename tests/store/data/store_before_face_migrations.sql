-- A record store as the code before the garden face's own migrations wrote it (user_version 3,
-- sync tables made by the store's migration 1), with one memory and one synced repo: `.dump` of it.
BEGIN TRANSACTION;
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
        skip_reason TEXT, next_vector BLOB,
        PRIMARY KEY (space_id, ord)
    ) WITHOUT ROWID;
INSERT INTO "documents" VALUES(1,0,'at://did:plc:abc/space/garden.engram.space/s/did:plc:a/garden.engram.memory/r0',1,0,'did:plc:a','kept note','[]',NULL,1,0,NULL,NULL,NULL,NULL);
CREATE TABLE spaces (
        id INTEGER PRIMARY KEY,
        uri TEXT NOT NULL UNIQUE,
        model TEXT, model_digest TEXT, dims INTEGER,
        document_prefix TEXT NOT NULL DEFAULT '',
        query_prefix TEXT NOT NULL DEFAULT '',
        seq INTEGER NOT NULL DEFAULT 0,
        next_ord INTEGER NOT NULL DEFAULT 0,
        created_ms INTEGER NOT NULL DEFAULT 0
    , next_model TEXT, next_digest TEXT, next_dims INTEGER);
INSERT INTO "spaces" VALUES(1,'at://did:plc:abc/space/garden.engram.space/s','m','d',4,'doc: ','query: ',1,1,0,NULL,NULL,NULL);
CREATE TABLE sync_paths (
        space TEXT NOT NULL,
        repo TEXT NOT NULL,
        path TEXT NOT NULL,
        cid TEXT NOT NULL,
        problem TEXT,
        PRIMARY KEY (space, repo, path)
    ) WITHOUT ROWID;
INSERT INTO "sync_paths" VALUES('at://did:plc:abc/space/garden.engram.space/s','did:plc:a','garden.engram.memory/r0','bafycid',NULL);
CREATE TABLE sync_repos (
        space TEXT NOT NULL,
        repo TEXT NOT NULL,
        rev TEXT,
        state BLOB,
        problem TEXT,
        checked_ms INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (space, repo)
    ) WITHOUT ROWID;
INSERT INTO "sync_repos" VALUES('at://did:plc:abc/space/garden.engram.space/s','did:plc:a','rev1',X'0102',NULL,2000);
CREATE TABLE sync_spaces (
        space TEXT PRIMARY KEY,
        added_ms INTEGER NOT NULL DEFAULT 0,
        space_rev TEXT,
        notify_until_ms INTEGER NOT NULL DEFAULT 0,
        synced_ms INTEGER NOT NULL DEFAULT 0,
        problem TEXT
    ) WITHOUT ROWID;
INSERT INTO "sync_spaces" VALUES('at://did:plc:abc/space/garden.engram.space/s',1000,NULL,0,0,NULL);
CREATE UNIQUE INDEX documents_by_id ON documents(space_id, doc_id);
CREATE INDEX documents_by_seq ON documents(space_id, seq);
CREATE INDEX documents_by_created ON documents(space_id, deleted, created_ms);
COMMIT;
PRAGMA user_version=3;
