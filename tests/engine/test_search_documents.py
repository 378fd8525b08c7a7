"""A search without documents: the same hits as the default, from the index's columns, no store read."""

from collections.abc import Iterator

import pytest

from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import Document, Filters, SearchRequest
from tests.engine.test_search import DIMS, unit


class Store:
    """An in-memory record store that counts the documents it is asked for."""

    def __init__(self) -> None:
        self.docs: dict[int, Document] = {}
        self.read: list[int] = []

    def fetch(self, ords: list[int]) -> dict[int, Document]:
        self.read.extend(ords)
        return {o: self.docs[o] for o in ords if o in self.docs}


@pytest.fixture
def space() -> Iterator[tuple[SpaceIndex, Store]]:
    store = Store()
    index = SpaceIndex(None, DIMS, store.fetch)
    rows = [
        ("deploy the http server on friday", unit(0), ("infra", "infra", "s:sessionId=1"), 10),
        ("pasta with fresh tomatoes", unit(1), ("food",), 20),
        ("the http server crashed with a timeout", unit(0, 1, 0.5), ("infra", "incident"), 30),
        ("tomatoes grow in summer", unit(2), ("garden", "food"), 40),
        ("a server for tomatoes", unit(1, 0, 0.3), (), 50),
    ]
    changes = []
    for i, (text, vec, tags, created) in enumerate(rows):
        doc = Document(id=f"m{i}", author="did:plc:a", text=text, tags=tags, created_ms=created, source="src",
                       metadata={"k": i}, vector=vec.astype("<f2").tobytes())
        store.docs[i] = doc
        changes.append((i, doc))
    index.apply(changes, seq=1)
    index.commit()
    yield index, store


def summary(result) -> list[tuple[object, ...]]:
    return [(h.document.id, h.score, h.similarity, h.bm25, h.vector_rank, h.keyword_rank, h.fusion)
            for h in result.hits]


@pytest.mark.parametrize("req", [
    SearchRequest("hybrid", q="server tomatoes", vector=unit(0), limit=4, explain=False),
    SearchRequest("hybrid", q="server", vector=unit(1), limit=3, explain=False, fusion="rrf"),
    SearchRequest("keyword", q="server tomatoes", limit=5, explain=False),
    SearchRequest("vector", vector=unit(1), limit=5, explain=False),
    SearchRequest("hybrid", q="server", vector=unit(0), limit=5, explain=False, filters=Filters(tags=("infra",))),
])
def test_a_search_without_documents_ranks_and_scores_exactly_as_with_them(space, req: SearchRequest) -> None:
    index, _ = space
    with_docs = index.search(req)
    without = index.search(SearchRequest(**{**{f: getattr(req, f) for f in req.__slots__}, "documents": False}))
    assert with_docs.hits and summary(without) == summary(with_docs)
    assert (without.mode, without.approximate) == (with_docs.mode, with_docs.approximate)


def test_a_search_without_documents_reads_nothing_from_the_store(space) -> None:
    index, store = space
    for mode in ("hybrid", "keyword", "vector"):
        assert index.search(SearchRequest(mode, q="server", vector=unit(0), limit=5, explain=False,
                                          documents=False)).hits
    assert store.read == []
    index.search(SearchRequest("hybrid", q="server", vector=unit(0), limit=5, explain=False))
    assert store.read  # the default reads the hits' documents


def test_a_documents_free_hit_carries_its_id_tags_and_creation_time_from_the_columns(space) -> None:
    index, _ = space
    hits = index.search(SearchRequest("keyword", q="friday", limit=5, explain=False, documents=False)).hits
    assert len(hits) == 1
    doc = hits[0].document
    assert (doc.id, doc.tags, doc.created_ms) == ("m0", ("infra", "s:sessionId=1"), 10)
    assert (doc.text, doc.source, doc.metadata, doc.vector) == ("", None, None, None)


def test_a_document_deleted_before_the_keyword_commit_is_not_returned_without_documents(space) -> None:
    index, _ = space
    index.apply([(0, None)], seq=2)  # not committed: the keyword index still holds it
    for mode in ("hybrid", "keyword"):
        found = index.search(SearchRequest(mode, q="http server", vector=unit(0), limit=5, explain=False,
                                           documents=False))
        assert "m0" not in [h.document.id for h in found.hits] and found.hits


def test_a_search_without_documents_cannot_be_explained(space) -> None:
    index, _ = space
    with pytest.raises(ValueError, match="documents=False cannot explain"):
        index.search(SearchRequest("keyword", q="server", documents=False))
