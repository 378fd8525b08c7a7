"""Tests of the float16 vector index: exactness, updates, filters, deadlines and recall."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from bench.synth import make_queries, make_space
from engram_index.engine.vector import VectorHits, VectorIndex


def random_vectors(n: int, dims: int, seed: int) -> np.ndarray:
    """Return n L2-normalised float16 vectors with a shared offset, like real embeddings."""
    rng = np.random.default_rng(seed)
    # A common offset makes the set anisotropic, as sentence embeddings are.
    raw = rng.standard_normal((n, dims)) + 0.5 * rng.standard_normal(dims)
    raw /= np.linalg.norm(raw, axis=1, keepdims=True)
    return raw.astype(np.float16)


def brute_force(
    vectors: np.ndarray, query: np.ndarray, k: int, ords: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Return the exact top-k ordinals and cosines (best first, ties by ordinal)."""
    if ords is None:
        ords = np.arange(len(vectors))
    v = vectors[ords].astype(np.float64)
    q = query.astype(np.float64)
    norms = np.linalg.norm(v, axis=1) * np.linalg.norm(q)
    sims = np.divide(v @ q, norms, out=np.zeros(len(ords)), where=norms > 0)
    order = np.lexsort((ords, -sims))[:k]
    return ords[order], sims[order]


def build(vectors: np.ndarray) -> VectorIndex:
    """Return an index holding vectors at ordinals 0..n-1."""
    index = VectorIndex(vectors.shape[1])
    index.put_many(np.arange(len(vectors)), vectors)
    return index


def recall_at_10(index: VectorIndex, vectors: np.ndarray, queries: np.ndarray) -> float:
    """Return the mean overlap of the index's top 10 with exact cosine's top 10."""
    v = vectors.astype(np.float32)
    v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    found = 0
    for query in queries:
        q = query.astype(np.float32)
        exact = np.argsort(-(v @ q), kind="stable")[:10]
        hits = index.search(q, 10)
        found += len(set(exact.tolist()) & set(hits.ords.tolist()))
    return found / (10 * len(queries))


def test_search_equals_brute_force_when_candidates_cover_the_index() -> None:
    vectors = random_vectors(3000, 48, seed=1)
    index = build(vectors)
    queries = random_vectors(20, 48, seed=2)
    for query in queries:
        hits = index.search(query.astype(np.float32), 10, candidates=len(vectors))
        ords, sims = brute_force(vectors, query, 10)
        assert isinstance(hits, VectorHits)
        assert not hits.approximate
        assert hits.ords.dtype == np.int64 and hits.sims.dtype == np.float32
        np.testing.assert_array_equal(hits.ords, ords)
        np.testing.assert_allclose(hits.sims, sims, atol=1e-5)


def test_search_results_come_best_first() -> None:
    index = build(random_vectors(2000, 32, seed=3))
    hits = index.search(random_vectors(1, 32, seed=4)[0], 50)
    assert len(hits.ords) == 50
    assert np.all(np.diff(hits.sims) <= 0)


def test_an_empty_index_returns_no_hits() -> None:
    index = VectorIndex(8)
    hits = index.search(np.ones(8, dtype=np.float32), 5)
    assert len(index) == 0 and index.size == 0
    assert hits.ords.shape == (0,) and hits.sims.shape == (0,)
    assert not hits.approximate


def test_k_larger_than_the_live_count_returns_every_live_vector() -> None:
    vectors = random_vectors(7, 16, seed=5)
    index = build(vectors)
    index.remove(3)
    hits = index.search(vectors[0], 100)
    assert sorted(hits.ords.tolist()) == [0, 1, 2, 4, 5, 6]
    assert hits.ords[0] == 0
    assert hits.sims[0] == pytest.approx(1.0, abs=1e-3)


def test_len_counts_live_vectors_and_size_follows_the_highest_ordinal() -> None:
    index = VectorIndex(4)
    index.put(10, np.ones(4, dtype=np.float16))
    index.put(2, np.ones(4, dtype=np.float16))
    assert len(index) == 2 and index.size == 11
    index.put(2, -np.ones(4, dtype=np.float16))
    assert len(index) == 2
    index.remove(10)
    index.remove(10)  # removing what is absent changes nothing
    index.remove(999)
    assert len(index) == 1 and index.size == 11
    assert index.has(2) and not index.has(10) and not index.has(5) and not index.has(999)


