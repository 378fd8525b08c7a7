"""What both record stores share above their SQL dialect: the rows they read back, and a model move.

The SQLite and PostgreSQL stores keep the same tables, so a document or a collection reads back the
same way from either; only placeholders and transactions differ, and stay in each store.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import orjson

from engram_index.engine.types import Document, ModelIdentity, Placed
from engram_index.errors import StorageError
from engram_index.store.base import Change, CollectionInfo, Statement

DOC_COLUMNS = "ord, doc_id, author, text, tags, source, created_ms, indexed_ms, metadata, vector, next_vector"
DOC_COLUMNS_NO_VECTORS = DOC_COLUMNS.replace(", vector, next_vector", ", NULL, NULL")
SPACE_COLUMNS = ("id, uri, model, model_digest, dims, document_prefix, query_prefix, seq, next_ord,"
                 " next_model, next_digest, next_dims")


_LONG_DIGITS = re.compile(r"\d{19}")  # a number orjson might read as a float (beyond 64 bits)


def loads_stored(text: str) -> Any:
    """A stored JSON value: orjson (a search decodes hundreds), else the standard parser, which reads
    back exactly what json.dumps may have written and orjson refuses (NaN, lone surrogates) or reads
    otherwise (integers beyond 64 bits, as floats)."""
    if _LONG_DIGITS.search(text):
        return json.loads(text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def stored_tags(text: str) -> tuple[str, ...]:
    """A stored tags array: orjson's reading when it holds strings alone (no number it could misread:
    a collection's load reads every record's, and `loads_stored`'s check for long numbers was a third
    of their reading), else `loads_stored`'s."""
    try:
        tags = orjson.loads(text)
    except orjson.JSONDecodeError:
        tags = None
    if type(tags) is list and all(type(tag) is str for tag in tags):
        return tuple(tags)
    return tuple(loads_stored(text))


def row_to_document(row: Sequence[Any]) -> tuple[int, Document]:
    """Turn a row of DOC_COLUMNS into (ord, Document)."""
    ord_, doc_id, author, text, tags, source, created, indexed, metadata, vector, next_vector = row
    return ord_, Document(
        id=doc_id, author=author, text=text, tags=stored_tags(tags), source=source, created_ms=created,
        indexed_ms=indexed, metadata=loads_stored(metadata) if metadata else None, vector=vector,
        next_vector=next_vector)


def placed_sql(mark: str, vectors: bool) -> str:
    """A page of `RecordStore.placed_fields` with the store's placeholder `mark`: the live records after a
    (seq, ord), up to a count; a row is seq, ord, then the `Placed` fields (`placed_pages`)."""
    return (f"SELECT seq, ord, doc_id, author, tags, source, created_ms, {'vector' if vectors else 'NULL'}"
            f" FROM documents WHERE space_id={mark} AND deleted=0 AND (seq, ord) > ({mark}, {mark})"
            f" ORDER BY seq, ord LIMIT {mark}")


# A page of a collection's rows in (seq, ord) order: `read` runs the store's statement with the space, the
# (seq, ord) after which the page starts and the page's size.
PageReader = Callable[[tuple[int, int, int, int]], Sequence[Sequence[Any]]]


def _pages(read: PageReader, space_id: int, seq: int, batch: int, ord_at: int) -> Iterator[Sequence[Sequence[Any]]]:
    """Every page of rows after sequence `seq` (each row: its seq first, its ordinal at `ord_at`)."""
    last_seq, last_ord = seq, 1 << 62  # past every ordinal of `seq` itself: those changes are already applied
    while rows := read((space_id, last_seq, last_ord, batch)):
        yield rows
        last_seq, last_ord = rows[-1][0], rows[-1][ord_at]


def change_pages(read: PageReader, space_id: int, seq: int, batch: int) -> Iterator[list[Change]]:
    """`RecordStore.changes_since`: each page of the store's changes statement (seq, deleted, DOC_COLUMNS)
    that `read` runs, as changes (deletes as None)."""
    for rows in _pages(read, space_id, seq, batch, 2):
        out: list[Change] = []
        for row in rows:
            ord_, doc = row_to_document(row[2:])
            out.append(Change(ord_, row[0], None if row[1] else doc))
        yield out


def placed_pages(read: PageReader, space_id: int, batch: int) -> Iterator[list[tuple[int, Placed]]]:
    """`RecordStore.placed_fields`: each page of `placed_sql` that `read` runs, as ordinals and their
    `Placed` fields."""
    for rows in _pages(read, space_id, 0, batch, 1):
        yield [(row[1], Placed(row[2], row[3], stored_tags(row[4]), row[5], row[6], row[7])) for row in rows]


def row_to_space(row: Sequence[Any]) -> CollectionInfo:
    """Turn a row of SPACE_COLUMNS into a CollectionInfo."""
    model = ModelIdentity(row[2], row[3], row[4]) if row[2] is not None else None
    next_model = ModelIdentity(row[9], row[10], row[11]) if row[9] is not None else None
    return CollectionInfo(row[0], row[1], model, row[5], row[6], row[7], row[8], next_model)


class _CollectionStore(Protocol):
    """What a model move needs of a store."""

    def collection(self, uri: str) -> CollectionInfo:
        """The collection with this URI, or UnknownSpace."""

    def execute(self, statements: Sequence[Statement]) -> None:
        """Run statements in one write transaction."""


class ModelMoves:
    """A collection's move to another embedding model, in statements either store runs (`?` placeholders)."""

    def set_next_model(self: _CollectionStore, uri: str, model: ModelIdentity | None) -> None:
        """Declare (or clear) the model a collection is moving to."""
        fields = (model.model, model.digest, model.dims) if model else (None, None, None)
        self.execute([("UPDATE spaces SET next_model=?, next_digest=?, next_dims=? WHERE uri=?", (*fields, uri))])

    def promote_next(self: _CollectionStore, uri: str) -> None:
        """Switch a collection to the model it was moving to: each memory's next vector becomes its vector."""
        info = self.collection(uri)
        if info.next_model is None:
            raise StorageError(f"{uri} is not moving to another model")
        self.execute([
            ("UPDATE documents SET vector=next_vector, next_vector=NULL, skip_reason=CASE WHEN next_vector IS NULL"
             " THEN 'no vector for the new model' ELSE NULL END WHERE space_id=? AND deleted=0", (info.id,)),
            ("UPDATE spaces SET model=next_model, model_digest=next_digest, dims=next_dims, next_model=NULL,"
             " next_digest=NULL, next_dims=NULL WHERE id=?", (info.id,)),
        ])
