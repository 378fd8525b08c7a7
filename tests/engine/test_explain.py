"""Tests of match explanations: which query terms a document holds, and the highlighted snippet."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from engram_index.engine.analyzer import QueryWord, query_words
from engram_index.engine.explain import match_terms, snippet
from engram_index.engine.types import Snippet, TermMatch


def explain(
    q: str, text: str, tags: Sequence[str] = (), source: str | None = None, max_chars: int = 200
) -> tuple[tuple[TermMatch, ...], Snippet]:
    """Run both explanations the way a search does."""
    words = query_words(q)
    matches = match_terms(words, text, tags, source)
    return matches, snippet(text, tags, source, matches, words, max_chars)


def highlighted(snip: Snippet) -> list[str]:
    """Decode each highlight's UTF-8 byte range of the snippet text."""
    data = snip.text.encode()
    return [data[start:end].decode() for start, end in snip.highlights]


# --- match_terms -----------------------------------------------------------------------------


def test_exact_match_in_text_is_reported_with_its_normalized_form() -> None:
    matches, _ = explain("Café", "We met at the CAFÉ.")
    assert matches == (TermMatch("cafe", "exact", "text"),)


def test_stem_is_reported_when_the_exact_form_is_absent() -> None:
    matches, _ = explain("servers", "one server only")
    assert matches == (TermMatch("~server", "stem", "text"),)


def test_identifier_parts_are_reported_one_per_part_when_the_whole_is_absent() -> None:
    matches, _ = explain("HTTPServer", "an http server")
    assert matches == (TermMatch("http", "part", "text"), TermMatch("server", "part", "text"))


def test_a_query_word_matches_an_identifier_part_of_the_document_exactly() -> None:
    matches, _ = explain("server", "the HTTPServer crashed")
    assert matches == (TermMatch("server", "exact", "text"),)


def test_stopwords_are_skipped_unless_every_query_word_is_a_stopword() -> None:
    assert explain("the cat", "the cat sat")[0] == (TermMatch("cat", "exact", "text"),)
    assert explain("the", "the end")[0] == (TermMatch("the", "exact", "text"),)


def test_the_best_kind_wins_over_the_field_order() -> None:
    matches, _ = explain("servers", "a server", tags=["servers"])
    assert matches == (TermMatch("servers", "exact", "tags"),)


def test_fields_are_tried_in_order_text_tags_source() -> None:
    matches, _ = explain("rust deploy", "nothing here", ["rust"], "deploy/notes.md")
    assert matches == (TermMatch("rust", "exact", "tags"), TermMatch("deploy", "exact", "source"))


def test_a_tag_matches_when_the_whole_normalized_tag_equals_the_query_word() -> None:
    word = QueryWord("c++", None, (), 0, 3)
    assert match_terms([word], "", ["C++"], None) == (TermMatch("c++", "exact", "tags"),)


def test_the_same_term_kind_and_field_is_reported_once() -> None:
    matches, _ = explain("server servers server", "server")
    assert matches == (TermMatch("server", "exact", "text"), TermMatch("~server", "stem", "text"))


def test_no_match_gives_no_terms() -> None:
    assert explain("zebra", "a horse", ["farm"], "barn")[0] == ()
    assert match_terms([], "text", [], None) == ()


def test_cjk_bigrams_match_as_exact_terms() -> None:
    matches, _ = explain("東京", "我爱东京和東京タワー")
    assert matches == (TermMatch("東京", "exact", "text"),)


# --- snippet: short fields, byte highlights --------------------------------------------------


def test_a_short_field_is_returned_whole_with_byte_highlights() -> None:
    _, snip = explain("server", "The server crashed")
    assert snip == Snippet("text", "The server crashed", ((4, 10),))


def test_highlights_are_utf8_byte_ranges_after_accents_and_emoji() -> None:
    _, snip = explain("server", "🚀 Café résumé naïve — the server crashed")
    assert highlighted(snip) == ["server"]


def test_highlights_are_utf8_byte_ranges_after_cjk_text() -> None:
    _, snip = explain("deploy", "東京タワー 한국어 deploy tomorrow")
    assert highlighted(snip) == ["deploy"]


def test_a_word_with_a_combining_mark_is_highlighted_with_its_mark() -> None:
    _, snip = explain("cafe", "at the cafe\u0301 today")
    assert highlighted(snip) == ["cafe\u0301"]


def test_a_stem_match_highlights_the_source_word() -> None:
    matches, snip = explain("servers", "Our Server is down, and the backup server too.")
    assert matches == (TermMatch("~server", "stem", "text"),)
    assert highlighted(snip) == ["Server", "server"]


def test_a_part_match_highlights_only_the_part() -> None:
    _, snip = explain("server", "restart the HTTPServer now")
    assert highlighted(snip) == ["Server"]
    _, snip = explain("HTTPServer", "an http proxy and a server")
    assert highlighted(snip) == ["http", "server"]