def test_vector_returns_the_stored_float16_exactly() -> None:
    vector = np.array([0.1, -2.5, 3e-5, 0.0, 65504.0, -1e-7], dtype=np.float16)
    index = VectorIndex(6)
    index.put(0, vector)
    stored = index.vector(0)
    assert stored is not None and stored.dtype == np.float16
    assert stored.tobytes() == vector.tobytes()
    assert index.vector(1) is None and index.vector(-1) is None


def test_replacing_an_ordinal_moves_its_vector() -> None:
    vectors = random_vectors(500, 32, seed=6)
    index = build(vectors)
    target = random_vectors(1, 32, seed=7)[0]
    assert index.search(target, 1).ords[0] != 42
    index.put(42, target)
    hits = index.search(target, 1)
    assert hits.ords[0] == 42 and hits.sims[0] == pytest.approx(1.0, abs=1e-3)
    # The old vector no longer finds ordinal 42.
    assert 42 not in index.search(vectors[42], 5).ords.tolist()
    assert len(index) == 500


def test_removed_ordinals_are_never_returned() -> None:
    vectors = random_vectors(4000, 32, seed=8)
    index = build(vectors)
    # A few removals and many take different paths through the coarse scan: test both.
    index.remove(1)
    assert index.search(vectors[1], 1).ords[0] != 1
    removed = np.append(np.arange(0, 4000, 3), 1)
    for ord in removed:
        index.remove(int(ord))
    assert len(index) == 4000 - len(removed)
    for query in vectors[:30]:
        hits = index.search(query, 20)
        assert not set(hits.ords.tolist()) & set(removed.tolist())
    # A removed vector's own query finds someone else.
    assert index.search(vectors[0], 1).ords[0] != 0


def test_put_many_matches_put_one_at_a_time() -> None:
    vectors = random_vectors(300, 24, seed=9)
    ords = np.random.default_rng(10).permutation(600)[:300]
    bulk, single = VectorIndex(24), VectorIndex(24)
    bulk.put_many(ords, vectors)
    for ord, vector in zip(ords, vectors):
        single.put(int(ord), vector)
    assert len(bulk) == len(single) == 300 and bulk.size == single.size
    query = random_vectors(1, 24, seed=11)[0]
    a, b = bulk.search(query, 15), single.search(query, 15)
    np.testing.assert_array_equal(a.ords, b.ords)
    np.testing.assert_array_equal(a.sims, b.sims)


def test_put_many_of_a_long_consecutive_run_stores_every_vector_in_place() -> None:
    vectors = random_vectors(70000, 8, seed=25)  # more rows than one bulk chunk
    index = VectorIndex(8)
    index.put(100000, vectors[0])
    index.put_many(np.arange(3, 70003), vectors)
    assert len(index) == 70001 and index.size == 100001
    assert not index.has(2) and index.has(3) and index.has(70002) and not index.has(70003)
    for i in (0, 65535, 65536, 69999):
        stored = index.vector(3 + i)
        assert stored is not None and stored.tobytes() == vectors[i].tobytes()
    hits = index.search(vectors[65540], 3, candidates=index.size)
    assert hits.ords[0] == 3 + 65540


def test_put_many_with_a_repeated_ordinal_keeps_the_last_vector() -> None:
    vectors = random_vectors(3, 8, seed=12)
    index = VectorIndex(8)
    index.put_many(np.array([5, 5, 1]), vectors)
    assert len(index) == 2
    stored = index.vector(5)
    assert stored is not None and stored.tobytes() == vectors[1].tobytes()


def test_a_query_of_the_wrong_dims_raises_value_error() -> None:
    index = build(random_vectors(10, 16, seed=13))
    with pytest.raises(ValueError):
        index.search(np.ones(15, dtype=np.float32), 3)
    with pytest.raises(ValueError):
        index.similarities(np.ones(17, dtype=np.float32), np.array([0]))


