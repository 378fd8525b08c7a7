"""The compiled rest of a hybrid search (_kernels.hybrid_rest): its checks refuse what does not agree, and
what it answers is the steps' (the started searches' tests compare the two over many searches)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import numpy as np
import pytest

from engram_index.engine import _kernels
from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import SearchRequest
from tests.engine.test_search_started import DIMS, build

Args = list[list[Any]]


@pytest.fixture(scope="module")
def space() -> SpaceIndex:
    return build(seed=11)[0]


def valid_args(index: SpaceIndex, limit: int = 10) -> Args:
    """The six argument groups of one search's planned rest, as hybrid_rest.run passes them."""
    started = index.start(SearchRequest("hybrid", q="river stone zebra", vector=Future(), limit=limit))
    assert started.keyword is not None and started.keyword.rest is not None
    rest, vectors, counts = started.keyword.rest, index.vectors, index.keyword.counts
    assert vectors is not None and rest.scoring is not None and rest.query is not None
    query = vectors.prepare(np.random.default_rng(1).standard_normal(DIMS))
    size = vectors._size
    q = rest.query
    return [
        [query.code, vectors._codes[:size], rest.scan.excluded, rest.scan.pool, rest.scan.wanted, query.unit,
         vectors._vectors, vectors._inv_norms, rest.n],
        [*counts.rows(), rest.scoring.qids, rest.scoring.cols, rest.scoring.idf, counts.table(), 1.2, 0.75,
         rest.scoring.average, len(q.terms)],
        [q.plain, q.stems, q.exacts, q.part_columns, 0.6, rest.kw_count],
        [rest.kw_ords, rest.kw_bm25],
        [vectors._live[:size], 0, 0.5, 60, limit],
        [np.empty(limit, np.int64), np.empty(limit, np.float64), np.empty(limit, np.float32),
         np.empty(limit, np.float32), np.empty(limit, np.bool_)],
    ]


def call(args: Args) -> int:
    return int(_kernels.hybrid_rest(*(tuple(group) for group in args)))


def test_the_rest_of_a_planned_search_writes_at_most_its_limit(space: SpaceIndex, c_loops: str) -> None:
    args = valid_args(space)
    got = call(args)
    assert 0 < got <= 10
    ords = args[5][0][:got]
    assert np.all(ords >= 0) and len(set(ords.tolist())) == got


def corrupt(group: int, place: int, value: Callable[[Any], Any]) -> Callable[[Args], None]:
    """A change of one argument, made from its valid value."""
    def change(args: Args) -> None:
        args[group][place] = value(args[group][place])
    return change


BAD = {
    "codes that are not rows of the code": corrupt(0, 1, lambda codes: codes.reshape(-1)[:-1]),
    "an excluded mask of another length": corrupt(0, 2, lambda _: np.zeros(3, np.bool_)),
    "a pool that does not ascend": corrupt(0, 3, lambda _: np.array([5, 3], np.int64)),
    "a pool outside the rows": corrupt(0, 3, lambda _: np.array([10**6], np.int64)),
    "a negative depth": corrupt(0, 8, lambda _: -1),
    "a term id outside the vocabulary": corrupt(1, 5, lambda q: np.full_like(q, 10**9)),
    "a term column outside the width": corrupt(1, 6, lambda c: np.full_like(c, 999)),
    "stems and exacts of two lengths": corrupt(2, 1, lambda _: np.array([0], np.int64)),
    "a sum's column outside the width": corrupt(2, 3, lambda _: np.array([999], np.int64)),
    "keyword scores of another length": corrupt(3, 1, lambda b: np.zeros(b.size + 1, np.float32)),
    "a fusion method of neither kind": corrupt(4, 1, lambda _: 2),
    "outputs shorter than the limit": corrupt(5, 0, lambda _: np.empty(1, np.int64)),
    "vectors of float32": corrupt(0, 6, lambda v: v.astype(np.float32)),
}


@pytest.mark.parametrize("case", list(BAD))
def test_the_rest_refuses_arguments_that_do_not_agree_with_a_value_or_type_error(space: SpaceIndex, case: str) -> None:
    args = valid_args(space)
    if case.startswith("a pool") and args[0][3] is None:
        args[0][2] = None  # a pool given up front replaces the scan
    BAD[case](args)
    with pytest.raises((ValueError, TypeError)):
        call(args)


def test_a_read_only_output_is_refused(space: SpaceIndex) -> None:
    args = valid_args(space)
    args[5][1].flags.writeable = False
    with pytest.raises(TypeError):
        call(args)
