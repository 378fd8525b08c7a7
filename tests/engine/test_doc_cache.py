"""The cache of fetched documents in front of a space's fetch: bounded, and never older than the index."""

import dataclasses

import numpy as np

from engram_index.engine.doc_cache import DocumentCache, _copy
from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import Document, SearchRequest

DIMS = 4


class Store:
    """An in-memory record store that counts the ordinals it is asked for."""

    def __init__(self) -> None:
        self.docs: dict[int, Document] = {}
        self.asked: list[int] = []
        self.during_fetch: list[object] = []  # callables run inside the next fetch, after reading

    def fetch(self, ords: list[int]) -> dict[int, Document]:
        self.asked += ords
        found = {o: self.docs[o] for o in ords if o in self.docs}
        while self.during_fetch:
            self.during_fetch.pop(0)()  # type: ignore[operator]
        return found


def doc(i: int, text: str, vector: int | None = None) -> Document:
    vec = None
    if vector is not None:
        v = np.zeros(DIMS, np.float32)
        v[vector] = 1.0
        vec = v.astype("<f2").tobytes()
    return Document(id=f"m{i}", author="did:plc:a", text=text, tags=("t",), created_ms=i, vector=vec,
                    metadata={"n": i})


def test_a_document_fetched_twice_is_read_from_the_store_once() -> None:
    store = Store()
    store.docs[1] = doc(1, "one")
    cache = DocumentCache(store.fetch)
    assert cache([1])[1].text == "one"
    assert cache([1, 2])[1].text == "one"
    assert store.asked == [1, 2]  # the second time only the unknown ordinal 2 is asked for
    assert cache([1])[1].text == "one" and store.asked == [1, 2]


def test_a_dropped_ordinal_is_read_again_and_a_deleted_one_is_not_answered() -> None:
    store = Store()
    store.docs[1], store.docs[2] = doc(1, "old"), doc(2, "two")
    cache = DocumentCache(store.fetch)
    cache([1, 2])
    store.docs[1] = doc(1, "new")
    del store.docs[2]
    cache.drop([1, 2])
    assert {o: d.text for o, d in cache([1, 2]).items()} == {1: "new"}


def test_a_fetch_that_overlapped_a_write_keeps_nothing_it_read() -> None:
    store = Store()
    store.docs[1] = doc(1, "old")
    cache = DocumentCache(store.fetch)

    def write_meanwhile() -> None:  # the store changes and the index applies it, mid-fetch
        store.docs[1] = doc(1, "new")
        cache.drop([1])

    store.during_fetch.append(write_meanwhile)
    assert cache([1])[1].text == "old"  # what that fetch read, answered once
    assert len(cache) == 0
    assert cache([1])[1].text == "new"


def test_the_least_recently_used_go_first_past_either_bound() -> None:
    store = Store()
    for i in range(6):
        store.docs[i] = doc(i, "x" * 10)
    cache = DocumentCache(store.fetch, max_documents=3, max_chars=1000)
    cache([0, 1, 2])
    cache([0])  # 0 is now the most recently used
    cache([3])
    assert len(cache) == 3
    store.asked.clear()
    cache([0, 2, 3])
    assert store.asked == []  # 1 was the one evicted
    by_chars = DocumentCache(store.fetch, max_documents=100, max_chars=25)
    by_chars([0, 1, 2])
    assert len(by_chars) == 2
    store.docs[9] = doc(9, "y" * 30)  # larger than the whole bound: never kept
    by_chars([9])
    assert len(by_chars) == 2 and 9 in by_chars([9])


def test_callers_changing_an_answer_do_not_change_the_cache_and_every_field_is_copied() -> None:
    store = Store()
    store.docs[1] = doc(1, "one", vector=0)
    cache = DocumentCache(store.fetch)
    first = cache([1])[1]
    first.text = "changed"
    assert cache([1])[1].text == "one"
    original = store.docs[1]
    copied = _copy(original)
    assert copied is not original
    assert [getattr(copied, f.name) for f in dataclasses.fields(Document)] == [
        getattr(original, f.name) for f in dataclasses.fields(Document)]


def test_a_search_after_a_rewrite_or_a_delete_answers_what_the_index_holds_now() -> None:
    store = Store()
    index = SpaceIndex(None, DIMS, store.fetch)
    store.docs[0], store.docs[1] = doc(0, "apples are red", 0), doc(1, "pears are green", 1)
    index.apply([(0, store.docs[0]), (1, store.docs[1])], seq=1)
    index.commit()
    vector = np.array([1, 0, 0, 0], np.float32)

    def texts() -> list[str]:
        hits = index.search(SearchRequest(mode="hybrid", q="apples pears", vector=vector, limit=5)).hits
        return [h.document.text for h in hits]

    assert texts() == ["apples are red", "pears are green"]
    store.docs[0] = doc(0, "apples are yellow", 0)
    index.apply([(0, store.docs[0])], seq=2)
    index.commit()
    assert texts() == ["apples are yellow", "pears are green"]
    del store.docs[1]
    index.apply([(1, None)], seq=3)
    index.commit()
    assert texts() == ["apples are yellow"]
