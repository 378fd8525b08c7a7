"""The vector index answers as float64 arithmetic would, on every kernel path this machine runs.

Each test runs once per loop of the C kernels (vectorised and portable) or once per simsimd
capability level (only that one enabled): a CPU whose fastest path sums in half precision, as
simsimd's float16 kernels do on AVX-512 FP16, would fail here rather than in production.
"""

from __future__ import annotations

import numpy as np
import pytest

from engram_index.engine.vector import VectorIndex
from tests.engine.test_kernels import ISSUE_EXAMPLE, adversarial_vectors, assert_within_float32_rounding


def reference_cosines(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Cosines of float16 rows with any query, all in float64."""
    wide = rows.astype(np.float64)
    unit = query.astype(np.float64) / np.linalg.norm(query.astype(np.float64))
    return (wide @ unit) / np.linalg.norm(wide, axis=1)


def check_index_answers_as_float64(dims: int) -> None:
    """Store awkward vectors, then check squared norms, cosines, search and the graph's pairs."""
    rows = adversarial_vectors(dims, seed=dims)[:-1]  # (the zero row has no direction)
    rng = np.random.default_rng(dims)
    rows = np.concatenate([rows, rng.standard_normal((40, dims)).astype(np.float16)])
    index = VectorIndex(dims)
    index.put_many(np.arange(len(rows)), rows)
    everything = np.arange(len(rows))
    for i, row in enumerate(rows):
        sims = index.similarities(row, everything)
        assert sims[i] == 1.0
        assert_within_float32_rounding(sims, reference_cosines(rows, row))
        hits = index.search(row, 3, candidates=len(rows))
        assert hits.ords[0] == i and hits.sims[0] == 1.0
    pairs = index.pairwise(everything)
    wide = rows.astype(np.float64)
    unit = wide / np.linalg.norm(wide, axis=1, keepdims=True)
    assert_within_float32_rounding(pairs.reshape(-1), (unit @ unit.T).reshape(-1))


@pytest.mark.parametrize("dims", [6, 384])
def test_the_index_answers_as_float64_would_on_each_loop_of_the_c_kernels(dims: int, c_loops: str) -> None:
    check_index_answers_as_float64(dims)


def test_the_index_answers_as_float64_would_under_each_simsimd_level(simsimd_level: str) -> None:
    check_index_answers_as_float64(384)


def test_the_issue_example_is_stored_exactly_and_is_its_own_nearest_vector(c_loops: str) -> None:
    vector = ISSUE_EXAMPLE.astype(np.float16)
    index = VectorIndex(6)
    index.put_many(np.arange(2), np.stack([vector, np.ones(6, np.float16)]))
    stored = index.vector(0)
    assert stored is not None and stored.tobytes() == vector.tobytes()
    hits = index.search(vector.astype(np.float32), 2)
    assert hits.ords.tolist() == [0, 1] and hits.sims[0] == 1.0
    assert_within_float32_rounding(hits.sims, reference_cosines(np.stack([vector, np.ones(6, np.float16)]), vector))


def test_vectors_of_norm_300_1_and_40_are_each_their_own_nearest_with_similarity_one(c_loops: str) -> None:
    rng = np.random.default_rng(300)
    directions = rng.standard_normal((3, 384))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    rows = (directions * np.array([[300.0], [1.0], [40.0]])).astype(np.float16)
    index = VectorIndex(384)
    index.put_many(np.arange(3), rows)
    for i, row in enumerate(rows):
        hits = index.search(row.astype(np.float32), 3)
        assert hits.ords[0] == i and hits.sims[0] == 1.0


def test_a_query_of_huge_or_tiny_float64_components_finds_the_same_vectors() -> None:
    rows = adversarial_vectors(384, seed=1)[:-1]
    index = VectorIndex(384)
    index.put_many(np.arange(len(rows)), rows)
    query = rows[0].astype(np.float64)
    expected = index.similarities(query, np.arange(len(rows)))
    for scale in (1e-300, 1e300):
        np.testing.assert_array_equal(index.similarities(query * scale, np.arange(len(rows))), expected)
