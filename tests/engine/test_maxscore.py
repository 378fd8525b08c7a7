"""MaxScore over the postings: the keyword top-k stays exact while the common words' holders are skipped."""

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from engram_index.engine import _kernels
from engram_index.engine.search import SpaceIndex
from engram_index.engine.termcounts import K1, B, QueryPlan, TermCounts
from engram_index.engine.types import Document, Filters, SearchRequest
from tests.engine.test_keyword_exact import brute_force

MARGIN = 1e-6


class Docs:
    """An in-memory document source standing in for the record store."""

    def __init__(self) -> None:
        self.docs: dict[int, Document] = {}

    def fetch(self, ords: list[int]) -> dict[int, Document]:
        return {o: self.docs[o] for o in ords if o in self.docs}


def pruning_texts() -> list[tuple[str, tuple[str, ...]]]:
    """Every text holds the common words; a few hold rare ones, some texts repeated (exact ties)."""
    rows: list[tuple[str, tuple[str, ...]]] = []
    for i in range(1500):
        extra = " ".join(["common"] * (1 + i % 4))
        rare = ""
        if i % 30 == 0:
            rare = "zebra"
        elif i % 45 == 1:
            rare = "zebras quagga"
        elif i % 70 == 2:
            rare = "quagga_stripe"
        tag = ("even",) if i % 2 == 0 else ("odd",)
        rows.append((f"{rare} {extra} usual words here note {i % 97}", tag))
    for i in range(12):
        rows.append(("zebra common usual", ("tie",)))  # equal scores: insertion order decides
    return rows


@pytest.fixture
def space() -> Iterator[tuple[SpaceIndex, Docs]]:
    docs = Docs()
    index = SpaceIndex(None, None, docs.fetch)
    rows = pruning_texts()
    order = np.random.default_rng(11).permutation(len(rows))
    changes = []
    for ord_, i in enumerate(order.tolist()):
        text, tags = rows[i]
        doc = Document(id=f"m{ord_}", author="did:plc:a", text=text, tags=tags, created_ms=1000 - ord_)
        docs.docs[ord_] = doc
        changes.append((ord_, doc))
    index.apply(changes, seq=1)
    index.commit()
    yield index, docs


def found(index: SpaceIndex, q: str, limit: int, filters: Filters = Filters()) -> list[tuple[int, float]]:
    """The keyword search's (ordinal, BM25) list."""
    result = index.search(SearchRequest(mode="keyword", q=q, limit=limit, filters=filters))
    by_id = index.columns._by_id
    return [(by_id[h.document.id], float(h.bm25 or 0.0)) for h in result.hits]


@pytest.mark.parametrize("q", ["zebra common", "zebras usual common", "quagga_stripe common words", "zebra quagga here"])
@pytest.mark.parametrize("limit", [1, 3, 10, 25, 60])
def test_pruned_keyword_search_is_the_exact_top_k_of_a_brute_force_scoring(space, q: str, limit: int, c_loops: str) -> None:
    index, _ = space
    assert found(index, q, limit) == brute_force(index, q, limit)


def test_pruning_kicks_in_when_the_common_words_cannot_lift_a_document_into_the_top_k(space, c_loops: str) -> None:
    index, _ = space
    got = found(index, "zebra common usual", 10)
    assert index.keyword.counts.skipped > 0  # the common words' postings were not all read
    assert got == brute_force(index, "zebra common usual", 10)
    # Ties among the twelve equal texts go to the earlier inserted, pruned or not.
    assert [o for o, _ in got] == [o for o, _ in brute_force(index, "zebra common usual", 10)]


def test_nothing_is_pruned_when_every_document_could_still_reach_the_top_k(space) -> None:
    index, _ = space
    assert found(index, "common usual", 2000) == brute_force(index, "common usual", 2000)
    assert index.keyword.counts.skipped == 0


@pytest.mark.parametrize("limit", [1, 10, 40])
def test_the_pruned_top_k_holds_under_filters_and_unsaved_writes(space, limit: int) -> None:
    index, docs = space
    even = {o for o, d in docs.docs.items() if "even" in d.tags}
    assert found(index, "zebra common", limit, Filters(tags=("even",))) == brute_force(index, "zebra common", limit, even)
    base = max(docs.docs) + 1
    changes: list[tuple[int, Document | None]] = []
    for i in range(6):
        doc = Document(id=f"new{i}", author="did:plc:a", text="zebra zebra common", created_ms=5)
        docs.docs[base + i] = doc
        changes.append((base + i, doc))
    for o, _ in brute_force(index, "zebra common", 3):
        del docs.docs[o]
        changes.append((o, None))
    index.apply(changes, seq=2)  # no commit: the new ones are stale in the postings
    assert found(index, "zebra common", limit) == brute_force(index, "zebra common", limit)


