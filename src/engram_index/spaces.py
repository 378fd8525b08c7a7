"""The spaces of one data directory: the record store and each space's index, kept in step.

A write is acknowledged once SQLite has committed it; the index is updated right after, and a
background thread commits keyword writes every `commit_interval` seconds so that they become
searchable within a second. After a crash the index catches up on open: vectors and filter
columns are rebuilt from the records, and the keyword index replays every change after the
sequence it last made durable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from .engine.search import SpaceIndex
from .engine.types import Document, ModelIdentity, SearchRequest, SearchResult
from .errors import IndexLoading
from .store.sqlite import SpaceInfo, StoredDocument, Store, WriteResult

Progress = Callable[[str, int, int], None]


class Spaces:
    """Every space of a data directory, opened lazily, with a background committer."""

    def __init__(self, data_dir: Path, *, commit_interval: float = 0.25) -> None:
        """Open the data directory (creating it when new)."""
        self.data_dir = data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        self.store = Store(data_dir / "records.sqlite")
        self._indexes: dict[str, SpaceIndex] = {}
        self._loading: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._committer = threading.Thread(
            target=self._commit_loop, args=(commit_interval,), daemon=True, name="committer"
        )
        self._committer.start()

    # -- spaces ---------------------------------------------------------------------------

    def ensure_space(
        self,
        uri: str,
        model: ModelIdentity | None = None,
        document_prefix: str | None = None,
        query_prefix: str | None = None,
    ) -> SpaceInfo:
        """Create or update a space's declaration."""
        info = self.store.ensure_space(uri, model, document_prefix, query_prefix)
        loaded = self._indexes.get(uri)
        if loaded is not None and loaded.dims != (info.model.dims if info.model else None):
            # The model's dimensions changed: the loaded vectors are no longer comparable.
            with self._lock:
                self._indexes.pop(uri, None)
            loaded.close()
        return info

    def info(self, uri: str) -> SpaceInfo:
        """The store's view of a space (UnknownSpace when absent)."""
        return self.store.space(uri)

    def index(self, uri: str, progress: Progress | None = None) -> SpaceIndex:
        """The space's index, loading it (and catching up on missed writes) on first use."""
        index = self._indexes.get(uri)
        if index is not None:
            return index
        with self._lock:
            index = self._indexes.get(uri)
            if index is None:
                index = self._load(self.store.space(uri), progress)
                self._indexes[uri] = index
        return index

    def index_if_loaded(self, uri: str) -> SpaceIndex:
        """The space's index if loaded; else start loading it in the background and say so."""
        index = self._indexes.get(uri)
        if index is not None:
            return index
        info = self.store.space(uri)
        with self._lock:
            if uri not in self._loading:
                self._loading.add(uri)
                threading.Thread(target=self._load_background, args=(info.uri,), daemon=True).start()
        raise IndexLoading(f"the index of {uri} is loading")

    def _load_background(self, uri: str) -> None:
        """Load a space's index off the request path."""
        try:
            self.index(uri)
        finally:
            with self._lock:
                self._loading.discard(uri)

    def _load(self, info: SpaceInfo, progress: Progress | None) -> SpaceIndex:
        """Build a space's index from its records and its keyword files."""
        dims = info.model.dims if info.model else None
        index = SpaceIndex(
            self.data_dir / "spaces" / str(info.id),
            dims,
            lambda ords: self.store.documents(info.id, ords),
        )
        total = self.store.count(info.id)
        kw_seq = index.keyword.committed_seq
        if kw_seq > info.seq:
            # The keyword files are ahead of the records (a restored backup): start them over.
            index.keyword.reset()
            kw_seq = 0
        done = 0
        replayed = False
        for batch in self.store.changes_since(info.id, 0):
            live = [(c.ord, c.document) for c in batch if c.document is not None]
            index.load_bulk(live)
            for change in batch:
                if change.seq <= kw_seq:
                    continue
                replayed = True
                if change.document is None:
                    index.keyword.delete(change.ord)
                else:
                    index.keyword.upsert(change.ord, change.document)
            done += len(live)
            if progress is not None:
                progress(info.uri, done, total)
        index.seq = info.seq
        if replayed or index.keyword.committed_seq != info.seq:
            index.commit()
        return index

    # -- writes -----------------------------------------------------------------------------

    def write(
        self, uri: str, puts: Sequence[StoredDocument], deletes: Sequence[str] = ()
    ) -> WriteResult:
        """Store documents durably, then apply them to the space's index if it is loaded."""
        info = self.store.space(uri)
        result = self.store.write(info.id, puts, deletes)
        index = self._indexes.get(uri)
        if index is not None and result.changes:
            index.apply(((c.ord, c.document) for c in result.changes), result.seq)
        return result

    def commit(self) -> None:
        """Make every pending keyword write durable and searchable now."""
        for index in list(self._indexes.values()):
            if index.keyword.pending or index.keyword.committed_seq != index.seq:
                index.commit()

    def _commit_loop(self, interval: float) -> None:
        """Commit pending keyword writes every `interval` seconds until closed."""
        while not self._stop.wait(interval):
            try:
                self.commit()
            except Exception:  # pragma: no cover - logged by the thread, retried next tick
                import logging

                logging.getLogger(__name__).exception("keyword commit failed; will retry")

    # -- reads ------------------------------------------------------------------------------

    def search(self, uri: str, req: SearchRequest) -> SearchResult:
        """Search a space (loading its index first when needed)."""
        return self.index(uri).search(req)

    def document(self, uri: str, doc_id: str) -> Document | None:
        """One live document by id."""
        found = self.store.document_by_id(self.store.space(uri).id, doc_id)
        return found[1] if found else None

    def close(self) -> None:
        """Stop the committer, commit everything and close the store."""
        self._stop.set()
        self._committer.join()
        for index in self._indexes.values():
            index.close()
        self._indexes.clear()
        self.store.close()
