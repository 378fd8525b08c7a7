"""A search whose vector comes later (SpaceIndex.start): its keyword pass first, answers bit for bit as one search."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram_index.engine import keyword_pass
from engram_index.engine.analyzer import query_words
from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import Document, Filters, SearchRequest

DIMS = 16
# Plain words, stems that inflect, identifiers with parts, and rare words a few documents hold.
COMMON = ["river", "stone", "light", "paper", "garden", "window", "market", "signal", "engine", "forest"]
INFLECTED = ["running", "runs", "runner", "walked", "walking", "walks"]
IDENTIFIERS = ["http_server", "HTTPServer", "parse_json", "jsonParser", "data_store"]
RARE = ["zebra", "quagga", "okapi", "narwhal"]
STOP = ["the", "a", "of", "and"]
VOCAB = COMMON + INFLECTED + IDENTIFIERS + RARE + STOP
TAGS = ["red", "green", "blue"]
N_DOCS = 700  # past the 200 candidates a side, so that MaxScore prunes and the vector pool cuts


def vector(rng: np.random.Generator) -> bytes | None:
    """A random float16 vector, or none (about one document in twelve has none)."""
    if rng.random() < 0.08:
        return None
    return rng.standard_normal(DIMS).astype("<f2").tobytes()


def document(rng: np.random.Generator, i: int) -> Document:
    """A document of common words with a few inflections, identifiers and rare words, repeats included."""
    words = list(rng.choice(COMMON, int(rng.integers(2, 12)), p=np.linspace(2, 1, len(COMMON)) / np.linspace(
        2, 1, len(COMMON)).sum()))
    if rng.random() < 0.4:
        words += list(rng.choice(INFLECTED, int(rng.integers(1, 3))))
    if rng.random() < 0.25:
        words.append(str(rng.choice(IDENTIFIERS)))
    if rng.random() < 0.04:
        words.append(str(rng.choice(RARE)))
    words += list(rng.choice(STOP, int(rng.integers(0, 3))))
    rng.shuffle(words)
    tags = tuple(sorted(set(rng.choice(TAGS, int(rng.integers(0, 3))).tolist())))
    return Document(id=f"d{i}", author="did:plc:a", text=" ".join(words), tags=tags, created_ms=i,
                    vector=vector(rng))


class Docs:
    """An in-memory document source standing in for the record store."""

    def __init__(self) -> None:
        self.docs: dict[int, Document] = {}

    def fetch(self, ords: list[int]) -> dict[int, Document]:
        return {o: self.docs[o] for o in ords if o in self.docs}


def build(seed: int = 5) -> tuple[SpaceIndex, Docs]:
    """A space with committed documents, deletions, and writes since its postings were inverted."""
    rng = np.random.default_rng(seed)
    docs = Docs()
    index = SpaceIndex(None, DIMS, docs.fetch)
    changes = []
    for i in range(N_DOCS):
        docs.docs[i] = document(rng, i)
        changes.append((i, docs.docs[i]))
    index.apply(changes, seq=1)
    index.commit()
    index.search(SearchRequest("keyword", q="river", limit=5))  # the postings are inverted now
    later: list[tuple[int, Document | None]] = [(i, None) for i in range(0, N_DOCS, 37)]
    for i in range(N_DOCS, N_DOCS + 30):  # written since: scored from their rows (stale in the postings)
        docs.docs[i] = document(rng, i)
        later.append((i, docs.docs[i]))
    for o, _ in later[: N_DOCS // 37 + 1]:
        docs.docs.pop(o, None)
    index.apply(later, seq=2)
    return index, docs


@pytest.fixture(scope="module")
def space() -> tuple[SpaceIndex, Docs]:
    return build()


def future_of(value: object) -> Future:
    """A Future already holding `value`."""
    done: Future = Future()
    done.set_result(value)
    return done


def answer(result) -> list[tuple]:
    """Everything a hit carries that a search computes, exactly (floats as their bits)."""
    return [(h.document.id, repr(h.score), repr(h.similarity), repr(h.bm25), h.vector_rank, h.keyword_rank,
             h.fusion, h.terms, h.snippet) for h in result.hits] + [result.mode, result.approximate]


FILTERS = st.sampled_from([
    Filters(), Filters(tags=("red",)), Filters(none_tags=("blue",)), Filters(any_tags=(("red", "green"),)),
    Filters(since_ms=100, until_ms=400), Filters(ids=frozenset({"d3"})), Filters(ids=frozenset({"d3", "d705"})),
    Filters(ids=frozenset({"d1", "d2", "d5", "d8", "d13"})), Filters(tags=("nothing-has-this",)),
])
QUERIES = st.one_of(
    st.lists(st.sampled_from(VOCAB), min_size=1, max_size=6).map(" ".join),
    # Nine or more words of one kind: a row of one call of one row is summed pairwise (numpy's way).
    st.permutations(COMMON).map(lambda ws: " ".join(ws[:9])),
    st.sampled_from(["zebra", "quagga okapi", "the of", "nothing matches this", "narwhal river stone light paper "
                     "garden window market signal engine forest"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(q=QUERIES, limit=st.integers(1, 80), fusion=st.sampled_from(["convex", "rrf"]), filters=FILTERS,
       explain=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_a_search_whose_vector_comes_later_answers_as_one_search_bit_for_bit(
        space, c_loops: str, q: str, limit: int, fusion: str, filters: Filters, explain: bool, seed: int) -> None:
    index, _ = space
    query = np.random.default_rng(seed).standard_normal(DIMS).astype(np.float32)
    req = SearchRequest("hybrid", q=q, vector=query, limit=limit, fusion=fusion, filters=filters, explain=explain)
    later = SearchRequest("hybrid", q=q, vector=future_of(query), limit=limit, fusion=fusion, filters=filters,
                          explain=explain)
    assert answer(index.start(later).finish()) == answer(index.search(req))


@settings(max_examples=40, deadline=None)
@given(q=QUERIES, k=st.integers(0, 260), filters=FILTERS, candidates=st.lists(st.integers(-3, 760), max_size=5),
       more=st.integers(0, 250))
def test_the_keyword_pass_and_its_finish_are_exact_top_and_score_bit_for_bit(
        space, q: str, k: int, filters: Filters, candidates: list[int], more: int) -> None:
    index, _ = space
    words = query_words(q)
    mask = index.columns.mask(filters)
    cands = np.array(candidates + list(range(0, 3 * more, 3)), np.int64)
    one = index.keyword.exact_top_and_score(words, k, mask, cands)
    two = keyword_pass.finish(index.keyword, keyword_pass.keyword_pass(index.keyword, words, k, mask), cands)
    assert [a.dtype for a in two] == [a.dtype for a in one]
    assert [a.tobytes() for a in two] == [a.tobytes() for a in one]


@pytest.fixture
def fresh() -> Iterator[tuple[SpaceIndex, Docs]]:
    yield build(seed=9)


def test_writes_between_the_keyword_pass_and_the_vector_give_the_answer_of_a_search_after_them(fresh) -> None:
    index, docs = fresh
    query = np.random.default_rng(3).standard_normal(DIMS).astype(np.float32)
    vector_later: Future = Future()
    started = index.start(SearchRequest("hybrid", q="zebra river", vector=vector_later, limit=20, explain=False))
    rng = np.random.default_rng(4)
    writes: list[tuple[int, Document | None]] = [(o, None) for o in range(1, 40)]
    for i in range(800, 830):
        doc = document(rng, i)
        docs.docs[i] = Document(doc.id, doc.author, "zebra zebra river", doc.tags, created_ms=doc.created_ms,
                                vector=doc.vector)
        writes.append((i, docs.docs[i]))
    index.apply(writes, seq=3)
    vector_later.set_result(query)
    got = started.finish()
    assert answer(got) == answer(index.search(SearchRequest("hybrid", q="zebra river", vector=query, limit=20,
                                                            explain=False)))
    assert {h.document.id for h in got.hits} & {f"d{i}" for i in range(800, 830)}  # the new ones are found


def test_a_started_search_waits_for_its_vector_without_holding_off_writes(fresh) -> None:
    index, _ = fresh
    vector_later: Future = Future()
    started = index.start(SearchRequest("hybrid", q="river", vector=vector_later, limit=5))
    wrote = threading.Event()
    writer = threading.Thread(target=lambda: (index.apply([(3, None)], seq=3), wrote.set()))
    writer.start()
    assert wrote.wait(10)  # (a held read lock would keep the writer waiting for the vector)
    writer.join()
    vector_later.set_result(np.ones(DIMS, np.float32))
    assert "d3" not in [h.document.id for h in started.finish().hits]


def test_a_vector_that_fails_fails_the_search_when_it_finishes(space) -> None:
    index, _ = space
    failed: Future = Future()
    failed.set_exception(RuntimeError("the embedder is busy"))
    started = index.start(SearchRequest("hybrid", q="river", vector=failed, limit=5))
    with pytest.raises(RuntimeError, match="busy"):
        started.finish()


@pytest.mark.parametrize("mode,q", [("vector", None), ("vector", "river"), ("hybrid", None), ("keyword", "river")])
def test_other_searches_with_a_later_vector_run_whole_when_they_finish(space, mode: str, q: str | None) -> None:
    index, _ = space
    query = np.random.default_rng(8).standard_normal(DIMS).astype(np.float32)
    got = index.start(SearchRequest(mode, q=q, vector=future_of(query), limit=12)).finish()
    assert answer(got) == answer(index.search(SearchRequest(mode, q=q, vector=query, limit=12)))


def test_an_explained_search_without_documents_is_refused_when_it_starts(space) -> None:
    index, _ = space
    with pytest.raises(ValueError, match="documents=False"):
        index.start(SearchRequest("hybrid", q="river", vector=future_of(np.ones(DIMS)), explain=True, documents=False))


def test_a_lone_row_is_summed_as_in_the_one_call_of_several_rows_a_search_makes(space, monkeypatch) -> None:
    # numpy sums a row of one row pairwise, a row of several column by column: with these eight parts
    # the two differ in float32 (1 + 2^-23 or 1), and each part must come out as in exact_top_and_score.
    index, _ = space
    parts = np.array([1.0, 2.0**-24, 0.0, 0.0, 2.0**-54, 2.0**-54, 2.0**-54, 2.0**-54])

    def term_scores(terms, ords):  # the parts at the words' stems (each word's own column), for held ordinals
        ords = np.asarray(ords)
        out = np.zeros((ords.size, len(terms)))
        stems = [i for i, term in enumerate(terms) if term.startswith("~")]
        out[np.ix_(ords >= 0, stems)] = parts
        return out

    monkeypatch.setattr(index.keyword.counts, "term_scores", term_scores)
    monkeypatch.setattr(index.keyword, "top_rows", lambda query, k, allowed: np.array([5], np.int64))
    words = query_words(" ".join(["river", "stone", "light", "paper", "garden", "window", "market", "signal"]))
    alone = index.keyword.exact_top_and_score(words, 10, None, np.empty(0, np.int64))[1]
    assert alone.tobytes() != index.keyword.exact_top_and_score(words, 10, None, np.array([7]))[1].tobytes()
    for cands in (np.empty(0, np.int64), np.array([7]), np.array([7, 9])):
        one = index.keyword.exact_top_and_score(words, 10, None, cands)
        two = keyword_pass.finish(index.keyword, keyword_pass.keyword_pass(index.keyword, words, 10, None), cands)
        assert [a.tobytes() for a in two] == [a.tobytes() for a in one]
    monkeypatch.setattr(index.keyword, "top_rows", lambda query, k, allowed: np.array([5, 6], np.int64))
    one = index.keyword.exact_top_and_score(words, 10, None, np.array([7]))
    two = keyword_pass.finish(index.keyword, keyword_pass.keyword_pass(index.keyword, words, 10, None), np.array([7]))
    assert [a.tobytes() for a in two] == [a.tobytes() for a in one]


def test_a_vector_of_other_dimensions_is_the_searchs_error_when_it_finishes(space) -> None:
    index, _ = space
    wrong = np.ones(DIMS + 1, np.float32)  # another model's vector: its dimensions do not fit
    later: Future = Future()
    started = index.start(SearchRequest("hybrid", q="river", vector=later, limit=5))
    later.set_result(wrong)
    with pytest.raises(ValueError, match="dimensions"):
        started.finish()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(q=QUERIES, limit=st.integers(1, 80), fusion=st.sampled_from(["convex", "rrf"]), filters=FILTERS,
       seed=st.integers(0, 2**32 - 1))
def test_a_started_search_runs_its_rest_in_one_call_and_answers_as_its_steps_bit_for_bit(
        space, c_loops: str, q: str, limit: int, fusion: str, filters: Filters, seed: int) -> None:
    index, _ = space
    query = np.random.default_rng(seed).standard_normal(DIMS).astype(np.float32)
    req = SearchRequest("hybrid", q=q, vector=future_of(query), limit=limit, fusion=fusion, filters=filters,
                        explain=False)
    kw = index.start(req).keyword
    assert kw is not None
    steps = replace(kw, rest=None)  # the same pass, its rest one step after another
    with index.reading():
        one = index._fused(replace(req, vector=query), kw)
        many = index._fused(replace(req, vector=query), steps)
    assert [a.tobytes() for a in (one.ords, one.scores, one.sims, one.bm25, one.has_sim)] == [
        a.tobytes() for a in (many.ords, many.scores, many.sims, many.bm25, many.has_sim)]
    assert one.approximate == many.approximate


def test_a_hybrid_search_plans_its_rest_with_its_keyword_pass(space) -> None:
    index, _ = space
    started = index.start(SearchRequest("hybrid", q="river stone", vector=Future(), limit=10))
    assert started.keyword is not None and started.keyword.rest is not None
    assert started.keyword.rest.kw_ords.size > 0 and started.keyword.rest.scoring is not None


def test_a_search_with_a_rerank_deadline_takes_its_rest_step_by_step(space) -> None:
    index, _ = space
    started = index.start(SearchRequest("hybrid", q="river stone", vector=Future(), limit=10, rerank_deadline_s=5.0))
    assert started.keyword is not None and started.keyword.rest is None


def test_a_lone_keyword_row_takes_its_rest_step_by_step_and_answers_as_one_search(space, monkeypatch) -> None:
    index, _ = space
    monkeypatch.setattr(index.keyword, "top_rows", lambda query, k, allowed: np.array([5], np.int64))
    query = np.random.default_rng(3).standard_normal(DIMS).astype(np.float32)
    started = index.start(SearchRequest("hybrid", q="river stone", vector=future_of(query), limit=10))
    assert started.keyword is not None and started.keyword.rest is None
    got = started.finish()
    assert answer(got) == answer(index.search(SearchRequest("hybrid", q="river stone", vector=query, limit=10)))
