"""Erasure on every node: a collection's deleted documents purged from this node's cache, and over
a shared store a mark that every other node's tailer reads and purges by (Collections mixes this in)."""

from __future__ import annotations

import logging
import shutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from engram_index.collection_loading import vectors_path
from engram_index.engine.search import SpaceIndex
from engram_index.errors import StorageError
from engram_index.store.base import CollectionInfo, RecordStore, SharedStore

log = logging.getLogger("engram_index.collections")

# Where a collection's cache records the last erasure it purged (a store's purge mark).
PURGED_FILE = "PURGED"


class Purging:
    """The erasure purge of Collections' caches."""

    read_only: bool
    data_dir: Path
    store: RecordStore
    _shared: SharedStore | None
    _indexes: dict[str, SpaceIndex]
    _ids: dict[str, int]
    _purged: dict[str, int]  # the last erasure each loaded cache purged (its PURGED file)

    if TYPE_CHECKING:
        def index(self, uri: str) -> SpaceIndex:
            """The collection's index, loaded when needed (Collections')."""

        def _collection_lock(self, uri: str) -> threading.RLock:
            """The lock ordering the collection's writes and index swaps (Collections')."""

        def compact(self, uri: str) -> None:
            """Rebuild the collection's keyword index from its records (Compaction's)."""

        def refresh(self, uri: str) -> int:
            """Apply other nodes' writes to the loaded index (Collections')."""

    def _marker(self, info: CollectionInfo) -> Path:
        """The file recording the last erasure the collection's cache purged."""
        return self.data_dir / "spaces" / str(info.id) / PURGED_FILE

    def purge(self, uri: str) -> None:
        """Leave no byte of a collection's deleted documents in this node's cache (an erasure), and over a
        shared store mark it, so that every other node purges its own cache when it reads the mark."""
        if self.read_only:
            raise StorageError("this data directory is open read-only")
        index = self.index(uri)
        with self._collection_lock(uri):
            seq = index.seq
        self._purge_cache(uri, seq)
        if self._shared is not None:
            self._shared.mark_purged(self._ids[uri], seq)

    def purged(self, uri: str) -> int:
        """The sequence of the last erasure this node's cache of a collection purged (0: none)."""
        if uri not in self._purged:
            marker = self._marker(self.store.collection(uri))
            self._purged[uri] = int(marker.read_text()) if marker.exists() else 0
        return self._purged[uri]

    def _note_clean_build(self, info: CollectionInfo) -> None:
        """A keyword index built from the records alone holds no erased word: the erasures marked before
        the records were read need no purge (one marked since may, and is purged by the tailer)."""
        assert self._shared is not None
        mark = self._shared.purges([info.id]).get(info.id, 0)
        if 0 < mark <= info.seq:
            self._write_mark(info, mark)

    def _write_mark(self, info: CollectionInfo, seq: int) -> None:
        """Record `seq` as the last erasure the collection's cache purged."""
        marker = self._marker(info)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(f"{seq}\n")
        self._purged[info.uri] = seq

    def _purge_cache(self, uri: str, seq: int) -> None:
        """Rebuild the collection's keyword index and term counts from the records, drop its saved vectors
        and record `seq` as purged: the deleted words leave every segment (a delete only marks them)."""
        self.compact(uri)
        info = self.store.collection(uri)
        shutil.rmtree(vectors_path(self.data_dir, info), ignore_errors=True)  # for --workers; made again at start
        self._write_mark(info, seq)
        log.info("purged the erased documents of %s from this node's cache (through sequence %d)", uri, seq)

    def _purge_marked(self, loaded: dict[str, int]) -> None:
        """Purge the caches of loaded collections that another node marked for an erasure since they last purged."""
        assert self._shared is not None
        marks = self._shared.purges(list(loaded.values()))
        for uri, collection_id in loaded.items():
            mark = marks.get(collection_id, 0)
            if mark > self.purged(uri) and uri in self._indexes:
                self.refresh(uri)  # the erasure's deletes first: the rebuild reads the records after them
                self._purge_cache(uri, mark)
