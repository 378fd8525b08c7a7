"""The spaces of one data directory: the record store and each space's index, kept in step.

A write is acknowledged once SQLite has committed it; the index is updated right after, and a
background thread commits keyword writes every `commit_interval` seconds so that they become
searchable within a second. After a crash the index catches up on open: vectors and filter
columns are rebuilt from the records, and the keyword index replays every change after the
sequence it last made durable.
"""

from __future__ import annotations

import fcntl
import logging
import shutil
import threading
import time
from collections import OrderedDict
from contextlib import ExitStack
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, cast

from engram_index.engine.keyword import KeywordIndex, staging_path, swap_in
from engram_index.engine.search import SpaceIndex, decode_vector
from engram_index.engine.vector import VectorIndex
from engram_index.engine.types import ModelIdentity, SearchRequest, SearchResult
from engram_index.errors import IndexLoading, StorageError
from engram_index.heap import Trimmer
from engram_index.store.base import (Change, RecordStore, SharedStore, SpaceInfo, Statement, StoredDocument,
                                     WriteResult)
from engram_index.store.opening import open_store
from engram_index.store.sqlite import PAGE_SIZE, Store
from engram_index.search_pool import SEARCH_THREADS, SearchPool

Progress = Callable[[str, int, int], None]
log = logging.getLogger(__name__)

# A node over a shared store looks for other nodes' writes at least this often (and whenever
# PostgreSQL NOTIFYs one): what bounds cross-node visibility when a notification is missed.
TAIL_POLL_S = 1.0
# More segments than this, and no write for QUIET_S seconds, and the committer compacts.
COMPACT_SEGMENTS = 4
QUIET_S = 10.0
_COMPACT_HEAP = 256 * 1024 * 1024
# How many collections a node keeps loaded at most (serve --max-collections): the least recently used
# idle one beyond it is closed, and loads again on its next request.
MAX_LOADED = 128
# Where a space's cache records the last erasure it purged (a store's purge mark, Collections.purge).
PURGED_FILE = "PURGED"