def test_overlapping_cjk_bigram_highlights_are_merged() -> None:
    _, snip = explain("東京都", "私は東京都に住む")
    assert highlighted(snip) == ["東京都"]
    assert list(snip.highlights) == sorted(snip.highlights)


# --- snippet: windows ------------------------------------------------------------------------


FILLER = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor "


def test_a_long_text_is_cut_around_the_match_with_ellipses_at_word_boundaries() -> None:
    text = FILLER * 10 + "the kubernetes cluster failed " + FILLER * 10
    _, snip = explain("kubernetes", text)
    assert snip.text.startswith("…") and snip.text.endswith("…")
    body = snip.text[1:-1]
    assert len(body) <= 200
    assert body in text
    start = text.index(body)
    assert text[start - 1] == " " and text[start + len(body)] == " "
    assert highlighted(snip) == ["kubernetes"]


def test_the_window_covers_the_most_distinct_matched_terms() -> None:
    text = "alpha " + FILLER * 5 + "beta " + FILLER * 5 + "alpha and beta together " + FILLER * 5
    _, snip = explain("alpha beta", text)
    assert "alpha and beta together" in snip.text
    assert highlighted(snip) == ["alpha", "beta"]


def test_ties_go_to_the_earliest_window() -> None:
    text = FILLER * 4 + "first alpha " + FILLER * 4 + "second alpha " + FILLER * 4
    _, snip = explain("alpha", text)
    assert "first alpha" in snip.text and "second" not in snip.text


def test_a_match_at_the_start_of_a_long_text_gets_no_leading_ellipsis() -> None:
    _, snip = explain("alpha", "alpha " + FILLER * 10)
    assert not snip.text.startswith("…") and snip.text.endswith("…")
    assert snip.highlights[0] == (0, 5)


def test_a_cut_window_keeps_byte_highlights_right_after_the_ellipsis() -> None:
    text = "ñ" * 300 + " naïve señor " + "é" * 300
    _, snip = explain("senor", text, max_chars=40)
    assert snip.text.startswith("…")
    assert highlighted(snip) == ["señor"]


def test_a_long_cjk_text_is_cut_without_spaces() -> None:
    text = "日本語の文章" * 50 + "東京都" + "日本語の文章" * 50
    _, snip = explain("東京都", text)
    assert snip.text.startswith("…") and snip.text.endswith("…")
    assert highlighted(snip) == ["東京都"]


def test_a_word_longer_than_the_window_is_highlighted_as_far_as_it_shows() -> None:
    word = "x" * 300
    _, snip = explain(word, word)
    assert snip.text.endswith("…")
    assert highlighted(snip) == ["x" * 200]


# --- snippet: fields and no match ------------------------------------------------------------


def test_tags_field_snippet_joins_tags_with_commas() -> None:
    matches, snip = explain("kubernetes", "nothing relevant", ["Ops", "Kubernetes-Cluster"])
    assert matches == (TermMatch("kubernetes", "exact", "tags"),)
    assert snip.field == "tags"
    assert snip.text == "Ops, Kubernetes-Cluster"
    assert highlighted(snip) == ["Kubernetes"]


def test_a_whole_tag_match_highlights_the_whole_tag() -> None:
    word = QueryWord("c++", None, (), 0, 3)
    matches = match_terms([word], "", ["go", "C++"], None)
    snip = snippet("", ["go", "C++"], None, matches, [word])
    assert highlighted(snip) == ["C++"]


def test_source_field_snippet_highlights_the_source() -> None:
    matches, snip = explain("notes", "unrelated", [], "https://example.com/notes.md")
    assert snip.field == "source"
    assert snip.text == "https://example.com/notes.md"
    assert highlighted(snip) == ["notes"]


def test_text_is_preferred_when_any_match_is_in_text() -> None:
    _, snip = explain("rust deploy", "we deploy today", ["rust"])
    assert snip.field == "text"
    assert highlighted(snip) == ["deploy"]


def test_no_match_gives_the_start_of_the_text_without_highlights() -> None:
    text = FILLER * 5
    _, snip = explain("zebra", text)
    assert snip.field == "text"
    assert snip.highlights == ()
    assert snip.text.endswith("…") and len(snip.text) <= 201
    assert text.startswith(snip.text[:-1])
    assert snippet("short", [], None, [], []) == Snippet("text", "short", ())


# --- snippet: long texts --------------------------------------------------------------------------


def test_snippet_of_a_30_kb_text_finds_the_match_in_the_middle() -> None:
    sentence = "The garden index keeps memories of meetings, plans and résumés for later. "
    text = (sentence * 500)[:15_000] + " the kubernetes cluster failed " + (sentence * 500)[:15_000]
    words = query_words("kubernetes cluster memories")
    matches = match_terms(words, text, [], None)
    snip = snippet(text, [], None, matches, words)
    assert "kubernetes cluster" in snip.text
    assert snip.text.startswith("…") and snip.text.endswith("…")


