"""Building a collection's index from its records, as every start and every crash recovery does.

Vectors and filter columns are rebuilt from every record; the keyword index keeps its own files
and replays each change after the sequence it last made durable (its term counts, saved apart,
are counted again from where they were saved).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from engram_index.engine.keyword import KeywordIndex
from engram_index.engine.search import SpaceIndex, decode_vector
from engram_index.engine.vector import VectorIndex
from engram_index.errors import StorageError
from engram_index.store.base import Change, CollectionInfo, RecordStore

Progress = Callable[[str, int, int], None]
log = logging.getLogger("engram_index.collections")


class Closing(Exception):
    """A background load stopped because the data directory is closing."""


def vectors_path(data_dir: Path, info: CollectionInfo) -> Path:
    """Where a collection's saved vectors live (for read-only processes to map)."""
    return data_dir / "spaces" / str(info.id) / "vectors"


def load_index(store: RecordStore, data_dir: Path, info: CollectionInfo, *, read_only: bool, locked: bool,
               stopping: threading.Event, progress: Progress | None) -> tuple[SpaceIndex, bool]:
    """A collection's index built from its records and its keyword files, and whether its keyword
    index was built from the records alone (so it holds no word of an erased document).

    `locked`: this process holds the data directory's lock (else it is a one-off reader beside its
    owner); `stopping` set: the directory is closing, and the load stops with Closing.
    """
    dims = info.model.dims if info.model else None
    # Results and explanations need text and fields, not the vector blobs.
    fetch = lambda ords: store.documents(info.id, ords, vectors=False)  # noqa: E731
    try:
        index = SpaceIndex(data_dir / "spaces" / str(info.id), dims, fetch, read_only=read_only)
        if read_only and index.keyword.committed_seq != info.seq:
            index.close(save_counts=False)
            raise StorageError(f"the keyword index of {info.uri} is behind its records: open it for writing first")
    except StorageError:
        if locked:
            raise
        # A one-off reader beside the directory's owner, whose keyword index is not (yet) on
        # disk at this sequence: build one in memory from the records, as a load after a crash would.
        log.info("the keyword index of %s is not current on disk: building it in memory", info.uri)
        index = SpaceIndex(None, dims, fetch)
    # Read-only processes share one copy of the vectors the writer saved for this sequence
    # (serve --workers); without one, each rebuilds its own from the records.
    mapped = VectorIndex.open(vectors_path(data_dir, info), info.seq) if read_only and dims else None
    shared = mapped is not None and mapped.dims == dims
    if mapped is not None and shared:
        index.use_saved(mapped)
    total = store.count(info.id)
    kw_seq = index.keyword.committed_seq
    if kw_seq > info.seq:
        # The keyword files are ahead of the records (a restored backup): start them over.
        index.keyword.reset()
        kw_seq = 0
    counts_seq = index.keyword.counts_seq  # the term counts may have been saved before that
    if kw_seq == info.seq and counts_seq > 0:
        # Nothing to replay (a restart after a clean close): the columns and vectors need none of the
        # records' texts and metadata, which were most of a load's reading (docs/design/engine.md).
        _place(store, index, info, shared, stopping, progress, total)
        if counts_seq < kw_seq:  # the term counts of the changes since they were saved
            index.keyword.count_only((c.ord, c.document) for batch in store.changes_since(info.id, counts_seq)
                                     for c in batch if c.seq <= kw_seq)
        return _loaded(index, info, read_only, replayed=False), False
    done = 0
    replayed = False
    for batch in store.changes_since(info.id, 0):
        if stopping.is_set():
            # Closing: stop before the store closes under this read (its uncommitted keyword
            # writes are dropped; the next open replays them from the change log).
            raise Closing(info.uri)
        live = [(c.ord, c.document) for c in batch if c.document is not None]
        # Columns and vectors are rebuilt from every record; the keyword index keeps its own.
        index.apply(live, index.seq, keyword=False, vectors=not shared)
        index.keyword.count_only((c.ord, c.document) for c in batch if counts_seq < c.seq <= kw_seq)
        missed = [c for c in batch if c.seq > kw_seq]
        replayed = replayed or bool(missed)
        replay(index.keyword, missed)
        done += len(live)
        if progress is not None:
            progress(info.uri, done, total)
    return _loaded(index, info, read_only, replayed), kw_seq == 0


def _place(store: RecordStore, index: SpaceIndex, info: CollectionInfo, shared: bool, stopping: threading.Event,
           progress: Progress | None, total: int) -> None:
    """Put every live record's columns and (unless mapped already) vector, from its `Placed` fields alone."""
    done = 0
    vectors = not shared and index.vectors is not None  # (a collection without a model reads no vector)
    for rows in store.placed_fields(info.id, vectors=vectors):
        if stopping.is_set():
            raise Closing(info.uri)
        index.place(rows, vectors=vectors)
        done += len(rows)
        if progress is not None:
            progress(info.uri, done, total)


def _loaded(index: SpaceIndex, info: CollectionInfo, read_only: bool, replayed: bool) -> SpaceIndex:
    """The index at the collection's sequence, its term counts saved (a writer's) or its replay committed."""
    index.seq = info.seq
    if not read_only and index.keyword.counts_seq != info.seq:
        index.save_counts()  # commits too
    elif replayed or index.keyword.committed_seq != info.seq:
        index.commit()
    return index


def build_next(store: RecordStore, info: CollectionInfo) -> VectorIndex:
    """The vectors of every live record for the model a collection moves to, from the store."""
    assert info.next_model is not None
    shadow = VectorIndex(info.next_model.dims)
    for batch in store.changes_since(info.id, 0):
        apply_next(shadow, batch)
    return shadow


def apply_next(shadow: VectorIndex, changes: Sequence[Change]) -> None:
    """Apply changes to the vectors of the model a collection moves to."""
    for change in changes:
        vec = decode_vector(change.document.next_vector, shadow.dims) if change.document is not None else None
        if vec is None:
            shadow.remove(change.ord)
        else:
            shadow.put(change.ord, vec)


def replay(keyword: KeywordIndex, changes: Sequence[Change]) -> None:
    """Apply changes from the log to a keyword index: deletes and (re)writes, in order."""
    keyword.write((change.ord, change.document, True) for change in changes)
