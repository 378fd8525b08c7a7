"""Query vectors by exact text, per model identity: a repeated query is not embedded again.

A bounded LRU: at most `QUERY_CACHE_ENTRIES` vectors (2048 × 384 float32 = 3 MB for MiniLM),
and only texts of at most `QUERY_CACHE_CHARS` characters (so keys add at most 2048 × 1000
characters). The key is the model identity and the exact final text (prefix included): the same
identity means the same vectors, so a hit gives exactly what embedding would. Each face holds
its own cache; nothing is shared between processes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from engram_index.embed.base import Embedder, EmbedderBusy
from engram_index.engine.types import ModelIdentity

QUERY_CACHE_ENTRIES = 2048
QUERY_CACHE_CHARS = 1000
# Embedding admission of the v5 and Kindgi faces, as garden's (engram/api/embedding.py): at most 4
# queries embedded at once, 8 more waiting up to 0.25 s; beyond, EmbedderBusy (503) at once.
EMBED_CONCURRENT, EMBED_QUEUE, EMBED_WAIT_S = 4, 8, 0.25


class EmbedSlots:
    """Admission for query embedding from callers' threads: a few at once, a short bounded queue."""

    def __init__(self, concurrent: int = EMBED_CONCURRENT, queue: int = EMBED_QUEUE,
                 wait_s: float = EMBED_WAIT_S) -> None:
        """`concurrent` at once, `queue` more waiting at most `wait_s` seconds."""
        self.concurrent, self.queue, self.wait_s = concurrent, queue, wait_s
        self._free = threading.BoundedSemaphore(concurrent)
        self._lock = threading.Lock()
        self._waiting = 0

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold a slot for one embedding, or raise EmbedderBusy."""
        if not self._free.acquire(blocking=False):
            with self._lock:
                if self._waiting >= self.queue:
                    raise EmbedderBusy("too many queries are being embedded; retry shortly")
                self._waiting += 1
            try:
                if not self._free.acquire(timeout=self.wait_s):
                    raise EmbedderBusy("too many queries are being embedded; retry shortly")
            finally:
                with self._lock:
                    self._waiting -= 1
        try:
            yield
        finally:
            self._free.release()


class QueryCache:
    """Exact text → query vector, per model identity, least recently used first out."""

    def __init__(self, entries: int = QUERY_CACHE_ENTRIES, max_chars: int = QUERY_CACHE_CHARS,
                 slots: EmbedSlots | None = None) -> None:
        """Hold at most `entries` vectors of texts of at most `max_chars` characters; a miss is
        embedded within `slots` when given (a hit needs none)."""
        if entries < 0:
            raise ValueError(f"entries must be at least 0, got {entries}")
        self.entries, self.max_chars = entries, max_chars
        self._vectors: OrderedDict[tuple[ModelIdentity, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.slots = slots
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._vectors)

    def holds(self, identity: ModelIdentity, text: str) -> bool:
        """Whether the vector of `text` for a model is held (a look: neither a hit nor a use)."""
        with self._lock:
            return (identity, text) in self._vectors

    def get(self, identity: ModelIdentity, text: str) -> np.ndarray | None:
        """The held vector of `text` for a model, if any (a hit, without embedding)."""
        with self._lock:
            held = self._vectors.get((identity, text))
            if held is not None:
                self._vectors.move_to_end((identity, text))
                self.hits += 1
            return held

    def vector(self, embedder: Embedder, text: str) -> np.ndarray:
        """The embedder's query vector of `text` (a final query text), from the cache when held."""
        key = (embedder.identity, text)
        held = self.get(*key)
        if held is not None:
            return held
        with self._lock:
            self.misses += 1
        if self.slots is None:
            vector = np.asarray(embedder.embed_queries([text])[0], np.float32)
        else:
            with self.slots.held():
                vector = np.asarray(embedder.embed_queries([text])[0], np.float32)
        vector.flags.writeable = False  # shared by every caller that asks for this text
        if self.entries and len(text) <= self.max_chars:
            with self._lock:
                self._vectors[key] = vector
                self._vectors.move_to_end(key)
                while len(self._vectors) > self.entries:
                    self._vectors.popitem(last=False)
        return vector
