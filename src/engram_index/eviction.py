"""Bounded memory on a node: at most `max_loaded` collections stay loaded, the least recently used
idle one is closed (Collections mixes this in) and loads again on its next request."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from engram_index.engine.search import SpaceIndex
from engram_index.engine.vector import VectorIndex

log = logging.getLogger("engram_index.collections")

# How many collections a node keeps loaded at most (serve --max-collections).
MAX_LOADED = 128


class Eviction:
    """The least-recently-used bound of Collections' loaded indexes."""

    read_only: bool
    max_loaded: int
    _indexes: dict[str, SpaceIndex]
    _next: dict[str, VectorIndex]
    _used: OrderedDict[str, None]  # loaded collections, least recently used first
    _purged: dict[str, int]
    _lock: threading.Lock
    _compaction_lock: threading.Lock

    if TYPE_CHECKING:
        def _collection_lock(self, uri: str) -> threading.RLock:
            """The lock ordering the collection's writes and index swaps (Collections')."""

    def _touch(self, uri: str) -> None:
        """Mark a loaded collection as the most recently used."""
        with self._lock:
            self._used[uri] = None
            self._used.move_to_end(uri)

    def _evict(self, keep: str) -> None:
        """Close the least recently used idle collections beyond `max_loaded` (one being written,
        loaded or compacted is not idle: its lock is held, and it is skipped)."""
        if self.read_only:
            return  # read-only workers map what the owner saved; they load nothing they must write back
        with self._lock:
            over = len(self._indexes) - self.max_loaded
            order = [uri for uri in self._used if uri != keep and uri in self._indexes]
        if over <= 0 or not self._compaction_lock.acquire(blocking=False):
            return  # nothing to do, or a compaction or a save of term counts runs: the next load evicts
        try:
            self._evict_idle(order, over)
        finally:
            self._compaction_lock.release()

    def _evict_idle(self, order: list[str], over: int) -> None:
        """Close `over` collections of `order` (least recently used first) that nothing holds."""
        for uri in order:
            if over <= 0:
                return
            lock = self._collection_lock(uri)
            if not lock.acquire(blocking=False):
                continue
            try:
                index = self._indexes.get(uri)
                if index is None:
                    continue
                with index.exclusive():  # the searches in flight finish first; later ones load it again
                    self._indexes.pop(uri, None)
                    self._next.pop(uri, None)
                index.close()  # commits and saves its term counts (under its read lock)
                with self._lock:
                    self._used.pop(uri, None)
                self._purged.pop(uri, None)
                over -= 1
                log.info("evicted the idle collection %s (%d loaded at most)", uri, self.max_loaded)
            finally:
                lock.release()
