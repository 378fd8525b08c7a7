"""A face's search as one job of the search pool: its collections' searches inline, keyword passes first."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import pytest

from engram_index.collections import Collections
from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import Document, ModelIdentity, SearchRequest
from engram_index.store.sqlite import StoredDocument

A, B = "supermemory:t:chunks", "supermemory:t:memories"
DIMS = 8


def put(doc_id: str, text: str, seed: int) -> StoredDocument:
    """A document with a vector."""
    vector = np.random.default_rng(seed).standard_normal(DIMS).astype("<f2").tobytes()
    return StoredDocument(Document(doc_id, "", text, (), None, 1, vector=vector))


@pytest.fixture
def spaces(tmp_path: Path) -> Iterator[Collections]:
    spaces = Collections(tmp_path, search_threads=1)
    try:
        for uri in (A, B):
            spaces.ensure_collection(uri, ModelIdentity("m", "d", DIMS))
        spaces.write_many([(A, [put(f"a{i}", f"river stone {i}", i) for i in range(20)], []),
                           (B, [put(f"b{i}", f"stone paper {i}", 50 + i) for i in range(20)], [])])
        spaces.commit()
        yield spaces
    finally:
        spaces.close()


def ids(result) -> list[str]:
    return [h.document.id for h in result.hits]


class Watched(Future):
    """A Future of a query vector that notes when a search first waits for it."""

    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events

    def result(self, timeout: float | None = None):  # type: ignore[no-untyped-def]
        self.events.append("waited for the vector")
        return super().result(timeout)


def test_every_keyword_pass_runs_before_a_vector_still_being_embedded_is_waited_for(spaces, monkeypatch) -> None:
    events: list[str] = []
    start = SpaceIndex.start
    monkeypatch.setattr(SpaceIndex, "start", lambda index, req: (events.append("keyword pass"), start(index, req))[1])
    query = np.random.default_rng(1).standard_normal(DIMS).astype(np.float32)
    later = Watched(events)
    asks = [(uri, SearchRequest("hybrid", q="stone", vector=later, limit=5)) for uri in (A, B)]
    answers: list = []
    searching = threading.Thread(target=lambda: answers.append(spaces.search_many(asks)))
    searching.start()
    later.set_result(query)
    searching.join()
    assert events[:3] == ["keyword pass", "keyword pass", "waited for the vector"]
    direct = spaces.search_many([(uri, SearchRequest("hybrid", q="stone", vector=query, limit=5)) for uri in (A, B)])
    assert [ids(r) for r in answers[0]] == [ids(r) for r in direct]


def test_a_job_of_the_pool_searches_its_collections_inline_on_its_own_thread(spaces) -> None:
    # One search thread: a job that took a second slot for its searches would wait for itself.
    def job() -> tuple[str, list[list[str]], list[str]]:
        many = spaces.search_many([(uri, SearchRequest("keyword", q="stone", limit=3)) for uri in (A, B)])
        one = spaces.search(A, SearchRequest("keyword", q="river", limit=3))
        return threading.current_thread().name, [ids(r) for r in many], ids(one)

    name, many, one = spaces.run_job(job)
    assert name.startswith("search")  # the pool's thread (search_pool.py names them)
    assert [len(found) for found in many] == [3, 3] and len(one) == 3
    assert asyncio.run(spaces.searching(job))[0].startswith("search")


def test_searches_started_in_a_job_finish_there_as_whole_searches_would(spaces) -> None:
    query = np.random.default_rng(2).standard_normal(DIMS).astype(np.float32)
    later: Future = Future()
    later.set_result(query)

    def job() -> list[list[str]]:
        started = spaces.start_many([(uri, SearchRequest("hybrid", q="stone", vector=later, limit=4)) for uri in (A, B)])
        return [ids(s.finish()) for s in started]

    whole = [ids(spaces.search(uri, SearchRequest("hybrid", q="stone", vector=query, limit=4))) for uri in (A, B)]
    assert spaces.run_job(job) == whole