def _random_counts(rng: np.random.Generator, docs: int) -> tuple[TermCounts, list[str]]:
    """A corpus whose terms follow a Zipf-like law: a few in most documents, most in few."""
    vocabulary = [f"w{i}" for i in range(60)]
    weights = 1.0 / np.arange(1, 61) ** 1.1
    weights /= weights.sum()
    counts = TermCounts()
    rows = []
    for o in range(docs):
        if o % 37 == 5:
            rows.append((o, None))
            continue
        size = int(rng.integers(1, 30))
        rows.append((o, [vocabulary[j] for j in rng.choice(60, size, p=weights)]))
    counts.put_many(rows)
    return counts, vocabulary


def _plan(rng: np.random.Generator, counts: TermCounts, vocabulary: list[str]) -> dict[str, np.ndarray]:
    """A random query plan: plain words, parts at 0.6, and stems (kind 1) with their exact forms (kind 2)."""
    tids, kinds, groups, weights = [], [], [], []
    group = 0
    for _ in range(int(rng.integers(1, 7))):
        pick = [int(x) for x in rng.choice(len(vocabulary), 2, replace=False)]
        if rng.random() < 0.4:
            group += 1
            tids += pick
            kinds += [1, 2]
            groups += [group, group]
            weights += [1.0, 1.0]
        else:
            tids.append(pick[0])
            kinds.append(0)
            groups.append(0)
            weights.append(0.6 if rng.random() < 0.3 else 1.0)
    tid = np.array([counts._vocab.get(vocabulary[t], -1) for t in tids], np.int64)
    if rng.random() < 0.2:
        tid[0] = -1  # a term no document holds
    return dict(tids=tid, kinds=np.array(kinds, np.int64), groups=np.array(groups, np.int64),
                weights=np.array(weights), idf=np.array([float(x) for x in rng.uniform(0.05, 4.0, len(tids))]))


@pytest.mark.parametrize("seed", range(12))
def test_the_pruned_kernel_keeps_what_the_full_scoring_selects_for_any_k(seed: int, c_loops: str) -> None:
    rng = np.random.default_rng(seed)
    counts, vocabulary = _random_counts(rng, int(rng.integers(200, 3000)))
    postings, _, _ = counts.inverted()
    size = counts._lengths.size
    for trial in range(25):
        plan = _plan(rng, counts, vocabulary)
        k = int(rng.choice([1, 2, 5, 10, 50, 200]))
        stale = rng.random(size) < 0.02 if trial % 3 == 0 else None
        allowed = rng.random(size) < 0.7 if trial % 4 == 1 else None
        common = dict(k1=K1, b=B, average=counts._tokens / counts._live, stale=stale, allowed=allowed)
        outs = []
        for pruned in (False, True):
            acc, mark = np.zeros(size), np.zeros(size, np.int32)
            touched, values = np.empty(size, np.int64), np.empty(size)
            if pruned:
                n, skipped, _ = _kernels.postings_top(
                    postings.starts, postings.ords, postings.tfs, counts._doc_lengths, postings.max_part,
                    postings.average, plan["tids"], plan["kinds"], plan["groups"], plan["weights"], plan["idf"],
                    common["k1"], common["b"], common["average"], stale, allowed, k, MARGIN, acc, mark, touched, values)
                assert skipped >= 0
            else:
                n = _kernels.postings_scores(
                    postings.starts, postings.ords, postings.tfs, counts._doc_lengths, plan["tids"], plan["kinds"],
                    plan["groups"], plan["weights"], plan["idf"], common["k1"], common["b"], common["average"],
                    stale, allowed, acc, mark, touched, values)
            assert not acc.any() and not mark.any()  # the scratch is left zeroed
            ords, vals = touched[:n].copy(), values[:n].copy()
            score = dict(zip(ords.tolist(), vals.tolist()))
            kept = _kernels.select_top(ords, vals, k, MARGIN)
            outs.append({o: score[o] for o in ords[:kept].tolist()})
        full, pruned_out = outs
        assert full.keys() == pruned_out.keys()
        for o, value in full.items():
            assert pruned_out[o] == pytest.approx(value, rel=1e-12)


def _two_documents_args() -> tuple[list[Any], int]:
    """The pruned kernel's arguments over two small documents (term "a" asked), and their entries' count."""
    counts = TermCounts()
    counts.put_many([(0, ["a", "b"]), (1, ["a"])])
    postings, _, _ = counts.inverted()
    args = [postings.starts, postings.ords, postings.tfs, counts._doc_lengths, postings.max_part, postings.average,
            np.array([0], np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64), np.ones(1), np.ones(1),
            K1, B, 1.5, None, None, 1, MARGIN, np.zeros(2), np.zeros(2, np.int32), np.empty(2, np.int64), np.empty(2)]
    return args, int(postings.ords.size)


def test_the_pruned_kernel_refuses_a_margin_or_group_out_of_range() -> None:
    args, entries = _two_documents_args()
    assert _kernels.postings_top(*args)[0] == 2
    bad_margin = list(args)
    bad_margin[17] = 1.5
    with pytest.raises(ValueError, match="margin"):
        _kernels.postings_top(*bad_margin)
    bad_group = list(args)
    bad_group[8] = np.array([-3], np.int64)
    with pytest.raises(ValueError, match="group"):
        _kernels.postings_top(*bad_group)
    short = list(args)
    short[4] = np.zeros(0)  # a bound per term is needed
    with pytest.raises(ValueError):
        _kernels.postings_top(*short)


