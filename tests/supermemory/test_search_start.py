"""A v5 search's query embedding set going on the event loop, before its hop: the rest overlaps it."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import pytest

from engram_index.collections import Collections
from engram_index.embed.hashing import HashingEmbedder
from engram_index.keys import KeyRecord, KeyStore
from engram_index.supermemory.face import Face
from engram_index.supermemory.http import Call
from engram_index.supermemory.routes import start_search


@pytest.fixture
def face(tmp_path: Path) -> Iterator[Face]:
    spaces = Collections(tmp_path)
    face = Face(spaces, KeyStore(tmp_path), HashingEmbedder())
    try:
        yield face
    finally:
        face.close()
        spaces.close()


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
