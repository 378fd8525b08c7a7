"""One space's hybrid search: modes, fusion, exact filters, deterministic ties and explanations."""

from collections.abc import Iterator

import numpy as np
import pytest

from engram_index.engine.search import SpaceIndex, checked_vector, checked_vectors
from engram_index.engine.types import Document, Filters, SearchRequest

DIMS = 8


def unit(i: int, j: int | None = None, mix: float = 0.0) -> np.ndarray:
    v = np.zeros(DIMS, np.float32)
    v[i] = 1.0
    if j is not None:
        v[j] = mix
    return v / np.linalg.norm(v)


class Docs:
    """An in-memory document source standing in for the record store."""

    def __init__(self) -> None:
        self.docs: dict[int, Document] = {}

    def fetch(self, ords: list[int]) -> dict[int, Document]:
        return {o: self.docs[o] for o in ords if o in self.docs}


@pytest.fixture
def space() -> Iterator[tuple[SpaceIndex, Docs]]:
    docs = Docs()
    index = SpaceIndex(None, DIMS, docs.fetch)
    rows = [
        ("deploy the HTTPServer on friday", unit(0), ("infra",), "did:plc:a", 10),
        ("pasta with fresh tomatoes", unit(1), ("food",), "did:plc:b", 20),
        ("the http server crashed with a timeout", unit(0, 1, 0.5), ("infra", "incident"), "did:plc:a", 30),
        ("tomatoes grow in summer", unit(2), ("garden",), "did:plc:b", 40),
        ("résumé: naïve café review ☕ in Zürich", unit(3), ("food",), "did:plc:c", 50),
    ]
    changes = []
    for i, (text, vec, tags, author, created) in enumerate(rows):
        doc = Document(id=f"m{i}", author=author, text=text, tags=tags, created_ms=created,
                       vector=vec.astype("<f2").tobytes())
        docs.docs[i] = doc
        changes.append((i, doc))
    index.apply(changes, seq=1)
    index.commit()
    yield index, docs


def ids(result) -> list[str]:
    return [h.document.id for h in result.hits]


def test_hybrid_unions_both_candidate_lists_and_scores_each_both_ways(space) -> None:
    index, _ = space
    result = index.search(SearchRequest(mode="hybrid", q="tomatoes", vector=unit(0), limit=5))
    assert result.mode == "hybrid"
    by_id = {h.document.id: h for h in result.hits}
    # m0 comes from the vector side only, m1 and m3 from the keyword side: all carry both scores.
    assert {"m0", "m1", "m3"} <= set(by_id)
    assert by_id["m0"].bm25 == 0.0 and by_id["m1"].bm25 > 0
    assert by_id["m1"].similarity == pytest.approx(0.0, abs=1e-3)
    assert all(h.fusion == "convex" for h in result.hits)


def test_rrf_is_selectable(space) -> None:
    index, _ = space
    result = index.search(SearchRequest(mode="hybrid", q="http server", vector=unit(0), fusion="rrf"))
    assert ids(result)[:2] == ["m2", "m0"] or ids(result)[:2] == ["m0", "m2"]
    assert result.hits[0].fusion == "rrf"


def test_ranks_in_explanations_are_ranks_among_the_returned_results(space) -> None:
    index, _ = space
    hits = index.search(SearchRequest(mode="hybrid", q="server timeout", vector=unit(1), limit=5)).hits
    sims = sorted(hits, key=lambda h: -h.similarity)
    assert [h.vector_rank for h in sims] == list(range(1, len(hits) + 1))
    kw = sorted([h for h in hits if h.bm25], key=lambda h: -h.bm25)
    assert [h.keyword_rank for h in kw] == list(range(1, len(kw) + 1))
    assert all(h.keyword_rank is None for h in hits if not h.bm25)


def test_keyword_mode_has_no_similarity_and_explains_terms(space) -> None:
    index, _ = space
    result = index.search(SearchRequest(mode="keyword", q="HTTPServer"))
    assert ids(result)[:2] == ["m0", "m2"]
    top = result.hits[0]
    assert top.similarity is None and top.keyword_rank == 1
    assert [(t.term, t.kind, t.field) for t in top.terms] == [("httpserver", "exact", "text")]
    parts = {(t.term, t.kind) for t in result.hits[1].terms}
    assert parts == {("http", "part"), ("server", "part")}


