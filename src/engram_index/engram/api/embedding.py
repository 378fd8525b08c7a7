"""Server-side query embedding for searchMemories: who may have q embedded, and how many at once."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from engram_index.endpoints import in_thread
from engram_index.embed.base import Embedder, EmbedderBusy, query_text
from engram_index.embed.pass_start import Embedding, embed_on, tells_pass
from engram_index.embed.query_cache import QueryCache
from engram_index.engine.types import ModelIdentity
from engram_index.errors import ModelNotHosted, NoModel, RateLimited, SpaceError
from engram_index.admission import TokenBucket, retry_after_s

MAX_EMBED_CHARS = 1000  # seed 000: a service embeds q of at most 1000 characters


class TextSearchNotAllowed(SpaceError):
    """This service does not embed queries for the space's authority."""

    code = "text_search_not_allowed"
    status = 403


@dataclass
class QueryEmbedding:
    """The embedder (if any), the authorities it serves, and its admission limits.

    At most `concurrent` queries are embedded at once and at most `queue` more wait (for at
    most `queue_wait_s`); beyond that callers get EmbedderBusy at once. Each authority gets
    `rate` embeddings a second, `burst` at most (RateLimitExceeded beyond). A query embedded
    lately comes from the cache and takes no slot.
    """

    embedder: Embedder | None = None
    authorities: Collection[str] | None = None  # None: every authority
    concurrent: int = 4
    queue: int = 8
    queue_wait_s: float = 0.25
    rate: float = 2.0
    burst: float = 20.0
    _slots: asyncio.Semaphore | None = None
    _threads: ThreadPoolExecutor | None = None  # where `start` embeds (made on first use)
    _waiting: int = 0
    _buckets: dict[str, TokenBucket] = field(default_factory=dict)
    _cache: QueryCache = field(default_factory=QueryCache)  # exact q → vector (embed/query_cache.py)

    def refusal(self, model: ModelIdentity | None, authority: str, q: str) -> SpaceError | None:
        """Why q cannot be embedded for this space (None when it can)."""
        if model is None:  # nothing to embed with, here or at the client: not ModelNotHosted
            return NoModel("the space's authority has not declared an embedding model")
        if self.embedder is None or self.embedder.identity != model:
            return ModelNotHosted("this service does not run the space's model: embed q and send the vector")
        if self.authorities is not None and authority not in self.authorities:
            return TextSearchNotAllowed("this service does not embed queries for the space's authority")
        if len(q) > MAX_EMBED_CHARS:
            return ModelNotHosted(f"q is longer than the {MAX_EMBED_CHARS} characters this service embeds")
        return None

    async def embed(self, authority: str, prefix: str, q: str) -> np.ndarray:
        """Embed one query (prefix + q) within the limits."""
        assert self.embedder is not None
        text = query_text(prefix, q)
        held, slots = await self._admitted(authority, text)
        if slots is None:
            assert held is not None
            return held
        try:
            return await in_thread(self._cache.vector, self.embedder, text)
        finally:
            slots.release()

    async def start(self, authority: str, prefix: str, q: str) -> np.ndarray | Embedding[np.ndarray]:
        """`embed`, within the same limits, set going on an embedding thread when the embedder is a local
        model (`pass_start.tells_pass`): the search's keyword pass then runs while it embeds, and its slot is
        freed when it ends. The vector itself when the cache holds it, or when the embedder is remote (a
        network call must not hold a search slot: it is embedded first, as by `embed`)."""
        assert self.embedder is not None
        if not tells_pass(self.embedder):
            return await self.embed(authority, prefix, q)
        text = query_text(prefix, q)
        held, slots = await self._admitted(authority, text)
        if slots is None:
            assert held is not None
            return held
        loop = asyncio.get_running_loop()
        embedder, cache = self.embedder, self._cache
        try:
            if self._threads is None:  # the slots bound how many embed at once
                self._threads = ThreadPoolExecutor(self.concurrent, thread_name_prefix="garden-embed")
            vector = embed_on(self._threads, lambda: cache.vector(embedder, text))
        except BaseException:
            slots.release()
            raise
        vector.add_done_callback(lambda _: loop.call_soon_threadsafe(slots.release))
        return vector

    async def _admitted(self, authority: str, text: str) -> tuple[np.ndarray, None] | tuple[None, asyncio.Semaphore]:
        """One query's admission: its authority's rate, then its held vector (a repeated query costs no
        embedding, so it takes no slot) or an embedding slot (the slots, one taken: the caller releases
        it); RateLimited or EmbedderBusy when refused."""
        assert self.embedder is not None
        bucket = self._buckets.get(authority)
        if bucket is None:  # made once per authority, not per call
            bucket = self._buckets.setdefault(authority, TokenBucket(self.rate, self.burst))
        if not bucket.take():
            raise RateLimited("too many queries embedded for this space's authority",
                              retry_after_s=retry_after_s(bucket.wait_s()))
        held = self._cache.get(self.embedder.identity, text)
        if held is not None:
            return held, None
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.concurrent)
        if self._slots.locked() and self._waiting >= self.queue:
            raise EmbedderBusy("too many queries are being embedded; retry shortly")
        self._waiting += 1
        try:
            await asyncio.wait_for(self._slots.acquire(), self.queue_wait_s)
        except TimeoutError:
            raise EmbedderBusy("too many queries are being embedded; retry shortly") from None
        finally:
            self._waiting -= 1
        return None, self._slots
