"""A search answered in columns (SearchRequest.hits=False): the hits' ordinals and numbers, no Hit objects."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import Filters, SearchRequest, SearchResult

from tests.engine.test_search_started import DIMS, FILTERS, QUERIES, build, future_of


@pytest.fixture(scope="module")
def space():
    return build(seed=11)


def as_columns(index: SpaceIndex, result: SearchResult) -> list[tuple]:
    """What the hits carry that columns hold: ordinal, id, score, similarity (None: none), BM25 (None: none)."""
    ords = index.columns.ids_to_ords([h.document.id for h in result.hits]).tolist()
    return [(o, h.document.id, float(h.score), None if h.similarity is None else float(h.similarity),
             None if h.bm25 is None else float(h.bm25)) for o, h in zip(ords, result.hits)]


def columns(index: SpaceIndex, result: SearchResult) -> list[tuple]:
    """The same read from the answer's columns."""
    cols = result.columns
    assert cols is not None and result.hits == []
    ids = index.columns.ids
    return [(o, ids[o], float(s), float(sim) if has else None, None if b != b else float(b))
            for o, s, sim, has, b in zip(cols.ords.tolist(), cols.scores.tolist(), cols.sims.tolist(),
                                         cols.has_sim.tolist(), cols.bm25.tolist())]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(q=QUERIES, limit=st.integers(1, 80), fusion=st.sampled_from(["convex", "rrf"]), filters=FILTERS,
       mode=st.sampled_from(["hybrid", "keyword", "vector"]), later=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_a_search_in_columns_answers_the_hits_of_the_same_search_in_order(
        space, q: str, limit: int, fusion: str, filters: Filters, mode: str, later: bool, seed: int) -> None:
    index, _ = space
    query = np.random.default_rng(seed).standard_normal(DIMS).astype(np.float32)
    asked = SearchRequest(mode, q=q, vector=query, limit=limit, fusion=fusion, filters=filters, explain=False,
                          documents=False)
    with_hits = index.search(asked)
    in_columns = SearchRequest(mode, q=q, vector=future_of(query) if later else query, limit=limit, fusion=fusion,
                               filters=filters, explain=False, documents=False, hits=False)
    got = index.start(in_columns).finish() if later else index.search(in_columns)
    assert columns(index, got) == as_columns(index, with_hits)
    assert (got.mode, got.approximate) == (with_hits.mode, with_hits.approximate)


def test_a_search_in_columns_leaves_out_what_was_deleted_after_its_candidates_were_found(space) -> None:
    index, docs = build(seed=12)
    query = np.random.default_rng(1).standard_normal(DIMS).astype(np.float32)
    first = index.search(SearchRequest("hybrid", q="river stone", vector=query, limit=10, explain=False,
                                       documents=False, hits=False))
    assert first.columns is not None and first.columns.ords.size == 10
    gone = int(first.columns.ords[0])
    index.apply([(gone, None)], seq=3)  # deleted: its keyword postings stay until the next commit
    again = index.search(SearchRequest("hybrid", q="river stone", vector=query, limit=10, explain=False,
                                       documents=False, hits=False))
    assert again.columns is not None and gone not in again.columns.ords.tolist()
    assert all(index.columns.ids[o] is not None for o in again.columns.ords.tolist())


def test_a_search_in_columns_cannot_explain(space) -> None:
    index, _ = space
    with pytest.raises(ValueError, match="columns"):
        index.search(SearchRequest("keyword", q="river", limit=3, hits=False))
    with pytest.raises(ValueError, match="columns"):
        index.start(SearchRequest("keyword", q="river", limit=3, hits=False))


def test_a_search_with_hits_has_no_columns(space) -> None:
    index, _ = space
    assert index.search(SearchRequest("keyword", q="river", limit=3)).columns is None
