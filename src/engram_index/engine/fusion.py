"""Score fusion: how a candidate's vector and keyword scores become one ranking score.

Both are small pure functions over aligned arrays (one entry per candidate):

- convex: alpha × normalised cosine + (1 − alpha) × normalised BM25 over the candidates
  (Bruch, Gai & Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", TOIS 2023).
  Scores are z-normalised by default (mean 0, standard deviation 1 over the candidate set);
  min-max (cosine) with BM25 / max BM25, the reference design, is the alternative. On SciFact,
  tuned on the even-numbered queries, z-scores with alpha = 0.6 beat min-max on both halves
  (docs/design/engine.md has the table);
- rrf: Σ 1 / (k + rank) over the lists a candidate appears in, k = 60 (Cormack, Clarke &
  Büttcher, SIGIR 2009). A candidate without any query word has no keyword rank.
"""

from __future__ import annotations

import numpy as np

RRF_K = 60
CONVEX_ALPHA = 0.6


def minmax(values: np.ndarray) -> np.ndarray:
    """Scale to [0, 1] by the candidates' min and max (all zeros when they are all equal)."""
    if values.size == 0:
        return values.astype(np.float64)
    lo, hi = float(values.min()), float(values.max())
    if hi <= lo:
        return np.zeros(values.shape, np.float64)
    return (values.astype(np.float64) - lo) / (hi - lo)


def zscore(values: np.ndarray) -> np.ndarray:
    """Centre on the candidates' mean and scale by their standard deviation (zeros when flat)."""
    values = values.astype(np.float64)
    std = float(values.std()) if values.size else 0.0
    if std <= 0:
        return np.zeros(values.shape, np.float64)
    out: np.ndarray = (values - values.mean()) / std
    return out


def convex(
    similarity: np.ndarray,
    bm25: np.ndarray,
    alpha: float = CONVEX_ALPHA,
    normalise: str = "zscore",
) -> np.ndarray:
    """Convex combination of the normalised cosine and BM25 scores of the candidates."""
    if normalise == "zscore":
        return alpha * zscore(similarity) + (1.0 - alpha) * zscore(bm25)
    top = float(bm25.max()) if bm25.size else 0.0
    keyword = bm25.astype(np.float64) / top if top > 0 else np.zeros(bm25.shape, np.float64)
    return alpha * minmax(similarity) + (1.0 - alpha) * keyword


def ranks(scores: np.ndarray) -> np.ndarray:
    """1-based ranks by descending score (equal scores share no rank: order of appearance)."""
    order = np.argsort(-scores, kind="stable")
    out = np.empty(scores.shape, np.int64)
    out[order] = np.arange(1, scores.size + 1)
    return out


def rrf(similarity: np.ndarray, bm25: np.ndarray, k: int = RRF_K) -> np.ndarray:
    """Reciprocal rank fusion of the vector ranking and the keyword ranking."""
    fused = 1.0 / (k + ranks(similarity))
    matched = bm25 > 0
    keyword_ranks = ranks(np.where(matched, bm25, -np.inf))
    return fused + np.where(matched, 1.0 / (k + keyword_ranks), 0.0)