def lock_data_dir(data_dir: Path, shared: bool = False) -> IO[str]:
    """Lock a data directory for this process (shared: for readers only); closing the file releases it.

    One writer owns a data directory: tantivy allows one writer per index, and two processes
    applying the same change log would race. Readers share. Say so at once.
    """
    lock = open(data_dir / "LOCK", "a+")
    try:
        fcntl.flock(lock, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise StorageError(f"the data directory {data_dir} is in use by another engram-index") from None
    return lock


class Collections:
    """Every space of a data directory, opened lazily, with a background committer."""

    def __init__(self, data_dir: Path, *, commit_interval: float = 0.25, read_only: bool = False,
                 lock: bool = True, store: str | None = None, search_threads: int = SEARCH_THREADS,
                 max_loaded: int = MAX_LOADED) -> None:
        """Open the data directory (creating it when new).

        Read-only: several processes may search together (serve --workers), none may write, and
        every space's keyword index must already have caught up with its records. Read-only
        without the lock: a one-off reader beside the process that owns the directory (SQLite's
        WAL and tantivy's committed segments both let a reader in while a writer works). `store`: a
        postgresql:// URL whose records this directory caches (None: its own SQLite file).
        Every face's searches run on one pool of `search_threads` (search_pool.py: deadlines, a queue).
        At most `max_loaded` collections stay loaded: the least recently used idle one is closed.
        """
        if max_loaded < 1:
            raise StorageError("a node must keep at least one collection loaded")
        if not lock and not read_only:
            raise StorageError("only a read-only opening may go without the data directory's lock")
        self.data_dir = data_dir
        self.read_only = read_only
        data_dir.mkdir(parents=True, exist_ok=True)
        self._dir_lock = lock_data_dir(data_dir, read_only) if lock else None
        self.store_url = store
        self.store: RecordStore = open_store(data_dir, store, read_only)
        if isinstance(self.store, Store) and not read_only and self.store.page_size() < PAGE_SIZE:
            log.warning("%s has %d KB pages (an older release made it): it is ~3x larger and slower to read"
                        " than it needs to be; stop the service and run `engram-index repack --data %s` once",
                        self.store.path, self.store.page_size() // 1024, data_dir)
        self.searches = SearchPool(search_threads)
        self._indexes: dict[str, SpaceIndex] = {}
        self.max_loaded = max_loaded
        self._used: OrderedDict[str, None] = OrderedDict()  # loaded collections, least recently used first
        self._purged: dict[str, int] = {}  # the last erasure each loaded cache purged (its PURGED file)
        # While a space moves to a new model: its memories' vectors for that model, ready to swap in.
        self._next: dict[str, VectorIndex] = {}
        self._loading: set[str] = set()
        self._loaders: set[threading.Thread] = set()  # background loads, joined by close()
        self._space_locks: dict[str, threading.RLock] = {}
        self._last_write: dict[str, float] = {}
        # Told how long each acknowledged write waited to become searchable (the service's metrics).
        self.on_searchable: Callable[[float], None] | None = None
        self._maintainer: threading.Thread | None = None
        self._compaction_lock = threading.Lock()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._committer = threading.Thread(
            target=self._commit_loop, args=(commit_interval,), daemon=True, name="committer"
        )
        if not read_only:
            self._committer.start()
        # Over a shared store, other nodes write too: tail the change log into the loaded indexes.
        self._shared = cast(SharedStore, self.store) if store is not None else None
        self._ids: dict[str, int] = {}  # loaded collections' store ids
        self._tailer: threading.Thread | None = None
        if self._shared is not None and not read_only:
            self._tailer = threading.Thread(target=self._tail_loop, daemon=True, name="tailer")
            self._tailer.start()

    def shared_store(self) -> RecordStore | None:
        """The PostgreSQL store these collections cache (None: the data directory's own SQLite)."""
        return self.store if self.store_url is not None else None

    # -- spaces ---------------------------------------------------------------------------

    def ensure_space(
        self,
        uri: str,
        model: ModelIdentity | None = None,
        document_prefix: str | None = None,
        query_prefix: str | None = None,
    ) -> SpaceInfo:
        """Create or update a space's declaration."""
        with self._space_lock(uri):
            info = self.store.ensure_space(uri, model, document_prefix, query_prefix)
            loaded = self._indexes.get(uri)
            if loaded is not None and loaded.dims != (info.model.dims if info.model else None):
                # The model's dimensions changed: the loaded vectors are no longer comparable.
                self._indexes.pop(uri, None)
                loaded.close()
        return info

    def drop(self, uri: str) -> None:
        """Forget a space: its records, its sync positions and its index files."""
        if self.read_only:
            raise StorageError("this data directory is open read-only")
        with self._space_lock(uri):
            index = self._indexes.pop(uri, None)
            self._next.pop(uri, None)
            if index is not None:
                index.close(save_counts=False)  # its files are deleted below
            space_id = self.store.drop_space(uri)
            self._last_write.pop(uri, None)
            if space_id is not None:
                shutil.rmtree(self.data_dir / "spaces" / str(space_id), ignore_errors=True)

    def info(self, uri: str) -> SpaceInfo:
        """The store's view of a space (UnknownSpace when absent)."""
        return self.store.space(uri)

    def _space_lock(self, uri: str) -> threading.RLock:
        """The lock that orders a space's writes, its loading and its index swaps.

        Holding it from the store's commit to the index's apply keeps the index applying
        changes in sequence order, and no write is ever committed but not yet applied while
        a load or a compaction reads the change log.
        """
        with self._lock:
            return self._space_locks.setdefault(uri, threading.RLock())

    def index(self, uri: str, progress: Progress | None = None) -> SpaceIndex:
        """The space's index, loading it (and catching up on missed writes) on first use."""
        index = self._indexes.get(uri)
        if index is not None:
            self._touch(uri)
            return index
        self.store.space(uri)  # UnknownSpace before any lock is made for it
        with self._space_lock(uri):
            index = self._indexes.get(uri)
            if index is None:
                info = self.store.space(uri)
                index = self._load(info, progress)
                self._indexes[uri] = index
                self._ids[uri] = info.id
        self._touch(uri)
        self._evict(keep=uri)  # after its own lock is released: eviction takes other spaces' locks
        return index

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
            lock = self._space_lock(uri)
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

    def loaded(self, uri: str) -> SpaceIndex | None:
        """The space's index if it is loaded, else None (nothing is started)."""
        return self._indexes.get(uri)

    def index_if_loaded(self, uri: str) -> SpaceIndex:
        """The space's index if loaded; else start loading it in the background and say so."""
        index = self._indexes.get(uri)
        if index is not None:
            return index
        info = self.store.space(uri)
        with self._lock:
            if uri not in self._loading and not self._stop.is_set():
                self._loading.add(uri)
                loader = threading.Thread(target=self._load_background, args=(info.uri,), daemon=True)
                self._loaders.add(loader)
                loader.start()
        raise IndexLoading(f"the index of {uri} is loading")

    def _load_background(self, uri: str) -> None:
        """Load a space's index off the request path, logging progress every few seconds."""
        last = [time.monotonic()]

        def report(space: str, done: int, total: int) -> None:
            if time.monotonic() - last[0] >= 5:
                last[0] = time.monotonic()
                log.info("loading %s: %d of %d memories", space, done, total)

        began = time.monotonic()
        try:
            index = self.index(uri, report)
            log.info("loaded %s: %d memories in %.1f s", uri, len(index), time.monotonic() - began)
        except _Closing:
            log.info("stopped loading %s: the data directory is closing", uri)
        except Exception:
            log.exception("loading %s failed", uri)
        finally:
            with self._lock:
                self._loading.discard(uri)
                self._loaders.discard(threading.current_thread())

    def _load(self, info: SpaceInfo, progress: Progress | None) -> SpaceIndex:
        """Build a space's index from its records and its keyword files."""
        dims = info.model.dims if info.model else None
        # Results and explanations need text and fields, not the vector blobs.
        fetch = lambda ords: self.store.documents(info.id, ords, vectors=False)  # noqa: E731
        try:
            index = SpaceIndex(self.data_dir / "spaces" / str(info.id), dims, fetch, read_only=self.read_only)
            if self.read_only and index.keyword.committed_seq != info.seq:
                index.close(save_counts=False)
                raise StorageError(f"the keyword index of {info.uri} is behind its records: open it for writing first")
        except StorageError:
            if self._dir_lock is not None:
                raise
            # A one-off reader beside the directory's owner, whose keyword index is not (yet) on
            # disk at this sequence: build one in memory from the records, as a load after a crash would.
            log.info("the keyword index of %s is not current on disk: building it in memory", info.uri)
            index = SpaceIndex(None, dims, fetch)
        # Read-only processes share one copy of the vectors the writer saved for this sequence
        # (serve --workers); without one, each rebuilds its own from the records.
        mapped = VectorIndex.open(self._vectors_path(info), info.seq) if self.read_only and dims else None
        shared = mapped is not None and mapped.dims == dims
        if shared:
            index.vectors = mapped
        total = self.store.count(info.id)
        kw_seq = index.keyword.committed_seq
        if kw_seq > info.seq:
            # The keyword files are ahead of the records (a restored backup): start them over.
            index.keyword.reset()
            kw_seq = 0
        counts_seq = index.keyword.counts_seq  # the term counts may have been saved before that
        done = 0
        replayed = False
        for batch in self.store.changes_since(info.id, 0):
            if self._stop.is_set():
                # Closing: stop before the store closes under this read (its uncommitted keyword
                # writes are dropped; the next open replays them from the change log).
                raise _Closing(info.uri)
            live = [(c.ord, c.document) for c in batch if c.document is not None]
            # Columns and vectors are rebuilt from every record; the keyword index keeps its own.
            index.apply(live, index.seq, keyword=False, vectors=not shared)
            index.keyword.count_only((c.ord, c.document) for c in batch if counts_seq < c.seq <= kw_seq)
            missed = [c for c in batch if c.seq > kw_seq]
            replayed = replayed or bool(missed)
            _replay(index.keyword, missed)
            done += len(live)
            if progress is not None:
                progress(info.uri, done, total)
        index.seq = info.seq
        if not self.read_only and index.keyword.counts_seq != info.seq:
            index.save_counts()  # commits too
        elif replayed or index.keyword.committed_seq != info.seq:
            index.commit()
        if info.next_model is not None:
            self._next[info.uri] = self._build_next(info)
        if kw_seq == 0 and self._shared is not None and not self.read_only:
            self._note_clean_build(info)
        return index

    def _note_clean_build(self, info: SpaceInfo) -> None:
        """A keyword index built from the records alone holds no erased word: the erasures marked before
        the records were read need no purge (one marked since may, and is purged by the tailer)."""
        assert self._shared is not None
        mark = self._shared.purges([info.id]).get(info.id, 0)
        if 0 < mark <= info.seq:
            marker = self.data_dir / "spaces" / str(info.id) / PURGED_FILE
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(f"{mark}\n")
            self._purged[info.uri] = mark

    # -- writes -----------------------------------------------------------------------------

    def write(
        self, uri: str, puts: Sequence[StoredDocument], deletes: Sequence[str] = (), also: Sequence[Statement] = ()
    ) -> WriteResult:
        """Store documents durably (with `also` in the same transaction), then apply them to the index if loaded."""
        return self.write_many([(uri, puts, deletes)], also)[0]

    def write_many(
        self, writes: Sequence[tuple[str, Sequence[StoredDocument], Sequence[str]]], also: Sequence[Statement] = ()
    ) -> list[WriteResult]:
        """Writes to several collections (and `also`) in one transaction, then applied to each loaded index."""
        if self.read_only:
            raise StorageError("this data directory is open read-only")
        infos = [self.store.space(uri) for uri, _, _ in writes]
        with ExitStack() as held:
            for uri in sorted({uri for uri, _, _ in writes}):  # one order for every caller: no deadlock
                held.enter_context(self._space_lock(uri))
            results = self.store.write_many([(info.id, puts, deletes) for info, (_, puts, deletes)
                                             in zip(infos, writes)], also)
            acknowledged = time.monotonic()
            applied = False
            for info, (uri, _, _), result in zip(infos, writes, results):
                self._last_write[uri] = time.monotonic()
                index = self._indexes.get(uri)
                if index is not None and result.changes:
                    if index.seq != result.seq - 1:
                        # Another node's writes came between: apply them with this one, in order.
                        self._apply_since(uri, index, info.id)
                        continue
                    index.apply(((c.ord, c.document) for c in result.changes), result.seq)
                    applied = True
                    shadow = self._next.get(uri)
                    if shadow is not None:
                        _apply_next(shadow, result.changes)
            if applied and self.on_searchable is not None:
                self.on_searchable(time.monotonic() - acknowledged)
        return results

    # -- other nodes' writes ----------------------------------------------------------------------

    def _apply_since(self, uri: str, index: SpaceIndex, space_id: int) -> int:
        """Apply every change after the index's sequence (the space's lock held); how many."""
        applied = 0
        for batch in self.store.changes_since(space_id, index.seq):
            index.apply(((c.ord, c.document) for c in batch), batch[-1].seq)
            shadow = self._next.get(uri)
            if shadow is not None:
                _apply_next(shadow, batch)
            applied += len(batch)
        if applied:
            self._last_write[uri] = time.monotonic()
        return applied

    def refresh(self, uri: str) -> int:
        """Bring a loaded index up to the store's latest sequence (other nodes' writes); changes applied."""
        with self._space_lock(uri):
            index, space_id = self._indexes.get(uri), self._ids.get(uri)
            if index is None or space_id is None:
                return 0
            return self._apply_since(uri, index, space_id)

    def _tail_loop(self) -> None:
        """Wake on every node's commits (NOTIFY) or every TAIL_POLL_S, and catch loaded indexes up."""
        assert self._shared is not None
        while not self._stop.is_set():
            if self._shared.wait_for_changes(TAIL_POLL_S) is None:
                self._stop.wait(TAIL_POLL_S)  # not listening (PostgreSQL away): poll
            try:
                loaded = {uri: i for uri, i in self._ids.items() if uri in self._indexes}
                if not loaded:
                    continue
                latest = self._shared.sequences(list(loaded.values()))
                for uri, space_id in loaded.items():
                    index = self._indexes.get(uri)
                    if index is not None and latest.get(space_id, 0) > index.seq:
                        self.refresh(uri)
                self._purge_marked(loaded)
            except Exception:  # the store is away: the next round tries again
                log.warning("could not tail the change log", exc_info=True)

    # -- moving to a new model ----------------------------------------------------------------

    def set_next_model(self, uri: str, model: ModelIdentity | None) -> None:
        """Declare (or clear) the model a space moves to; its vectors are kept ready beside the index."""
        with self._space_lock(uri):
            self.store.set_next_model(uri, model)
            self._next.pop(uri, None)
            if model is not None and uri in self._indexes:
                self._next[uri] = self._build_next(self.store.space(uri))

    def _build_next(self, info: SpaceInfo) -> VectorIndex:
        """The next model's vectors of every live memory, from the store."""
        assert info.next_model is not None
        shadow = VectorIndex(info.next_model.dims)
        for batch in self.store.changes_since(info.id, 0):
            _apply_next(shadow, batch)
        return shadow

    def switch_model(self, uri: str) -> None:
        """Make the model a space was moving to its model, swapping the vectors in without a reload.

        The store's promotion and the swap happen while the index is held exclusively, so every
        search runs on one model's vectors or the other's, never a mix, and none waits for a load.
        """
        with self._space_lock(uri):
            info = self.store.space(uri)
            if info.next_model is None:
                raise StorageError(f"{uri} is not moving to another model")
            index = self._indexes.get(uri)
            if index is None:
                self.store.promote_next(uri)
                return
            shadow = self._next.pop(uri, None) or self._build_next(info)
            with index.exclusive():
                self.store.promote_next(uri)
                index.vectors = shadow
                index.dims = info.next_model.dims
            log.info("%s now searches with %s", uri, info.next_model.model)

    def commit(self) -> bool:
        """Make every pending keyword write durable and searchable now; whether there was any."""
        if self.read_only:
            return False
        committed = False
        for uri, index in list(self._indexes.items()):
            if index.keyword.pending or index.keyword.committed_seq != index.seq:
                with self._space_lock(uri):  # not while an eviction closes it
                    if self._indexes.get(uri) is index:
                        index.commit()
                        committed = True
        self._save_due_counts()
        return committed

    def _save_due_counts(self) -> None:
        """Write the term counts of the spaces where a save is due, copied while writes wait."""
        # Not during a compaction, which swaps the directory they are written into.
        if not self._compaction_lock.acquire(blocking=False):
            return
        try:
            for uri, index in list(self._indexes.items()):
                write = index.freeze_counts()
                if write is None:
                    continue
                try:
                    write()
                except OSError:
                    log.exception("saving the term counts of %s failed; they are counted again after a restart", uri)
        finally:
            self._compaction_lock.release()

    def _commit_loop(self, interval: float) -> None:
        """Commit pending keyword writes every `interval` seconds until closed."""
        trimmer = Trimmer()
        while not self._stop.wait(interval):
            try:
                if self.commit() or (self._maintainer is not None and self._maintainer.is_alive()):
                    trimmer.worked()  # tantivy frees what its commits and merges used: give it back
                trimmer.tick()
                self._maintain_in_background()
            except Exception:  # pragma: no cover - logged, retried at the next tick
                log.exception("keyword commit failed; will retry")

    # -- erasure ------------------------------------------------------------------------------

    def purge(self, uri: str) -> None:
        """Leave no byte of a space's deleted documents in this node's cache (an erasure), and over a
        shared store mark it, so that every other node purges its own cache when it reads the mark."""
        if self.read_only:
            raise StorageError("this data directory is open read-only")
        index = self.index(uri)
        with self._space_lock(uri):
            seq = index.seq
        self._purge_cache(uri, seq)
        if self._shared is not None:
            self._shared.mark_purged(self._ids[uri], seq)

    def purged(self, uri: str) -> int:
        """The sequence of the last erasure this node's cache of a space purged (0: none)."""
        if uri not in self._purged:
            info = self.store.space(uri)
            marker = self.data_dir / "spaces" / str(info.id) / PURGED_FILE
            self._purged[uri] = int(marker.read_text()) if marker.exists() else 0
        return self._purged[uri]

    def _purge_cache(self, uri: str, seq: int) -> None:
        """Rebuild the space's keyword index and term counts from the records, drop its saved vectors and
        record `seq` as purged: the deleted words leave every segment (a delete only marks them)."""
        self.compact(uri)
        info = self.store.space(uri)
        shutil.rmtree(self._vectors_path(info), ignore_errors=True)  # saved for --workers; made again at start
        marker = self.data_dir / "spaces" / str(info.id) / PURGED_FILE
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(f"{seq}\n")
        self._purged[uri] = seq
        log.info("purged the erased documents of %s from this node's cache (through sequence %d)", uri, seq)

    def _purge_marked(self, loaded: dict[str, int]) -> None:
        """Purge the caches of loaded spaces that another node marked for an erasure since they last purged."""
        assert self._shared is not None
        marks = self._shared.purges(list(loaded.values()))
        for uri, space_id in loaded.items():
            mark = marks.get(space_id, 0)
            if mark > self.purged(uri) and uri in self._indexes:
                self.refresh(uri)  # the erasure's deletes first: the rebuild reads the records after them
                self._purge_cache(uri, mark)

    # -- compaction ---------------------------------------------------------------------------

    def compact(self, uri: str) -> None:
        """Rebuild a space's keyword index as one segment, then swap it in.

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
        info = self.store.space(uri)
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
        with self._space_lock(uri), index.exclusive():
            for batch in self.store.changes_since(info.id, snapshot):
                _replay(fresh, batch)
            fresh.commit(index.seq)
            fresh.close(save_counts=False)
            index.keyword.commit(index.seq)
            index.keyword.close(save_counts=False)  # its directory is about to be retired
            swap_in(path)
            index.keyword = KeywordIndex(path, counts=(fresh.counts, snapshot))
        log.info("compacted the keyword index of %s", uri)

    def _due(self, quiet_s: float) -> list[str]:
        """The spaces whose keyword index has many segments and no write for `quiet_s` seconds."""
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
        """Compact the keyword index of every space with many segments and no recent writes."""
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

    # -- reads ------------------------------------------------------------------------------

    def search(self, uri: str, req: SearchRequest) -> SearchResult:
        """Search a space (loading its index first when needed) on the search pool, within its deadline."""
        return self.searches.run_sync(self.index(uri).search, req)

    def catch_up(self) -> None:
        """Load every space (replaying what its keyword index missed), compact where due, and save
        each space's vectors for read-only processes to map."""
        for uri in self.store.spaces():
            self.index(uri)
        self.maintain()
        for uri in self.store.spaces():
            with self._space_lock(uri):
                index = self.index(uri)
                index.save_counts()
                if index.vectors is not None:
                    index.vectors.save(self._vectors_path(self.store.space(uri)), index.seq)

    def _vectors_path(self, info: SpaceInfo) -> Path:
        """Where a space's saved vectors live."""
        return self.data_dir / "spaces" / str(info.id) / "vectors"

    def close(self) -> None:
        """Stop the committer, commit everything and close the store."""
        self._stop.set()
        self.searches.close()
        if self._committer.is_alive():
            self._committer.join()
        if self._tailer is not None:
            self._tailer.join()  # it reads the store: it must stop before the store closes
        if self._maintainer is not None:
            self._maintainer.join()
        with self._lock:
            loaders = list(self._loaders)
        for loader in loaders:
            loader.join()  # a load reads the store: it must stop before the store closes
        for index in self._indexes.values():
            index.close()
        self._indexes.clear()
        self._used.clear()
        self.store.close()
        if self._dir_lock is not None:
            self._dir_lock.close()  # releases the lock


class _Closing(Exception):
    """A background load stopped because the data directory is closing."""


def _apply_next(shadow: VectorIndex, changes: Sequence[Change]) -> None:
    """Apply changes to the vectors of the model a space moves to."""
    for change in changes:
        vec = decode_vector(change.document.next_vector, shadow.dims) if change.document is not None else None
        if vec is None:
            shadow.remove(change.ord)
        else:
            shadow.put(change.ord, vec)


def _replay(keyword: KeywordIndex, changes: Sequence[Change]) -> None:
    """Apply changes from the log to a keyword index: deletes and (re)writes, in order."""
    keyword.write((change.ord, change.document, True) for change in changes)
