"""The PostgreSQL record store: the same collections, sequence numbers and change log as the SQLite one.

Several engram-index nodes may share one database: each write locks its collection's row
(`SELECT … FOR UPDATE`), so sequence numbers and ordinals stay dense and ordered whichever node
writes, and commits with a NOTIFY on `engram_changes` (collection id and sequence) that nodes
tailing the log wake up on. Faces' own statements arrive in SQLite's dialect and pass through
`dialect.Dialect`. Connections come from a psycopg pool; a database that cannot be reached is
`StoreUnavailable` (503), never a 500.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from engram_index.engine.types import Document, ModelIdentity, Placed
from engram_index.errors import InvalidInput, StorageError, StoreConflict, StoreUnavailable, UnknownSpace
from engram_index.store.rows import (
    DOC_COLUMNS, DOC_COLUMNS_NO_VECTORS, SPACE_COLUMNS, ModelMoves, change_pages, placed_pages, placed_sql,
    row_to_document, row_to_space,
)
from engram_index.store.base import Change, CollectionInfo, Statement, StoredDocument, WriteResult
from engram_index.store.dialect import Dialect, parameters
from engram_index.store.postgres_schema import MIGRATIONS

log = logging.getLogger(__name__)
T = TypeVar("T")
CHANNEL = "engram_changes"

# Any one number, the same on every node: migrations wait for each other across nodes.
_MIGRATION_LOCK = 0x656E6772616D
_CHANGES_SQL = (f"SELECT seq, deleted, {DOC_COLUMNS} FROM documents"
                " WHERE space_id=%s AND (seq, ord) > (%s, %s) ORDER BY seq, ord LIMIT %s")
_PLACED_SQL = {vectors: placed_sql("%s", vectors) for vectors in (False, True)}
_SPACE_SQL = f"SELECT {SPACE_COLUMNS} FROM spaces WHERE uri=%s"
_SPACES_SQL = f"SELECT {SPACE_COLUMNS} FROM spaces WHERE uri = ANY(%s)"
# How long the pool keeps retrying a connection, with its doubling backoff, before it gives up and the
# next request starts over at a 1 s delay: with psycopg_pool's default (5 min) the delay kept doubling
# through an outage, so a node went on answering 503 for up to half the outage after PostgreSQL was back.
RECONNECT_S = 5.0
# Type codes whose values SQLite would hand back as integers: booleans, and numeric (sum of bigints).
_BOOL, _NUMERIC = 16, 1700


def _sqlite_value(value: Any) -> Any:
    """A value as SQLite would have returned it (True → 1, Decimal 3 → 3)."""
    if value is None or isinstance(value, int):
        return int(value) if isinstance(value, bool) else value
    return int(value) if value == int(value) else float(value)


class PostgresStore(ModelMoves):
    """The record store in a PostgreSQL database (`postgresql://…`), shared by any number of nodes."""

    def __init__(self, url: str, read_only: bool = False, *, pool_size: int = 8, timeout: float = 3.0) -> None:
        """Connect (creating and migrating the schema when needed, unless read-only)."""
        self.url = url
        self.read_only = read_only
        # One writer per process, as with SQLite: faces read, then write, under it.
        self._write_lock = threading.Lock()
        self._keys: dict[str, list[str]] = {}
        self._listener: psycopg.Connection[Any] | None = None  # LISTEN engram_changes, for tailing nodes
        self.dialect = Dialect(self._primary_key)
        try:
            self._pool = ConnectionPool(url, min_size=1, max_size=pool_size, timeout=timeout, open=True,
                                        reconnect_timeout=RECONNECT_S,
                                        kwargs={"autocommit": True}, name="engram-store")
            self._pool.wait(timeout)
        except (psycopg.Error, PoolTimeout) as exc:
            raise StorageError(f"cannot connect to the PostgreSQL store: {_safe(exc)}") from exc
        if not read_only:
            self._migrate()
        self.identity = str(self._read(lambda c: _one(c, "SELECT id FROM store_identity", ()))[0])

    # -- connections ------------------------------------------------------------------------

    def _read(self, work: Callable[[psycopg.Connection[Any]], T], retry: bool = True) -> T:
        """Run `work` on a pooled connection; an unreachable database is StoreUnavailable.

        A read that fails on a pooled connection the server dropped (it restarted) is run once
        more on a fresh one; a write is not, since its commit may have landed.
        """
        try:
            with self._pool.connection() as conn:
                return work(conn)
        except psycopg.OperationalError as exc:
            if retry:
                self._pool.check()  # drop the other dead connections too
                return self._read(work, retry=False)
            raise StoreUnavailable(f"the PostgreSQL store is unreachable: {_safe(exc)}") from exc
        except PoolTimeout as exc:
            raise StoreUnavailable(f"the PostgreSQL store is unreachable: {_safe(exc)}") from exc
        except (psycopg.errors.UniqueViolation, psycopg.errors.SerializationFailure,
                psycopg.errors.DeadlockDetected) as exc:
            # Two nodes writing the same fact or document at once: the loser's retry reads the winner's.
            log.warning("a write lost a race with another writer: %s", _safe(exc))
            raise StoreConflict(f"another writer changed the same records at the same moment: retry ({_safe(exc)})") \
                from exc
        except psycopg.DataError as exc:
            if "NUL" in str(exc):  # PostgreSQL's text cannot hold U+0000 (SQLite's can): the caller's 400
                raise InvalidInput("text may not contain the NUL character (U+0000) in this store") from exc
            raise

    def _transaction(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run `work` in one transaction, this process's writes one at a time."""
        with self._write_lock:
            def run(conn: psycopg.Connection[Any]) -> T:
                with conn.transaction():
                    return work(conn)
            return self._read(run, retry=False)

    @contextlib.contextmanager
    def exclusive(self, name: str) -> Iterator[None]:
        """Hold the lock named `name` against every node of this database: a session advisory lock on a
        pooled connection of its own, for the block (the store's other calls use other connections)."""
        key = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)
        try:
            with self._pool.connection() as conn:
                conn.execute("SELECT pg_advisory_lock(%s)", (key,))
                try:
                    yield
                finally:
                    try:
                        conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
                    except psycopg.Error:  # the connection died: the server released the lock with it
                        pass
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise StoreUnavailable(f"the PostgreSQL store is unreachable: {_safe(exc)}") from exc

    def _migrate(self) -> None:
        """Run the migrations this database has not run yet, one node at a time."""
        def migrate(conn: psycopg.Connection[Any]) -> None:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute("CREATE TABLE IF NOT EXISTS store_schema (version BIGINT NOT NULL)")
            row = conn.execute("SELECT version FROM store_schema").fetchone()
            version = int(row[0]) if row else 0
            for number in range(version, len(MIGRATIONS)):
                conn.execute(MIGRATIONS[number].encode())
                if number == 0:
                    conn.execute("INSERT INTO store_identity(id) VALUES (%s)", (uuid.uuid4().hex,))
            conn.execute("DELETE FROM store_schema")
            conn.execute("INSERT INTO store_schema(version) VALUES (%s)", (len(MIGRATIONS),))
        self._transaction(migrate)

    def _primary_key(self, table: str) -> list[str]:
        """The primary key columns of a table, from the catalog (for INSERT OR REPLACE)."""
        keys = self._keys.get(table)
        if keys is None:
            rows = self._read(lambda c: c.execute(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
                " AND a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass(%s) AND i.indisprimary"
                " ORDER BY array_position(i.indkey, a.attnum)", (table,)).fetchall())
            if not rows:
                raise StorageError(f"INSERT OR REPLACE into {table}, which has no primary key")
            keys = self._keys[table] = [str(r[0]) for r in rows]
        return keys

    def close(self) -> None:
        """Close every pooled connection and the listener."""
        if self._listener is not None:
            self._listener.close()
        self._pool.close()

    # -- tailing the change log ---------------------------------------------------------------

    def sequences(self, ids: Sequence[int]) -> dict[int, int]:
        """Each collection's latest committed sequence number (by any node): the log position to reach."""
        rows = self._read(lambda c: c.execute("SELECT id, seq FROM spaces WHERE id = ANY(%s)", (list(ids),)).fetchall())
        return {int(i): int(q) for i, q in rows}

    def mark_purged(self, space_id: int, seq: int) -> None:
        """Record that deletions up to `seq` must leave every node's cache (an erasure): nodes read it as they tail."""
        self._transaction(lambda c: c.execute(
            "UPDATE spaces SET purged_seq = GREATEST(purged_seq, %s) WHERE id=%s", (seq, space_id)))

    def purges(self, ids: Sequence[int]) -> dict[int, int]:
        """Each collection's latest sequence whose deletions every node must purge from its cache (0: none)."""
        rows = self._read(lambda c: c.execute(
            "SELECT id, purged_seq FROM spaces WHERE id = ANY(%s)", (list(ids),)).fetchall())
        return {int(i): int(q) for i, q in rows}

    def wait_for_changes(self, timeout: float) -> set[int] | None:
        """The ids of collections written (by any node) since the last call, waiting up to `timeout` for
        the first; None when the listener could not listen (the caller falls back to polling)."""
        try:
            if self._listener is None:
                self._listener = psycopg.connect(self.url, autocommit=True)
                self._listener.execute(f"LISTEN {CHANNEL}")
            ids: set[int] = set()
            for note in self._listener.notifies(timeout=timeout, stop_after=1):
                ids.add(int(note.payload.split(":", 1)[0]))
            for note in self._listener.notifies(timeout=0.001):  # the ones right behind it
                ids.add(int(note.payload.split(":", 1)[0]))
            return ids
        except (psycopg.Error, ValueError):
            if self._listener is not None:
                self._listener.close()
            self._listener = None
            return None

    def rewrite(self) -> None:
        """Rewrite every table (VACUUM FULL), so that no deleted row's bytes stay in a page's free space."""
        with self._write_lock:
            self._read(lambda c: c.execute("VACUUM FULL"))

    def truncate_log(self, attempts: int = 50) -> bool:
        """Checkpoint and switch to a new WAL segment, so that older segments (with the deleted rows'
        images) may be recycled; False when this role may not (it needs pg_checkpoint)."""
        def checkpoint(conn: psycopg.Connection[Any]) -> bool:
            try:
                conn.execute("CHECKPOINT")
                conn.execute("SELECT pg_switch_wal()")
            except psycopg.errors.InsufficientPrivilege:
                log.warning("the store's role may not CHECKPOINT: grant it pg_checkpoint (docs/design/store.md)")
                return False
            return True
        return self._read(checkpoint)

    # -- collections ---------------------------------------------------------------------------

    def ensure_collection(self, uri: str, model: ModelIdentity | None = None, document_prefix: str | None = None,
                          query_prefix: str | None = None, now_ms: int = 0) -> CollectionInfo:
        """Create the collection when new; update its model and prefixes when given."""
        def run(conn: psycopg.Connection[Any]) -> None:
            conn.execute("INSERT INTO spaces(uri, created_ms) VALUES (%s, %s) ON CONFLICT (uri) DO NOTHING",
                         (uri, now_ms))
            if model is not None:
                conn.execute("UPDATE spaces SET model=%s, model_digest=%s, dims=%s WHERE uri=%s",
                             (model.model, model.digest, model.dims, uri))
            if document_prefix is not None:
                conn.execute("UPDATE spaces SET document_prefix=%s WHERE uri=%s", (document_prefix, uri))
            if query_prefix is not None:
                conn.execute("UPDATE spaces SET query_prefix=%s WHERE uri=%s", (query_prefix, uri))
        self._transaction(run)
        return self.collection(uri)

    def drop_collection(self, uri: str, also: Sequence[Statement] = ()) -> int | None:
        """Delete a collection with every record it has, and run `also` in the same transaction (a face's rows
        of it); returns its id (None when absent)."""
        def run(conn: psycopg.Connection[Any]) -> int | None:
            row = conn.execute("SELECT id FROM spaces WHERE uri=%s FOR UPDATE", (uri,)).fetchone()
            if row is not None:
                conn.execute("DELETE FROM documents WHERE space_id=%s", (row[0],))
                conn.execute("DELETE FROM spaces WHERE id=%s", (row[0],))
            for sql, params in also:
                conn.execute(self.dialect.sql(sql), parameters(params))
            return None if row is None else int(row[0])
        return self._transaction(run)

    def collection(self, uri: str) -> CollectionInfo:
        """The collection with this URI, or UnknownSpace."""
        row = self._read(lambda c: c.execute(_SPACE_SQL, (uri,)).fetchone())
        if row is None:
            raise UnknownSpace(f"space not indexed here: {uri}")
        return row_to_space(row)

    def collection_infos(self, uris: Sequence[str]) -> dict[str, CollectionInfo]:
        """These collections as stored now, by URI, in one read (absent ones left out)."""
        if not uris:
            return {}
        rows = self._read(lambda c: c.execute(_SPACES_SQL, (list(uris),)).fetchall())
        return {info.uri: info for info in map(row_to_space, rows)}

    def collections(self) -> list[str]:
        """The URIs of every collection in the store."""
        return [str(r[0]) for r in self._read(lambda c: c.execute("SELECT uri FROM spaces ORDER BY id").fetchall())]

    # -- writes -----------------------------------------------------------------------------

    def write(self, space_id: int, puts: Sequence[StoredDocument], deletes: Sequence[str] = (),
              also: Sequence[Statement] = ()) -> WriteResult:
        """Upsert and delete documents in one transaction (see sqlite.Store.write)."""
        return self.write_many([(space_id, puts, deletes)], also)[0]

    def write_many(self, writes: Sequence[tuple[int, Sequence[StoredDocument], Sequence[str]]],
                   also: Sequence[Statement] = ()) -> list[WriteResult]:
        """Upserts and deletes in several spaces, and `also`, in one transaction; a result per write."""
        def run(conn: psycopg.Connection[Any]) -> list[WriteResult]:
            results = [_write_locked(conn, space_id, puts, deletes) for space_id, puts, deletes in writes]
            for sql, params in also:
                conn.execute(self.dialect.sql(sql), parameters(params))
            for (space_id, _, _), result in zip(writes, results):
                if result.changes:  # delivered at commit, to every node listening
                    conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, f"{space_id}:{result.seq}"))
            return results
        return self._transaction(run)

    # -- reads ------------------------------------------------------------------------------

    def documents(self, space_id: int, ords: Iterable[int], vectors: bool = True) -> dict[int, Document]:
        """The live documents with these ordinals (without their vector blobs unless asked)."""
        wanted = list(ords)
        columns = DOC_COLUMNS if vectors else DOC_COLUMNS_NO_VECTORS
        rows = self._read(lambda c: c.execute(
            f"SELECT {columns} FROM documents WHERE space_id=%s AND deleted=0 AND ord = ANY(%s)",
            (space_id, wanted)).fetchall())
        return dict(row_to_document(row) for row in rows)

    def document_by_id(self, space_id: int, doc_id: str) -> tuple[int, Document] | None:
        """The live document with this id, with its ordinal, or None."""
        row = self._read(lambda c: c.execute(
            f"SELECT {DOC_COLUMNS} FROM documents WHERE space_id=%s AND doc_id=%s AND deleted=0",
            (space_id, doc_id)).fetchone())
        return row_to_document(row) if row else None

    def changes_since(self, space_id: int, seq: int, batch: int = 2000) -> Iterator[list[Change]]:
        """Every document changed after `seq`, in sequence order, in batches (deletes as None)."""
        return change_pages(lambda start: self._read(lambda c: c.execute(_CHANGES_SQL, start).fetchall()),
                            space_id, seq, batch)

    def placed_fields(self, space_id: int, batch: int = 2000, vectors: bool = True) -> Iterator[list[tuple[int, Placed]]]:
        """Every live document's ordinal and `Placed` fields, in sequence order, in batches (a load's)."""
        sql = _PLACED_SQL[vectors]
        return placed_pages(lambda start: self._read(lambda c: c.execute(sql, start).fetchall()), space_id, batch)

    def count(self, space_id: int) -> int:
        """The number of live documents in the collection."""
        return int(self._read(lambda c: _one(
            c, "SELECT count(*) FROM documents WHERE space_id=%s AND deleted=0", (space_id,)))[0])

    def recent(self, space_id: int, limit: int, *, before: tuple[int, str] | None = None,
               author: str | None = None, tags: Sequence[str] = (),
               with_vector: bool = False) -> list[tuple[int, Document]]:
        """Live documents newest first (created_ms, then id, both descending), without vector blobs."""
        where = ["space_id=%s", "deleted=0"]
        args: list[Any] = [space_id]
        if before is not None:
            where.append("(created_ms, doc_id) < (%s, %s)")
            args += [before[0], before[1]]
        if author is not None:
            where.append("author = %s")
            args.append(author)
        for tag in dict.fromkeys(tags):
            where.append("tags::jsonb ? %s")  # the array holds this string
            args.append(tag)
        if with_vector:
            where.append("vector IS NOT NULL")
        sql = (f"SELECT {DOC_COLUMNS_NO_VECTORS} FROM documents WHERE {' AND '.join(where)}"
               " ORDER BY created_ms DESC, doc_id DESC LIMIT %s")
        rows = self._read(lambda c: c.execute(sql, (*args, limit)).fetchall())
        return [row_to_document(row) for row in rows]

    def execute(self, statements: Sequence[Statement]) -> None:
        """Run statements (in SQLite's dialect) in one write transaction."""
        def run(conn: psycopg.Connection[Any]) -> None:
            for sql, params in statements:
                conn.execute(self.dialect.sql(sql), parameters(params))
        self._transaction(run)

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of a read query (in SQLite's dialect), with values as SQLite would give them."""
        translated = self.dialect.sql(sql)

        def run(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            cur = conn.execute(translated, parameters(params))
            rows = cur.fetchall()
            if cur.description and any(d.type_code in (_BOOL, _NUMERIC) for d in cur.description):
                rows = [tuple(_sqlite_value(v) if isinstance(v, bool) or not isinstance(v, (int, str, bytes, float))
                              else v for v in row) for row in rows]
            return rows
        return self._read(run)

    def skipped(self, space_id: int) -> list[tuple[str, str, int]]:
        """(author, reason, count) of the live documents whose vector is not indexed, by author and reason."""
        rows = self._read(lambda c: c.execute(
            "SELECT author, skip_reason, count(*) FROM documents"
            " WHERE space_id=%s AND deleted=0 AND skip_reason IS NOT NULL"
            " GROUP BY author, skip_reason ORDER BY author, skip_reason", (space_id,)).fetchall())
        return [(str(a), str(r), int(n)) for a, r, n in rows]


def _write_locked(conn: psycopg.Connection[Any], space_id: int, puts: Sequence[StoredDocument],
                  deletes: Sequence[str]) -> WriteResult:
    """Apply one batch inside an open transaction, holding the collection's row (see sqlite.Store)."""
    found = conn.execute("SELECT seq, next_ord FROM spaces WHERE id=%s FOR UPDATE", (space_id,)).fetchone()
    if found is None:
        raise StorageError(f"no space with id {space_id}")
    seq, next_ord = int(found[0]) + 1, int(found[1])
    changes: list[Change] = []
    unchanged = 0
    ids = [item.document.id for item in puts] + list(deletes)
    old_rows = {r[0]: r[1:] for r in conn.execute(
        "SELECT doc_id, ord, deleted, author, text, tags, source, created_ms, metadata, vector, skip_reason,"
        " next_vector FROM documents WHERE space_id=%s AND doc_id = ANY(%s)", (space_id, ids)).fetchall()}
    inserts: list[tuple[Any, ...]] = []
    updates: list[tuple[Any, ...]] = []
    for item in puts:
        doc = item.document
        row = (doc.author, doc.text, json.dumps(list(doc.tags), ensure_ascii=False), doc.source, doc.created_ms,
               json.dumps(doc.metadata, ensure_ascii=False, sort_keys=True) if doc.metadata else None,
               doc.vector, item.skip_reason, doc.next_vector)
        old = old_rows.get(doc.id)
        if old is not None and not old[1] and tuple(old[2:]) == row:
            unchanged += 1
            continue
        if old is None:
            ord_ = next_ord
            next_ord += 1
            inserts.append((space_id, ord_, doc.id, seq, *row[:5], doc.indexed_ms, *row[5:]))
        else:
            ord_ = old[0]
            updates.append((seq, *row[:5], doc.indexed_ms, *row[5:], space_id, ord_))
        # The same id twice in one batch: the second put sees the first (as SQLite's row-by-row does).
        old_rows[doc.id] = (ord_, 0, *row)
        changes.append(Change(ord_, seq, doc))
    _flush(conn, inserts, updates)
    tombstones: list[tuple[Any, ...]] = []
    for doc_id in deletes:
        old = old_rows.get(doc_id)
        if old is None or old[1]:
            continue
        tombstones.append((seq, space_id, old[0]))
        old_rows[doc_id] = (old[0], 1, *old[2:])
        changes.append(Change(old[0], seq, None))
    if tombstones:
        conn.cursor().executemany(
            "UPDATE documents SET seq=%s, deleted=1, text='', tags='[]', source=NULL, metadata=NULL, vector=NULL,"
            " skip_reason=NULL, next_vector=NULL WHERE space_id=%s AND ord=%s", tombstones)
    if changes:
        conn.execute("UPDATE spaces SET seq=%s, next_ord=%s WHERE id=%s", (seq, next_ord, space_id))
    else:
        seq -= 1
    return WriteResult(seq, changes, unchanged)


def _flush(conn: psycopg.Connection[Any], inserts: list[tuple[Any, ...]], updates: list[tuple[Any, ...]]) -> None:
    """Write a batch's new and changed rows, an insert and an update statement for all of them."""
    cur = conn.cursor()
    # A row inserted and then changed in the same batch: its update must follow its insert.
    if inserts:
        cur.executemany(
            "INSERT INTO documents(space_id, ord, doc_id, seq, deleted, author, text, tags, source, created_ms,"
            " indexed_ms, metadata, vector, skip_reason, next_vector)"
            " VALUES (%s, %s, %s, %s, 0, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", inserts)
    if updates:
        cur.executemany(
            "UPDATE documents SET seq=%s, deleted=0, author=%s, text=%s, tags=%s, source=%s, created_ms=%s,"
            " indexed_ms=%s, metadata=%s, vector=%s, skip_reason=%s, next_vector=%s WHERE space_id=%s AND ord=%s",
            updates)


def _one(conn: psycopg.Connection[Any], sql: str, params: tuple[Any, ...]) -> tuple[Any, ...]:
    """The one row a query always returns."""
    row = conn.execute(sql, params).fetchone()
    if row is None:
        raise StorageError(f"the PostgreSQL store answered no row to {sql.split()[0]}")
    return tuple(row)


def _safe(exc: BaseException) -> str:
    """An error's first line, without the connection string (which may carry a password)."""
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
