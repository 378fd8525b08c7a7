"""The compiled sum of a keyword score's BM25 parts (_kernels.combine_scores) equals numpy's, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from engram_index.engine import _kernels


def numpy_sums(parts: np.ndarray, plain: list[int], stems: list[int], exacts: list[int], part_cols: list[int],
               weight: float) -> np.ndarray:
    """How keyword._score added the parts up before the kernel."""
    out = parts[:, plain].sum(axis=1) if plain else np.zeros(parts.shape[0], np.float64)
    if stems:
        stem, exact = parts[:, stems], parts[:, exacts]
        out += np.where(stem > 0, stem, exact).sum(axis=1)
    if part_cols:
        out += weight * parts[:, part_cols].sum(axis=1)
    return out.astype(np.float32)


@pytest.mark.parametrize("rows", [0, 1, 2, 3, 17, 400, 5000])
def test_the_parts_add_up_as_numpy_adds_them_for_any_rows_and_columns(rows: int) -> None:
    rng = np.random.default_rng(rows)
    for _ in range(40):
        width = int(rng.integers(1, 40))
        parts = rng.exponential(2.0, (rows, width)) * (rng.random((rows, width)) > 0.3)
        parts *= 10.0 ** rng.uniform(-2, 2, (rows, width))
        cols = list(rng.permutation(width))
        n_plain, n_stem = int(rng.integers(0, width + 1)), int(rng.integers(0, width + 1))
        plain = [int(c) for c in cols[:n_plain]]
        stems = [int(c) for c in rng.choice(width, n_stem)]
        exacts = [int(c) for c in rng.choice(width, n_stem)]
        part_cols = [int(c) for c in rng.choice(width, int(rng.integers(0, width + 1)))]
        out = np.empty(rows, np.float32)
        _kernels.combine_scores(np.ascontiguousarray(parts), np.array(plain, np.int64), np.array(stems, np.int64),
                                np.array(exacts, np.int64), np.array(part_cols, np.int64), 0.6, out)
        assert out.tobytes() == numpy_sums(parts, plain, stems, exacts, part_cols, 0.6).tobytes()


def test_columns_outside_the_parts_are_refused() -> None:
    out = np.empty(2, np.float32)
    none = np.zeros(0, np.int64)
    with pytest.raises(IndexError):
        _kernels.combine_scores(np.ones((2, 3)), np.array([3]), none, none, none, 0.6, out)
    with pytest.raises(ValueError):
        _kernels.combine_scores(np.ones((2, 3)), none, np.array([0]), none, none, 0.6, out)
    with pytest.raises(ValueError):
        _kernels.combine_scores(np.ones(5), none, none, none, none, 0.6, out)


@pytest.mark.parametrize("n", [0, 1, 5, 199, 200, 201, 1000, 50_000])
def test_the_top_selection_keeps_what_numpys_partition_and_margin_keep(n: int) -> None:
    rng = np.random.default_rng(n)
    for ties in (False, True):
        values = rng.exponential(5.0, n)
        if ties:
            values = np.round(values, 0)  # many equal scores, the k-th among them
        ords = rng.permutation(3 * n + 1)[:n].astype(np.int64)
        for k in (1, 10, 200, n + 1):
            expected = ords
            if n > k:
                kth = float(np.partition(values, n - k)[n - k])
                expected = ords[values >= kth - 1e-6 * abs(kth)]
            mine = ords.copy()
            assert mine[: _kernels.select_top(mine, values, k, 1e-6)].tolist() == expected.tolist()


def test_the_top_selection_refuses_a_k_of_zero_and_unaligned_values() -> None:
    with pytest.raises(ValueError):
        _kernels.select_top(np.arange(3), np.ones(3), 0, 1e-6)
    with pytest.raises(ValueError):
        _kernels.select_top(np.arange(3), np.ones(2), 1, 1e-6)


@pytest.mark.parametrize("rows", [0, 1, 2, 17, 400])
def test_every_words_sums_at_once_are_each_words_combine_scores_bit_for_bit(rows: int) -> None:
    rng = np.random.default_rng(100 + rows)
    for _ in range(30):
        width, words = int(rng.integers(1, 30)), int(rng.integers(1, 12))
        parts = np.ascontiguousarray(rng.exponential(2.0, (rows, width)) * (rng.random((rows, width)) > 0.3))
        roles = []
        for _ in range(words):
            n_stem = int(rng.integers(0, 3))
            roles.append([[int(c) for c in rng.choice(width, n)] for n in
                          (int(rng.integers(0, 3)), n_stem, n_stem, int(rng.integers(0, 4)))])
        counts = np.array([[len(role) for role in word] for word in roles], np.int64)
        cols = np.array([c for word in roles for role in word for c in role], np.int64)
        out = np.full((rows, words), np.nan, np.float32)
        _kernels.word_sums(parts, counts, cols, 0.6, out)
        for j, (plain, stems, exacts, part_cols) in enumerate(roles):
            alone = np.empty(rows, np.float32)
            _kernels.combine_scores(parts, np.array(plain, np.int64), np.array(stems, np.int64),
                                    np.array(exacts, np.int64), np.array(part_cols, np.int64), 0.6, alone)
            assert out[:, j].tobytes() == alone.tobytes()


@pytest.mark.parametrize(("counts", "cols", "error"), [
    ([[1, 0, 0, 0]], [5], IndexError),  # a column past the parts' width
    ([[0, 1, 0, 0]], [0], ValueError),  # a stem without its exact form
    ([[1, 0, 0, 0]], [0, 1], ValueError),  # more columns than the counts name
    ([[-1, 0, 0, 1]], [0], ValueError),  # a negative count
    ([[1, 0, 0]], [0], ValueError),  # not four counts a word
])
def test_word_sums_refuses_counts_and_columns_that_do_not_fit(counts: list[list[int]], cols: list[int],
                                                              error: type) -> None:
    parts = np.ones((3, 2))
    with pytest.raises(error):
        _kernels.word_sums(parts, np.array(counts, np.int64), np.array(cols, np.int64), 0.6,
                           np.empty((3, len(counts)), np.float32))
    with pytest.raises(TypeError):
        _kernels.word_sums(parts, np.zeros((1, 4), np.int32), np.zeros(0, np.int64), 0.6, np.empty((3, 1), np.float32))
