"""Keyword compaction of a data directory's collections: many segments and no recent write, one segment.

Each segment adds a fixed cost to every query term, and incremental commits leave many small ones
that tantivy merges only down to about eight per size level; the committer starts a pass when one
is due (Collections mixes this in).
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from typing import TYPE_CHECKING

from engram_index.collection_loading import replay
from engram_index.engine.keyword import KeywordIndex, staging_path, swap_in
from engram_index.engine.search import SpaceIndex
from engram_index.store.base import RecordStore

log = logging.getLogger("engram_index.collections")

# More segments than this, and no write for QUIET_S seconds, and the committer compacts.
COMPACT_SEGMENTS = 4
QUIET_S = 10.0
_COMPACT_HEAP = 256 * 1024 * 1024


class Compaction:
    """The compaction of Collections: one pass at a time, never holding up commits or searches for long."""

    read_only: bool
    store: RecordStore
    _indexes: dict[str, SpaceIndex]
    _last_write: dict[str, float]
    _compaction_lock: threading.Lock
    _maintainer: threading.Thread | None

    if TYPE_CHECKING:
        def index(self, uri: str) -> SpaceIndex:
            """The collection's index, loaded when needed (Collections')."""

        def _collection_lock(self, uri: str) -> threading.RLock:
            """The lock ordering the collection's writes and index swaps (Collections')."""

    def compact(self, uri: str) -> None:
        """Rebuild a collection's keyword index as one segment, then swap it in.

        Each segment adds a fixed cost to every query term, and incremental commits leave
        many small ones that tantivy merges only down to about eight per size level. The
        copy is built from the records up to a snapshot sequence while writes go on; the
        writes after it are replayed into the copy under the index's lock before the swap.
        """
        with self._compaction_lock:  # one at a time: they share the staging directory
            self._compact_locked(uri)

    def _compact_locked(self, uri: str) -> None:
        """Build, catch up and swap in the compacted copy (the caller holds the compaction lock)."""
        index = self.index(uri)
        info = self.store.collection(uri)
        path = index.keyword.path
        if path is None:
            return
        snapshot = info.seq
        shutil.rmtree(staging_path(path), ignore_errors=True)
        fresh = KeywordIndex(staging_path(path), heap_bytes=_COMPACT_HEAP)
        for batch in self.store.changes_since(info.id, 0):
            # Rows changed after the snapshot come back in the replay below.
            fresh.write((c.ord, c.document, False) for c in batch if c.document is not None and c.seq <= snapshot)
        fresh.commit(snapshot)
        # Saved before searches are held off (a large space's counts take a while to write); the
        # writes after the snapshot are counted in memory below and saved later, or counted
        # again from the records after a crash.
        fresh.save_counts(snapshot)
        with self._collection_lock(uri), index.exclusive():
            for batch in self.store.changes_since(info.id, snapshot):
                replay(fresh, batch)
            fresh.commit(index.seq)
            fresh.close(save_counts=False)
            index.keyword.commit(index.seq)
            index.keyword.close(save_counts=False)  # its directory is about to be retired
            swap_in(path)
            index.keyword = KeywordIndex(path, counts=(fresh.counts, snapshot))
        log.info("compacted the keyword index of %s", uri)

    def _due(self, quiet_s: float) -> list[str]:
        """The collections whose keyword index has many segments and no write for `quiet_s` seconds."""
        if self.read_only:
            return []
        now = time.monotonic()
        return [
            uri
            for uri, index in list(self._indexes.items())
            if now - self._last_write.get(uri, 0.0) >= quiet_s
            and index.keyword.segments() > COMPACT_SEGMENTS
        ]

    def maintain(self, quiet_s: float = 0.0) -> list[str]:
        """Compact the keyword index of every collection with many segments and no recent writes."""
        done = []
        for uri in self._due(quiet_s):
            with self._compaction_lock:
                # Another pass may have compacted it while this one waited (a background pass
                # started while a caller's compaction ran would rebuild it all over again).
                if uri in self._due(quiet_s):
                    self._compact_locked(uri)
                    done.append(uri)
        return done

    def _maintain_in_background(self) -> None:
        """Start a compaction pass when one is due and none runs (it must not hold up commits)."""
        if self._maintainer is not None and self._maintainer.is_alive():
            return
        if not self._due(QUIET_S):
            return  # the common case at every tick: no thread to start

        def run() -> None:
            try:
                self.maintain(QUIET_S)
            except Exception:
                log.exception("keyword compaction failed; the old index stays in use")

        self._maintainer = threading.Thread(target=run, daemon=True, name="compaction")
        self._maintainer.start()