def test_the_bounds_are_each_terms_largest_part_over_its_holders() -> None:
    counts = TermCounts()
    counts.put_many([(0, ["a", "a", "b"]), (1, ["a"]), (2, ["b", "c", "c", "c", "d"])])
    postings, _, _ = counts.inverted()
    assert postings.average == 3.0
    vocab = counts._vocab

    def part(tf: int, length: int) -> float:
        return tf / (tf + K1 * (1 - B + B * length / 3.0))

    want = {"a": max(part(2, 3), part(1, 1)), "b": max(part(1, 3), part(1, 5)), "c": part(3, 5), "d": part(1, 5)}
    for term, value in want.items():
        assert postings.max_part[vocab[term]] == pytest.approx(value, rel=1e-15)


def test_the_top_k_stays_exact_when_the_average_length_grew_since_the_inversion() -> None:
    counts = TermCounts()
    rows = [(o, ["common"] + (["rare"] if o % 40 == 0 else []) + ["pad"] * (o % 5)) for o in range(2000)]
    counts.put_many(rows)
    counts.inverted()
    # Longer documents written since: the average grows, the old bounds must widen with it.
    counts.put_many([(2000 + i, ["pad"] * 300) for i in range(100)])
    plan = QueryPlan([("rare", 0, 0, 1.0), ("common", 0, 0, 1.0)])
    ords, values, stale = counts.matches(plan, None, 10, MARGIN)
    full, full_values, _ = counts.matches(plan, None)
    kept = full.copy()
    n = _kernels.select_top(kept, full_values, 10, MARGIN)
    want = set(kept[:n].tolist())
    got = ords.copy()
    m = _kernels.select_top(got, values, 10, MARGIN)
    assert set(got[:m].tolist()) == want and stale.size == 100


def _pass(counts: TermCounts, plan: dict[str, np.ndarray], k: int, stale: np.ndarray | None,
          allowed: np.ndarray | None, lengths: np.ndarray | None) -> tuple[list[int], list[float], int]:
    """postings_top's documents met, their sums and its skipped count, with the entries' lengths or without."""
    postings, _, _ = counts.inverted()
    size = counts._lengths.size
    acc, mark = np.zeros(size), np.zeros(size, np.int32)
    touched, values = np.empty(size, np.int64), np.empty(size)
    n, skipped, _ = _kernels.postings_top(
        postings.starts, postings.ords, postings.tfs, counts._doc_lengths, postings.max_part, postings.average,
        plan["tids"], plan["kinds"], plan["groups"], plan["weights"], plan["idf"], K1, B,
        counts._tokens / counts._live, stale, allowed, k, MARGIN, acc, mark, touched, values, lengths)
    assert not acc.any() and not mark.any()
    return touched[:n].tolist(), values[:n].tolist(), skipped


@pytest.mark.parametrize("seed", range(6))
def test_the_entries_lengths_give_the_sums_the_holders_lengths_give(seed: int, c_loops: str) -> None:
    # The same documents in the same order with the same float64 sums, pruned or not, masked or not.
    rng = np.random.default_rng(200 + seed)
    counts, vocabulary = _random_counts(rng, int(rng.integers(300, 3000)))
    postings, _, _ = counts.inverted()
    assert postings.lengths is not None
    assert postings.lengths.tolist() == counts._doc_lengths[postings.ords].tolist()
    size = counts._lengths.size
    for trial in range(20):
        plan = _plan(rng, counts, vocabulary)
        k = int(rng.choice([0, 1, 5, 10, 50, 200]))
        stale = rng.random(size) < 0.02 if trial % 5 == 0 else None
        allowed = rng.random(size) < 0.7 if trial % 4 == 1 else None
        assert (_pass(counts, plan, k, stale, allowed, postings.lengths)
                == _pass(counts, plan, k, stale, allowed, None))


def test_the_entries_lengths_are_left_out_past_16_bits_and_the_top_k_stays_exact() -> None:
    counts = TermCounts()
    counts.put_many([(0, ["rare"] + ["pad"] * 70_000)] + [(o, ["rare", "common"] * (o % 3 + 1)) for o in range(1, 50)])
    postings, _, _ = counts.inverted()
    assert postings.lengths is None  # the pass reads the holders' own lengths
    plan = QueryPlan([("rare", 0, 0, 1.0), ("common", 0, 0, 1.0)])
    ords, values, _ = counts.matches(plan, None, 5, MARGIN)
    full, full_values, _ = counts.matches(plan, None)
    n, m = _kernels.select_top(ords, values, 5, MARGIN), _kernels.select_top(full, full_values, 5, MARGIN)
    assert set(ords[:n].tolist()) == set(full[:m].tolist())


def test_the_pruned_kernel_refuses_entries_lengths_of_another_size() -> None:
    args, entries = _two_documents_args()
    with pytest.raises(ValueError):
        _kernels.postings_top(*args, np.zeros(entries + 1, np.uint16))
    with pytest.raises(TypeError):
        _kernels.postings_top(*args, np.zeros(entries, np.int32))
