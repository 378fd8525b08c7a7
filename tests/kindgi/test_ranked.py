"""A retrieve's legs ranked and fused as ids and scores (kindgi/ranked.py, without explanations) give
what the explained path's hits give (kindgi/explained.py): the same facts, order and scores, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from engram_index.engine.analyzer import query_words
from engram_index.engine.types import Filters, SearchRequest
from engram_index.kindgi import explained, ranked
from engram_index.kindgi.conversations import ConversationCodes, Conversations, keyword_in_context
from engram_index.ranking import content_query, content_words, context_keyword
from tests.kindgi.conversation_space import conversation_space

DIMS = 8


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("context", [False, True])
@pytest.mark.parametrize("filters", [Filters(), Filters(tags=("t:turn",), any_tags=(("v:org:-",),))])
def test_the_legs_as_ids_and_scores_rank_and_fuse_as_the_explained_hits_do(
        seed: int, context: bool, filters: Filters) -> None:
    index, rng = conversation_space(seed, DIMS)
    codes = ConversationCodes()
    pairs = lambda a, b: codes.same(index.columns, a, b)  # noqa: E731
    crossed = [0, 0]  # retrieves whose legs each took facts of the other leg in
    for query in ("Ana's trip to Paris", "what did bob eat for dinner?", "boat river morning", "coffee"):
        asked = content_query(query)
        words = content_words(query_words(asked), asked)
        vector = rng.standard_normal(DIMS)
        for depth in (3, 20):
            found = index.search(SearchRequest("keyword", q=asked, limit=50, filters=filters, explain=False))
            keyword_hits = context_keyword(index, asked, found.hits, filters, Conversations(), depth, words=words,
                                           columns=True)
            # The path without explanations takes the engine's answers in columns.
            in_columns = index.search(SearchRequest("keyword", q=asked, limit=50, filters=filters, explain=False,
                                                    documents=False, hits=False)).columns
            keyword = keyword_in_context(index, words, in_columns.ords, filters, depth, pairs)
            semantic_hits = index.search(SearchRequest("vector", vector=vector, limit=depth, filters=filters,
                                                       explain=False)).hits
            semantic = ranked.from_columns(index, index.search(SearchRequest(
                "vector", vector=vector, limit=depth, filters=filters, explain=False, documents=False,
                hits=False)).columns)
            by_meaning = ranked.by_meaning(index, vector, semantic, keyword, filters, pairs, context)
            by_words = ranked.by_words(index, words, filters, pairs, keyword, semantic)
            want_meaning = explained.by_meaning(index, vector, semantic_hits, keyword_hits, filters, context)
            want_words = explained.by_words(index, asked, words, Conversations(), keyword_hits, semantic_hits, filters)
            legs = {"keyword": ranked.stable(index, by_words), "semantic": ranked.stable(index, by_meaning)}
            want = {"keyword": explained.stable(index, want_words), "semantic": explained.stable(index, want_meaning)}
            for leg in legs:
                ids, scores = legs[leg]
                assert scores.dtype == np.float64
                assert list(zip(ids, scores.tolist())) == [(h.document.id, float(h.score)) for h in want[leg]]
            for mode in ("keyword", "semantic", "both"):
                for limit in (1, 5, 30):
                    got = ranked.fused(mode, legs, limit)
                    assert got == [(fid, score) for fid, score, _ in explained.rank(mode, want, limit)]
            assert legs["keyword"][0] and legs["semantic"][0]
            crossed[0] += len(by_words[0]) > len(keyword[0])
            crossed[1] += len(by_meaning[0]) > len(semantic[0])
    assert all(crossed)
