"""The compiled scan kernels agree with plain numpy and refuse malformed buffers."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from engram_index.engine import _kernels


def reference_distances(query: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Hamming distances the slow, obvious way."""
    return np.unpackbits(codes ^ query, axis=1).sum(axis=1).astype(np.uint16)


def reference_nearest(distances: np.ndarray, excluded: np.ndarray | None, count: int) -> np.ndarray:
    """The count smallest by (distance, ordinal) among the admitted rows, ascending by ordinal."""
    admitted = np.flatnonzero(~excluded) if excluded is not None else np.arange(len(distances))
    order = admitted[np.lexsort((admitted, distances[admitted]))]
    return np.sort(order[:count])


@pytest.mark.parametrize("width", [1, 7, 8, 13, 16, 32, 48, 64, 96, 128, 192, 200])
def test_hamming_distances_equal_counting_the_differing_bits(width: int, c_loops: str) -> None:
    rng = np.random.default_rng(width)
    codes = rng.integers(0, 256, (1000, width), dtype=np.uint8)
    query = rng.integers(0, 256, width, dtype=np.uint8)
    out = np.empty(len(codes), dtype=np.uint16)
    _kernels.hamming(query, codes, out)
    assert np.array_equal(out, reference_distances(query, codes))


@pytest.mark.parametrize("width", [8, 48, 64, 72, 256, 264])
@pytest.mark.parametrize("rows", [1, 7, 9, 1003])
def test_hamming_distances_are_exact_for_any_row_count_and_word_count_on_each_loop(
    width: int, rows: int, c_loops: str
) -> None:
    # The AVX-512 scan takes 8 rows at a time and up to 32 words a row: the rows after the last
    # 8, and rows of more words (its popcnt fallback), must count the same.
    rng = np.random.default_rng(width * 10_000 + rows)
    codes = rng.integers(0, 256, (rows, width), dtype=np.uint8)
    query = rng.integers(0, 256, width, dtype=np.uint8)
    out = np.empty(rows, dtype=np.uint16)
    _kernels.hamming(query, codes, out)
    assert np.array_equal(out, reference_distances(query, codes))
    out_near = np.empty(min(rows, 5), dtype=np.int64)
    assert _kernels.nearest(query, codes, None, out_near) == out_near.size
    assert np.array_equal(out_near, reference_nearest(reference_distances(query, codes), None, out_near.size))


