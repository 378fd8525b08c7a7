"""The keyword index: BM25 through tantivy over our analyzed terms."""

from pathlib import Path

import numpy as np
import pytest

import tantivy

from engram_index.engine.analyzer import QueryWord, query_words

from engram_index.engine.keyword import KeywordIndex, query_terms
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


def in_memory(texts: list[str]) -> KeywordIndex:
    """An in-memory index holding these texts at ordinals 0, 1, …, committed."""
    idx = KeywordIndex(None)
    for i, text in enumerate(texts):
        idx.upsert(i, doc(i, text))
    idx.commit(1)
    return idx


def ords(index: KeywordIndex, q: str, k: int = 10, filters: Filters | None = None) -> list[int]:
    return index.search(query_words(q), k, filters)[0].tolist()


def test_a_word_matches_its_inflections_through_its_stem(index: KeywordIndex) -> None:
    got = ords(index, "timeouts")
    assert set(got) == {0, 1}  # "timeouts" in 1, "timeout" in 0


def test_a_word_scores_by_its_stem_alone_so_inflections_score_alike(tmp_path: Path) -> None:
    idx = in_memory(["running fast", "runs fast", "walking slowly"])
    found, scores = idx.search(query_words("running"), 10)
    assert sorted(found.tolist()) == [0, 1]
    assert scores[0] == pytest.approx(scores[1], rel=1e-6)
    stem_alone = QueryWord(exact="~run", stem=None, parts=(), start=0, end=7)
    assert scores[0] == pytest.approx(idx.search([stem_alone], 10)[1][0], rel=1e-6)


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
def test_search_and_score_equals_search_plus_scores(index: KeywordIndex, k: int, filters: Filters | None) -> None:
    words = query_words("http server timeout pasta")
    candidates = [4, 2, 0]  # (all pass the filter, as the vector side's candidates do)
    top_ords, top_scores, cand_scores = index.search_and_score(words, k, filters, candidates)
    want_ords, want_scores = index.search(words, k, filters)
    assert top_ords.tolist() == want_ords.tolist()
    assert top_scores.tolist() == want_scores.tolist()
    assert cand_scores.tolist() == index.scores(words, candidates).tolist()
    assert cand_scores[0] == 0.0 and cand_scores[1] > 0


def test_each_terms_bm25_agrees_with_tantivys_where_it_keeps_exact_lengths(index: KeywordIndex) -> None:
    # tantivy stores a length exactly below 40 terms; above, a byte code of it (ours stays exact).
    searcher = index._searcher()
    for term in ["~server", "server", "http", "httpserver", "timeout", "~timeout", "pasta", "the"]:
        hits = searcher.search(tantivy.Query.term_query(index.schema, "body", term), 10).hits
        assert hits, term
        ords = searcher.fast_field_values("ord", [a for _, a in hits])
        ours = index.counts.bm25([term], ords)
        assert ours.tolist() == pytest.approx([s for s, _ in hits], rel=1e-5), term


def test_a_word_counts_once_by_its_stem_else_its_exact_form_plus_its_parts(index: KeywordIndex) -> None:
    counts = index.counts
    ords = [0, 1, 2]
    (server,) = query_words("servers")
    got = index.scores([server], ords)
    assert got.tolist() == pytest.approx(counts.bm25(["~server"], ords).tolist())
    # "httpserver" typed plainly is stemmed, but the document holds the identifier whole, unstemmed.
    (word,) = query_words("HTTPServer")
    got = index.scores([word], ords)
    want = counts.bm25(["httpserver"], ords) + 0.6 * (counts.bm25(["http"], ords) + counts.bm25(["server"], ords))
    assert got.tolist() == pytest.approx(want.tolist())
    (plain,) = query_words("httpserver")
    assert index.scores([plain], [0])[0] == pytest.approx(counts.bm25(["httpserver"], [0])[0])


def test_a_match_deleted_since_the_last_commit_is_not_returned(index: KeywordIndex) -> None:
    index.delete(2)  # tantivy still finds it until the commit; its counts are gone at once
    assert 2 not in ords(index, "http server")


def test_term_counts_survive_reopening_without_counting_again(index: KeywordIndex, tmp_path: Path) -> None:
    index.upsert(7, doc(7, "a server of servers"))
    index.commit(2)
    index.save_counts(2)
    before = index.search(query_words("server"), 10)
    index.close()
    again = KeywordIndex(tmp_path / "kw")
    assert again.counts_seq == 2 and len(again.counts) == 6
    after = again.search(query_words("server"), 10)
    assert after[0].tolist() == before[0].tolist() and after[1].tolist() == before[1].tolist()


def test_saved_counts_ahead_of_the_index_or_from_before_a_reset_are_not_used(index: KeywordIndex, tmp_path: Path) -> None:
    index.save_counts(5)  # claims more than the index committed (1)
    index._writer = None  # (as after a crash: nothing more is saved)
    ahead = KeywordIndex(tmp_path / "kw", read_only=True)
    assert ahead.counts_seq == 0 and len(ahead.counts) == 0
    again = KeywordIndex(tmp_path / "kw")
    again.save_counts(1)
    again.reset()
    assert not (tmp_path / "kw" / "counts").exists()
    again.upsert(0, doc(0, "fresh"))
    again.commit(3)
    again.close()
    reopened = KeywordIndex(tmp_path / "kw")
    assert reopened.counts_seq == 3 and reopened.counts.terms_of(0) == {"fresh": 1, "~fresh": 1}


def test_candidates_outside_the_top_k_get_their_exact_scores(tmp_path: Path) -> None:
    idx = in_memory(["alpha " * (i + 1) + f"beta{i}" for i in range(30)])
    words = query_words("alpha")
    top, _, got = idx.search_and_score(words, 2, None, [0, 1, 2, 29])
    assert 29 in top.tolist() and not {0, 1, 2} & set(top.tolist())
    assert got.tolist() == pytest.approx(idx.scores(words, [0, 1, 2, 29]).tolist(), abs=1e-6)
    assert all(g > 0 for g in got)


