"""Term counts: the forward index behind every BM25 score the engine reports."""

import math
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from engram_index.engine.termcounts import TermCounts

WORDS = [f"w{i}" for i in range(40)]


def reference_bm25(docs: dict[int, list[str]], query: list[str], ord_: int) -> float:
    """BM25 as the module doc states it, computed the slow way."""
    if ord_ not in docs:
        return 0.0
    live = len(docs)
    average = sum(len(d) for d in docs.values()) / live
    doc = Counter(docs[ord_])
    score = 0.0
    for term, times in Counter(query).items():
        df = sum(1 for d in docs.values() if term in d)
        if not df or term not in doc:
            continue
        idf = math.log(1 + (live - df + 0.5) / (df + 0.5))
        tf = doc[term]
        score += times * idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(docs[ord_]) / average))
    return score


def random_docs(rng: random.Random, n: int, first: int = 0) -> dict[int, list[str]]:
    return {first + i: [rng.choice(WORDS[: rng.randint(3, 40)]) for _ in range(rng.randint(0, 30))] for i in range(n)}


def check(counts: TermCounts, docs: dict[int, list[str]], rng: random.Random, top: int) -> None:
    for _ in range(20):
        query = [rng.choice(WORDS) for _ in range(rng.randint(1, 6))] + ["never-seen"]
        ords = np.array(rng.sample(range(top + 5), 25))
        got = counts.bm25(query, ords)
        want = [reference_bm25(docs, query, int(o)) for o in ords]
        assert got.tolist() == pytest.approx(want, rel=1e-5, abs=1e-6)


def test_scores_follow_the_bm25_formula_with_exact_lengths() -> None:
    rng = random.Random(1)
    docs = random_docs(rng, 200)
    counts = TermCounts()
    counts.put_many(docs.items())
    assert len(counts) == 200
    check(counts, docs, rng, 200)


def test_rewrites_and_removals_keep_every_statistic_current() -> None:
    rng = random.Random(2)
    docs = random_docs(rng, 100)
    counts = TermCounts()
    counts.put_many(docs.items())
    for round_ in range(30):  # enough rewrites that the arena is compacted on the way
        changed = random_docs(rng, 40, first=rng.randint(0, 80))
        counts.put_many(changed.items())
        docs.update(changed)
        for ord_ in rng.sample(sorted(docs), 5):
            counts.remove(ord_)
            del docs[ord_]
    assert len(counts) == len(docs)
    check(counts, docs, rng, 130)


def test_the_last_of_repeated_ordinals_in_one_batch_wins() -> None:
    counts = TermCounts()
    counts.put_many([(3, ["a", "b"]), (3, ["c"])])
    assert counts.terms_of(3) == {"c": 1} and len(counts) == 1
    assert counts.bm25(["a"], [3]).tolist() == [0.0]


def test_none_in_a_batch_forgets_the_ordinal_and_the_last_entry_wins() -> None:
    counts = TermCounts()
    counts.put_many([(0, ["a"]), (1, ["a", "b"])])
    counts.put_many([(1, None), (2, ["b"]), (2, None), (0, None), (0, ["c"]), (9, None)])
    assert len(counts) == 1 and counts.terms_of(0) == {"c": 1}
    assert counts.terms_of(1) == {} and counts.terms_of(2) == {}
    assert counts.bm25(["a"], [0, 1, 2]).tolist() == [0.0, 0.0, 0.0]


def test_a_repeated_query_term_counts_again_and_unknown_terms_count_nothing() -> None:
    counts = TermCounts()
    counts.put_many([(0, ["x", "y"]), (1, ["y"]), (2, ["z"])])
    once, twice = counts.bm25(["x"], [0])[0], counts.bm25(["x", "x", "unknown"], [0])[0]
    assert once > 0 and twice == pytest.approx(2 * once)


def test_ordinals_without_a_document_score_zero() -> None:
    counts = TermCounts()
    counts.put_many([(5, ["x"])])
    assert counts.bm25(["x"], [-1, 0, 5, 6, 10_000]).tolist()[:2] == [0.0, 0.0]
    assert counts.bm25(["x"], [5, 6, 10_000]).tolist()[1:] == [0.0, 0.0]