def cpu_flags() -> set[str]:
    """The CPU's feature flags as Linux names them (empty where /proc/cpuinfo has none)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def test_the_scan_names_each_loop_it_can_be_held_to() -> None:
    flags = cpu_flags()
    fastest = _kernels.loops()["scan"]
    try:
        _kernels.use_avx512(False)
        without_avx512 = _kernels.loops()["scan"]
        _kernels.use_avx2(False)
        scalar = _kernels.loops()["scan"]
        _kernels.use_avx512(True)
        held_by_avx2_alone = _kernels.loops()["scan"]
        _kernels.use_portable(True)
        portable = _kernels.loops()["scan"]
    finally:
        _kernels.use_portable(False)
        _kernels.use_avx512(True)
        _kernels.use_avx2(True)
    assert scalar == ("popcnt" if "popcnt" in flags else "portable")
    assert without_avx512 == ("avx2" if {"avx2", "popcnt"} <= flags else scalar)
    assert held_by_avx2_alone == scalar
    assert portable == "portable"
    assert _kernels.loops()["scan"] == fastest


def test_a_cpu_with_avx2_and_no_avx512_popcount_scans_with_avx2() -> None:
    flags = cpu_flags()
    if not {"avx2", "popcnt"} <= flags or "avx512_vpopcntdq" in flags:
        pytest.skip("the CPU has no AVX2, or has AVX-512 VPOPCNTDQ (whose loop it scans with)")
    assert _kernels.loops()["scan"] == "avx2"


@pytest.mark.parametrize("width", [2, 48, 96])
@pytest.mark.parametrize("with_exclusions", [False, True])
def test_nearest_keeps_the_smallest_distances_with_ties_at_the_cut_to_the_lower_ordinals(
    width: int, with_exclusions: bool, c_loops: str
) -> None:
    # Two-byte codes make ties at the cut certain; 48 and 96 bytes are real code widths.
    rng = np.random.default_rng(width + with_exclusions)
    codes = rng.integers(0, 256, (5000, width), dtype=np.uint8)
    query = rng.integers(0, 256, width, dtype=np.uint8)
    excluded = rng.random(len(codes)) < 0.3 if with_exclusions else None
    distances = reference_distances(query, codes)
    for count in (1, 10, 333, 1032):
        out = np.empty(count, dtype=np.int64)
        written = _kernels.nearest(query, codes, excluded, out)
        assert written == count
        assert np.array_equal(out, reference_nearest(distances, excluded, count))


@pytest.mark.parametrize("rows", [5, 16, 37, 1003])
def test_nearest_keeps_copies_of_the_query_first_even_when_they_fill_the_count(rows: int, c_loops: str) -> None:
    # Distance 0 at the cut: every row taken is a tie at it, and a block of distances is compared
    # against a cut with nothing under it.
    rng = np.random.default_rng(rows)
    codes = rng.integers(0, 256, (rows, 48), dtype=np.uint8)
    query = rng.integers(0, 256, 48, dtype=np.uint8)
    copies = np.sort(rng.choice(rows, size=max(2, rows // 4), replace=False))
    codes[copies] = query
    excluded = np.zeros(rows, dtype=bool)
    excluded[copies[0]] = True
    distances = reference_distances(query, codes)
    for count in (1, len(copies) - 1, len(copies) + 1):
        out = np.empty(min(count, rows - 1), dtype=np.int64)
        assert _kernels.nearest(query, codes, excluded, out) == out.size
        assert np.array_equal(out, reference_nearest(distances, excluded, out.size))


def test_nearest_gives_every_admitted_row_when_fewer_remain_than_asked() -> None:
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 256, (50, 48), dtype=np.uint8)
    excluded = np.zeros(50, dtype=bool)
    excluded[::3] = True
    out = np.full(100, -1, dtype=np.int64)
    written = _kernels.nearest(codes[0], codes, excluded, out)
    assert written == 33
    assert np.array_equal(out[:written], np.flatnonzero(~excluded))
    assert (out[written:] == -1).all()


def test_nearest_over_no_rows_or_for_none_wanted_writes_nothing() -> None:
    query = np.zeros(48, dtype=np.uint8)
    assert _kernels.nearest(query, np.zeros((0, 48), dtype=np.uint8), None, np.empty(5, dtype=np.int64)) == 0
    assert _kernels.nearest(query, np.zeros((9, 48), dtype=np.uint8), None, np.empty(0, dtype=np.int64)) == 0
    everything = np.ones(9, dtype=bool)
    assert _kernels.nearest(query, np.zeros((9, 48), dtype=np.uint8), everything, np.empty(5, dtype=np.int64)) == 0


def test_the_kernels_refuse_malformed_buffers() -> None:
    codes = np.zeros((10, 48), dtype=np.uint8)
    query = np.zeros(48, dtype=np.uint8)
    with pytest.raises(TypeError, match="uint16"):
        _kernels.hamming(query, codes, np.empty(10, dtype=np.float32))
    with pytest.raises(ValueError, match="out holds 9 values for 10 rows"):
        _kernels.hamming(query, codes, np.empty(9, dtype=np.uint16))
    with pytest.raises(ValueError, match="not rows"):
        _kernels.hamming(np.zeros(7, dtype=np.uint8), codes, np.empty(10, dtype=np.uint16))
    with pytest.raises(ValueError, match="1 to 8191 bytes"):
        _kernels.hamming(np.zeros(0, dtype=np.uint8), codes, np.empty(10, dtype=np.uint16))
    with pytest.raises(TypeError, match="uint8"):
        _kernels.hamming(np.zeros(12, dtype=np.float32), codes, np.empty(10, dtype=np.uint16))
    with pytest.raises(TypeError, match="C-contiguous"):
        _kernels.hamming(query, np.zeros((48, 10), dtype=np.uint8).T, np.empty(10, dtype=np.uint16))
    with pytest.raises(TypeError, match="writable"):
        _kernels.hamming(query, codes, np.frombuffer(bytes(20), dtype=np.uint16))
    with pytest.raises(ValueError, match="one byte per row"):
        _kernels.nearest(query, codes, np.zeros(9, dtype=bool), np.empty(3, dtype=np.int64))
    with pytest.raises(TypeError, match="int64"):
        _kernels.nearest(query, codes, None, np.empty(3, dtype=np.int32))


def reference_cosines(vectors: np.ndarray, unit: np.ndarray) -> np.ndarray:
    """Cosines of float16 rows with a unit query, all in float64 (0 for a zero row)."""
    rows = vectors.astype(np.float64)
    norms = np.sqrt((rows**2).sum(axis=1))
    return np.divide(rows @ unit, norms, out=np.zeros(len(rows)), where=norms > 0)


def assert_within_float32_rounding(got: np.ndarray, expected: np.ndarray) -> None:
    """Each value is the float64 one rounded once to float32 (half a float32 unit in the last
    place), give or take the float64 sums' own error."""
    expected = np.clip(expected, -1, 1)
    error = np.abs(got.astype(np.float64) - expected)
    allowed = 2.0**-24 * np.abs(expected) * (1 + 1e-9) + 1e-12
    worst = int(np.argmax(error - allowed))
    assert (error <= allowed).all(), f"row {worst}: {got[worst]!r} against {expected[worst]!r}"


