"""The query-vector cache: exact text to vector per model identity, bounded, least recently used out."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest

from engram_index.embed.base import EmbedderBusy
from engram_index.embed.hashing import HashingEmbedder
from engram_index.embed.query_cache import QUERY_CACHE_CHARS, QUERY_CACHE_ENTRIES, EmbedSlots, QueryCache


class Counting(HashingEmbedder):
    """The hashing embedder, remembering which query texts it really embedded."""

    def __init__(self, dims: int) -> None:
        super().__init__(dims)
        self.embedded: list[str] = []

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded += list(texts)
        return super().embed_queries(texts)


def test_a_repeated_query_is_embedded_once_and_gets_the_same_vector() -> None:
    cache, emb = QueryCache(), Counting(32)
    first = cache.vector(emb, "harbour at dusk")
    again = cache.vector(emb, "harbour at dusk")
    assert emb.embedded == ["harbour at dusk"]
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first, HashingEmbedder(32).embed_queries(["harbour at dusk"])[0])
    assert (cache.hits, cache.misses) == (1, 1)


def test_looking_whether_a_vector_is_held_is_neither_a_hit_nor_a_use() -> None:
    cache, emb = QueryCache(entries=2), Counting(16)
    assert not cache.holds(emb.identity, "a")
    cache.vector(emb, "a")
    cache.vector(emb, "b")
    assert cache.holds(emb.identity, "a") and not cache.holds(HashingEmbedder(8).identity, "a")
    assert (cache.hits, cache.misses) == (0, 2)
    cache.vector(emb, "c")  # "a" was only looked at, not used, since "b": "a" leaves
    assert not cache.holds(emb.identity, "a") and cache.holds(emb.identity, "b")


def test_the_least_recently_used_vector_leaves_first_when_full() -> None:
    cache, emb = QueryCache(entries=2), Counting(16)
    for text in ("a", "b", "a", "c"):  # "a" was used after "b": "b" leaves
        cache.vector(emb, text)
    assert len(cache) == 2
    assert cache.get(emb.identity, "a") is not None and cache.get(emb.identity, "c") is not None
    assert cache.get(emb.identity, "b") is None


def test_each_model_identity_has_its_own_vectors() -> None:
    cache, small, large = QueryCache(), Counting(16), Counting(24)
    assert cache.vector(small, "pasta").shape == (16,)
    assert cache.vector(large, "pasta").shape == (24,)
    assert small.embedded == large.embedded == ["pasta"]


def test_texts_longer_than_the_bound_are_embedded_but_not_held() -> None:
    cache, emb = QueryCache(), Counting(16)
    long = "x" * (QUERY_CACHE_CHARS + 1)
    cache.vector(emb, long)
    cache.vector(emb, long)
    assert emb.embedded == [long, long] and len(cache) == 0


def test_a_held_vector_cannot_be_changed_by_a_caller() -> None:
    vector = QueryCache().vector(Counting(16), "tide")
    with pytest.raises(ValueError):
        vector[0] = 1.0


def test_the_default_bound_is_the_documented_one_and_a_negative_bound_is_refused() -> None:
    assert (QUERY_CACHE_ENTRIES, QUERY_CACHE_CHARS) == (2048, 1000)
    with pytest.raises(ValueError, match="entries must be at least 0"):
        QueryCache(entries=-1)


class Blocking(HashingEmbedder):
    """The hashing embedder, holding each embedding until the test lets it go."""

    def __init__(self, dims: int) -> None:
        super().__init__(dims)
        self.started, self.go = threading.Event(), threading.Event()

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.started.set()
        self.go.wait()
        return super().embed_queries(texts)


def test_a_miss_beyond_the_embedding_slots_and_their_queue_is_refused_busy() -> None:
    cache, emb = QueryCache(slots=EmbedSlots(concurrent=1, queue=0)), Blocking(16)
    first = threading.Thread(target=cache.vector, args=(emb, "first"))
    first.start()
    emb.started.wait()
    with pytest.raises(EmbedderBusy) as err:
        cache.vector(emb, "second")
    assert err.value.status == 503
    emb.go.set()
    first.join()
    assert cache.vector(emb, "first") is cache.get(emb.identity, "first")  # a hit takes no slot
    assert cache.vector(emb, "second").shape == (16,)  # the slot is free again