def test_vector_mode_ranks_by_cosine_alone(space) -> None:
    index, _ = space
    result = index.search(SearchRequest(mode="vector", vector=unit(1), limit=2, q="pasta"))
    assert ids(result) == ["m1", "m2"] and result.mode == "vector"
    assert result.hits[0].similarity == pytest.approx(1.0, abs=1e-3)


def test_hybrid_without_q_runs_as_vector(space) -> None:
    index, _ = space
    assert index.search(SearchRequest(mode="hybrid", vector=unit(2))).mode == "vector"


def test_filters_are_exact_in_every_mode(space) -> None:
    index, _ = space
    f = Filters(author="did:plc:b", tags=("food",))
    for mode in ("hybrid", "vector", "keyword"):
        result = index.search(SearchRequest(mode=mode, q="tomatoes server", vector=unit(0), filters=f))
        assert ids(result) == ["m1"], mode
    since = index.search(SearchRequest(mode="vector", vector=unit(0), filters=Filters(since_ms=30)))
    assert set(ids(since)) == {"m2", "m3", "m4"}
    none = index.search(SearchRequest(mode="vector", vector=unit(0), filters=Filters(author="did:plc:nobody")))
    assert none.hits == []


def test_ties_break_by_insertion_ordinal_never_by_id_or_time() -> None:
    docs = Docs()
    index = SpaceIndex(None, DIMS, docs.fetch)
    changes = []
    for i, (doc_id, created) in enumerate([("b", 5), ("a", 5), ("c", 1), ("d", 9)]):
        doc = Document(id=doc_id, author="did:plc:a", text="same words here", created_ms=created,
                       vector=unit(0).astype("<f2").tobytes())
        docs.docs[i] = doc
        changes.append((i, doc))
    index.apply(changes, 1)
    index.commit()
    for mode in ("hybrid", "vector", "keyword"):
        result = index.search(SearchRequest(mode=mode, q="same words", vector=unit(0), limit=4))
        assert ids(result) == ["b", "a", "c", "d"], mode


def test_limit_is_honoured_and_larger_limits_get_more_candidates(space) -> None:
    index, _ = space
    assert len(index.search(SearchRequest(mode="vector", vector=unit(0), limit=2)).hits) == 2
    assert index._n_candidates(10) == 200 and index._n_candidates(100) == 400


def test_a_passed_deadline_gives_approximate_results(space) -> None:
    index, _ = space
    result = index.search(SearchRequest(mode="hybrid", q="tomatoes", vector=unit(0), rerank_deadline_s=-1.0))
    assert result.approximate and result.hits


def test_deleted_documents_vanish_at_once_even_before_the_keyword_commit(space) -> None:
    index, docs = space
    index.apply([(1, None)], seq=2)
    del docs.docs[1]
    for mode in ("hybrid", "keyword", "vector"):
        assert "m1" not in ids(index.search(SearchRequest(mode=mode, q="pasta tomatoes", vector=unit(1)))), mode


def test_a_keyword_search_finds_writes_before_the_keyword_commit_and_respects_filters(space) -> None:
    index, docs = space
    new = Document(id="m9", author="did:plc:b", text="quokka on the island", tags=("zoo",), created_ms=50)
    moved = Document(id="m3", author="did:plc:b", text="now about quokka care", created_ms=40)
    docs.docs[9], docs.docs[3] = new, moved
    index.apply([(9, new), (3, moved)], seq=2)  # no commit
    assert set(ids(index.search(SearchRequest(mode="keyword", q="quokka")))) == {"m9", "m3"}
    assert ids(index.search(SearchRequest(mode="keyword", q="summer"))) == []  # m3's old words are gone at once
    assert ids(index.search(SearchRequest(mode="keyword", q="quokka", filters=Filters(tags=("zoo",))))) == ["m9"]
    assert ids(index.search(SearchRequest(mode="keyword", q="quokka", filters=Filters(author="did:plc:a")))) == []
    index.commit()
    assert set(ids(index.search(SearchRequest(mode="keyword", q="quokka")))) == {"m9", "m3"}