def inverse_norms(vectors: np.ndarray) -> np.ndarray:
    """The index's inverse norms: 1/|v| in float64, 0 for a zero row."""
    squared = (vectors.astype(np.float64) ** 2).sum(axis=1)
    return np.where(squared > 0, 1 / np.sqrt(np.where(squared > 0, squared, 1)), 0)


def adversarial_vectors(dims: int, seed: int) -> np.ndarray:
    """Float16 rows that break half-precision sums and float32 ones: norms of 300, the largest
    half (65504) beside tiny components, subnormals, and near-orthogonal pairs."""
    rng = np.random.default_rng(seed)
    rows = [
        15.0 + rng.standard_normal(dims),  # norm ~300 in 384 dims: squares sum past 65504
        rng.choice([-15.3, 15.3], dims),
        np.full(dims, 65504.0),  # squared norm 4.3e9 per component
        rng.standard_normal(dims) * 6e-8,  # subnormals (below 6.1e-5) down to the smallest, 6e-8
        rng.standard_normal(dims) * 1e-5,
        np.where(np.arange(dims) == 0, 65504.0, rng.standard_normal(dims) * 1e-3),  # one huge component
        np.where(np.arange(dims) == 0, 0.0, rng.standard_normal(dims)),  # orthogonal to it: cancellation
        rng.standard_normal(dims),
        np.zeros(dims),
    ]
    return np.array(rows).astype(np.float16)


ISSUE_EXAMPLE = np.array([0.1, -2.5, 3e-5, 0, 65504, -1.19e-7])


@pytest.mark.parametrize("dims", [1, 7, 16, 100, 384, 768])
def test_cosines_equal_float64_cosines_to_float32_rounding_on_each_loop(dims: int, c_loops: str) -> None:
    rng = np.random.default_rng(dims)
    vectors = np.concatenate([rng.standard_normal((300, dims)).astype(np.float16), adversarial_vectors(dims, dims)])
    vectors[5] = 0  # a zero vector: inverse norm 0, cosine 0
    inv_norms = inverse_norms(vectors)
    ords = np.array([5, 0, 299, 17, 17, 3, *range(300, len(vectors))], np.int64)
    for query in [rng.standard_normal(dims), *vectors[300:-1].astype(np.float64)]:
        if not query.any():
            continue  # (in one dimension the near-orthogonal row is zero)
        unit = query / np.linalg.norm(query)
        out = np.empty(len(ords), np.float32)
        _kernels.cosines(unit, vectors, inv_norms, ords, out)
        assert out[0] == 0.0
        assert_within_float32_rounding(out, reference_cosines(vectors[ords], unit))


def test_cosines_of_the_issue_example_with_itself_and_a_near_orthogonal_row_are_exact(c_loops: str) -> None:
    # Half-precision sums make this vector's squared norm infinite (its true value is 4.29e9).
    vectors = np.array([ISSUE_EXAMPLE, [1, 0, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0]]).astype(np.float16)
    unit = vectors[0].astype(np.float64) / np.linalg.norm(vectors[0].astype(np.float64))
    out = np.empty(3, np.float32)
    _kernels.cosines(unit, vectors, inverse_norms(vectors), np.arange(3, dtype=np.int64), out)
    assert out[0] == 1.0
    # 1.5e-6 and 4.6e-10: a float16 or float32 query would lose most of their digits.
    assert_within_float32_rounding(out, reference_cosines(vectors, unit))
    assert out[1] != 0 and out[2] != 0


