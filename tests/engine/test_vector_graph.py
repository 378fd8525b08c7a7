"""Tests of the neighbour graph helpers: pairwise cosines and each pair's edge once."""

from __future__ import annotations

import numpy as np

from engram_index.engine.vector import VectorIndex, neighbor_pairs


def test_pairwise_gives_the_cosine_of_every_two_ordinals_and_zero_without_a_vector() -> None:
    index = VectorIndex(3)
    index.put_many(np.array([0, 1, 2]), np.array([[1, 0, 0], [2, 2, 0], [0, 0, 5]], np.float16))
    index.remove(2)
    sims = index.pairwise(np.array([1, 0, 2, 7]))
    assert sims.dtype == np.float32 and sims.shape == (4, 4)
    assert np.allclose(sims[0, :2], [1.0, np.sqrt(0.5)], atol=1e-6)
    assert np.allclose(sims[1, :2], [np.sqrt(0.5), 1.0], atol=1e-6)
    assert not sims[2:].any() and not sims[:, 2:].any()


def test_each_row_keeps_its_best_neighbours_above_the_threshold_and_pairs_come_once() -> None:
    sims = np.array([
        [1.0, 0.9, 0.8, 0.1],
        [0.9, 1.0, 0.7, 0.5],
        [0.8, 0.7, 1.0, 0.45],
        [0.1, 0.5, 0.45, 1.0],
    ], np.float32)
    assert neighbor_pairs(sims, 1, 0.4) == [(0, 1, np.float32(0.9)), (2, 0, np.float32(0.8)), (3, 1, np.float32(0.5))]
    pairs = neighbor_pairs(sims, 3, 0.6)
    assert [(i, j) for i, j, _ in pairs] == [(0, 1), (0, 2), (1, 2)]
    assert neighbor_pairs(sims, 3, 0.95) == []


def test_ties_go_to_the_lower_index_and_tiny_graphs_have_no_edges() -> None:
    sims = np.full((4, 4), 0.5, np.float32)
    assert [(i, j) for i, j, _ in neighbor_pairs(sims, 1, 0.5)] == [(0, 1), (2, 0), (3, 0)]
    assert neighbor_pairs(np.ones((1, 1), np.float32), 3, 0.1) == []
    assert neighbor_pairs(np.zeros((0, 0), np.float32), 3, 0.1) == []
