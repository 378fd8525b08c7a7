"""A search whose query vector comes later: its keyword pass first, the rest once the vector is there.

A face that embeds the query on the server hands the engine a `concurrent.futures.Future` of the
vector (`SearchRequest.vector`). `SpaceIndex.start` runs at once what needs no vector: a hybrid
search's query analysis, filter mask and keyword pass (keyword_pass.py), and the rest planned as far
as it goes without the vector (hybrid_rest.py). `StartedSearch.finish` waits for the vector (its
error is the search's) and runs the rest: the vector side, the vector candidates' BM25, the fusion
(one compiled call that lets go of the GIL once), the hits. Any other search runs whole in
`finish`. The answers are `search`'s with the vector, bit for bit, as of the finish: a write
applied in between (the index's generation moves) runs the keyword pass again.
docs/design/engine.md has the reasoning.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from engram_index.engine import hybrid_rest, keyword_pass
from engram_index.engine.analyzer import QueryWord, query_words
from engram_index.engine.columns import Columns
from engram_index.engine.keyword import KeywordIndex
from engram_index.engine.types import Fused, SearchRequest, SearchResult, explainable
from engram_index.engine.vector import PreparedQuery, VectorHits, VectorIndex

class Starting:
    """SpaceIndex's searches begun before their vector is known (SpaceIndex mixes this in)."""

    columns: Columns
    keyword: KeywordIndex
    vectors: VectorIndex | None
    _generation: int  # moved by every change under the write lock (SpaceIndex.apply, exclusive)

    if TYPE_CHECKING:
        def reading(self) -> contextlib.AbstractContextManager[None]: ...
        def search(self, req: SearchRequest) -> SearchResult: ...
        def _n_candidates(self, limit: int) -> int: ...
        def _query_vector(self, req: SearchRequest) -> np.ndarray: ...
        def _vector_candidates(self, req: SearchRequest, query: PreparedQuery, n: int,
                               mask: np.ndarray | None) -> VectorHits: ...
        def _keyword_top(self, kw_ords: np.ndarray, kw_scores: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]: ...
        def _fuse(self, req: SearchRequest, query: PreparedQuery, vec: VectorHits, vec_bm25: np.ndarray,
                  kw_ords: np.ndarray, kw_scores: np.ndarray) -> Fused: ...
        def _hits(self, req: SearchRequest, words: list[QueryWord], fused: Fused) -> SearchResult: ...

    def start(self, req: SearchRequest) -> StartedSearch:
        """Begin a search whose query vector may still be coming (`req.vector` a Future of it): a hybrid
        search's keyword pass runs now, the rest in `StartedSearch.finish`, which waits for the vector;
        any other search runs whole there. `start(req).finish()` answers as `search` with the vector,
        bit for bit, as of the finish: a write applied in between makes it run its keyword pass again."""
        explainable(req)
        if not isinstance(req.vector, Future) or req.mode != "hybrid" or not req.q or self.vectors is None:
            return StartedSearch(self, req, None)
        with self.reading():
            return StartedSearch(self, req, self._keyword_pass(req))

    def _keyword_pass(self, req: SearchRequest) -> _Pass:
        """A hybrid search's keyword side as far as it goes without the vector side's candidates, and the rest
        planned as far as it goes without the vector (hybrid_rest.py)."""
        words = query_words(req.q or "")
        n = self._n_candidates(req.limit)
        mask = self.columns.mask(req.filters)
        found = keyword_pass.keyword_pass(self.keyword, words, n, mask)
        rest = hybrid_rest.planned(self.vectors, self.keyword.counts, self._keyword_top, req, n, mask, found)
        return _Pass(self._generation, words, mask, found, rest)

    def _finish(self, started: StartedSearch) -> SearchResult:
        """The rest of a started search, once its vector is there (`StartedSearch.finish`)."""
        req = started.req
        if isinstance(req.vector, Future):
            req = replace(req, vector=req.vector.result())
        if started.keyword is None:
            return self.search(req)
        with self.reading():
            kw = started.keyword if started.keyword.generation == self._generation else self._keyword_pass(req)
            return self._hits(req, kw.words, self._fused(req, kw))

    def _fused(self, req: SearchRequest, kw: _Pass) -> Fused:
        """A started hybrid search's compiled rest, its vector at hand (under the read lock): the vector side,
        its candidates' BM25 (keyword_pass.finish), the keyword top now and their fusion."""
        vectors = self.vectors
        assert vectors is not None  # (a search is started only where the space has vectors)
        query = vectors.prepare(self._query_vector(req))
        if kw.rest is not None:  # one compiled call, the GIL let go once
            return hybrid_rest.run(vectors, self.keyword.counts, kw.rest, query)
        n = self._n_candidates(req.limit)
        vec = self._vector_candidates(req, query, n, kw.mask)
        kw_ords, kw_scores, vec_bm25 = keyword_pass.finish(self.keyword, kw.found, vec.ords)
        return self._fuse(req, query, vec, vec_bm25, *self._keyword_top(kw_ords, kw_scores, n))


class StartedSearch:
    """A search begun by `SpaceIndex.start`, its keyword pass done (a hybrid one's), waiting for its vector."""

    __slots__ = ("index", "req", "keyword")

    def __init__(self, index: Starting, req: SearchRequest, keyword: _Pass | None) -> None:
        """Hold the index, the request and the keyword pass (None: the whole search runs at the finish)."""
        self.index, self.req, self.keyword = index, req, keyword

    def finish(self) -> SearchResult:
        """Wait for the vector (its error is the search's) and run the rest of the search."""
        return self.index._finish(self)


@dataclass(frozen=True, slots=True)
class _Pass:
    """A hybrid search's keyword pass and the index state it saw."""

    generation: int
    words: list[QueryWord]
    mask: np.ndarray | None
    found: keyword_pass.KeywordPass
    rest: hybrid_rest.Rest | None  # the rest planned (None: its steps one by one)