@pytest.mark.parametrize(
    "text, q",
    [
        ("The HTTPServer timed out; servers need timeouts. " * 3, "http servers timeout"),
        ("café naïve résumé — Zürich 東京大学 " * 20, "cafe zurich 大学"),
        ("nothing relevant here", "kubernetes"),
        ("x" * 5000 + " needle " + "y" * 5000, "needle"),
    ],
)
def test_explain_in_one_pass_equals_matching_then_snippet(text: str, q: str, explain_path: str) -> None:
    from engram_index.engine.explain import explain

    words = query_words(q)
    tags, source = ["infra", "Zürich"], "notes/servers.md"
    matches = match_terms(words, text, tags, source)
    assert explain(words, text, tags, source) == (matches, snippet(text, tags, source, matches, words))


def test_one_explainer_over_many_hits_equals_matching_then_snippet_for_each_hit(explain_path: str) -> None:
    from engram_index.engine.explain import Explainer

    texts = [
        "The HTTPServer timed out; servers need timeouts.",
        "Servers, servers everywhere: snake_case http_server configs.",
        "nothing relevant here",
        "",
        "café naïve résumé — Zürich 東京大学 servers",
        "The HTTPServer timed out; servers need timeouts.",  # a repeated hit reuses what was learned
        "Zürich servers time out " * 200,  # a long text
    ]
    for q in ["http servers timeout", "cafe zurich 大学 server", "kubernetes", "the"]:
        words = query_words(q)
        explainer = Explainer(words)
        for text in texts:
            matches = match_terms(words, text, ["infra"], "notes/servers.md")
            expected = (matches, snippet(text, ["infra"], "notes/servers.md", matches, words))
            assert explainer.explain(text, ["infra"], "notes/servers.md") == expected, (q, text)


def test_explainers_of_different_queries_on_several_threads_each_find_their_own_terms(explain_path: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from engram_index.engine.explain import Explainer

    texts = [f"doc {i}: The HTTPServer timed out; kubernetes cluster {i} failed; café servers." for i in range(50)]
    queries = ["http servers", "kubernetes cluster", "cafe timeout", "failed doc"]

    def run(q: str) -> list[tuple[tuple[TermMatch, ...], Snippet]]:
        """Explain every text for one query with one explainer, as one search does."""
        explainer = Explainer(query_words(q))
        return [explainer.explain(text, [], None) for text in texts]

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(run, queries * 5))
    for q, got in zip(queries * 5, results):
        words = query_words(q)
        expected = [(m, snippet(text, [], None, m, words)) for text in texts for m in [match_terms(words, text, [], None)]]
        assert got == expected, q


def test_the_compiled_snippet_window_chooses_as_the_python_one_on_random_ascii_bodies() -> None:
    import random

    from engram_index.engine import _kernels
    from engram_index.engine.explain import _window_any

    rng = random.Random(5)
    words = ["server", "runs", "a", "HTTPServer", "snake_case", "x", "longerwordthanmost", "v2.3.1"]
    spaces = [" ", "  ", "\t", "\n", "\x1c", "\x0b", "-", ""]
    for _ in range(3000):
        body = "".join(rng.choice(words) + rng.choice(spaces) for _ in range(rng.randint(1, 120)))
        starts = sorted(rng.sample(range(len(body)), min(len(body), rng.randint(1, 30))))
        spans = [(s, min(len(body), s + rng.randint(1, 40)), rng.choice(["server", "~run", "http", "x"]))
                 for s in starts]
        spans = [(s, e, (t + ".")[:-1]) for s, e, t in spans]  # distinct objects for equal terms
        max_chars = rng.choice([5, 20, 60, 200])
        if len(body) <= max_chars:
            continue
        assert _kernels.snippet_bounds(body, spans, max_chars) == _window_any(body, spans, max_chars), (body, spans)


def test_hits_sharing_tags_and_source_match_each_querys_own_words_in_those_fields(explain_path: str) -> None:
    from engram_index.engine.explain import Explainer

    tags, source = ["Kubernetes", "http-server", "timeouts"], "notes/cluster_servers.md"
    text = "nothing of the query in the text"
    expected = {
        "kubernetes": [("kubernetes", "exact", "tags")],
        "server timeout": [("server", "exact", "tags"), ("~timeout", "stem", "tags")],
        "cluster notes": [("cluster", "exact", "source"), ("notes", "exact", "source")],
        "http missing": [("http", "exact", "tags")],
    }
    # Every order, twice: what one query learned of the fields must not change another's matches.
    for q in [*expected, *reversed(expected)]:
        matches, _ = Explainer(query_words(q)).explain(text, tags, source)
        assert [(m.term, m.kind, m.field) for m in matches] == expected[q], q
        assert matches == match_terms(query_words(q), text, tags, source)
