"""The collections of one data directory: the record store and each collection's index, kept in step.

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

from engram_index.collection_loading import Closing, Progress, apply_next, build_next, load_index, vectors_path
from engram_index.compaction import Compaction
from engram_index.eviction import MAX_LOADED, Eviction
from engram_index.engine.search import SpaceIndex
from engram_index.engine.vector import VectorIndex
from engram_index.engine.types import ModelIdentity
from engram_index.errors import IndexLoading, StorageError
from engram_index.heap import Trimmer
from engram_index.purging import Purging
from engram_index.searching import Searching
from engram_index.store.base import (RecordStore, SharedStore, CollectionInfo, Statement, StoredDocument,
                                     WriteResult)
from engram_index.store.opening import open_store
from engram_index.store.sqlite import PAGE_SIZE, Store
from engram_index.search_pool import SEARCH_THREADS, SearchPool

log = logging.getLogger(__name__)

# A node over a shared store looks for other nodes' writes at least this often (and whenever
# PostgreSQL NOTIFYs one): what bounds cross-node visibility when a notification is missed.
TAIL_POLL_S = 1.0


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


class Collections(Compaction, Eviction, Purging, Searching):
    """Every collection of a data directory, opened lazily, with a background committer."""

    def __init__(self, data_dir: Path, *, commit_interval: float = 0.25, read_only: bool = False,
                 lock: bool = True, store: str | None = None, search_threads: int = SEARCH_THREADS,
                 max_loaded: int = MAX_LOADED) -> None:
        """Open the data directory (creating it when new).

        Read-only: several processes may search together (serve --workers), none may write, and
        every collection's keyword index must already have caught up with its records. Read-only
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
        self._used: OrderedDict[str, None] = OrderedDict()
        self._purged: dict[str, int] = {}
        # While a collection moves to a new model: its memories' vectors for that model, ready to swap in.
        self._next: dict[str, VectorIndex] = {}
        self._loading: set[str] = set()
        self._loaders: set[threading.Thread] = set()  # background loads, joined by close()
        self._collection_locks: dict[str, threading.RLock] = {}
        # Each collection's declaration as last read (info()): kept by a process that makes every write of
        # its store, which drops it at each of its changes, and by a read-only one holding the lock, under
        # which no process writes (`serve --workers`); not by a reader without the lock or a node over a
        # shared store, which would not hear of another process's model move. Every search read it once
        # per collection (in a served search, its caches cold, a read transaction is ~30 µs of CPU).
        self._keep_infos = store is None and (not read_only or lock)
        self._infos: dict[str, CollectionInfo] = {}
        self._info_changes: dict[str, int] = {}  # drops per collection: a read racing one is not kept
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

    # -- collections ---------------------------------------------------------------------------

    def ensure_collection(
        self,
        uri: str,
        model: ModelIdentity | None = None,
        document_prefix: str | None = None,
        query_prefix: str | None = None,
    ) -> CollectionInfo:
        """Create or update a collection's declaration."""
        with self._collection_lock(uri):
            info = self.store.ensure_collection(uri, model, document_prefix, query_prefix)
            self._changed_info(uri)
            loaded = self._indexes.get(uri)
            if loaded is not None and loaded.dims != (info.model.dims if info.model else None):
                # The model's dimensions changed: the loaded vectors are no longer comparable.
                self._indexes.pop(uri, None)
                loaded.close()
        return info

    def drop(self, uri: str, also: Sequence[Statement] = ()) -> None:
        """Forget a collection: its records and its index files, with `also` (a face's rows of it) in the
        same transaction."""
        if self.read_only:
            raise StorageError("this data directory is open read-only")
        with self._collection_lock(uri):
            index = self._indexes.pop(uri, None)
            self._next.pop(uri, None)
            if index is not None:
                index.close(save_counts=False)  # its files are deleted below
            space_id = self.store.drop_collection(uri, also)
            self._changed_info(uri)
            self._last_write.pop(uri, None)
            if space_id is not None:
                shutil.rmtree(self.data_dir / "spaces" / str(space_id), ignore_errors=True)

    def info(self, uri: str) -> CollectionInfo:
        """The store's view of a collection (UnknownSpace when absent): its id, model and prefixes are
        current; its `seq` and `next_ord` may be older than the store's (`current` reads them now)."""
        held = self._infos.get(uri)
        if held is not None:
            return held
        changes = self._info_changes.get(uri, 0)  # before the read: a change after it drops what it read
        info = self.store.collection(uri)
        if self._keep_infos:
            with self._lock:
                if self._info_changes.get(uri, 0) == changes:
                    self._infos[uri] = info
        return info

    def current(self, uris: Sequence[str]) -> dict[str, CollectionInfo]:
        """The store's view of these collections now, sequences included, in one read (absent ones left out)."""
        return self.store.collection_infos(uris)

    def _changed_info(self, uri: str) -> None:
        """Drop the declaration kept of a collection, after the store changed it (see info)."""
        with self._lock:
            self._info_changes[uri] = self._info_changes.get(uri, 0) + 1
            self._infos.pop(uri, None)

    def _collection_lock(self, uri: str) -> threading.RLock:
        """The lock that orders a collection's writes, its loading and its index swaps.

        Holding it from the store's commit to the index's apply keeps the index applying
        changes in sequence order, and no write is ever committed but not yet applied while
        a load or a compaction reads the change log.
        """
        with self._lock:
            return self._collection_locks.setdefault(uri, threading.RLock())

    def index(self, uri: str, progress: Progress | None = None) -> SpaceIndex:
        """The collection's index, loading it (and catching up on missed writes) on first use."""
        index = self._indexes.get(uri)
        if index is not None:
            self._touch(uri)
            return index
        self.store.collection(uri)  # UnknownSpace before any lock is made for it
        with self._collection_lock(uri):
            index = self._indexes.get(uri)
            if index is None:
                info = self.store.collection(uri)
                index, clean = load_index(self.store, self.data_dir, info, read_only=self.read_only,
                                          locked=self._dir_lock is not None, stopping=self._stop,
                                          progress=progress)
                if info.next_model is not None:
                    self._next[info.uri] = build_next(self.store, info)
                if clean and self._shared is not None and not self.read_only:
                    self._note_clean_build(info)
                self._indexes[uri] = index
                self._ids[uri] = info.id
        self._touch(uri)
        self._evict(keep=uri)  # after its own lock is released: eviction takes other collections' locks
        return index

    def loaded(self, uri: str) -> SpaceIndex | None:
        """The collection's index if it is loaded, else None (nothing is started)."""
        return self._indexes.get(uri)

    def index_if_loaded(self, uri: str) -> SpaceIndex:
        """The collection's index if loaded; else start loading it in the background and say so."""
        index = self._indexes.get(uri)
        if index is not None:
            return index
        info = self.store.collection(uri)
        with self._lock:
            if uri not in self._loading and not self._stop.is_set():
                self._loading.add(uri)
                loader = threading.Thread(target=self._load_background, args=(info.uri,), daemon=True)
                self._loaders.add(loader)
                loader.start()
        raise IndexLoading(f"the index of {uri} is loading")

    def _load_background(self, uri: str) -> None:
        """Load a collection's index off the request path, logging progress every few seconds."""
        last = [time.monotonic()]

        def report(space: str, done: int, total: int) -> None:
            if time.monotonic() - last[0] >= 5:
                last[0] = time.monotonic()
                log.info("loading %s: %d of %d memories", space, done, total)

        began = time.monotonic()
        try:
            index = self.index(uri, report)
            log.info("loaded %s: %d memories in %.1f s", uri, len(index), time.monotonic() - began)
        except Closing:
            log.info("stopped loading %s: the data directory is closing", uri)
        except Exception:
            log.exception("loading %s failed", uri)
        finally:
            with self._lock:
                self._loading.discard(uri)
                self._loaders.discard(threading.current_thread())

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
        infos = [self.info(uri) for uri, _, _ in writes]  # (their ids)
        with ExitStack() as held:
            for uri in sorted({uri for uri, _, _ in writes}):  # one order for every caller: no deadlock
                held.enter_context(self._collection_lock(uri))
            try:
                results = self.store.write_many([(info.id, puts, deletes) for info, (_, puts, deletes)
                                                 in zip(infos, writes)], also)
            finally:  # their sequences moved (or a collection went meanwhile: read it again)
                for uri in {uri for uri, _, _ in writes}:
                    self._changed_info(uri)
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
                        apply_next(shadow, result.changes)
            if applied and self.on_searchable is not None:
                self.on_searchable(time.monotonic() - acknowledged)
        return results

    # -- other nodes' writes ----------------------------------------------------------------------

    def _apply_since(self, uri: str, index: SpaceIndex, space_id: int) -> int:
        """Apply every change after the index's sequence (the collection's lock held); how many."""
        applied = 0
        for batch in self.store.changes_since(space_id, index.seq):
            index.apply(((c.ord, c.document) for c in batch), batch[-1].seq)
            shadow = self._next.get(uri)
            if shadow is not None:
                apply_next(shadow, batch)
            applied += len(batch)
        if applied:
            self._last_write[uri] = time.monotonic()
        return applied

    def refresh(self, uri: str) -> int:
        """Bring a loaded index up to the store's latest sequence (other nodes' writes); changes applied."""
        with self._collection_lock(uri):
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
        """Declare (or clear) the model a collection moves to; its vectors are kept ready beside the index."""
        with self._collection_lock(uri):
            self.store.set_next_model(uri, model)
            self._changed_info(uri)
            self._next.pop(uri, None)
            if model is not None and uri in self._indexes:
                self._next[uri] = build_next(self.store, self.store.collection(uri))

    def switch_model(self, uri: str) -> None:
        """Make the model a collection was moving to its model, swapping the vectors in without a reload.

        The store's promotion and the swap happen while the index is held exclusively, so every
        search runs on one model's vectors or the other's, never a mix, and none waits for a load.
        """
        with self._collection_lock(uri):
            info = self.store.collection(uri)
            if info.next_model is None:
                raise StorageError(f"{uri} is not moving to another model")
            index = self._indexes.get(uri)
            if index is None:
                self.store.promote_next(uri)
                self._changed_info(uri)
                return
            shadow = self._next.pop(uri, None) or build_next(self.store, info)
            with index.exclusive():
                self.store.promote_next(uri)
                self._changed_info(uri)
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
                with self._collection_lock(uri):  # not while an eviction closes it
                    if self._indexes.get(uri) is index:
                        index.commit()
                        committed = True
        self._save_due_counts()
        return committed

    def _save_due_counts(self) -> None:
        """Write the term counts of the collections where a save is due, copied while writes wait."""
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

    # -- reads ------------------------------------------------------------------------------

    def catch_up(self) -> None:
        """Load every collection (replaying what its keyword index missed), compact where due, and save
        each collection's vectors for read-only processes to map."""
        for uri in self.store.collections():
            self.index(uri)
        self.maintain()
        for uri in self.store.collections():
            with self._collection_lock(uri):
                index = self.index(uri)
                index.save_counts()
                index.save_vectors(vectors_path(self.data_dir, self.store.collection(uri)))

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

