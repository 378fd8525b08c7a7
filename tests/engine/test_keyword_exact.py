"""Keyword search returns the exact top-k by our own BM25, whatever tantivy's own ranking says."""

from collections.abc import Iterator

import numpy as np
import pytest

from engram_index.engine.analyzer import query_words
from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import Document, Filters, SearchRequest

FILLER = "alpha beta gamma delta epsilon zeta theta iota kappa lambda"


class Docs:
    """An in-memory document source standing in for the record store."""

    def __init__(self) -> None:
        self.docs: dict[int, Document] = {}

    def fetch(self, ords: list[int]) -> dict[int, Document]:
        return {o: self.docs[o] for o in ords if o in self.docs}


def disagreeing_texts() -> list[tuple[str, tuple[str, ...]]]:
    """Texts on which tantivy's sum (exact form and stem, parts at full weight) and ours disagree.

    "running" in a long text matches both the exact form and the stem (tantivy counts both, we
    count the stem once); "runs" in a short text matches the stem only (both count it once, and its
    short length scores it higher). So tantivy ranks the 150 long texts first, and our BM25 puts
    the short ones on top: they sit outside any window of tantivy's best few times the limit.
    """
    rows: list[tuple[str, tuple[str, ...]]] = []
    for i in range(150):
        rows.append((f"running {FILLER} {FILLER} note {i}", ("long",)))
    for i in range(30):
        rows.append((f"runs daily {i}", ("short",) if i % 2 else ("long",)))
    # Identifier parts: tantivy weighs each part like a word, we weigh it 0.6.
    for i in range(40):
        rows.append((f"http_server {FILLER} entry {i}", ("long",)))
    for i in range(40):
        rows.append((f"the server of {i}", ("short",)))
    for i in range(20):
        rows.append((f"same words {i % 2}", ("tie",)))  # exact ties: insertion order decides
    return rows


@pytest.fixture
def space() -> Iterator[tuple[SpaceIndex, Docs]]:
    docs = Docs()
    index = SpaceIndex(None, None, docs.fetch)
    changes = []
    # Interleave the kinds of text, so that insertion order is not the order of either ranking.
    rows = disagreeing_texts()
    order = np.random.default_rng(7).permutation(len(rows))
    for ord_, i in enumerate(order.tolist()):
        text, tags = rows[i]
        doc = Document(id=f"x{(ord_ * 7919) % 1000:03d}-{ord_}", author="did:plc:a", text=text, tags=tags,
                       created_ms=1000 - ord_)
        docs.docs[ord_] = doc
        changes.append((ord_, doc))
    index.apply(changes, seq=1)
    index.commit()
    yield index, docs


def brute_force(index: SpaceIndex, q: str, limit: int, allowed: set[int] | None = None) -> list[tuple[int, float]]:
    """Every live document scored by our BM25, best first, ties by insertion ordinal."""
    ords = np.flatnonzero(index.columns.live[: index.columns.size])
    if allowed is not None:
        ords = np.array([o for o in ords.tolist() if o in allowed], np.int64)
    scores = index.keyword.scores(query_words(q), ords)
    ranked = sorted((( -float(s), int(o)) for o, s in zip(ords, scores) if s > 0))
    return [(o, -s) for s, o in ranked[:limit]]


def found(index: SpaceIndex, q: str, limit: int, filters: Filters = Filters()) -> list[tuple[int, float]]:
    """The keyword search's (ordinal, BM25) list."""
    result = index.search(SearchRequest(mode="keyword", q=q, limit=limit, filters=filters))
    by_id = index.columns._by_id
    return [(by_id[h.document.id], float(h.bm25 or 0.0)) for h in result.hits]


def test_the_corpus_makes_tantivys_window_miss_documents_of_our_top_k(space) -> None:
    index, _ = space
    # tantivy's own top 50 for "running" are the long texts; our best are the short ones.
    tantivy_top, _ = index.keyword.search(query_words("running"), 50)
    assert not set(tantivy_top.tolist()) & {o for o, _ in brute_force(index, "running", 10)}


@pytest.mark.parametrize("q", ["running", "running server", "http_server", "runs http server", "same words"])
@pytest.mark.parametrize("limit", [1, 5, 10, 20, 37, 100, 400])
def test_keyword_search_is_the_exact_top_k_of_a_brute_force_scoring(space, q: str, limit: int) -> None:
    index, _ = space
    assert found(index, q, limit) == brute_force(index, q, limit)


@pytest.mark.parametrize("limit", [1, 10, 25])
def test_the_exact_top_k_holds_under_filters(space, limit: int) -> None:
    index, docs = space
    short = {o for o, d in docs.docs.items() if "short" in d.tags}
    assert found(index, "running server", limit, Filters(tags=("short",))) == brute_force(
        index, "running server", limit, short)
    not_short = set(docs.docs) - short
    assert found(index, "runs", limit, Filters(none_tags=("short",))) == brute_force(index, "runs", limit, not_short)


def test_the_exact_top_k_holds_for_writes_and_deletes_before_the_keyword_commit(space) -> None:
    index, docs = space
    base = max(docs.docs) + 1
    changes: list[tuple[int, Document | None]] = []
    for i in range(5):
        doc = Document(id=f"new{i}", author="did:plc:a", text="runs" if i % 2 else "runs runs", created_ms=5)
        docs.docs[base + i] = doc
        changes.append((base + i, doc))
    gone = [o for o, _ in brute_force(index, "runs", 3)]
    for o in gone:
        del docs.docs[o]
        changes.append((o, None))
    index.apply(changes, seq=2)  # no commit
    for limit in (1, 5, 20):
        assert found(index, "runs", limit) == brute_force(index, "runs", limit)
    assert not set(gone) & {o for o, _ in found(index, "runs", 50)}


def test_the_exact_top_k_holds_after_many_writes_rebuild_the_postings(space) -> None:
    index, docs = space
    base = max(docs.docs) + 1
    for batch in range(6):
        changes: list[tuple[int, Document | None]] = []
        for i in range(400):
            o = base + batch * 400 + i
            doc = Document(id=f"w{o}", author="did:plc:a", text=f"runs {'running ' * (i % 3)}{FILLER}", created_ms=5)
            docs.docs[o] = doc
            changes.append((o, doc))
        index.apply(changes, seq=2 + batch)
        for limit in (3, 30):
            assert found(index, "runs running", limit) == brute_force(index, "runs running", limit)
    index.commit()
    assert found(index, "runs running", 10) == brute_force(index, "runs running", 10)
