"""The ranking core: content words of questions, stable order, one place per source, RRF, conversation context."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from engram_index.collections import Collections
from engram_index.engine.analyzer import query_words
from engram_index.engine.types import Document, Filters, ModelIdentity, SearchRequest
from engram_index.ranking import (
    column_documents,
    content_query,
    content_words,
    context_keyword,
    is_question,
    one_per_source,
    rrf,
    same_source,
    search,
    stable_order,
    with_context,
)
from engram_index.store.sqlite import StoredDocument

SPACE = "at://did:plc:ranking00000000000000000/space/garden.engram.space/talk"


def test_a_question_loses_its_question_words_and_a_claim_keeps_every_word() -> None:
    assert content_query("What did Caroline research?") == "Caroline research"
    assert content_query("when did Melanie paint a sunrise") == "Melanie paint sunrise"
    claim = "Class I HLA has no effect when cells are stressed."
    assert content_query(claim) == claim
    assert [w.exact for w in content_words(query_words(claim), claim)] == ["class", "i", "hla", "has", "effect",
                                                                            "when", "cells", "stressed"]


def test_a_question_of_nothing_but_question_words_keeps_them() -> None:
    assert content_query("What did you do?") == "What did you do?"
    assert is_question(query_words("Did it rain"), "Did it rain") and not is_question(query_words("rain"), "rain")


def test_equal_scores_keep_the_stable_key_order_not_the_input_order() -> None:
    items = [("b", 1.0, 2), ("a", 1.0, 1), ("c", 2.0, 3)]
    assert [i[0] for i in stable_order(items, lambda i: i[1], lambda i: (i[2],))] == ["c", "a", "b"]


def test_one_place_per_source_keeps_the_first_of_each() -> None:
    ranked = [("m1", "turn1"), ("c1", "turn1"), ("c2", "turn2"), ("x", None), ("y", None)]
    assert [r[0] for r in one_per_source(ranked, lambda r: r[1])] == ["m1", "c2", "x", "y"]


def test_rrf_sums_reciprocal_ranks_and_ties_keep_the_first_legs_order() -> None:
    fused = rrf([["a", "b"], ["b", "a", "c"]], 60)
    assert [f[0] for f in fused] == ["a", "b", "c"]  # a and b tie: a came first in the first leg
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62) and fused[2][2] == {1: 3}


@pytest.fixture
def talk(tmp_path: Path) -> Iterator[Collections]:
    """A conversation of two sessions, one document per turn, the session as the source."""
    turns = [("s1", "Mel: What did you research last week, Caroline?"), ("s1", "Adoption agencies, mostly."),
             ("s1", "Mel: Cool, tell me more."), ("s2", "Caroline: My research paper is done."),
             ("s2", "Mel: Adoption is a big step.")]
    spaces = Collections(tmp_path)
    spaces.ensure_collection(SPACE)
    spaces.write(SPACE, [StoredDocument(Document(f"t{i}", "did:plc:ranking00000000000000000", text, source=src,
                                                 created_ms=i)) for i, (src, text) in enumerate(turns)])
    yield spaces
    spaces.close()


def test_the_turn_after_a_matching_question_is_found_by_its_context(talk: Collections) -> None:
    index = talk.index(SPACE)
    query = content_query("What did Caroline research?")
    hits = index.search(SearchRequest("keyword", q=query, limit=10, explain=False)).hits
    assert "t1" not in [h.document.id for h in hits]  # "Adoption agencies" holds no word of the question
    ranked = context_keyword(index, query, hits, Filters(), lambda a, b: a.source == b.source, 10)
    ids = [h.document.id for h in ranked]
    assert "t1" in ids and "t2" not in ids  # the answer joins; the turn after it (no match, no hit before) does not
    # A turn of another session is no context: the first turn of session 2 gains nothing from the last of 1.
    alone = context_keyword(index, query, hits, Filters(), lambda a, b: False, 10)
    assert [h.document.id for h in alone] == [h.document.id for h in hits]


def test_search_gives_a_memory_the_context_of_the_one_before_it_from_the_same_source(talk: Collections) -> None:
    index = talk.index(SPACE)
    req = SearchRequest("keyword", q=content_query("What did Caroline research?"), limit=10)
    ranked = search(index, req, same_source)
    assert "t1" in [h.document.id for h in ranked.hits]
    assert all(h.terms for h in ranked.hits if h.document.id in ("t0", "t3"))  # explained by the words they hold
    assert [h.keyword_rank for h in ranked.hits] == list(range(1, len(ranked.hits) + 1))


def test_search_without_any_context_is_the_engines_own_answer(tmp_path: Path) -> None:
    spaces = Collections(tmp_path)
    try:
        spaces.ensure_collection(SPACE)
        spaces.write(SPACE, [StoredDocument(Document(f"d{i}", "did:plc:ranking00000000000000000", text, created_ms=i))
                             for i, text in enumerate(["red apples", "green apples", "apple pie recipe", "pears"])])
        index = spaces.index(SPACE)
        req = SearchRequest("keyword", q="apples recipe", limit=2)
        ours, engine = search(index, req, same_source), index.search(req)
        assert [(h.document.id, h.score, h.keyword_rank, h.terms) for h in ours.hits] == \
               [(h.document.id, h.score, h.keyword_rank, h.terms) for h in engine.hits]
    finally:
        spaces.close()


def test_the_context_read_from_the_columns_ranks_as_the_stores_documents_do(tmp_path: Path) -> None:
    turns = [("a", "Mel: What did you research last week, Caroline?"), ("a", "Adoption agencies, mostly."),
             ("a", "Mel: Cool, tell me more."), ("b", "Caroline: My research paper is done."),
             ("b", "Mel: Adoption is a big step."), ("b", "Research on adoption, then.")]
    spaces = Collections(tmp_path)
    try:
        spaces.ensure_collection(SPACE)
        spaces.write(SPACE, [StoredDocument(Document(f"t{i}", "did:plc:ranking00000000000000000", text,
                                                     tags=(f"s:sessionId={s}", "t:turn"), created_ms=i))
                             for i, (s, text) in enumerate(turns)])
        spaces.write(SPACE, [], deletes=["t4"])  # a deleted turn is no one's context, read either way
        index = spaces.index(SPACE)
        query = content_query("What did Caroline research?")
        hits = index.search(SearchRequest("keyword", q=query, limit=10, explain=False)).hits

        def session(a: Document, b: Document) -> bool:
            return [t for t in a.tags if t.startswith("s:")] == [t for t in b.tags if t.startswith("s:")]

        stored = context_keyword(index, query, hits, Filters(), session, 10)
        columns = context_keyword(index, query, hits, Filters(), session, 10, columns=True)
        assert [(h.document.id, h.score) for h in columns] == [(h.document.id, h.score) for h in stored]
        assert "t1" in [h.document.id for h in columns]  # the answer joined by its question's context
        with index.reading():
            read = column_documents(index)([1, 4, 99])
        assert list(read) == [1] and read[1].id == "t1" and read[1].tags == ("s:sessionId=a", "t:turn")
    finally:
        spaces.close()


def test_the_same_source_judged_from_the_columns_ranks_as_the_documents_do(tmp_path: Path) -> None:
    sources = ["a", "a", "a", None, "b", "b", "b", "", "c", "c"]
    texts = ["Mel: What did you research last week, Caroline?", "Adoption agencies, mostly.", "Cool, tell me more.",
             "Caroline: research without a source.", "Caroline: My research paper is done.", "Adoption is a big step.",
             "Research on adoption, then.", "An empty source is none: research.", "What research, Caroline?",
             "Adoption papers."]
    spaces = Collections(tmp_path)
    try:
        spaces.ensure_collection(SPACE, ModelIdentity("m", "sha256:m", 4))
        rng = np.random.default_rng(7)
        spaces.write(SPACE, [StoredDocument(Document(f"t{i}", "did:plc:ranking00000000000000000", text, source=src,
                                                     created_ms=i, vector=rng.standard_normal(4).astype("<f2").tobytes()))
                             for i, (src, text) in enumerate(zip(sources, texts))])
        spaces.write(SPACE, [], deletes=["t5"])  # a deleted turn is no one's context
        index = spaces.index(SPACE)
        by_documents = lambda a, b: same_source(a, b)  # noqa: E731  (not `same_source` itself: read from the store)
        for mode in ("keyword", "hybrid"):
            for limit in (1, 3, 10):
                req = SearchRequest(mode, q=content_query("What did Caroline research?"), limit=limit,
                                    vector=np.array([1.0, 0.5, 0.0, -0.5], np.float32))
                ours, stored = search(index, req, same_source), search(index, req, by_documents)
                assert [(h.document, h.score, h.bm25, h.keyword_rank, h.terms, h.snippet) for h in ours.hits] == \
                       [(h.document, h.score, h.bm25, h.keyword_rank, h.terms, h.snippet) for h in stored.hits]
        assert "t1" in [h.document.id for h in search(index, SearchRequest(
            "keyword", q=content_query("What did Caroline research?"), limit=10), same_source).hits]
    finally:
        spaces.close()


def test_a_space_whose_memories_name_no_source_gets_the_engines_hybrid_answer_at_the_limit(tmp_path: Path) -> None:
    spaces = Collections(tmp_path)
    try:
        spaces.ensure_collection(SPACE, ModelIdentity("m", "sha256:m", 4))
        rng = np.random.default_rng(3)
        texts = ["red apples", "green apples", "apple pie recipe", "pears", "apple trees", "recipe book"]
        spaces.write(SPACE, [StoredDocument(Document(f"d{i}", "did:plc:ranking00000000000000000", text, created_ms=i,
                                                     vector=rng.standard_normal(4).astype("<f2").tobytes()))
                             for i, text in enumerate(texts)])
        index = spaces.index(SPACE)
        assert index.columns.sourced == 0
        req = SearchRequest("hybrid", q="apples recipe", vector=np.array([0.5, 1.0, -0.2, 0.1], np.float32), limit=2)
        ours, engine = search(index, req, same_source), index.search(req)
        assert [(h.document.id, h.score, h.similarity, h.vector_rank, h.keyword_rank, h.terms, h.snippet)
                for h in ours.hits] == [(h.document.id, h.score, h.similarity, h.vector_rank, h.keyword_rank, h.terms,
                                         h.snippet) for h in engine.hits]
        spaces.write(SPACE, [StoredDocument(Document("d9", "did:plc:ranking00000000000000000", "apples", source="s",
                                                     created_ms=9))])
        assert spaces.index(SPACE).columns.sourced == 1  # one memory with a source: the context pass runs again
    finally:
        spaces.close()


def test_with_context_judges_pairs_without_neighbours_and_refuses_to_go_without_either(talk: Collections) -> None:
    index = talk.index(SPACE)
    hits = search(index, SearchRequest("keyword", q="research", limit=10), same_source).hits
    with index.reading():
        judged = with_context(index, hits, Filters(), None, pairs=lambda a, b: index.columns.same_source(a, b))
        expected = with_context(index, hits, Filters(), same_source)
        assert judged.ords.tolist() == expected.ords.tolist()
        assert judged.has_prev.tolist() == expected.has_prev.tolist()
        with pytest.raises(ValueError, match="neighbours"):
            with_context(index, hits, Filters(), None)