@pytest.mark.parametrize("dims", [1, 6, 7, 8, 15, 16, 17, 384, 1536])
def test_self_dots_equal_float64_squared_norms_on_each_loop(dims: int, c_loops: str) -> None:
    vectors = adversarial_vectors(dims, dims)
    if dims == 6:
        vectors = np.concatenate([vectors, ISSUE_EXAMPLE[None, :].astype(np.float16)])
    out = np.full(len(vectors), np.nan)
    _kernels.self_dots(vectors, out)
    expected = (vectors.astype(np.float64) ** 2).sum(axis=1)
    # Positive terms: a float64 sum in any order is within dims float64 roundings of the true one.
    np.testing.assert_allclose(out, expected, rtol=dims * 2.0**-53, atol=0)
    assert np.isfinite(out).all()


def test_self_dots_of_no_rows_write_nothing_and_refuse_rows_that_do_not_divide() -> None:
    _kernels.self_dots(np.zeros((0, 8), np.float16), np.empty(0))
    with pytest.raises(ValueError, match="are not 3 rows"):
        _kernels.self_dots(np.zeros(8, np.float16), np.empty(3))
    with pytest.raises(ValueError, match="are not 2 rows"):
        _kernels.self_dots(np.zeros(0, np.float16), np.empty(2))
    with pytest.raises(TypeError, match="out has the wrong item type"):
        _kernels.self_dots(np.zeros((2, 4), np.float16), np.empty(2, np.float32))
    with pytest.raises(TypeError, match="vectors has the wrong item type"):
        _kernels.self_dots(np.zeros((2, 4), np.float32), np.empty(2))


def test_the_portable_switch_names_the_loops_it_selects() -> None:
    try:
        _kernels.use_portable(True)
        assert _kernels.loops() == {"scan": "portable", "dot": "portable"}
    finally:
        _kernels.use_portable(False)
    assert set(_kernels.loops()) == {"scan", "dot"}


def test_cosines_of_a_vector_with_itself_are_clipped_to_one() -> None:
    vector = np.full((1, 384), 0.05, np.float16)
    unit = vector[0].astype(np.float64) / np.linalg.norm(vector[0].astype(np.float64))
    out = np.empty(1, np.float32)
    inv_norm = np.array([1.0001 / np.linalg.norm(vector[0].astype(np.float64))])  # as if rounding pushed it over
    _kernels.cosines(unit, vector, inv_norm, np.zeros(1, np.int64), out)
    assert out[0] == 1.0


def test_cosines_refuse_ordinals_outside_the_vectors_and_mismatched_shapes() -> None:
    vectors = np.zeros((4, 8), np.float16)
    query = np.zeros(8)
    inv_norms = np.ones(4)
    with pytest.raises(ValueError, match="ordinal 4 is outside the 4 vectors"):
        _kernels.cosines(query, vectors, inv_norms, np.array([0, 4], np.int64), np.empty(2, np.float32))
    with pytest.raises(ValueError, match="ordinal -1"):
        _kernels.cosines(query, vectors, inv_norms, np.array([-1], np.int64), np.empty(1, np.float32))
    with pytest.raises(ValueError, match="rows of d"):
        _kernels.cosines(np.zeros(5), vectors, inv_norms, np.array([0], np.int64), np.empty(1, np.float32))
    with pytest.raises(ValueError, match="rows of d"):
        _kernels.cosines(np.zeros(0), vectors, inv_norms, np.array([0], np.int64), np.empty(1, np.float32))
    with pytest.raises(TypeError, match="query has the wrong item type"):
        _kernels.cosines(query.astype(np.float32), vectors, inv_norms, np.array([0], np.int64), np.empty(1, np.float32))
    with pytest.raises(ValueError, match="out holds 1 items, expected 2"):
        _kernels.cosines(query, vectors, inv_norms, np.array([0, 1], np.int64), np.empty(1, np.float32))


def test_nearest_over_no_rows_works_in_a_thread_that_never_scanned() -> None:
    # The distances live in a per-thread buffer: a new thread has none yet.
    query = np.zeros(48, dtype=np.uint8)
    results: list[int] = []
    thread = threading.Thread(
        target=lambda: results.append(
            _kernels.nearest(query, np.zeros((0, 48), dtype=np.uint8), None, np.empty(5, dtype=np.int64))
        )
    )
    thread.start()
    thread.join()
    assert results == [0]


