"""Which documents hold which query words, read from the term counts (what the v5 face scores coverage by)."""

from __future__ import annotations

import numpy as np

from engram_index.engine import keyword_query
from engram_index.engine.analyzer import query_words
from engram_index.engine.keyword import searchable_words
from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import Document


def test_holds_says_whole_words_stems_and_identifier_parts_per_document() -> None:
    docs = {0: Document("a", "", "The runners were running fast"), 1: Document("b", "", "see HttpServer logs"),
            2: Document("c", "", "nothing relevant here")}
    index = SpaceIndex(None, None, lambda ords: {o: docs[o] for o in ords if o in docs})
    index.apply(list(docs.items()), seq=1)
    words = searchable_words(query_words("run server HttpClient"))
    whole, part = index.keyword.holds(words, np.array([0, 1, 2], np.int64))
    assert [w.exact for w in words] == ["run", "server", "httpclient"]
    # "running" by its stem; HttpServer is indexed whole and by its parts, so it holds "server".
    assert whole.tolist() == [[True, False, False], [False, True, False], [False, False, False]]
    assert part[:, 2].tolist() == [False, True, False] and whole.dtype == part.dtype == np.bool_
    index.apply([(1, None)], seq=2)  # a deleted document holds nothing
    whole, part = index.keyword.holds(words, np.array([1], np.int64))
    assert not whole.any() and not part.any()


def test_holds_beside_a_row_are_what_either_row_holds_and_none_beside_holds_nothing_more() -> None:
    texts = ["The runners were running fast", "see HttpServer logs", "nothing relevant here", "a server ran"]
    docs = {i: Document(f"d{i}", "", t) for i, t in enumerate(texts)}
    index = SpaceIndex(None, None, lambda ords: {o: docs[o] for o in ords if o in docs})
    index.apply(list(docs.items()), seq=1)
    words = searchable_words(query_words("run server HttpClient"))
    ords = np.array([1, 2, 3, -1], np.int64)
    prev = np.array([0, -1, 2, -1], np.int64)  # -1: none beside; an ordinal of -1 holds nothing itself
    whole, part = index.keyword.holds(words, ords, prev)
    own_whole, own_part = index.keyword.holds(words, np.array([1, 2, 3], np.int64))
    before_whole, before_part = index.keyword.holds(words, np.array([0, 2], np.int64))
    assert whole[0].tolist() == (own_whole[0] | before_whole[0]).tolist() == [True, True, False]
    assert whole[1].tolist() == own_whole[1].tolist() and whole[2].tolist() == (own_whole[2] | before_whole[1]).tolist()
    assert part[0].tolist() == (own_part[0] | before_part[0]).tolist()
    assert not whole[3].any() and not part[3].any()


def test_holds_agree_with_the_term_counts_bm25_parts_on_random_queries() -> None:
    rng = np.random.default_rng(3)
    vocab = ["alpha", "beta", "gamma", "delta", "running", "runs", "HttpServer", "parseJSON", "json", "x1"]
    docs = {i: Document(f"d{i}", "", " ".join(rng.choice(vocab, int(rng.integers(1, 6)))))
            for i in range(40)}
    index = SpaceIndex(None, None, lambda ords: {o: docs[o] for o in ords if o in docs})
    index.apply(list(docs.items()), seq=1)
    for _ in range(25):
        words = searchable_words(query_words(" ".join(rng.choice([*vocab, "run", "server", "omega"], 3))))
        ords = rng.integers(-1, 42, 12).astype(np.int64)
        roles = keyword_query.word_columns_of(words)  # each word's term columns, as its BM25 adds them up
        inside = (ords >= 0) & (ords < 40)
        present = np.zeros((ords.size, len(roles.terms)), bool)
        present[inside] = index.keyword.counts.term_scores(roles.terms, ords[inside]) > 0
        whole, part = index.keyword.holds(words, ords)
        for j, (plain, stems, exacts, parts) in enumerate(roles.columns):
            assert whole[:, j].tolist() == present[:, np.concatenate([plain, stems, exacts])].any(axis=1).tolist()
            assert part[:, j].tolist() == present[:, parts].any(axis=1).tolist()


def test_coverage_weighs_what_holds_says_each_row_or_the_row_beside_it_holds_word_after_word() -> None:
    rng = np.random.default_rng(4)
    vocab = ["alpha", "beta", "gamma", "delta", "running", "runs", "HttpServer", "parseJSON", "json", "x1"]
    docs = {i: Document(f"d{i}", "", " ".join(rng.choice(vocab, int(rng.integers(1, 6))))) for i in range(40)}
    index = SpaceIndex(None, None, lambda ords: {o: docs[o] for o in ords if o in docs})
    index.apply(list(docs.items()), seq=1)
    for trial in range(25):
        words = searchable_words(query_words(" ".join(rng.choice([*vocab, "run", "server", "omega"], 4))))
        ords = rng.integers(-1, 42, 12).astype(np.int64)
        prev = rng.integers(-1, 42, 12).astype(np.int64) if trial % 2 else None
        weights = rng.random(len(words)) * 3
        whole, part = index.keyword.holds(words, ords, prev)
        coverage = index.keyword.coverage(words, ords, prev, weights)
        expected = []
        for w_row, p_row in zip(whole.tolist(), part.tolist()):
            held = sum((weights[j] for j in range(len(words)) if w_row[j]), 0.0)  # (in the words' order)
            half = sum((weights[j] for j in range(len(words)) if p_row[j] and not w_row[j]), 0.0)
            expected.append((held + 0.5 * half) / sum(weights.tolist(), 0.0))
        assert coverage.tolist() == expected
    # Without weights (or with none above 0) every word weighs 1; with no word there is nothing to cover.
    ords = np.array([0, 1, 2], np.int64)
    words = searchable_words(query_words("alpha beta"))
    whole, part = index.keyword.holds(words, ords)
    unweighted = ((whole.sum(axis=1) + 0.5 * (part & ~whole).sum(axis=1)) / 2).tolist()
    assert index.keyword.coverage(words, ords, None, None).tolist() == unweighted
    assert index.keyword.coverage(words, ords, None, np.zeros(2)).tolist() == unweighted
    assert index.keyword.coverage([], ords, None, None).tolist() == [0.0, 0.0, 0.0]


def test_a_document_holding_every_word_covers_exactly_one_whatever_the_weights() -> None:
    # numpy's product and sum add the weights in orders of their own: a quarter of random weightings made
    # such a document 0.9999999999999999 or 1.0000000000000002, and the threshold judged it by that.
    docs = {0: Document("a", "", "alpha beta gamma delta epsilon zeta eta theta")}
    index = SpaceIndex(None, None, lambda ords: {o: docs[o] for o in ords if o in docs})
    index.apply(list(docs.items()), seq=1)
    words = searchable_words(query_words("alpha beta gamma delta epsilon zeta eta theta"))
    rng = np.random.default_rng(8)
    for _ in range(200):
        k = int(rng.integers(1, len(words) + 1))
        weights = rng.random(k) * 6
        assert index.keyword.coverage(words[:k], np.array([0], np.int64), None, weights).tolist() == [1.0]