def test_vectors_of_the_wrong_shape_or_not_finite_are_rejected() -> None:
    index = VectorIndex(4)
    with pytest.raises(ValueError):
        index.put(0, np.ones(5, dtype=np.float16))
    with pytest.raises(ValueError):
        index.put(0, np.array([1, np.inf, 0, 0], dtype=np.float16))
    with pytest.raises(ValueError):
        index.put_many(np.array([0, 1]), np.array([[1, 0, 0, 0], [np.nan, 0, 0, 0]], np.float16))
    with pytest.raises(ValueError):
        index.put(-1, np.ones(4, dtype=np.float16))
    assert len(index) == 0


def test_a_zero_vector_has_similarity_zero() -> None:
    index = VectorIndex(4)
    index.put(0, np.zeros(4, dtype=np.float16))
    index.put(1, np.array([1, 0, 0, 0], dtype=np.float16))
    query = np.array([-1, 0, 0, 0], dtype=np.float32)
    hits = index.search(query, 2)
    assert hits.ords.tolist() == [0, 1]
    assert hits.sims.tolist() == [0.0, -1.0]


def test_similarities_are_exact_cosines_and_nan_where_there_is_no_vector() -> None:
    vectors = random_vectors(100, 32, seed=14)
    index = build(vectors)
    index.remove(7)
    query = random_vectors(1, 32, seed=15)[0].astype(np.float32) * 3.0
    ords = np.array([0, 7, 99, 100, 5000, 50])
    sims = index.similarities(query, ords)
    assert sims.dtype == np.float32
    assert np.isnan(sims[[1, 3, 4]]).all()
    for i in (0, 2, 5):
        _, expected = brute_force(vectors, query, 1, ords=ords[i : i + 1])
        assert sims[i] == pytest.approx(expected[0], abs=1e-6)


def test_a_query_prepared_once_gives_the_same_hits_and_similarities_as_the_raw_query() -> None:
    vectors = random_vectors(3000, 48, seed=30)
    index = build(vectors)
    query = random_vectors(1, 48, seed=31)[0].astype(np.float32) * 2.5
    prepared = index.prepare(query)
    assert index.prepare(prepared) is prepared
    raw_hits, hits = index.search(query, 20), index.search(prepared, 20)
    assert hits.ords.tolist() == raw_hits.ords.tolist() and hits.sims.tolist() == raw_hits.sims.tolist()
    ords = np.arange(0, 3000, 7)
    assert index.similarities(prepared, ords).tolist() == index.similarities(query, ords).tolist()


def test_the_same_query_asked_again_is_prepared_once_and_its_preparation_cannot_be_changed() -> None:
    index = build(random_vectors(500, 48, seed=32))
    query = random_vectors(1, 48, seed=33)[0].astype(np.float32)
    prepared = index.prepare(query)
    # The same values, in another array or another float type, find the preparation made (a v5 search
    # prepares its query for each collection's search and again for each collection's take).
    assert index.prepare(query.astype(np.float64)) is prepared and index.prepare(query.copy()) is prepared
    other = index.prepare(query * 2)  # another query (the same direction, other values) is its own
    assert other is not prepared and other.unit.tolist() == prepared.unit.tolist()
    assert not prepared.unit.flags.writeable and not prepared.code.flags.writeable
    with pytest.raises(ValueError, match="finite"):
        index.prepare(np.full(48, np.nan))
    with pytest.raises(ValueError, match="finite"):  # refused each time, never kept
        index.prepare(np.full(48, np.nan))
    with pytest.raises(ValueError, match="expected a query of 48 dims"):
        index.prepare(np.zeros(47))