def term_rows(rng: np.random.Generator, docs: int, vocab: int, most: int,
              absent: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Term counts' rows: each ordinal's distinct term ids back to back (`ids`, uint32), where each row
    starts (int64) and how many it holds (int32; -1 for the `absent` ordinals, without a document)."""
    lengths = rng.integers(0, most, docs).astype(np.int32)
    lengths[absent] = -1
    rows = [np.sort(rng.choice(vocab, max(n, 0), replace=False)) for n in lengths]
    starts = np.cumsum([0, *[max(n, 0) for n in lengths[:-1]]]).astype(np.int64)
    return starts, lengths, np.concatenate(rows).astype(np.uint32)


def test_bm25_parts_equal_the_textbook_formula_for_every_ordinal_and_query_term() -> None:
    rng = np.random.default_rng(11)
    docs, vocab = 60, 40
    starts, lengths, ids = term_rows(rng, docs, vocab, 12, [3, 9])
    tfs = rng.integers(1, 5, ids.size).astype(np.uint16)
    doc_lengths = rng.integers(1, 80, docs).astype(np.int64)
    qids = np.array([4, 17, 39, 0], np.int64)
    cols = np.array([2, 0, 3, 1], np.int64)
    idf = np.array([0.5, 1.5, 2.5, 3.5])
    ords = np.array([0, 3, 5, 59, 60, -1, 5, 22], np.int64)  # 60 and -1: outside the counts
    table = np.zeros(vocab, np.int32)
    out = np.zeros((ords.size, 4))
    k1, b, average = 1.2, 0.75, 31.0
    _kernels.bm25_parts(ords, starts, lengths, doc_lengths, ids, tfs, qids, cols, idf, table, k1, b, average, out)
    expected = np.zeros_like(out)
    for i, o in enumerate(ords):
        if not 0 <= o < docs or lengths[o] <= 0:
            continue
        row = slice(starts[o], starts[o] + lengths[o])
        norm = k1 * (1 - b + b * doc_lengths[o] / average)
        for term, tf in zip(ids[row], tfs[row]):
            for q in np.flatnonzero(qids == term):
                expected[i, cols[q]] = idf[q] * tf * (k1 + 1) / (tf + norm)
    assert np.allclose(out, expected, rtol=1e-12, atol=0)
    assert out.any()
    assert not table.any()  # the scratch table is left as it was given


def test_bm25_parts_refuse_query_terms_outside_the_table_and_mismatched_arrays() -> None:
    one = np.zeros(1, np.int64)
    args = dict(ords=one, starts=one, lengths=np.zeros(1, np.int32), doc_lengths=one, ids=np.zeros(1, np.uint32),
                tfs=np.zeros(1, np.uint16), qids=np.array([5], np.int64), cols=np.zeros(1, np.int64),
                idf=np.ones(1), table=np.zeros(5, np.int32))
    with pytest.raises(ValueError, match="query term 0: id 5"):
        _kernels.bm25_parts(*args.values(), 1.2, 0.75, 1.0, np.zeros((1, 1)))
    args["qids"] = np.array([0], np.int64)
    args["tfs"] = np.zeros(2, np.uint16)
    with pytest.raises(ValueError, match="tfs holds 2 items, expected 1"):
        _kernels.bm25_parts(*args.values(), 1.2, 0.75, 1.0, np.zeros((1, 1)))
    args["tfs"] = np.zeros(1, np.uint32)
    with pytest.raises(TypeError, match="tfs has the wrong item type"):
        _kernels.bm25_parts(*args.values(), 1.2, 0.75, 1.0, np.zeros((1, 1)))


def reference_presence(ords: np.ndarray, prev: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                       ids: np.ndarray, qids: np.ndarray, term_whole: np.ndarray,
                       term_part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """word_presence the slow, obvious way: a row holds a word when one of its terms does."""
    whole = np.zeros((ords.size, term_whole.shape[1]), bool)
    part = np.zeros_like(whole)
    for i, o in enumerate(ords):
        for row in [o, *([prev[i]] if prev.size else [])]:
            if not 0 <= row < lengths.size or lengths[row] <= 0:
                continue
            for term in ids[starts[row]:starts[row] + lengths[row]]:
                for q in np.flatnonzero(qids == term):
                    whole[i] |= term_whole[q]
                    part[i] |= term_part[q]
    return whole, part


@pytest.mark.parametrize("with_prev", [False, True])
def test_word_presence_marks_the_words_of_each_row_and_of_the_row_beside_it(with_prev: bool) -> None:
    rng = np.random.default_rng(5)
    docs, vocab, words = 80, 50, 7
    starts, lengths, ids = term_rows(rng, docs, vocab, 10, [2, 11])
    qids = np.array([3, 8, 21, 40, 49, 0], np.int64)
    term_whole = rng.random((qids.size, words)) < 0.3
    term_part = rng.random((qids.size, words)) < 0.2
    ords = np.array([0, 2, 5, 79, 80, -1, 5, 33, 11, 60], np.int64)  # 80 and -1: outside the counts
    prev = np.array([-1, 1, 4, 78, 3, 7, 90, -5, 10, 59], np.int64) if with_prev else np.zeros(0, np.int64)
    table = np.zeros(vocab, np.int32)
    whole, part = np.zeros((ords.size, words), bool), np.zeros((ords.size, words), bool)
    _kernels.word_presence(ords, prev, starts, lengths, ids, qids, term_whole, term_part, table, whole, part)
    expected_whole, expected_part = reference_presence(ords, prev, starts, lengths, ids, qids, term_whole, term_part)
    assert whole.tolist() == expected_whole.tolist() and part.tolist() == expected_part.tolist()
    assert whole.any() and part.any()
    assert not table.any()  # the scratch table is left as it was given


def reference_coverage(whole: np.ndarray, part: np.ndarray, weights: np.ndarray, total: float) -> list[float]:
    """word_coverage the slow, obvious way: per ordinal, its whole words' weights and half its other parts'
    weights, each summed word after word, over `total`."""
    out = []
    for w_row, p_row in zip(whole.tolist(), part.tolist()):
        held = half = 0.0
        for j, weight in enumerate(weights.tolist()):
            if w_row[j]:
                held += weight
            elif p_row[j]:
                half += weight
        out.append((held + 0.5 * half) / total)
    return out


@pytest.mark.parametrize("with_prev", [False, True])
def test_word_coverage_weighs_the_words_each_row_or_the_row_beside_it_holds(with_prev: bool) -> None:
    rng = np.random.default_rng(6)
    docs, vocab, words = 80, 50, 9
    starts, lengths, ids = term_rows(rng, docs, vocab, 10, [2, 11])
    qids = np.array([3, 8, 21, 40, 49, 0, 17], np.int64)
    term_whole = rng.random((qids.size, words)) < 0.3
    term_part = rng.random((qids.size, words)) < 0.3
    ords = np.array([0, 2, 5, 79, 80, -1, 5, 33, 11, 60, 7, 8], np.int64)
    prev = (np.array([-1, 1, 4, 78, 3, 7, 90, -5, 10, 59, 6, 7], np.int64) if with_prev
            else np.zeros(0, np.int64))
    weights = rng.random(words) * 5
    total = 0.0
    for weight in weights.tolist():  # (word after word)
        total += weight
    table = np.zeros(vocab, np.int32)
    out = np.full(ords.size, np.nan)
    _kernels.word_coverage(ords, prev, starts, lengths, ids, qids, term_whole, term_part, table, weights, out)
    whole, part = reference_presence(ords, prev, starts, lengths, ids, qids, term_whole, term_part)
    assert out.tolist() == reference_coverage(whole, part, weights, total)
    assert 0.0 < out.max() <= 1.0 and out.min() == 0.0  # (80 and -1 hold nothing)
    # numpy's product gives the same figures but for the order it adds them in.
    expected = (whole @ weights + 0.5 * (part & ~whole) @ weights) / total
    assert np.allclose(out, expected, rtol=1e-15, atol=0.0)
    assert not table.any()


def test_word_coverage_of_no_query_term_is_zero_and_refuses_mismatched_weights() -> None:
    one = np.zeros(1, np.int64)
    args = dict(ords=one, prev=np.zeros(0, np.int64), starts=one, lengths=np.ones(1, np.int32),
                ids=np.zeros(1, np.uint32), qids=np.zeros(0, np.int64), term_whole=np.zeros((0, 2), bool),
                term_part=np.zeros((0, 2), bool), table=np.zeros(5, np.int32))
    out = np.full(1, np.nan)
    _kernels.word_coverage(*args.values(), np.ones(2), out)
    assert out.tolist() == [0.0]
    args |= dict(qids=np.array([0], np.int64), term_whole=np.ones((1, 2), bool), term_part=np.zeros((1, 2), bool))
    _kernels.word_coverage(*args.values(), np.array([1.0, 3.0]), out)
    assert out.tolist() == [1.0]
    with pytest.raises(ValueError, match="weights holds 3 items, expected 2"):
        _kernels.word_coverage(*args.values(), np.ones(3), out)
    with pytest.raises(ValueError, match="out holds 2 items, expected 1"):
        _kernels.word_coverage(*args.values(), np.ones(2), np.zeros(2))
    with pytest.raises(ValueError, match="query term 0: id 5"):
        _kernels.word_coverage(*{**args, "qids": np.array([5], np.int64)}.values(), np.ones(2), out)


def test_word_presence_refuses_terms_outside_the_table_and_mismatched_arrays() -> None:
    one = np.zeros(1, np.int64)
    args = dict(ords=one, prev=np.zeros(0, np.int64), starts=one, lengths=np.ones(1, np.int32),
                ids=np.zeros(1, np.uint32), qids=np.array([5], np.int64), term_whole=np.ones((1, 2), bool),
                term_part=np.zeros((1, 2), bool), table=np.zeros(5, np.int32))
    outs = (np.zeros((1, 2), bool), np.zeros((1, 2), bool))
    with pytest.raises(ValueError, match="query term 0: id 5"):
        _kernels.word_presence(*args.values(), *outs)
    args["qids"] = np.array([0], np.int64)
    with pytest.raises(ValueError, match="prev holds 2 ordinals, not none or one per ordinal"):
        _kernels.word_presence(*{**args, "prev": np.zeros(2, np.int64)}.values(), *outs)
    with pytest.raises(ValueError, match="term_part is not one row of words per term"):
        _kernels.word_presence(*{**args, "term_part": np.zeros((1, 3), bool)}.values(), *outs)
    with pytest.raises(ValueError, match="whole is not one row of words per ordinal"):
        _kernels.word_presence(*args.values(), np.zeros((2, 2), bool), np.zeros((2, 2), bool))
    with pytest.raises(TypeError, match="term_whole has the wrong item type"):
        _kernels.word_presence(*{**args, "term_whole": np.ones((1, 2), np.float32)}.values(), *outs)
    with pytest.raises(ValueError, match="a row lies outside the arena"):
        _kernels.word_presence(*{**args, "lengths": np.array([3], np.int32)}.values(), *outs)


def reference_candidates(found: np.ndarray, live: np.ndarray, mask: np.ndarray | None,
                         follow: bool) -> tuple[list[int], list[bool]]:
    """context_candidates the slow, obvious way: the hits (-1: none) and, following, each usable one after
    a hit, ascending and each once; and whether the one before each is usable."""
    def usable(o: int) -> bool:
        return 0 <= o < live.size and bool(live[o]) and (mask is None or (o < mask.size and bool(mask[o])))
    cands = sorted({int(o) for o in found if o >= 0} | ({int(o) + 1 for o in found if o >= 0 and usable(int(o) + 1)}
                                                        if follow else set()))
    return cands, [usable(o - 1) for o in cands]


@pytest.mark.parametrize("follow", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_context_candidates_are_the_hits_and_the_usable_ones_after_them_ascending_each_once(
        follow: bool, masked: bool) -> None:
    rng = np.random.default_rng(7)
    for trial in range(60):
        size = int(rng.integers(1, 200))
        live = rng.random(size) < 0.8
        mask = (rng.random(int(rng.integers(0, size + 5))) < 0.7) if masked else None
        found = rng.integers(-1, size + 3, int(rng.integers(0, 60))).astype(np.int64)
        cands = np.zeros(2 * found.size, np.int64)
        has_prev = np.zeros(2 * found.size, bool)
        m = _kernels.context_candidates(found, live, mask, follow, cands, has_prev)
        expected, expected_prev = reference_candidates(found, live, mask, follow)
        assert cands[:m].tolist() == expected and has_prev[:m].tolist() == expected_prev


def test_context_candidates_refuses_outputs_too_small_for_the_hits_and_those_after_them() -> None:
    found = np.array([1, 2], np.int64)
    with pytest.raises(ValueError, match="cands holds 3 items, expected 4"):
        _kernels.context_candidates(found, np.ones(4, bool), None, True, np.zeros(3, np.int64), np.zeros(4, bool))
    with pytest.raises(ValueError, match="has_prev holds 3 items, expected 4"):
        _kernels.context_candidates(found, np.ones(4, bool), None, True, np.zeros(4, np.int64), np.zeros(3, bool))
