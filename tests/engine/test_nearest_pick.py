"""The coarse pick stays exact where it finds its cut from a sample of the rows (many rows), also when
the sampled rows mislead it (the pick then counts every row)."""

from __future__ import annotations

import numpy as np
import pytest

from engram_index.engine import _kernels
from tests.engine.test_kernels import reference_distances, reference_nearest

ROWS = 40_000
# Where _kernels_pick.c samples: every STEP-th row from STEP // 2 (4,096 rows at most, 4 apart at least).
STEP = max(ROWS // 4096, 4)


def assert_exact(query: np.ndarray, codes: np.ndarray, excluded: np.ndarray | None, counts: list[int]) -> None:
    """nearest gives the reference's rows for every count."""
    dist = reference_distances(query, codes)
    for count in counts:
        out = np.full(count, -1, dtype=np.int64)
        written = _kernels.nearest(query, codes, excluded, out)
        want = reference_nearest(dist, excluded, count)
        assert written == len(want), count
        assert np.array_equal(out[:written], want), count


@pytest.mark.parametrize("width", [2, 48, 200])
@pytest.mark.parametrize("with_exclusions", [False, True])
def test_nearest_over_many_rows_keeps_the_exact_smallest_with_ties_to_the_lower_ordinals(
    width: int, with_exclusions: bool, c_loops: str
) -> None:
    # Two-byte codes put thousands of rows at each distance: the cut falls among ties. 200-byte rows
    # (1,600 bits) take the popcnt scan on every CPU, and spread the distances: the window spans more.
    rng = np.random.default_rng(width * 2 + with_exclusions)
    codes = rng.integers(0, 256, (ROWS, width), dtype=np.uint8)
    query = rng.integers(0, 256, width, dtype=np.uint8)
    excluded = rng.random(ROWS) < 0.3 if with_exclusions else None
    assert_exact(query, codes, excluded, [1, 10, 1032, 5000, 19_999])


def test_nearest_stays_exact_when_every_sampled_row_is_the_farthest(c_loops: str) -> None:
    # The sample puts the cut at the last distance; almost every row lies below it.
    rng = np.random.default_rng(11)
    codes = rng.integers(0, 256, (ROWS, 48), dtype=np.uint8)
    query = rng.integers(0, 256, 48, dtype=np.uint8)
    codes[STEP // 2::STEP] = ~query
    assert_exact(query, codes, None, [10, 1032])


def test_nearest_stays_exact_when_the_sampled_rows_are_copies_of_the_query_and_too_few(c_loops: str) -> None:
    # The sample puts the cut at 0, where fewer rows lie than asked for.
    rng = np.random.default_rng(12)
    codes = rng.integers(0, 256, (ROWS, 48), dtype=np.uint8)
    query = rng.integers(0, 256, 48, dtype=np.uint8)
    codes[STEP // 2::STEP] = query
    copies = len(codes[STEP // 2::STEP])
    assert_exact(query, codes, None, [copies - 1, copies, copies + 1, copies + 500])


def test_nearest_stays_exact_when_every_sampled_row_is_excluded(c_loops: str) -> None:
    # The sample sees no admitted row at all.
    rng = np.random.default_rng(13)
    codes = rng.integers(0, 256, (ROWS, 48), dtype=np.uint8)
    query = rng.integers(0, 256, 48, dtype=np.uint8)
    excluded = np.zeros(ROWS, dtype=bool)
    excluded[STEP // 2::STEP] = True
    assert_exact(query, codes, excluded, [10, 1032, ROWS - 1])