def test_vectors_saved_and_mapped_read_only_search_as_the_original(tmp_path: Path) -> None:
    vectors = random_vectors(3000, 48, seed=40)
    index = build(vectors)
    index.remove(17)
    index.save(tmp_path / "v", seq=7)
    mapped = VectorIndex.open(tmp_path / "v", seq=7)
    assert mapped is not None and mapped.mapped and not index.mapped
    assert (len(mapped), mapped.size, mapped.dims) == (len(index), index.size, index.dims)
    query = random_vectors(1, 48, seed=41)[0].astype(np.float32)
    for allowed in (None, np.arange(3000) % 3 == 0):
        a, b = index.search(query, 15, allowed=allowed), mapped.search(query, 15, allowed=allowed)
        assert a.ords.tolist() == b.ords.tolist() and a.sims.tolist() == b.sims.tolist()
    ords = np.array([0, 17, 2999, 5000])
    assert np.array_equal(index.similarities(query, ords), mapped.similarities(query, ords), equal_nan=True)
    assert np.array_equal(index.pairwise(ords[:3]), mapped.pairwise(ords[:3]))
    with pytest.raises(ValueError):
        mapped.put(3, vectors[3])  # the files are never written through a map


def test_saved_vectors_of_another_sequence_or_none_are_not_opened(tmp_path: Path) -> None:
    index = build(random_vectors(10, 8, seed=42))
    assert VectorIndex.open(tmp_path / "v", seq=1) is None
    index.save(tmp_path / "v", seq=1)
    assert VectorIndex.open(tmp_path / "v", seq=2) is None
    (tmp_path / "v" / "codes.npy").write_bytes(b"torn")
    assert VectorIndex.open(tmp_path / "v", seq=1) is None


def test_a_filtered_search_returns_allowed_vectors_far_from_the_query() -> None:
    vectors = random_vectors(20000, 64, seed=16)
    index = build(vectors)
    query = vectors[0].astype(np.float32)
    # The allowed few are the farthest from the query: a coarse cut alone would never reach them.
    far = np.argsort(vectors.astype(np.float32) @ query)[:50]
    allowed = np.zeros(20000, dtype=bool)
    allowed[far] = True
    hits = index.search(query, 10, allowed=allowed)
    ords, sims = brute_force(vectors, query, 10, ords=np.sort(far))
    assert not hits.approximate
    np.testing.assert_array_equal(hits.ords, ords)
    np.testing.assert_allclose(hits.sims, sims, atol=1e-5)


def test_a_broad_filter_excludes_before_the_candidate_cut() -> None:
    vectors = random_vectors(20000, 64, seed=17)
    index = build(vectors)
    index.exact_filter_divisor = 10**9  # force the coarse path
    query = vectors[0].astype(np.float32)
    # Allow only the 60% farthest: all of the query's coarse candidates would be disallowed.
    allowed = np.zeros(20000, dtype=bool)
    allowed[np.argsort(vectors.astype(np.float32) @ query)[:12000]] = True
    hits = index.search(query, 10, allowed=allowed, candidates=500)
    assert len(hits.ords) == 10 and allowed[hits.ords].all()
    assert not hits.approximate


def test_a_broad_filter_keeps_recall_on_scifact(scifact_dir: Path) -> None:
    corpus = np.load(scifact_dir / "corpus.minilm.f16.npy")
    queries = np.load(scifact_dir / "queries.minilm.f16.npy").astype(np.float32)
    index = build(corpus)
    index.exact_filter_divisor = 10**9  # force the coarse path
    allowed = np.random.default_rng(24).random(len(corpus)) < 0.6
    admitted = np.flatnonzero(allowed)
    exact = admitted[np.argsort(-(queries @ corpus[admitted].astype(np.float32).T), axis=1)[:, :10]]
    found = 0
    for query, truth in zip(queries, exact):
        hits = index.search(query, 10, allowed=allowed)
        assert len(hits.ords) == 10 and allowed[hits.ords].all()
        found += len(set(truth.tolist()) & set(hits.ords.tolist()))
    assert found / (10 * len(queries)) >= 0.99


def test_a_mask_shorter_than_size_counts_missing_entries_as_false() -> None:
    vectors = random_vectors(1000, 16, seed=18)
    index = build(vectors)
    allowed = np.ones(100, dtype=bool)
    hits = index.search(vectors[900], 1000, allowed=allowed)
    assert sorted(hits.ords.tolist()) == list(range(100))
    assert len(index.search(vectors[0], 5, allowed=np.zeros(0, dtype=bool)).ords) == 0