def test_a_write_stays_findable_while_commits_race_with_searches(space) -> None:
    import threading

    index, docs = space
    stop = threading.Event()

    def commit_loop() -> None:
        while not stop.wait(0.0005):  # a breath between commits: a spinning reader would starve writes
            index.commit()

    committer = threading.Thread(target=commit_loop)
    committer.start()
    try:
        for i in range(300):
            word = "zq" + "".join("abcdefghij"[int(c)] for c in str(1000 + i))
            doc = Document(id=f"r{i}", author="did:plc:a", text=f"{word} here", created_ms=100 + i)
            docs.docs[100 + i] = doc
            index.apply([(100 + i, doc)], seq=2 + i)
            assert ids(index.search(SearchRequest(mode="keyword", q=word))) == [f"r{i}"], i
    finally:
        stop.set()
        committer.join()


def test_replacing_a_document_moves_its_vector_and_words(space) -> None:
    index, docs = space
    doc = Document(id="m3", author="did:plc:b", text="now about kubernetes", created_ms=40,
                   vector=unit(5).astype("<f2").tobytes())
    docs.docs[3] = doc
    index.apply([(3, doc)], seq=2)
    index.commit()
    assert ids(index.search(SearchRequest(mode="keyword", q="kubernetes"))) == ["m3"]
    assert ids(index.search(SearchRequest(mode="keyword", q="summer"))) == []
    assert ids(index.search(SearchRequest(mode="vector", vector=unit(5), limit=1))) == ["m3"]


def test_snippet_highlights_are_byte_ranges_on_non_ascii_text(space) -> None:
    index, _ = space
    hit = index.search(SearchRequest(mode="keyword", q="cafe zurich")).hits[0]
    raw = hit.snippet.text.encode()
    assert [raw[s:e].decode() for s, e in hit.snippet.highlights] == ["café", "Zürich"]


def test_a_document_without_a_vector_is_found_by_hybrid_without_a_similarity_it_does_not_have() -> None:
    docs = Docs()
    index = SpaceIndex(None, DIMS, docs.fetch)
    orphan = Document(id="x", author="did:plc:a", text="orphan words", created_ms=1, vector=None)
    other = Document(id="y", author="did:plc:a", text="orphan other", created_ms=2,
                     vector=unit(1).astype("<f2").tobytes())
    docs.docs.update({0: orphan, 1: other})
    index.apply([(0, orphan), (1, other)], 1)
    index.commit()
    hybrid = index.search(SearchRequest(mode="hybrid", q="orphan words", vector=unit(0)))
    by_id = {h.document.id: h for h in hybrid.hits}
    assert set(by_id) == {"x", "y"}
    # It ranks as if orthogonal to the query, but no cosine or vector rank is made up for it.
    assert by_id["x"].similarity is None and by_id["x"].vector_rank is None
    assert by_id["y"].similarity == pytest.approx(0.0, abs=1e-3) and by_id["y"].vector_rank == 1
    assert by_id["x"].keyword_rank == 1


def test_many_identical_keyword_scores_return_the_first_inserted_first() -> None:
    docs = Docs()
    index = SpaceIndex(None, DIMS, docs.fetch)
    changes = []
    for i in range(60):
        # Created newest first: the creation time plays no part in the order of ties.
        doc = Document(id=f"d{i:02d}", author="did:plc:a", text="duplicate note", created_ms=1000 - i)
        docs.docs[i] = doc
        changes.append((i, doc))
    index.apply(changes, 1)
    index.commit()
    result = index.search(SearchRequest(mode="keyword", q="duplicate", limit=5))
    assert ids(result) == ["d00", "d01", "d02", "d03", "d04"]


