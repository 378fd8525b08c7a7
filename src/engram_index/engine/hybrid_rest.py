"""A started hybrid search's rest in one compiled call: planned before its vector, run once it is there.

What `Starting._fused` does once the vector is known (the vector side's scan and re-rank, its best
candidates' BM25, the keyword side's top and the fusion) was eight compiled steps with Python between
them. A v5 search runs one collection's rest while another thread takes the other collection's hits
(Python): each step's return waited for the GIL that the other thread's Python held. Everything
here that the vector does not change is worked out with the keyword pass (`planned`, under the same
index state), so that the rest is one call that lets go of the GIL once (`run`,
_kernels.hybrid_rest). The answers are the step-by-step path's, bit for bit; a search with a
re-rank deadline, or whose keyword top is one row still waiting for its call (keyword_pass.py),
takes that path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engram_index.engine import fusion, keyword_pass
from engram_index.engine.keyword_query import PART_WEIGHT, KeywordQuery
from engram_index.engine.termcounts import B, K1, Scoring, TermCounts
from engram_index.engine.types import Fused, SearchRequest
from engram_index.engine.vector import PreparedQuery, ScanPlan, VectorIndex

# The keyword side's exact top n of those live now (SpaceIndex._keyword_top): (ordinals, scores, n) -> both kept.
KeywordTop = Callable[[np.ndarray, np.ndarray, int], tuple[np.ndarray, np.ndarray]]

_NO_INTS = np.zeros(0, np.int64)
_NO_INTS.flags.writeable = False


@dataclass(frozen=True, slots=True)
class Rest:
    """A hybrid search's rest as far as it goes without its vector: the vector side's plan and depth, the
    keyword side's top (live, best first), and how the vector candidates' BM25 is scored and summed."""

    scan: ScanPlan
    n: int
    kw_ords: np.ndarray  # int64
    kw_bm25: np.ndarray  # float32
    query: KeywordQuery | None  # None: the vector candidates score 0
    scoring: Scoring | None  # None: no query term is held (their BM25 parts are all 0)
    kw_count: int  # the keyword pass's rows (a lone candidate is summed as in a call beside them)
    limit: int
    method: int
    alpha: float
    rrf_k: int


def planned(vectors: VectorIndex | None, counts: TermCounts, keyword_top: KeywordTop, req: SearchRequest, n: int,
            mask: np.ndarray | None, found: keyword_pass.KeywordPass) -> Rest | None:
    """The rest of a started hybrid search over these vectors and term counts, planned with its keyword pass
    (under the same read lock); None when it takes the step-by-step path."""
    if vectors is None or req.rerank_deadline_s is not None:
        return None
    if found.query is not None and found.scores is None:  # a lone row waits to know its call (keyword_pass.py)
        return None
    scan = vectors.plan(n, mask, max(n, vectors.default_candidates(req.limit)))
    if scan is None:
        return None
    kw_ords, kw_bm25 = _NO_INTS, np.zeros(0, np.float32)
    scoring = None
    if found.query is not None and found.scores is not None:
        keep = found.scores > 0
        kw_ords, kw_bm25 = keyword_top(found.ords[keep], found.scores[keep], n)
        scoring = counts.scoring(found.query.terms)
    return Rest(scan, n, np.ascontiguousarray(kw_ords, np.int64), np.ascontiguousarray(kw_bm25, np.float32),
                found.query, scoring, found.ords.size, req.limit, 1 if req.fusion == "rrf" else 0,
                fusion.CONVEX_ALPHA, fusion.RRF_K)


def run(vectors: VectorIndex, counts: TermCounts, rest: Rest, query: PreparedQuery) -> Fused:
    """The planned rest with its query vector, as `Starting._fused`'s steps answer (call under the read lock
    the plan was made under, its index state unchanged)."""
    scoring, terms = rest.scoring, rest.query
    qids, cols, idf, average = (scoring.qids, scoring.cols, scoring.idf, scoring.average) if scoring else (
        _NO_INTS, _NO_INTS, np.zeros(0), 0.0)
    width = len(terms.terms) if terms is not None else 0
    roles = (terms.plain, terms.stems, terms.exacts, terms.part_columns) if terms is not None else (_NO_INTS,) * 4
    out = (np.empty(rest.limit, np.int64), np.empty(rest.limit, np.float64), np.empty(rest.limit, np.float32),
           np.empty(rest.limit, np.float32), np.empty(rest.limit, np.bool_))
    got = vectors.rest(query, rest.scan, rest.n,
                       (*counts.rows(), qids, cols, idf, counts.table(), K1, B, average, width),
                       (*roles, PART_WEIGHT, rest.kw_count), (rest.kw_ords, rest.kw_bm25),
                       (rest.method, rest.alpha, rest.rrf_k, rest.limit), out)
    ords, fused, sims, bm25, has_sim = (a[:got] for a in out)
    return Fused(ords, fused, sims, bm25, has_sim, False)