def test_cjk_and_accented_queries_are_found_and_scored_by_the_term_counts(tmp_path: Path) -> None:
    idx = in_memory(["東京タワーの夜景はきれいです", "Café résumé naïve", "plain english text"])
    for q, want in [("東京タワー", 0), ("cafe resume", 1), ("CAFÉ", 1)]:
        found, scores = idx.search(query_words(q), 10)
        assert found.tolist() == [want] and scores[0] > 0, q
        assert idx.scores(query_words(q), [want])[0] == pytest.approx(scores[0])


def test_a_deleted_then_rewritten_ordinal_is_scored_by_its_new_text(index: KeywordIndex) -> None:
    index.delete(3)
    index.upsert(3, doc(3, "pasta pasta pasta"), replace=False)
    index.commit(2)
    found, scores = index.search(query_words("pasta"), 10)
    assert found.tolist() == [3]
    assert index.counts.terms_of(3)["pasta"] == 3


@pytest.mark.parametrize("q", ["http server timeout", "HTTPServer snake_case servers", "the pasta", "nothing matches",
                               "timeouts timeout servers server"])
@pytest.mark.parametrize("ordinals", [[0], [2, 0, 4, 1, 3], [3, 3, 9, 1]])
def test_each_words_own_scores_at_once_equal_its_scores_alone_bit_for_bit(
        index: KeywordIndex, q: str, ordinals: list[int]) -> None:
    words = query_words(q)
    at_once = index.word_scores(words, np.array(ordinals, np.int64))
    assert at_once.shape == (len(ordinals), len(words)) and at_once.dtype == np.float32
    for j, word in enumerate(words):
        assert at_once[:, j].tobytes() == index.scores([word], ordinals).tobytes()
    assert index.word_scores([], np.array(ordinals, np.int64)).shape == (len(ordinals), 0)


def test_a_queries_word_columns_are_worked_out_once_and_are_each_words_own() -> None:
    from engram_index.engine import keyword_query

    words = query_words("HTTPServer running the servers fast")
    held = keyword_query.word_columns_of(words)
    assert keyword_query.word_columns_of(list(words)) is held  # the same words: worked out once
    column = {term: i for i, term in enumerate(query_terms(words))}
    assert held.terms == tuple(query_terms(words))
    for word, got in zip(words, held.columns, strict=True):
        assert [a.tolist() for a in got] == [a.tolist() for a in keyword_query.word_columns(word, column)]
        assert not any(a.flags.writeable for a in got)  # shared by every search of these words


def test_a_commit_cut_short_by_a_kill_leaves_no_file_that_fails_the_next_commit(tmp_path: Path) -> None:
    path = tmp_path / "kw"
    first = KeywordIndex(path)
    first.write([(i, Document(id=f"d{i}", author="", text=f"word{i} common"), False) for i in range(10)])
    first.commit(1)
    first.close()
    # The commit points: tantivy's, then ours (keyword.meta.json, written after it).
    durable = {name: (path / name).read_bytes() for name in ("meta.json", "keyword.meta.json")}
    cut = KeywordIndex(path)
    cut.write([(3, None, True), (4, None, True)])
    cut.commit(2)
    cut.close()
    # As a kill -9 leaves it: the deletes' file written (and registered), the commit point not yet moved.
    for name, data in durable.items():
        (path / name).write_bytes(data)
    again = KeywordIndex(path)
    assert again.committed_seq == 1
    again.write([(3, None, True), (4, None, True)])  # the same operations: the same file name
    again.commit(2)
    assert again.committed_seq == 2
    assert again.num_docs() == 8  # (the term counts are the caller's to replay: Collections does)


def test_holds_says_which_documents_hold_each_word_whole_by_form_or_stem_and_in_part_by_its_identifier_parts(
        index: KeywordIndex) -> None:
    words = query_words("HTTPServer timeouts snake pasta missing")
    ords_ = np.array([0, 1, 2, 3, 4, 1], np.int64)  # (one twice: each row answers for itself)
    whole, part = index.holds(words, ords_)
    present = index.counts.term_scores(query_terms(words), ords_) > 0
    column = {t: i for i, t in enumerate(query_terms(words))}
    for j, word in enumerate(words):
        forms = [column[word.exact]] + ([column[word.stem]] if word.stem else [])
        assert whole[:, j].tolist() == present[:, forms].any(axis=1).tolist(), word
        parts = [column[p] for p in dict.fromkeys(word.parts) if p != word.exact]
        assert part[:, j].tolist() == (present[:, parts].any(axis=1) if parts else np.zeros(6, bool)).tolist(), word
    # What the rows hold, by name: "timeouts" is held by its stem in 0 and 1; HTTPServer whole in 0, its
    # part "server" in 2 ("an http server"); "snake" whole in 4; nothing holds "missing".
    assert whole[:, 1].tolist() == [True, True, False, False, False, True]
    assert whole[:, 0].tolist() == [True, False, False, False, False, False]
    assert part[2, 0] and not part[3, 0]
    assert whole[4, 2] and not whole[:, 4].any() and not part[:, 4].any()
    assert whole.shape == part.shape == (6, 5)


def test_holds_of_no_ordinals_or_no_words_is_empty(index: KeywordIndex) -> None:
    whole, part = index.holds(query_words("timeouts"), np.zeros(0, np.int64))
    assert whole.shape == part.shape == (0, 1)
    whole, part = index.holds([], np.array([0, 1], np.int64))
    assert whole.shape == part.shape == (2, 0)
