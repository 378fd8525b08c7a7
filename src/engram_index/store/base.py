"""The record store's interface: what collections and faces call, whichever database holds the records.

Two stores implement it: `sqlite.Store` (the embedded default, one file in the data directory) and
`postgres.PostgresStore` (`--store postgresql://...`, shared by several nodes). Faces pass their
own SQL as `Statement`s written in SQLite's dialect; the PostgreSQL store translates it
(`dialect.py`; docs/design/store.md says why).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from engram_index.engine.types import Document, ModelIdentity, Placed

# Statements run inside a write's transaction, after its documents (see RecordStore.write).
Statement = tuple[str, tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class CollectionInfo:
    """A collection as the store knows it: its id, URI, model and prefixes, and its sequence."""

    id: int
    uri: str
    model: ModelIdentity | None
    document_prefix: str
    query_prefix: str
    seq: int
    next_ord: int
    next_model: ModelIdentity | None = None


@dataclass(frozen=True, slots=True)
class Change:
    """One document's latest state after a sequence number: a document, or None when deleted."""

    ord: int
    seq: int
    document: Document | None


@dataclass(frozen=True, slots=True)
class WriteResult:
    """What one batch write did."""

    seq: int
    changes: list[Change]
    unchanged: int


@dataclass(frozen=True, slots=True)
class StoredDocument:
    """A document to write, with the reason its vector is not indexed (if it is not)."""

    document: Document
    skip_reason: str | None = None


class RecordStore(Protocol):
    """Collections of documents with per-collection sequence numbers and a change log, plus faces' tables."""

    def close(self) -> None:
        """Release every connection."""

    def rewrite(self) -> None:
        """Rewrite storage so that no fragment of a deleted row survives in unused space."""

    def truncate_log(self, attempts: int = 50) -> bool:
        """Leave no older image of a deleted row in the write-ahead log; False when that could not be done."""

    def ensure_collection(
        self,
        uri: str,
        model: ModelIdentity | None = None,
        document_prefix: str | None = None,
        query_prefix: str | None = None,
        now_ms: int = 0,
    ) -> CollectionInfo:
        """Create the collection when new; update its model and prefixes when given."""

    def drop_collection(self, uri: str, also: Sequence[Statement] = ()) -> int | None:
        """Delete a collection with every record it has, and run `also` in the same transaction (a face's rows
        of it); returns its id (None when absent)."""

    def collection(self, uri: str) -> CollectionInfo:
        """The collection with this URI, or UnknownSpace."""

    def collection_infos(self, uris: Sequence[str]) -> dict[str, CollectionInfo]:
        """These collections as stored now, by URI, in one read (absent ones left out)."""

    def set_next_model(self, uri: str, model: ModelIdentity | None) -> None:
        """Declare (or clear) the model a collection is moving to."""

    def promote_next(self, uri: str) -> None:
        """Switch a collection to the model it was moving to."""

    def collections(self) -> list[str]:
        """The URIs of every collection in the store."""

    def write(
        self,
        space_id: int,
        puts: Sequence[StoredDocument],
        deletes: Sequence[str] = (),
        also: Sequence[Statement] = (),
    ) -> WriteResult:
        """Upsert and delete documents (and run `also`) in one transaction."""

    def write_many(
        self,
        writes: Sequence[tuple[int, Sequence[StoredDocument], Sequence[str]]],
        also: Sequence[Statement] = (),
    ) -> list[WriteResult]:
        """Upserts and deletes in several spaces, and `also`, in one transaction; a result per write."""

    def documents(self, space_id: int, ords: Iterable[int], vectors: bool = True) -> dict[int, Document]:
        """The live documents with these ordinals."""

    def document_by_id(self, space_id: int, doc_id: str) -> tuple[int, Document] | None:
        """The live document with this id, with its ordinal, or None."""

    def changes_since(self, space_id: int, seq: int, batch: int = 2000) -> Iterator[list[Change]]:
        """Every document changed after `seq`, in sequence order, in batches (deletes as None)."""

    def placed_fields(self, space_id: int, batch: int = 2000, vectors: bool = True) -> Iterator[list[tuple[int, Placed]]]:
        """Every live document's ordinal and what its columns and vector are built from (`Placed`; its
        vector None unless `vectors`), in sequence order, in batches: a load's, without texts or metadata."""

    def count(self, space_id: int) -> int:
        """The number of live documents in the collection."""

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
        """Live documents newest first (created_ms, then id, both descending), without vector blobs."""

    def execute(self, statements: Sequence[Statement]) -> None:
        """Run statements in one write transaction (for state that is not documents)."""

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of a read query."""

    def skipped(self, space_id: int) -> list[tuple[str, str, int]]:
        """(author, reason, count) of the live documents whose vector is not indexed."""

    def exclusive(self, name: str) -> AbstractContextManager[None]:
        """Hold the lock named `name` against every other process (every node) of this store, for a block."""


class SharedStore(RecordStore, Protocol):
    """A record store several nodes write: what a node needs to follow the others' writes."""

    def sequences(self, ids: Sequence[int]) -> dict[int, int]:
        """Each collection's latest committed sequence number (by any node)."""

    def wait_for_changes(self, timeout: float) -> set[int] | None:
        """Ids of collections written since the last call, waiting up to `timeout`; None: not listening."""

    def mark_purged(self, space_id: int, seq: int) -> None:
        """Record that the collection's deleted documents up to `seq` must leave every node's cache (an erasure)."""

    def purges(self, ids: Sequence[int]) -> dict[int, int]:
        """Each collection's latest sequence whose deletions every node must purge from its cache (0: none)."""
