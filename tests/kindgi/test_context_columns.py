"""The keyword leg's context judged from the columns (kindgi/conversations.py) ranks as the one that
builds a document per turn and asks same_conversation per pair (ranking.context_keyword)."""

from __future__ import annotations

import numpy as np
import pytest

from engram_index.engine.analyzer import query_words
from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import Document, Filters, SearchRequest
from engram_index.context_columns import in_context, scores_in_context
from engram_index.kindgi.conversations import ConversationCodes, keyword_in_context
from engram_index.kindgi.conversations import Conversations
from engram_index.ranking import content_query, content_words, context_keyword, context_scores, with_context
from tests.kindgi.conversation_space import conversation_space


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("query", ["Ana's trip to Paris", "what did bob eat for dinner?", "boat river morning",
                                   "coffee"])
@pytest.mark.parametrize("filters", [Filters(), Filters(tags=("t:turn",), any_tags=(("v:org:-",),))])
def test_the_context_from_the_columns_ranks_the_hits_and_their_turns_as_one_document_per_turn_does(
        seed: int, query: str, filters: Filters) -> None:
    index, _ = conversation_space(seed)
    asked = content_query(query)
    words = content_words(query_words(asked), asked)
    hits = index.search(SearchRequest("keyword", q=asked, limit=50, filters=filters, explain=False,
                                      documents=False)).hits
    codes = ConversationCodes()
    for limit in (5, 20, 50):
        expected = context_keyword(index, asked, hits, filters, Conversations(), limit, words=words, columns=True)
        ids, scores = keyword_in_context(index, words, index.columns.ids_to_ords([h.document.id for h in hits]),
                                         filters, limit, lambda a, b: codes.same(index.columns, a, b))
        assert scores.dtype == np.float64
        assert list(zip(ids, scores.tolist())) == [(h.document.id, h.score) for h in expected]
        assert all(h.bm25 == h.score for h in expected)  # a retrieve's keyword score is that BM25
        assert len(ids) == min(limit, len(expected)) and ids  # the queries' words are in the facts


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("follow", [True, False])
@pytest.mark.parametrize("filters", [Filters(), Filters(tags=("t:turn",), any_tags=(("v:org:-",),))])
def test_the_retrieves_own_context_and_its_scores_are_ranking_s_general_ones_bit_for_bit(
        seed: int, follow: bool, filters: Filters) -> None:
    index, _ = conversation_space(seed)
    asked = content_query("what did Ana eat at the river on her Paris trip?")
    words = content_words(query_words(asked), asked)
    hits = index.search(SearchRequest("keyword", q=asked, limit=50, filters=filters, explain=False,
                                      documents=False)).hits
    codes = ConversationCodes()
    pairs = lambda a, b: codes.same(index.columns, a, b)  # noqa: E731
    with index.reading():
        expected = with_context(index, hits, filters, Conversations(), follow=follow, pairs=pairs)
        got = in_context(index, index.columns.ids_to_ords([h.document.id for h in hits]), filters, pairs,
                         follow=follow)
        want, have = context_scores(index, words, expected), scores_in_context(index, words, got)
    for name in ("ords", "prev", "has_prev"):
        assert getattr(got, name).dtype == getattr(expected, name).dtype
        assert getattr(got, name).tolist() == getattr(expected, name).tolist()
    assert got.ords.size
    assert have.dtype == want.dtype and have.tobytes() == want.tobytes() and (have > 0).any()


def test_a_hit_deleted_since_its_search_counts_as_no_hit_with_no_turn_after_it() -> None:
    docs = {o: Document(id=f"f{o}", author="", text=text, tags=("t:turn", "s:sessionId=s1"), created_ms=o)
            for o, text in enumerate(["coffee", "coffee and tea", "a walk by the river"])}
    index = SpaceIndex(None, None, lambda ords: {o: docs[o] for o in ords if o in docs})
    index.apply(list(docs.items()), seq=1)
    index.commit()
    words = content_words(query_words("coffee"), "coffee")
    found = index.search(SearchRequest("keyword", q="coffee", limit=1, explain=False, documents=False,
                                       hits=False)).columns.ords
    assert found.tolist() == [0]  # the shorter fact first; the one after it holds the word too
    codes = ConversationCodes()
    pairs = lambda a, b: codes.same(index.columns, a, b)  # noqa: E731
    assert keyword_in_context(index, words, found, Filters(), 5, pairs)[0] == ["f0", "f1"]
    index.apply([(0, None)], seq=2)  # deleted after the search answered
    ids, scores = keyword_in_context(index, words, found, Filters(), 5, pairs)
    assert ids == [] and scores.size == 0  # as though its id found no ordinal: no hit, no turn after it
