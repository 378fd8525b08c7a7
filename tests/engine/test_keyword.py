"""The keyword index: BM25 through tantivy over our analyzed terms."""

from pathlib import Path

import pytest

from engram_index.engine.analyzer import QueryWord, query_words
from engram_index.engine.keyword import KeywordIndex, TermWeights
from engram_index.engine.types import Document, Filters


def doc(i: int, text: str, **kw: object) -> Document:
    return Document(id=f"d{i}", author=kw.pop("author", "did:plc:a"), text=text, created_ms=kw.pop("created_ms", i), **kw)  # type: ignore[arg-type]


@pytest.fixture
def index(tmp_path: Path) -> KeywordIndex:
    idx = KeywordIndex(tmp_path / "kw")
    texts = [
        "the HTTPServer closed the connection after a timeout",
        "servers need timeouts",
        "an http server and a client",
        "cooking pasta with tomatoes",
        "snake_case names in python modules",
    ]
    for i, t in enumerate(texts):
        idx.upsert(i, doc(i, t, tags=("infra",) if i < 3 else ("food",), author="did:plc:a" if i % 2 else "did:plc:b"))
    idx.commit(1)
    return idx


def ords(index: KeywordIndex, q: str, k: int = 10, filters: Filters | None = None) -> list[int]:
    return index.search(query_words(q), k, filters)[0].tolist()


def test_exact_word_outranks_a_stem_only_match(index: KeywordIndex) -> None:
    got = ords(index, "timeouts")
    assert got[0] == 1 and 0 in got  # "timeouts" exact in 1; "timeout" (stem) in 0


def test_identifier_query_matches_its_parts_in_other_documents(index: KeywordIndex) -> None:
    got = ords(index, "HTTPServer")
    assert got[0] == 0  # the whole identifier
    assert 2 in got  # "http server" written apart matches by parts


def test_stopword_only_documents_do_not_match_a_content_query(index: KeywordIndex) -> None:
    assert 3 not in ords(index, "the server")


def test_a_query_of_only_stopwords_still_searches(index: KeywordIndex) -> None:
    assert ords(index, "the")[:1] == [0]


def test_filters_are_exact_and_add_nothing_to_the_score(index: KeywordIndex, tmp_path: Path) -> None:
    words = query_words("server")
    all_ords, all_scores = index.search(words, 10)
    f_ords, f_scores = index.search(words, 10, Filters(tags=("infra",), author="did:plc:a"))
    assert set(f_ords.tolist()) == {1}
    assert f_scores[0] == pytest.approx(all_scores[all_ords.tolist().index(1)])


def test_since_filter_keeps_documents_created_at_or_after(index: KeywordIndex) -> None:
    assert set(ords(index, "server", filters=Filters(since_ms=2))) == {2}


def test_scores_of_given_ordinals_equal_their_search_scores(index: KeywordIndex) -> None:
    words = query_words("http server timeout")
    found, scores = index.search(words, 10)
    got = index.scores(words, [4, *found.tolist()])
    assert got[0] == 0.0
    assert got[1:].tolist() == pytest.approx(scores.tolist())


def test_best_alternative_counts_once_per_word(tmp_path: Path) -> None:
    idx = KeywordIndex(None, TermWeights(1.0, 0.5, 0.4))
    idx.upsert(0, doc(0, "running"))
    idx.upsert(1, doc(1, "runs"))
    idx.commit(1)
    found, scores = idx.search(query_words("running"), 10)
    assert found.tolist() == [0, 1]
    # Doc 1 matches only by stem: half the stem term's own BM25, counted once.
    stem_alone = QueryWord(exact="~run", stem=None, parts=(), start=0, end=7)
    stem_scores = dict(zip(*[a.tolist() for a in idx.search([stem_alone], 10)]))
    assert scores[1] == pytest.approx(0.5 * stem_scores[1], rel=1e-5)
    # Doc 0 matches both ways: the best alternative (exact), not the sum.
    exact_alone = QueryWord(exact="running", stem=None, parts=(), start=0, end=7)
    assert scores[0] == pytest.approx(idx.search([exact_alone], 10)[1][0], rel=1e-5)


def test_replace_and_delete_are_visible_after_commit(index: KeywordIndex) -> None:
    index.upsert(3, doc(3, "a server for pasta"))
    index.delete(1)
    assert 3 not in ords(index, "server")  # not yet committed
    index.commit(2)
    got = ords(index, "server")
    assert 3 in got and 1 not in got


def test_committed_sequence_survives_reopening(index: KeywordIndex, tmp_path: Path) -> None:
    index.close()
    again = KeywordIndex(tmp_path / "kw")
    assert again.committed_seq == 1
    assert ords(again, "pasta") == [3]


def test_an_index_of_another_analyzer_version_starts_empty(index: KeywordIndex, tmp_path: Path) -> None:
    index.close()
    meta = tmp_path / "kw" / "keyword.meta.json"
    meta.write_text(meta.read_text().replace("[1, 1]", "[1, 0]"))
    again = KeywordIndex(tmp_path / "kw")
    assert again.committed_seq == 0 and again.num_docs() == 0


def test_empty_query_finds_nothing(index: KeywordIndex) -> None:
    assert ords(index, "") == [] and ords(index, "🙂 ...") == []


@pytest.mark.parametrize("k", [1, 3, 10])
@pytest.mark.parametrize("filters", [None, Filters(tags=("infra",))])
def test_one_pass_search_and_score_equals_search_plus_scores(index: KeywordIndex, k: int, filters: Filters | None) -> None:
    words = query_words("http server timeout pasta")
    candidates = [4, 3, 0]
    top_ords, top_scores, cand_scores = index.search_and_score(words, k, filters, candidates)
    want_ords, want_scores = index.search(words, k, filters)
    assert top_ords.tolist() == want_ords.tolist()
    assert top_scores.tolist() == pytest.approx(want_scores.tolist(), abs=1e-5)
    passing = set(index.search(words, 100, filters)[0].tolist()) if filters else set(candidates)
    want = [s if c in passing else 0.0 for c, s in zip(candidates, index.scores(words, candidates).tolist())]
    assert cand_scores.tolist() == pytest.approx(want, abs=1e-5)


def test_one_pass_scoring_falls_back_when_other_documents_outscore_the_offset(tmp_path: Path) -> None:
    from engram_index.engine import keyword

    idx = KeywordIndex(None)
    for i in range(30):
        idx.upsert(i, doc(i, "alpha " * (i + 1) + f"beta{i}"))
    idx.commit(1)
    words = query_words("alpha")
    saved = keyword.CANDIDATE_OFFSET
    keyword.CANDIDATE_OFFSET = 0.001  # every match now outscores the offset: the cut drops candidates
    try:
        _, _, got = idx.search_and_score(words, 2, None, [0, 1, 2])
    finally:
        keyword.CANDIDATE_OFFSET = saved
    assert got.tolist() == pytest.approx(idx.scores(words, [0, 1, 2]).tolist(), abs=1e-5)
    assert all(g > 0 for g in got)
