"""The postings kernels: inversion of the term counts' rows and term-at-a-time scoring, with every bad buffer refused."""

import numpy as np
import pytest

from engram_index.engine import _kernels
from engram_index.engine.termcounts import QueryPlan, TermCounts


def counts_of(rows: list[list[str] | None]) -> TermCounts:
    counts = TermCounts()
    counts.put_many(enumerate(rows))
    return counts


def test_inverting_the_rows_lists_each_terms_holders_in_ascending_order_with_their_counts() -> None:
    rng = np.random.default_rng(3)
    vocabulary = [f"t{i}" for i in range(30)]
    rows = [None if i % 7 == 3 else [vocabulary[j] for j in rng.integers(0, 30, rng.integers(1, 12))] for i in range(200)]
    counts = counts_of(rows)
    postings, stale, mask = counts.inverted()
    assert stale.size == 0 and mask is None
    for term in vocabulary:
        tid = counts._vocab[term]
        got = postings.ords[postings.starts[tid]: postings.starts[tid + 1]].tolist()
        want = [i for i, row in enumerate(rows) if row is not None and term in row]
        assert got == want
        tfs = postings.tfs[postings.starts[tid]: postings.starts[tid + 1]].tolist()
        assert tfs == [rows[i].count(term) for i in want]  # type: ignore[union-attr]


def test_scores_over_the_postings_equal_the_rows_sums_for_each_kind_of_column() -> None:
    rows = [["run", "~run"], ["~run"], ["runner", "part"], ["part", "part", "x"], ["y"]]
    counts = counts_of(rows)
    plan = QueryPlan([("~run", 1, 1, 1.0), ("run", 2, 1, 1.0), ("part", 0, 0, 0.6), ("absent", 0, 0, 1.0)])
    ords, values, stale = counts.matches(plan, None)
    parts = counts.term_scores(["~run", "run", "part"], ords)
    want = np.where(parts[:, 0] > 0, parts[:, 0], parts[:, 1]) + 0.6 * parts[:, 2]
    assert sorted(ords.tolist()) == [0, 1, 2, 3] and stale.size == 0
    np.testing.assert_allclose(values, want, rtol=1e-12)
    allowed = np.array([False, True, False, True])
    ords, _, _ = counts.matches(plan, allowed)
    assert sorted(ords.tolist()) == [1, 3]


def test_documents_written_after_the_inversion_are_reported_stale_and_not_scored_from_old_postings() -> None:
    counts = counts_of([["a"], ["a", "b"]])
    counts.inverted()
    counts.put_many([(1, ["c"]), (2, ["a"])])
    ords, _, stale = counts.matches(QueryPlan([("a", 0, 0, 1.0)]), None)
    assert ords.tolist() == [0] and sorted(stale.tolist()) == [1, 2]


def _inputs(counts: TermCounts) -> dict[str, object]:
    postings, _, _ = counts.inverted()
    size = counts._lengths.size
    return dict(post_starts=postings.starts, post_ords=postings.ords, post_tfs=postings.tfs,
                doc_lengths=counts._doc_lengths, tids=np.array([0], np.int64), kinds=np.zeros(1, np.int64),
                groups=np.zeros(1, np.int64), weights=np.ones(1), idf=np.ones(1), k1=1.2, b=0.75, average=2.0,
                stale=None, allowed=None, acc=np.zeros(size), mark=np.zeros(size, np.int32),
                touched=np.empty(size, np.int64), values=np.empty(size))


@pytest.mark.parametrize(("name", "bad", "error"), [
    ("tids", np.array([99], np.int64), ValueError),
    ("kinds", np.array([3], np.int64), ValueError),
    ("weights", np.zeros(1), ValueError),
    ("idf", np.array([np.nan]), ValueError),
    ("mark", np.zeros(3, np.int32), ValueError),
    ("touched", np.empty(2, np.int64), ValueError),
    ("acc", np.zeros(4, np.float32), TypeError),
    ("post_ords", np.zeros(3, np.int64), TypeError),
    ("allowed", np.zeros(3, np.float64), TypeError),
    ("acc", np.zeros(1024)[::2], TypeError),
])
def test_postings_scores_refuses_every_malformed_buffer(name: str, bad: object, error: type) -> None:
    args = _inputs(counts_of([["a"], ["a", "b"]]))
    args[name] = bad
    with pytest.raises(error):
        _kernels.postings_scores(*args.values())  # type: ignore[arg-type]


def test_build_postings_refuses_rows_outside_the_arena_and_ids_outside_the_vocabulary() -> None:
    starts, lengths = np.array([0, 5], np.int64), np.array([1, 2], np.int32)
    ids, tfs = np.array([0, 1, 0], np.uint32), np.ones(3, np.uint16)
    with pytest.raises(ValueError, match="outside the arena"):
        _kernels.build_postings(starts, lengths, ids, tfs, np.zeros(3, np.int64), np.zeros(3, np.int32),
                                np.zeros(3, np.uint16))
    starts = np.array([0, 1], np.int64)
    with pytest.raises(ValueError, match="vocabulary"):
        _kernels.build_postings(starts, lengths, ids, tfs, np.zeros(2, np.int64), np.zeros(3, np.int32),
                                np.zeros(3, np.uint16))
    with pytest.raises(ValueError, match="one entry per row entry"):
        _kernels.build_postings(starts, lengths, ids, tfs, np.zeros(3, np.int64), np.zeros(2, np.int32),
                                np.zeros(2, np.uint16))
    with pytest.raises(TypeError):
        _kernels.build_postings(starts, lengths.astype(np.int64), ids, tfs, np.zeros(3, np.int64),
                                np.zeros(3, np.int32), np.zeros(3, np.uint16))
