"""Fusion functions against hand-computed values."""

import numpy as np
import pytest

from engram_index.engine import fusion


def test_convex_by_default_combines_z_normalised_scores_with_alpha_0_6() -> None:
    sims = np.array([0.2, 0.6, 0.4])
    bm25 = np.array([10.0, 0.0, 5.0])
    z = lambda x: (x - x.mean()) / x.std()
    assert fusion.convex(sims, bm25) == pytest.approx(0.6 * z(sims) + 0.4 * z(bm25))


def test_convex_minmax_is_half_minmax_cosine_plus_half_bm25_over_max() -> None:
    sims = np.array([0.2, 0.6, 0.4])
    bm25 = np.array([10.0, 0.0, 5.0])
    got = fusion.convex(sims, bm25, 0.5, "minmax")
    want = 0.5 * np.array([0.0, 1.0, 0.5]) + 0.5 * np.array([1.0, 0.0, 0.5])
    assert got == pytest.approx(want)


def test_convex_without_any_keyword_match_ranks_by_cosine_alone() -> None:
    got = fusion.convex(np.array([0.1, 0.3]), np.zeros(2))
    assert got[1] > got[0] and fusion.convex(np.array([0.1, 0.3]), np.zeros(2), 0.5, "minmax") == pytest.approx([0.0, 0.5])


def test_convex_with_equal_similarities_does_not_divide_by_zero() -> None:
    got = fusion.convex(np.array([0.5, 0.5]), np.array([2.0, 1.0]), 0.5, "minmax")
    assert got == pytest.approx([0.5, 0.25])
    flat = fusion.convex(np.array([0.5, 0.5]), np.array([2.0, 2.0]))
    assert flat == pytest.approx([0.0, 0.0])


def test_rrf_adds_reciprocal_ranks_with_k_60_and_skips_unmatched_keyword() -> None:
    sims = np.array([0.9, 0.8, 0.7])
    bm25 = np.array([0.0, 3.0, 1.0])
    got = fusion.rrf(sims, bm25)
    want = [1 / 61, 1 / 62 + 1 / 61, 1 / 63 + 1 / 62]
    assert got == pytest.approx(want)


def test_ranks_are_one_based_and_descending() -> None:
    assert fusion.ranks(np.array([0.1, 0.9, 0.5])).tolist() == [3, 1, 2]