def test_stored_vectors_that_cannot_be_used_are_left_out_and_reported_and_the_rest_load() -> None:
    docs = Docs()
    index = SpaceIndex(None, DIMS, docs.fetch)
    infinite = np.ones(DIMS, "<f2")
    infinite[2] = np.inf
    rows = {
        0: np.full(DIMS, 106.0, "<f2").tobytes(),  # norm 300: fine
        1: infinite.tobytes(),
        2: bytes(2 * DIMS),  # all zeros
        3: np.ones(DIMS // 2, "<f2").tobytes(),  # the wrong size
        4: b"\x00\x3c\x00",  # not whole float16 values
        5: unit(1).astype("<f2").tobytes(),
    }
    changes = []
    for i, raw in rows.items():
        doc = Document(id=f"v{i}", author=f"did:plc:{'ab'[i % 2]}", text=f"row {i}", created_ms=i, vector=raw)
        docs.docs[i] = doc
        changes.append((i, doc))
    index.apply(changes, seq=1)
    assert [o for o in rows if index.has_vector(o)] == [0, 5]
    assert index.unusable_vectors() == [
        ("did:plc:a", "vector has 3 bytes, not whole float16 values", 1),
        ("did:plc:a", "vector is all zeros: it has no direction", 1),
        ("did:plc:b", "vector has 4 components, the space's model has 8", 1),
        ("did:plc:b", "vector holds NaN or infinite values", 1),
    ]
    result = index.search(SearchRequest(mode="vector", vector=np.full(DIMS, 1.0), limit=10))
    assert ids(result) == ["v0", "v5"] and result.hits[0].similarity == 1.0
    # A row replaced with a usable vector, or deleted, is no longer reported.
    fixed = Document(id="v1", author="did:plc:b", text="row 1", created_ms=1, vector=unit(3).astype("<f2").tobytes())
    index.apply([(1, fixed), (2, None), (3, None), (4, None)], seq=2)
    assert index.unusable_vectors() == [] and index.has_vector(1)


def test_a_load_checks_each_stored_vector_in_bulk_as_one_check_of_each_would() -> None:
    halves = {"nan": 0x7E00, "inf": 0x7C00, "-inf": 0xFC00, "zero": 0x0000, "-zero": 0x8000, "tiny": 0x0001,
              "-tiny": 0x8001, "largest": 0x7BFF, "one": 0x3C00}
    rows = [np.full(DIMS, 0x3C00, "<u2") for _ in halves] + [np.zeros(DIMS, "<u2"), np.full(DIMS, 0x8000, "<u2"),
                                                             np.full(DIMS, 0x0001, "<u2")]
    for row, half in zip(rows, halves.values()):
        row[3] = half
    raws = [row.tobytes() for row in rows] + [b"\x00\x3c" * (DIMS - 1), b"\x00\x3c\x00"]
    got, whole, problems = checked_vectors(raws, DIMS)
    assert problems == [checked_vector(raw, DIMS)[1] for raw in raws]
    assert [p is None for p in problems] == [False, False, False, True, True, True, True, True, True,
                                             False, False, True, False, False]
    assert whole == list(range(len(rows))) and got.tobytes() == b"".join(raws[:len(rows)])


@pytest.mark.parametrize("seed", range(5))
def test_batches_of_usable_and_unusable_vectors_leave_what_the_last_write_of_each_ordinal_says(seed: int) -> None:
    import random
    from collections import Counter

    from engram_index.engine.vector import vector_problem

    rng = random.Random(seed)
    docs = Docs()
    index = SpaceIndex(None, DIMS, docs.fetch)

    def raw() -> bytes | None:
        kind = rng.randrange(7)
        if kind == 0:
            return None
        if kind == 1:
            return bytes(2 * DIMS)  # all zeros
        if kind == 2:
            bad = np.ones(DIMS, "<f2")
            bad[rng.randrange(DIMS)] = rng.choice([np.inf, np.nan])
            return bad.tobytes()
        if kind == 3:
            return np.ones(rng.choice([DIMS // 2, DIMS + 1]), "<f2").tobytes()  # the wrong size
        if kind == 4:
            return b"\x00\x3c\x00"  # not whole float16 values
        return np.array([rng.uniform(-2, 2) for _ in range(DIMS)], "<f2").tobytes()

    final: dict[int, Document | None] = {}
    for seq in range(1, 30):
        changes: list[tuple[int, Document | None]] = []
        for _ in range(rng.randrange(1, 12)):
            o = rng.randrange(20)
            doc = None if rng.random() < 0.15 else Document(
                id=f"v{o}", author=f"did:plc:{rng.choice('ab')}", text=f"row {o}", created_ms=o, vector=raw())
            changes.append((o, doc))
            final[o] = doc
        index.apply(changes, seq=seq)
        expected: Counter[tuple[str, str]] = Counter()
        for o, doc in final.items():
            usable = False
            if doc is not None and doc.vector is not None:
                problem = (f"vector has {len(doc.vector)} bytes, not whole float16 values" if len(doc.vector) % 2
                           else vector_problem(np.frombuffer(doc.vector, "<f2"), DIMS))
                usable = problem is None
                if problem is not None:
                    expected[(doc.author, problem)] += 1
            assert index.has_vector(o) == usable, (seq, o)
        assert index.unusable_vectors() == sorted((a, p, n) for (a, p), n in expected.items())
