"""A small bounded cache of fetched documents by ordinal, in front of a space's fetch from the store.

Why: fetching a search's 10 results from SQLite cost ~0.17 ms of a ~1.3 ms hybrid search
(docs/design/engine.md, "The native hybrid path"), and the documents that searches return repeat
(a page's or an agent's queries come back to the same memories). Correctness first: every write
the index applies (a put or a delete of an ordinal) drops that ordinal before the write's lock is
released, and a fetch that overlapped any applied write does not keep what it read (an epoch
counts the writes), so the cache never answers with a document older than the index's own state.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from engram_index.engine.types import Document

Fetch = Callable[[list[int]], dict[int, Document]]

# At most this many documents, and about this many characters of their text, per space: ~3,000
# distinct results of 300 queries fit, and a space's cache stays a few MB.
MAX_DOCUMENTS = 4096
MAX_CHARS = 4_000_000


class DocumentCache:
    """Documents by ordinal, least recently used out first, in front of a fetch (one per space)."""

    __slots__ = ("_fetch", "_docs", "_chars", "_epoch", "_lock", "max_documents", "max_chars")

    def __init__(self, fetch: Fetch, max_documents: int = MAX_DOCUMENTS, max_chars: int = MAX_CHARS) -> None:
        """Cache what `fetch` (ordinals → their live documents) answers, within the two bounds."""
        self._fetch = fetch
        self._docs: OrderedDict[int, Document] = OrderedDict()
        self._chars = 0
        self._epoch = 0  # counts invalidations: a fetch that saw one keeps nothing it read
        self._lock = threading.Lock()  # searches run on several threads at once
        self.max_documents = max_documents
        self.max_chars = max_chars

    def __len__(self) -> int:
        """How many documents are cached."""
        return len(self._docs)

    def __call__(self, ords: list[int]) -> dict[int, Document]:
        """The live documents with these ordinals, as fetch gives them (copies: callers may change them)."""
        out: dict[int, Document] = {}
        missing: list[int] = []
        with self._lock:
            docs = self._docs
            for ord_ in ords:
                doc = docs.get(ord_)
                if doc is None:
                    missing.append(ord_)
                else:
                    docs.move_to_end(ord_)
                    out[ord_] = doc
            epoch = self._epoch
        found = {ord_: _copy(doc) for ord_, doc in out.items()}
        if not missing:
            return found
        fetched = self._fetch(missing)  # outside the lock: the store may take its time
        with self._lock:
            if epoch == self._epoch:  # no write was applied meanwhile: what was read is current
                for ord_, doc in fetched.items():
                    self._put(ord_, _copy(doc))
        found.update(fetched)
        return found

    def drop(self, ords: Iterable[int]) -> None:
        """Forget these ordinals (a write to them is being applied), and what in-flight fetches read."""
        with self._lock:
            self._epoch += 1
            for ord_ in ords:
                doc = self._docs.pop(ord_, None)
                if doc is not None:
                    self._chars -= len(doc.text)

    def clear(self) -> None:
        """Forget every document."""
        with self._lock:
            self._epoch += 1
            self._docs.clear()
            self._chars = 0

    def _put(self, ord_: int, doc: Document) -> None:
        """Keep one document (the lock held), evicting the least recently used past the bounds."""
        size = len(doc.text)
        if size > self.max_chars:
            return
        old = self._docs.pop(ord_, None)
        if old is not None:
            self._chars -= len(old.text)
        self._docs[ord_] = doc
        self._chars += size
        while len(self._docs) > self.max_documents or self._chars > self.max_chars:
            _, evicted = self._docs.popitem(last=False)
            self._chars -= len(evicted.text)


def _copy(doc: Document) -> Document:
    """A shallow copy of a document (a tenth of copy.copy's cost on a slotted dataclass)."""
    return Document(doc.id, doc.author, doc.text, doc.tags, doc.source, doc.created_ms, doc.indexed_ms,
                    doc.metadata, doc.vector, doc.next_vector)