def test_a_filter_never_returns_removed_ordinals() -> None:
    vectors = random_vectors(200, 16, seed=19)
    index = build(vectors)
    index.remove(5)
    hits = index.search(vectors[5], 10, allowed=np.ones(200, dtype=bool))
    assert 5 not in hits.ords.tolist() and len(hits.ords) == 10


def coarse_order(vectors: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the top-k ordinals by sign-bit Hamming distance (ties by ordinal), and distances."""
    codes = np.packbits(vectors.astype(np.float32) > 0, axis=1)
    code = np.packbits(query.astype(np.float32) > 0)
    distances = np.bitwise_count(codes ^ code).sum(axis=1)
    order = np.lexsort((np.arange(len(vectors)), distances))[:k]
    return order, distances[order]


def test_a_passed_deadline_returns_the_coarse_order_marked_approximate() -> None:
    vectors = random_vectors(5000, 64, seed=20)
    index = build(vectors)
    query = random_vectors(1, 64, seed=21)[0].astype(np.float32)
    hits = index.search(query, 10, deadline=time.monotonic() - 1.0)
    ords, distances = coarse_order(vectors, query, 10)
    assert hits.approximate
    np.testing.assert_array_equal(hits.ords, ords)
    np.testing.assert_allclose(hits.sims, np.cos(np.pi * distances / 64), atol=1e-6)


def test_a_passed_deadline_on_a_narrow_filter_is_approximate_and_still_filtered() -> None:
    vectors = random_vectors(5000, 64, seed=22)
    index = build(vectors)
    allowed = np.zeros(5000, dtype=bool)
    allowed[::100] = True
    hits = index.search(vectors[1], 10, allowed=allowed, deadline=time.monotonic() - 1.0)
    assert hits.approximate and len(hits.ords) == 10 and allowed[hits.ords].all()


def test_a_passed_deadline_on_a_broad_filter_with_removed_vectors_keeps_both_out() -> None:
    # Above size / 32 admitted, the filter and the removals are excluded from the coarse order
    # itself; the deadline path must honour both, as the exact path does.
    vectors = random_vectors(5000, 64, seed=24)
    index = build(vectors)
    for ord in range(0, 5000, 7):
        index.remove(ord)
    allowed = np.ones(5000, dtype=bool)
    allowed[::3] = False
    query = vectors[2].astype(np.float32)
    for deadline in (time.monotonic() - 1.0, None):
        hits = index.search(query, 50, allowed=allowed, deadline=deadline)
        assert hits.approximate == (deadline is not None) and len(hits.ords) == 50
        assert allowed[hits.ords].all() and not (hits.ords % 7 == 0).any()
    unfiltered = index.search(query, 50, deadline=time.monotonic() - 1.0)
    assert unfiltered.approximate and not (unfiltered.ords % 7 == 0).any()


def test_a_future_deadline_gives_exact_results() -> None:
    vectors = random_vectors(2000, 32, seed=23)
    index = build(vectors)
    query = vectors[3].astype(np.float32)
    hits = index.search(query, 5, candidates=2000, deadline=time.monotonic() + 60.0)
    assert not hits.approximate
    np.testing.assert_array_equal(hits.ords, brute_force(vectors, query, 5)[0])


def test_recall_at_10_on_scifact_is_at_least_0_99(scifact_dir: Path) -> None:
    corpus = np.load(scifact_dir / "corpus.minilm.f16.npy")
    queries = np.load(scifact_dir / "queries.minilm.f16.npy")
    index = build(corpus)
    assert recall_at_10(index, corpus, queries) >= 0.99


def test_recall_at_10_on_a_20k_synthetic_space_is_at_least_0_97(scifact_dir: Path) -> None:
    space = make_space(20000, seed=1, scifact_dir=scifact_dir)
    _, queries = make_queries(space, 100, seed=2)
    index = build(space.vectors)
    assert recall_at_10(index, space.vectors, queries) >= 0.97
