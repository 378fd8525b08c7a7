"""A v5 search's query embedding set going on the event loop, before its hop: the rest overlaps it."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import pytest

from engram_index.collections import Collections
from engram_index.embed.base import EmbedderBusy
from engram_index.embed.hashing import HashingEmbedder
from engram_index.embed.query_cache import EMBED_CONCURRENT, EMBED_QUEUE
from engram_index.keys import KeyRecord, KeyStore
from engram_index.supermemory.face import Face
from engram_index.supermemory.http import Call
from engram_index.errors import StorageError
from engram_index.shortfall import Gathered
from engram_index.supermemory.routes import start_search
from engram_index.supermemory.search import _Why
from tests.limits import PATIENCE_S


def call(face: Face, body: dict) -> Call:
    """A parsed search call of namespace `ns`."""
    key = KeyRecord("k", "supermemory", None, {"namespaces": None}, 0, None, None)
    return Call(face, key, "ns", {}, {}, {"query": "where is the river stone", **body}, {})


def test_a_search_starts_embedding_its_query_and_runs_whole_as_one_job_of_the_search_pool(face: Face) -> None:
    started = call(face, {})
    assert start_search(started) is True
    vector = started.extra["vector"]
    assert isinstance(vector, Future)
    assert np.array_equal(vector.result(10), face.embed_query("where is the river stone"))
    again = call(face, {})
    start_search(again)  # a query the cache holds: its vector at once
    assert isinstance(again.extra["vector"], np.ndarray)


@pytest.mark.parametrize("body", [{"rerank": "order"}, {"rerank": "aggregate"}, {"rewriteQuery": True}])
def test_a_search_that_calls_an_llm_takes_no_search_slot_for_its_whole(face: Face, body: dict) -> None:
    assert start_search(call(face, body)) is False


def test_without_an_embedder_a_search_starts_no_embedding(tmp_path: Path) -> None:
    spaces = Collections(tmp_path)
    face = Face(spaces, KeyStore(tmp_path), None)
    try:
        started = call(face, {})
        assert start_search(started) is True and started.extra["vector"] is None
    finally:
        face.close()
        spaces.close()


class Gated(HashingEmbedder):
    """An embedder whose queries wait for the test's word."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()

    def embed_queries(self, texts):  # type: ignore[no-untyped-def]
        self.go.wait(PATIENCE_S)
        return super().embed_queries(texts)


def test_queries_embedded_at_once_beyond_the_embedding_slots_are_refused_busy_as_before(tmp_path: Path) -> None:
    spaces = Collections(tmp_path)
    embedder = Gated()
    face = Face(spaces, KeyStore(tmp_path), embedder)
    try:
        started = [face.start_embedding(f"query {i}") for i in range(EMBED_CONCURRENT + EMBED_QUEUE + 4)]
        deadline = time.monotonic() + PATIENCE_S  # the slots' waiters give up at their deadline: the embedder is busy
        while sum(f.done() for f in started) < len(started) - EMBED_CONCURRENT and time.monotonic() < deadline:
            time.sleep(0.01)
        busy = [f for f in started if f.done()]
        assert len(busy) == EMBED_QUEUE + 4 and all(isinstance(f.exception(), EmbedderBusy) for f in busy)
        embedder.go.set()  # the ones in the slots embed
        assert all(f.exception(PATIENCE_S) is None for f in started if f not in busy)
    finally:
        embedder.go.set()
        face.close()
        spaces.close()


def test_whyfewer_read_while_the_query_is_embedded_is_read_again_for_the_answer_when_that_failed() -> None:
    reads: list[str] = []

    def read() -> Gathered:
        reads.append("read")
        if len(reads) == 1:
            raise StorageError("the store is away for a moment")
        return Gathered("ns", 3, [], False, 0)

    why = _Why(read)
    why.gather()  # (its error is not the search's: the answer may need no whyFewer)
    assert why.gathered() == Gathered("ns", 3, [], False, 0) and reads == ["read", "read"]
    early = _Why(lambda: Gathered("ns", 1, [], True, 2))
    early.gather()
    assert early.gathered().explained(0, 0)["loading"] is True


def test_a_search_over_a_shared_store_takes_no_search_slot_for_its_whole(face: Face, monkeypatch) -> None:
    monkeypatch.setattr(face.collections, "shared_store", lambda: object())  # (as over PostgreSQL)
    started = call(face, {})
    assert start_search(started) is False and isinstance(started.extra["vector"], Future)
