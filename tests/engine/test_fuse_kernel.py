"""The compiled fusion (_kernels.fuse) gives bit for bit what engine/fusion.py and numpy give."""

from __future__ import annotations

import numpy as np
import pytest

from engram_index.engine import _kernels, fusion
from engram_index.engine.vector import VectorIndex


def reference(index: VectorIndex, query: np.ndarray, vec_ords: np.ndarray, vec_sims: np.ndarray,
              vec_bm25: np.ndarray, kw_ords: np.ndarray, kw_bm25: np.ndarray, method: str,
              limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The numpy steps the hybrid search took before the kernel: union, cosines, fusion, order."""
    ords = np.unique(np.concatenate([vec_ords, kw_ords]))
    sims = np.full(ords.size, np.nan, np.float32)
    bm25 = np.zeros(ords.size, np.float32)
    sims[np.searchsorted(ords, vec_ords)] = vec_sims
    bm25[np.searchsorted(ords, vec_ords)] = vec_bm25
    bm25[np.searchsorted(ords, kw_ords)] = kw_bm25
    missing = np.isnan(sims)
    if missing.any():
        sims[missing] = index.similarities(query, ords[missing])
    no_vector = np.isnan(sims)
    sims[no_vector] = 0.0
    fused = fusion.rrf(sims, bm25) if method == "rrf" else fusion.convex(sims, bm25)
    top = np.lexsort((ords, -np.asarray(fused, np.float64)))[:limit] if ords.size else np.zeros(0, np.int64)
    return ords[top], fused[top], sims[top], bm25[top], ~no_vector[top]


def bits(a: np.ndarray) -> bytes:
    """The exact bytes of an array (so that -0.0, NaN and the last bit count)."""
    return np.ascontiguousarray(a).tobytes()


@pytest.mark.parametrize("method", ["convex", "rrf"])
@pytest.mark.parametrize("size", [0, 1, 2, 7, 8, 9, 64, 127, 128, 129, 300, 700])
def test_the_fusion_kernel_equals_the_numpy_fusion_bit_for_bit_on_each_loop(method: str, size: int, c_loops: str) -> None:
    rng = np.random.default_rng(size * 7 + len(method))
    dims, rows = 24, 3000
    index = VectorIndex(dims)
    stored = rng.normal(size=(rows, dims)).astype(np.float16)
    index.put_many(np.arange(rows), stored)
    for gone in rng.choice(rows, 200, replace=False):
        index.remove(int(gone))  # keyword candidates without a vector
    query = index.prepare(rng.normal(size=dims))
    for case in range(6):
        live = np.flatnonzero(index._live[: index._size])
        n_vec = int(rng.integers(0, size + 1))
        vec_ords = rng.choice(live, n_vec, replace=False).astype(np.int64)
        vec_sims = index.similarities(query, vec_ords)
        if case % 2:  # ties: repeated cosines and BM25 values
            vec_sims = np.round(vec_sims, 1).astype(np.float32)
        n_kw = size - n_vec
        pool = np.arange(rows + 50)  # some beyond the vectors, some sharing the vector candidates
        kw_ords = rng.choice(pool, n_kw, replace=False).astype(np.int64)
        kw_bm25 = (rng.exponential(3.0, n_kw) * (rng.random(n_kw) > 0.2)).astype(np.float32)
        vec_bm25 = (rng.exponential(3.0, n_vec) * (rng.random(n_vec) > 0.5)).astype(np.float32)
        if case % 2:
            kw_bm25 = np.round(kw_bm25).astype(np.float32)
        if case == 4:  # every score equal: zero variance
            vec_sims[:] = 0.5
            vec_bm25[:] = 0.0
            kw_bm25[:] = 0.0
        common = np.intersect1d(vec_ords, kw_ords)
        for o in common:  # an ordinal in both stages carries the same BM25 in both, as the search gives it
            vec_bm25[vec_ords == o] = kw_bm25[kw_ords == o]
        for limit in (1, 10, 400):
            top = min(limit, vec_ords.size + kw_ords.size)
            out = (np.empty(top, np.int64), np.empty(top, np.float64), np.empty(top, np.float32),
                   np.empty(top, np.float32), np.empty(top, np.bool_))
            got = index.fuse(query, vec_ords, vec_sims, vec_bm25, kw_ords, kw_bm25, 1 if method == "rrf" else 0,
                             fusion.CONVEX_ALPHA, fusion.RRF_K, *out)
            expected = reference(index, query, vec_ords, vec_sims, vec_bm25, kw_ords, kw_bm25, method, limit)
            assert got == expected[0].size
            for mine, theirs in zip(out, expected):
                assert bits(mine[:got]) == bits(theirs.astype(mine.dtype)), (method, size, case, limit)


def test_the_fusion_kernel_refuses_what_it_cannot_fuse() -> None:
    index = VectorIndex(4)
    index.put_many(np.arange(3), np.eye(3, 4, dtype=np.float16))
    query = index.prepare(np.ones(4))
    out = (np.empty(2, np.int64), np.empty(2, np.float64), np.empty(2, np.float32), np.empty(2, np.float32),
           np.empty(2, np.bool_))
    one = np.ones(1, np.float32)
    with pytest.raises(ValueError, match="no vector"):
        index.fuse(query, np.array([7]), one, one, np.zeros(0, np.int64), np.zeros(0, np.float32), 0, 0.6, 60, *out)
    with pytest.raises(ValueError, match="non-negative"):
        index.fuse(query, np.array([1]), one, one, np.array([-1]), one, 0, 0.6, 60, *out)
    with pytest.raises(ValueError, match="method"):
        index.fuse(query, np.array([1]), one, one, np.array([2]), one, 2, 0.6, 60, *out)
    with pytest.raises(ValueError, match="holds"):
        index.fuse(query, np.array([1]), one, np.ones(2, np.float32), np.array([2]), one, 0, 0.6, 60, *out)
    assert _kernels.fuse is not None


@pytest.mark.parametrize("n", [0, 1, 7, 9, 200, 1032, 5000])
def test_the_vector_top_equals_numpys_lexsort_of_ordinals_and_negated_cosines(n: int) -> None:
    rng = np.random.default_rng(n + 3)
    # The best k are picked before they are sorted: random cosines, ties, and cosines already in
    # order or in reverse (a partition's worst inputs) all give the whole sort's answer.
    for layout in ("random", "ties", "ascending", "descending", "equal"):
        ords = np.sort(rng.choice(10 * n + 1, n, replace=False)).astype(np.int64)
        sims = rng.uniform(-1, 1, n).astype(np.float32)
        if layout == "ties":
            sims = np.round(sims, 1).astype(np.float32)
            sims[: n // 3] = 0.0
            sims[n // 3 : n // 2] = -0.0
        elif layout in ("ascending", "descending"):
            sims = np.sort(sims) if layout == "ascending" else np.sort(sims)[::-1].copy()
        elif layout == "equal":
            sims = np.full(n, 0.5, np.float32)
        for k in sorted({1, 10, 200, max(n - 1, 1), n + 5}):
            top = min(k, n)
            out_ords, out_sims = np.empty(top, np.int64), np.empty(top, np.float32)
            assert _kernels.rank_top(ords, sims, out_ords, out_sims) == top
            order = np.lexsort((ords, -sims))[:k]
            assert out_ords.tolist() == ords[order].tolist()
            assert out_sims.tobytes() == sims[order].tobytes()


def test_the_vector_top_refuses_ordinals_out_of_order() -> None:
    with pytest.raises(ValueError, match="ascend"):
        _kernels.rank_top(np.array([2, 1]), np.ones(2, np.float32), np.empty(1, np.int64), np.empty(1, np.float32))
