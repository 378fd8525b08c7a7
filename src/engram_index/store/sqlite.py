"""The record store: one SQLite database (WAL) holding every collection's documents and a change log.

Every write bumps the collection's sequence number and stamps the rows it touches with it, deletes
included (as tombstones), so an index can replay exactly what changed since the sequence it last
made durable. Ordinals are dense per space and never reused, so vector rows can be addressed by them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from engram_index.engine.types import Document, ModelIdentity, Placed
from engram_index.errors import StorageError, UnknownSpace
from engram_index.store.rows import (
    DOC_COLUMNS, DOC_COLUMNS_NO_VECTORS, SPACE_COLUMNS, ModelMoves, change_pages, placed_pages, placed_sql,
    row_to_document, row_to_space,
)
from engram_index.store.base import Change, CollectionInfo, Statement, StoredDocument, WriteResult
from engram_index.store.sqlite_schema import MIGRATIONS, PAGE_SIZE

__all__ = ["PAGE_SIZE", "Change", "CollectionInfo", "Statement", "Store", "StoredDocument", "WriteResult"]

# One page of the change log. A row value, not an OR: SQLite then seeks the (space_id, seq)
# index (whose entries end with the ordinal) to the page start, instead of scanning from the
# space's first row for every page (quadratic: a 1M-memory space took minutes).
_CHANGES_SQL = (
    f"SELECT seq, deleted, {DOC_COLUMNS} FROM documents"
    " WHERE space_id=? AND (seq, ord) > (?, ?) ORDER BY seq, ord LIMIT ?"
)

_PLACED_SQL = {vectors: placed_sql("?", vectors) for vectors in (False, True)}


class Store(ModelMoves):
    """The SQLite record store: one writer (serialised by a lock), readers per thread."""

    def __init__(self, path: Path, read_only: bool = False) -> None:
        """Open (creating and migrating when needed, unless read-only) the database at `path`."""
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._write_lock = threading.Lock()
        self._exclusive = threading.Lock()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []  # every thread's, to close with the store
        self._readers_lock = threading.Lock()
        try:
            self._writer = self._connect()
            # Deleted content is overwritten with zeros, not left in free pages: an erasure or a
            # forget must leave no byte of what it removed in the file (truncate_log() empties the
            # write-ahead log's older page images too).
            self._writer.execute("PRAGMA secure_delete=ON")
            if not read_only:
                self._migrate()
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open the database at {path}: {exc}") from exc

    def _connect(self) -> sqlite3.Connection:
        """Open a connection with the settings every connection needs."""
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        # Only a new, empty database takes this. A memory's row (its 768-byte vector at 384
        # dimensions, the text, the rest) must fit on its page: with 4 KB pages this WITHOUT
        # ROWID table keeps ~1 KB of a row in place and spills the rest to an overflow page of
        # its own, which tripled the file at 100k memories and doubled the time to fetch a
        # search's results (bench/store_pages.py).
        conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
        conn.execute("PRAGMA journal_mode=WAL")
        # FULL: an acknowledged write survives power loss, not only a process crash.
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        # Result rows are read at random: a larger page cache and memory-mapped reads spare
        # a system call per page on every fetch of results.
        conn.execute("PRAGMA cache_size=-32768")
        conn.execute("PRAGMA mmap_size=1073741824")
        return conn

    def _reader(self) -> sqlite3.Connection:
        """This thread's read connection."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def _migrate(self) -> None:
        """Run the migrations this database has not run yet."""
        with self._write_lock:
            version = self._writer.execute("PRAGMA user_version").fetchone()[0]
            for number in range(version, len(MIGRATIONS)):
                # One script, one transaction: a crash mid-migration leaves the old version.
                self._writer.executescript(
                    f"BEGIN IMMEDIATE;{MIGRATIONS[number]};PRAGMA user_version={number + 1};COMMIT;"
                )

    def rewrite(self) -> None:
        """Rebuild the database file page by page (VACUUM), so that no fragment of a deleted row
        survives in a page's unused space: secure_delete zeroes deleted cells, but a page rebuilt
        by a b-tree rebalance can keep older bytes in its gap. Writes wait meanwhile (~4 s for a
        470 MB file); follow it with truncate_log()."""
        with self._write_lock:
            self._writer.execute("VACUUM")

    def truncate_log(self, attempts: int = 50) -> bool:
        """Copy the write-ahead log into the database and empty it, so that no older page image (of a
        row since deleted) outlives the deletion; False when readers kept it busy every time."""
        for _ in range(attempts):
            with self._write_lock:
                busy = self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            if not busy:
                return True
            time.sleep(0.02)  # a read in progress holds an older snapshot: let it end
        return False

    def page_size(self) -> int:
        """The database's page size in bytes."""
        return int(self._writer.execute("PRAGMA page_size").fetchone()[0])

    def repack(self, page_size: int = PAGE_SIZE) -> tuple[int, int] | None:
        """Rewrite a database made with smaller pages; give its bytes before and after (None: nothing to do).

        One SQLite VACUUM: atomic (a crash leaves the old file), it needs free disk space for a
        copy of the database, and nothing else may have the database open.
        """
        with self._write_lock:
            conn = self._writer
            if self.page_size() >= page_size:
                return None
            before = self._file_bytes()
            self._close_readers()  # they would hold the database open (threads reopen theirs)
            # A WAL database keeps its page size: VACUUM changes it in rollback mode only, which
            # SQLite enters only while no other connection has the database open.
            try:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                mode = conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0]
            except sqlite3.OperationalError:
                mode = "wal"
            if mode != "delete":
                raise StorageError(f"the record store {self.path} is open elsewhere: stop the service first")
            try:
                conn.execute(f"PRAGMA page_size={page_size}")
                conn.execute("VACUUM")
            except sqlite3.Error as exc:
                raise StorageError(f"could not repack the record store {self.path}: {exc}") from exc
            finally:
                conn.execute("PRAGMA journal_mode=WAL")
            return before, self._file_bytes()

    def _file_bytes(self) -> int:
        """The database's size on disk, its write-ahead log included."""
        wal = self.path.with_name(self.path.name + "-wal")
        return self.path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)

    def _close_readers(self) -> None:
        """Close every thread's reader (none may be in use); a thread that reads again opens a new one."""
        with self._readers_lock:
            readers, self._readers, self._local = self._readers, [], threading.local()
        for conn in readers:
            conn.close()

    def close(self) -> None:
        """Close the writer and every thread's reader (none may be in use)."""
        self._close_readers()
        self._writer.close()

    # -- collections ---------------------------------------------------------------------------

    def ensure_collection(
        self,
        uri: str,
        model: ModelIdentity | None = None,
        document_prefix: str | None = None,
        query_prefix: str | None = None,
        now_ms: int = 0,
    ) -> CollectionInfo:
        """Create the collection when new; update its model and prefixes when given."""
        with self._write_lock:
            conn = self._writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "INSERT OR IGNORE INTO spaces(uri, created_ms) VALUES (?, ?)", (uri, now_ms)
                )
                if model is not None:
                    conn.execute(
                        "UPDATE spaces SET model=?, model_digest=?, dims=? WHERE uri=?",
                        (model.model, model.digest, model.dims, uri),
                    )
                if document_prefix is not None:
                    conn.execute(
                        "UPDATE spaces SET document_prefix=? WHERE uri=?", (document_prefix, uri)
                    )
                if query_prefix is not None:
                    conn.execute("UPDATE spaces SET query_prefix=? WHERE uri=?", (query_prefix, uri))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return self.collection(uri)

    def drop_collection(self, uri: str, also: Sequence[Statement] = ()) -> int | None:
        """Delete a collection with every record it has, and run `also` in the same transaction (a face's rows
        of it); returns its id (None when absent)."""
        with self._write_lock:
            conn = self._writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute("SELECT id FROM spaces WHERE uri=?", (uri,)).fetchone()
                if row is not None:
                    conn.execute("DELETE FROM documents WHERE space_id=?", (row[0],))
                    conn.execute("DELETE FROM spaces WHERE id=?", (row[0],))
                for sql, params in also:
                    conn.execute(sql, params)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return None if row is None else int(row[0])

    def collection(self, uri: str) -> CollectionInfo:
        """The collection with this URI, or UnknownSpace."""
        row = self._reader().execute(f"SELECT {SPACE_COLUMNS} FROM spaces WHERE uri=?", (uri,)).fetchone()
        if row is None:
            raise UnknownSpace(f"space not indexed here: {uri}")
        return row_to_space(row)

    def collection_infos(self, uris: Sequence[str]) -> dict[str, CollectionInfo]:
        """These collections as stored now, by URI, in one read (absent ones left out)."""
        if not uris:
            return {}
        marks = ",".join("?" * len(uris))
        rows = self._reader().execute(f"SELECT {SPACE_COLUMNS} FROM spaces WHERE uri IN ({marks})", tuple(uris))
        return {info.uri: info for info in map(row_to_space, rows)}

    def collections(self) -> list[str]:
        """The URIs of every collection in the store."""
        return [r[0] for r in self._reader().execute("SELECT uri FROM spaces ORDER BY id")]

    # -- writes -----------------------------------------------------------------------------

    def write(
        self,
        space_id: int,
        puts: Sequence[StoredDocument],
        deletes: Sequence[str] = (),
        also: Sequence[Statement] = (),
    ) -> WriteResult:
        """Upsert and delete documents in one transaction; the result lists what changed.

        A put whose content equals the stored document changes nothing (no new sequence number),
        so re-importing the same records is a no-op. `also` runs in the same transaction: sync
        advances a repo's position only together with the records it verified.
        """
        return self.write_many([(space_id, puts, deletes)], also)[0]

    def write_many(
        self,
        writes: Sequence[tuple[int, Sequence[StoredDocument], Sequence[str]]],
        also: Sequence[Statement] = (),
    ) -> list[WriteResult]:
        """Upserts and deletes in several spaces, and `also`, in one transaction; a result per write.

        What belongs together across spaces commits together: a v5 document's chunks and
        memories live in two collections, and a kill between two transactions would leave one
        without the other.
        """
        with self._write_lock:
            conn = self._writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                results = [self._write_locked(conn, space_id, puts, deletes) for space_id, puts, deletes in writes]
                for sql, params in also:
                    conn.execute(sql, params)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return results

    def _write_locked(
        self,
        conn: sqlite3.Connection,
        space_id: int,
        puts: Sequence[StoredDocument],
        deletes: Sequence[str],
    ) -> WriteResult:
        """Apply one batch inside an open transaction."""
        seq, next_ord = conn.execute(
            "SELECT seq, next_ord FROM spaces WHERE id=?", (space_id,)
        ).fetchone()
        seq += 1
        changes: list[Change] = []
        unchanged = 0
        for item in puts:
            doc = item.document
            row = (
                doc.author,
                doc.text,
                json.dumps(list(doc.tags), ensure_ascii=False),
                doc.source,
                doc.created_ms,
                json.dumps(doc.metadata, ensure_ascii=False, sort_keys=True) if doc.metadata else None,
                doc.vector,
                item.skip_reason,
                doc.next_vector,
            )
            old = conn.execute(
                "SELECT ord, deleted, author, text, tags, source, created_ms, metadata, vector,"
                " skip_reason, next_vector FROM documents WHERE space_id=? AND doc_id=?",
                (space_id, doc.id),
            ).fetchone()
            if old is not None and not old[1] and tuple(old[2:]) == row:
                unchanged += 1
                continue
            if old is None:
                ord_ = next_ord
                next_ord += 1
                conn.execute(
                    "INSERT INTO documents(space_id, ord, doc_id, seq, deleted, author, text, tags,"
                    " source, created_ms, indexed_ms, metadata, vector, skip_reason, next_vector)"
                    " VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (space_id, ord_, doc.id, seq, *row[:5], doc.indexed_ms, *row[5:]),
                )
            else:
                ord_ = old[0]
                conn.execute(
                    "UPDATE documents SET seq=?, deleted=0, author=?, text=?, tags=?, source=?,"
                    " created_ms=?, indexed_ms=?, metadata=?, vector=?, skip_reason=?, next_vector=?"
                    " WHERE space_id=? AND ord=?",
                    (seq, *row[:5], doc.indexed_ms, *row[5:], space_id, ord_),
                )
            changes.append(Change(ord_, seq, doc))
        for doc_id in deletes:
            old = conn.execute(
                "SELECT ord, deleted FROM documents WHERE space_id=? AND doc_id=?",
                (space_id, doc_id),
            ).fetchone()
            if old is None or old[1]:
                continue
            # A tombstone keeps the ordinal and carries the sequence, so replay sees the delete.
            conn.execute(
                "UPDATE documents SET seq=?, deleted=1, text='', tags='[]', source=NULL,"
                " metadata=NULL, vector=NULL, skip_reason=NULL, next_vector=NULL WHERE space_id=? AND ord=?",
                (seq, space_id, old[0]),
            )
            changes.append(Change(old[0], seq, None))
        if changes:
            conn.execute(
                "UPDATE spaces SET seq=?, next_ord=? WHERE id=?", (seq, next_ord, space_id)
            )
        else:
            seq -= 1
        return WriteResult(seq, changes, unchanged)

    # -- reads ------------------------------------------------------------------------------

    def documents(
        self, space_id: int, ords: Iterable[int], vectors: bool = True
    ) -> dict[int, Document]:
        """The live documents with these ordinals (without their vector blobs unless asked)."""
        wanted = list(ords)
        out: dict[int, Document] = {}
        conn = self._reader()
        columns = DOC_COLUMNS if vectors else DOC_COLUMNS_NO_VECTORS
        # SQLite caps bound parameters; 500 at a time stays well under every build's limit.
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in conn.execute(
                f"SELECT {columns} FROM documents"
                f" WHERE space_id=? AND deleted=0 AND ord IN ({marks})",
                (space_id, *chunk),
            ):
                ord_, doc = row_to_document(row)
                out[ord_] = doc
        return out

    def document_by_id(self, space_id: int, doc_id: str) -> tuple[int, Document] | None:
        """The live document with this id, with its ordinal, or None."""
        row = self._reader().execute(
            f"SELECT {DOC_COLUMNS} FROM documents WHERE space_id=? AND doc_id=? AND deleted=0",
            (space_id, doc_id),
        ).fetchone()
        return row_to_document(row) if row else None

    def changes_since(self, space_id: int, seq: int, batch: int = 2000) -> Iterator[list[Change]]:
        """Every document changed after `seq`, in sequence order, in batches (deletes as None)."""
        conn = self._reader()
        return change_pages(lambda start: conn.execute(_CHANGES_SQL, start).fetchall(), space_id, seq, batch)

    def placed_fields(self, space_id: int, batch: int = 2000, vectors: bool = True) -> Iterator[list[tuple[int, Placed]]]:
        """Every live document's ordinal and `Placed` fields, in sequence order, in batches (a load's)."""
        conn, sql = self._reader(), _PLACED_SQL[vectors]
        return placed_pages(lambda start: conn.execute(sql, start).fetchall(), space_id, batch)

    def count(self, space_id: int) -> int:
        """The number of live documents in the collection."""
        row = self._reader().execute(
            "SELECT count(*) FROM documents WHERE space_id=? AND deleted=0", (space_id,)
        ).fetchone()
        return int(row[0])

    def recent(
        self,
        space_id: int,
        limit: int,
        *,
        before: tuple[int, str] | None = None,
        author: str | None = None,
        tags: Sequence[str] = (),
        with_vector: bool = False,
    ) -> list[tuple[int, Document]]:
        """Live documents newest first (created_ms, then id, both descending), without vector blobs.

        `before` is a keyset position (created_ms, id): only documents strictly after it in this
        order come back, so pages walk the (space_id, deleted, created_ms) index with no OFFSET.
        Every tag must be present; `with_vector` keeps only documents that carry a vector.
        """
        where = ["space_id=?", "deleted=0"]
        args: list[Any] = [space_id]
        if before is not None:
            # The plain bound lets SQLite seek the index; the row value breaks ties by id.
            where.append("created_ms <= ? AND (created_ms, doc_id) < (?, ?)")
            args += [before[0], before[0], before[1]]
        if author is not None:
            where.append("author = ?")
            args.append(author)
        for tag in dict.fromkeys(tags):
            # instr() on the JSON text is a cheap pre-check; json_each makes the match exact.
            where.append("instr(tags, ?) > 0 AND EXISTS (SELECT 1 FROM json_each(documents.tags) WHERE value = ?)")
            args += [json.dumps(tag, ensure_ascii=False), tag]
        if with_vector:
            where.append("vector IS NOT NULL")
        columns = DOC_COLUMNS_NO_VECTORS
        rows = self._reader().execute(
            f"SELECT {columns} FROM documents WHERE {' AND '.join(where)}"
            " ORDER BY created_ms DESC, doc_id DESC LIMIT ?",
            (*args, limit),
        ).fetchall()
        return [row_to_document(row) for row in rows]

    def execute(self, statements: Sequence[Statement]) -> None:
        """Run statements in one write transaction (for state that is not documents)."""
        with self._write_lock:
            conn = self._writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                for sql, params in statements:
                    conn.execute(sql, params)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    @contextlib.contextmanager
    def exclusive(self, name: str) -> Iterator[None]:
        """Hold the lock named `name` against every other process of this database file (`serve
        --workers`, a command beside a service): an flock on a file beside it, for the block."""
        with self._exclusive:  # flock is per open file: threads of this process wait here
            lock = self.path.with_name(f"{self.path.name}.{name}.lock")
            with open(lock, "a+b") as held:
                fcntl.flock(held, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(held, fcntl.LOCK_UN)

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of a read query, on this thread's read connection."""
        return self._reader().execute(sql, params).fetchall()

    def skipped(self, space_id: int) -> list[tuple[str, str, int]]:
        """(author, reason, count) of the live documents whose vector is not indexed, by author and reason."""
        rows = self._reader().execute(
            "SELECT author, skip_reason, count(*) FROM documents"
            " WHERE space_id=? AND deleted=0 AND skip_reason IS NOT NULL"
            " GROUP BY author, skip_reason ORDER BY author, skip_reason",
            (space_id,),
        ).fetchall()
        return [(str(a), str(r), int(n)) for a, r, n in rows]
