"""A search's candidates in columns rank as search.rank ranks them as Candidates, bit for bit."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engram_index.supermemory import search, statements, why_fewer
from engram_index.supermemory.candidates import QueryExplainer
from engram_index.supermemory.found import Found, rank, ranked_candidates

LAST = int(np.iinfo(np.int64).max)  # the largest insertion order a candidate can hold
EXPLAINER = QueryExplainer([])
# Few distinct values, so that scores, insertion orders and groups tie often.
COSINES = [None, -0.25, -0.0, 0.0, 0.1, 0.3, 0.5, 0.5, 0.9, 1.0, 1.2]
COVERAGES = [0.0, 0.25, 0.5, 0.5, 1.0, 1.0000000000000002]
GROUPS = ["", "g1", "g2", "g3", "g4"]
STATEMENTS = ["ana adopted a puppy", "rex  is\\na dog", "the river is wide", ""]


def candidates(kind: str, draw: st.DrawFn, n: int, vector: bool) -> Found:
    """n random candidates of one kind (unique ids; memories may share the order of one no longer found)."""
    ids = [f"{kind[0]}{i}" for i in range(n)]
    cosines = [draw(st.sampled_from(COSINES)) for _ in ids]
    sims = np.array([np.nan if c is None else c for c in cosines], np.float64)
    coverage = np.array([draw(st.sampled_from(COVERAGES)) for _ in ids])
    if kind == "memory":
        order = np.array([draw(st.sampled_from([LAST, *range(6)])) for _ in ids], np.int64)
    else:
        order = np.array(draw(st.permutations(range(16)))[:n], np.int64)
    groups = [draw(st.sampled_from(GROUPS)) for _ in ids]
    found = Found.of(kind, ids, [None] * n, sims, np.full(n, np.nan), [()] * n, EXPLAINER, vector, coverage, order,
                     groups)
    for i in range(n):  # texts: statements, some held by chunks (whitespace apart), some not
        statement = draw(st.sampled_from(STATEMENTS))
        found.texts[i] = statement if kind == "memory" else draw(st.sampled_from(
            ["", statement, f"so {statement.replace(' ', '  ')} today", "nothing of the kind"]))
    return found


@st.composite
def found_sets(draw: st.DrawFn) -> Found:
    vector = draw(st.booleans())
    return Found.joined([candidates("memory", draw, draw(st.integers(0, 12)), vector),
                         candidates("chunk", draw, draw(st.integers(0, 16)), vector)])


def described(cands) -> list[tuple]:
    return [(c.kind, c.id, c.doc_id, c.text, repr(c.backed), repr(c.similarity), repr(c.own_similarity)) for c in cands]


@settings(max_examples=300, deadline=None)
@given(found=found_sets(), limit=st.integers(1, 12), threshold=st.sampled_from([0.0, 0.15, 0.3, 0.5, 0.91]))
def test_candidates_in_columns_rank_as_the_candidates_rank(found: Found, limit: int, threshold: float) -> None:
    as_objects = found.candidates()
    expected = search.rank(as_objects, limit, threshold)
    cut = why_fewer.threshold_cut([as_objects], threshold)
    ranked = rank(found, found.sharing_a_document(), limit, threshold)
    assert described(ranked_candidates(found, ranked)) == described(expected)
    assert ranked.below(threshold) == cut


@settings(max_examples=100, deadline=None)
@given(found=found_sets())
def test_a_candidate_in_columns_scores_alone_as_a_candidate_does(found: Found) -> None:
    assert [repr(x) for x in found.own.tolist()] == [repr(c.own_similarity) for c in found.candidates()]


def test_a_candidates_hit_is_made_from_its_columns_with_none_where_the_engine_had_no_number() -> None:
    found = Found.of("chunk", ["d1c0", "d1c1"], [None, None], np.array([0.5, np.nan]), np.array([np.nan, 2.25]),
                     [("sm:doc:d1",), ()], EXPLAINER, True, np.array([0.25, 0.5]), np.array([3, 4], np.int64),
                     ["sm:doc:d1", ""])
    first, second = found.candidate(0), found.candidate(1)
    assert (first.hit.document.id, first.hit.document.tags, first.hit.similarity, first.hit.bm25) == (
        "d1c0", ("sm:doc:d1",), 0.5, None)
    assert (second.hit.similarity, second.hit.bm25, second.doc_id) == (None, 2.25, "d1")
    assert second.own_similarity == (1 - 0.7) * 0.5  # no cosine: the keyword part alone


@settings(max_examples=300, deadline=None)
@given(found=found_sets(), limit=st.integers(1, 12), threshold=st.sampled_from([0.0, 0.3, 0.91]),
       named=st.sets(st.sampled_from(GROUPS)))
def test_chunks_that_name_their_memories_rank_as_their_texts_would_and_only_the_others_texts_are_read(
        found: Found, limit: int, threshold: float, named: set[str]) -> None:
    # The documents in `named` were processed since chunks name the memories whose statement they hold (their
    # records' authors); the others' chunks name nothing, and their texts are read as before.
    expected = search.rank(found.candidates(), limit, threshold)
    texts = list(found.texts)
    for j in range(len(found)):
        if not found.kinds[j] and found.groups[j] in named:
            found.links[j] = statements.chunk_author(
                found.ids[i] for i in range(len(found))
                if found.kinds[i] and found.groups[i] == found.groups[j] and statements.holds(texts[j], texts[i]))
    sharing = found.sharing_a_document()
    read = set(found.unlinked(sharing))
    assert read == {i for i in sharing if found.groups[i] not in named}
    found.texts = [t if i in read else "" for i, t in enumerate(texts)]  # (what Rows.read_found reads)
    ranked = rank(found, sharing, limit, threshold)
    found.texts = texts  # (the page's rows, read after ranking)
    assert described(ranked_candidates(found, ranked)) == described(expected)
