"""A hybrid search's keyword pass run before its vector candidates are known, finished once they are.

`KeywordIndex.exact_top_and_score` finds the exact keyword top-k and scores the vector side's
candidates in one pass over the term counts' rows. A search whose query vector is still being
embedded (`SpaceIndex.start`) runs the postings pass and the top's rows now (`keyword_pass`) and
scores the candidates later (`finish`), with the same float32 values: each row is scored alone, but
`_kernels.combine_scores` sums a row of one call of one row pairwise, as numpy does, and of a call
of several rows column by column. So a part that would have been one row of a call of several is
scored beside an empty row (ordinal -1, which holds nothing), and a top of one row waits for its
candidates to know which call it is in.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engram_index.engine import keyword_query
from engram_index.engine.analyzer import QueryWord
from engram_index.engine.keyword import KeywordIndex

_EMPTY_ROW = np.array([-1], np.int64)


class KeywordPass:
    """What a keyword pass found: the query (None: it scores nothing), the ordinals to score (ascending),
    and their scores (float32; None while a single ordinal's waits for the candidates)."""

    __slots__ = ("query", "ords", "scores")

    def __init__(self, query: keyword_query.KeywordQuery | None, ords: np.ndarray, scores: np.ndarray | None) -> None:
        """Hold the pass's query, ordinals and scores."""
        self.query, self.ords, self.scores = query, ords, scores


def keyword_pass(index: KeywordIndex, words: Sequence[QueryWord], k: int, allowed: np.ndarray | None) -> KeywordPass:
    """`exact_top_and_score`'s work that needs no candidates: the postings pass and the top's rows
    (the caller holds off writes, and `finish`es under the same state)."""
    query = keyword_query.prepared(words)
    if not query.terms or k <= 0:
        return KeywordPass(None, np.empty(0, np.int64), None)
    ords = index.top_rows(query, k, allowed)
    return KeywordPass(query, ords, index.score_query(query, ords) if ords.size > 1 else None)


def finish(index: KeywordIndex, found: KeywordPass, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`exact_top_and_score(words, k, allowed, candidates)` from its keyword pass, bit for bit."""
    query, ords = found.query, found.ords
    if query is None:
        return np.empty(0, np.int64), np.empty(0, np.float32), np.zeros(candidates.size, np.float32)
    together = ords.size + candidates.size  # the rows of exact_top_and_score's one call
    top = found.scores
    if top is None:
        top = _rows(index, query, ords, together)
    candidate_scores = _rows(index, query, candidates, together)
    keep = top > 0
    return ords[keep], top[keep], candidate_scores


def _rows(index: KeywordIndex, query: keyword_query.KeywordQuery, ords: np.ndarray, together: int) -> np.ndarray:
    """The scores of `ords` as they come out of a call of `together` rows that holds them."""
    if ords.size == 1 and together > 1:
        return index.score_query(query, np.concatenate([ords, _EMPTY_ROW]))[:1]
    return index.score_query(query, ords)