def test_an_empty_document_counts_as_a_document_of_length_zero() -> None:
    counts = TermCounts()
    counts.put_many([(0, []), (1, ["x"])])
    assert len(counts) == 2 and counts.terms_of(0) == {}
    assert counts.bm25(["x"], [0, 1]).tolist()[0] == 0.0


@pytest.mark.parametrize("shared", [False, True])
def test_a_saved_state_opens_with_its_sequence_and_the_same_scores(tmp_path: Path, shared: bool) -> None:
    rng = random.Random(3)
    docs = random_docs(rng, 150)
    counts = TermCounts()
    counts.put_many(docs.items())
    counts.put_many(random_docs(rng, 20).items())  # garbage in the arena, dropped by the save
    docs.update({})
    counts.save(tmp_path / "counts", 42)
    opened = TermCounts.open(tmp_path / "counts", shared=shared)
    assert opened is not None
    again, seq = opened
    assert seq == 42 and len(again) == len(counts) and not again.changed
    query, ords = ["w1", "w2", "w3"], np.arange(170)
    assert again.bm25(query, ords).tolist() == counts.bm25(query, ords).tolist()


def test_writing_after_a_shared_open_leaves_the_files_as_they_were(tmp_path: Path) -> None:
    counts = TermCounts()
    counts.put_many([(0, ["a"]), (1, ["b"])])
    counts.save(tmp_path / "c", 1)
    before = {p.name: p.read_bytes() for p in (tmp_path / "c").iterdir()}
    opened = TermCounts.open(tmp_path / "c", shared=True)
    assert opened is not None
    mapped = opened[0]
    mapped.put_many([(0, ["b"]), (7, ["a", "a"])])
    mapped.remove(1)
    assert mapped.terms_of(0) == {"b": 1} and mapped.terms_of(7) == {"a": 2} and len(mapped) == 2
    assert {p.name: p.read_bytes() for p in (tmp_path / "c").iterdir()} == before


def test_a_missing_torn_or_foreign_save_does_not_open(tmp_path: Path) -> None:
    assert TermCounts.open(tmp_path / "none") is None
    counts = TermCounts()
    counts.put_many([(0, ["a"])])
    counts.save(tmp_path / "c", 1)
    (tmp_path / "c" / "df.npy").write_bytes(b"torn")
    assert TermCounts.open(tmp_path / "c") is None
    counts.save(tmp_path / "d", 1)
    meta = tmp_path / "d" / "meta.json"
    meta.write_text(meta.read_text().replace('"version": 1', '"version": 99'))
    assert TermCounts.open(tmp_path / "d") is None


def test_clear_forgets_everything() -> None:
    counts = TermCounts()
    counts.put_many([(0, ["a"])])
    counts.clear()
    assert len(counts) == 0 and counts.vocabulary == 0 and counts.changed


def test_every_idf_is_the_c_librarys_log1p_bit_for_bit_whatever_numpys_vectorised_loops_give() -> None:
    # numpy's log1p takes a vectorised path on some CPUs (AVX-512) that differs from the C library's in
    # the last bit for some inputs: scores would then differ between CPUs.
    rng = np.random.default_rng(17)
    vocabulary = [f"t{i}" for i in range(300)]
    rows = [vocabulary] + [[t for i, t in enumerate(vocabulary) if rng.random() < (i + 1) / 301] for _ in range(399)]
    counts = TermCounts()
    counts.put_many(enumerate(rows))
    live = float(len(rows))

    def want(term: str) -> float:
        df = float(sum(term in row for row in rows))
        return math.log1p((live - df + 0.5) / (df + 0.5))

    ids = np.array([counts._vocab[t] for t in vocabulary], np.int64)
    assert counts._idf(ids).tolist() == [want(t) for t in vocabulary]
    assert counts.idf(vocabulary).tolist() == [want(t) for t in vocabulary]
