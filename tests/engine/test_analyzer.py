"""Tests of the text analyzer: segmentation, normalization, identifiers, stems, CJK, spans."""

from __future__ import annotations

import random

import pytest

from engram_index.engine.analyzer import (
    ANALYZER_VERSION,
    MAX_TERM_CHARS,
    STEM_PREFIX,
    STOPWORDS,
    QueryWord,
    Token,
    index_terms,
    normalize,
    query_words,
    term_set,
    tokens,
)
from engram_index.engine.termfind import find_terms


def terms_of(text: str) -> list[tuple[str, str]]:
    """List the (term, kind) pairs of a text, in order."""
    return [(t.term, t.kind) for t in tokens(text)]


def spans_match_source(text: str) -> None:
    """Check that every token's byte span decodes to a slice of the original text."""
    data = text.encode("utf-8", "surrogatepass")
    for tok in tokens(text):
        assert 0 <= tok.start < tok.end <= len(data), tok
        data[tok.start : tok.end].decode("utf-8")  # never splits a character


# --- constants -------------------------------------------------------------------------------


def test_public_constants_have_the_documented_values() -> None:
    assert ANALYZER_VERSION == 1
    assert STEM_PREFIX == "~"
    assert MAX_TERM_CHARS == 64
    assert len(STOPWORDS) == 33
    assert {"the", "a", "with", "will", "such"} <= STOPWORDS


# --- plain words, stems, normalization -------------------------------------------------------


def test_empty_and_blank_text_give_no_tokens() -> None:
    assert tokens("") == []
    assert index_terms("   \n\t ") == []
    assert query_words("") == []


def test_plain_word_gives_exact_then_stem_with_the_same_span() -> None:
    toks = tokens("Running servers")
    assert [(t.term, t.kind, t.start, t.end) for t in toks] == [
        ("running", "exact", 0, 7),
        ("~run", "stem", 0, 7),
        ("servers", "exact", 8, 15),
        ("~server", "stem", 8, 15),
    ]


def test_stem_is_emitted_even_when_it_equals_the_word() -> None:
    assert terms_of("server") == [("server", "exact"), ("~server", "stem")]


def test_stopwords_are_indexed_but_get_no_stem() -> None:
    assert terms_of("the cat") == [("the", "exact"), ("cat", "exact"), ("~cat", "stem")]


def test_numbers_are_exact_terms_without_stems() -> None:
    assert terms_of("2024") == [("2024", "exact")]


def test_normalize_folds_case_width_ligatures_and_latin_greek_cyrillic_accents() -> None:
    assert normalize("Café") == "cafe"
    assert normalize("ＡＢＣ") == "abc"
    assert normalize("ﬁle") == "file"
    assert normalize("STRASSE") == normalize("straße") == "strasse"
    assert normalize("Ἀθῆναι") == "αθηναι"
    assert normalize("Ёлка") == "елка"


def test_normalize_keeps_marks_that_carry_meaning_in_devanagari_and_japanese() -> None:
    assert normalize("हिन्दी") == "हिन्दी"
    assert normalize("が") == "が"


def test_normalize_is_idempotent() -> None:
    for word in ["Café", "İstanbul", "ǅemal", "Ἀθῆναι", "ﬃ", "が", "ｶﾞ", "Ⅻ", "हिन्दी", "don’t"]:
        once = normalize(word)
        assert normalize(once) == once, word


def test_combining_mark_inside_a_word_stays_in_the_word_and_is_stripped() -> None:
    text = "cafe\u0301 open"
    toks = tokens(text)
    assert toks[0].term == "cafe"
    assert text.encode()[toks[0].start : toks[0].end].decode() == "cafe\u0301"


def test_precomposed_and_decomposed_accents_give_the_same_terms() -> None:
    assert index_terms("résumé") == index_terms("re\u0301sume\u0301")


def test_curly_apostrophe_and_english_possessive_are_normalized() -> None:
    assert terms_of("Alice’s") == [("alice", "exact"), ("~alic", "stem")]
    assert terms_of("don't") == [("don't", "exact"), ("~don't", "stem")]


def test_emoji_and_symbols_are_not_terms() -> None:
    assert index_terms("🚀 ✨ → © 👍🏽 1️⃣") == ["1"]
    assert index_terms("___ --- ...") == []


def test_cyrillic_and_arabic_words_are_terms_without_english_stems() -> None:
    assert terms_of("Привет мир") == [("привет", "exact"), ("мир", "exact")]
    assert terms_of("مرحبا") == [("مرحبا", "exact")]


# --- identifiers -----------------------------------------------------------------------------


def test_camel_case_identifier_is_kept_whole_and_split_into_parts() -> None:
    assert terms_of("HTTPServer") == [
        ("httpserver", "exact"),
        ("http", "part"),
        ("~http", "stem"),
        ("server", "part"),
        ("~server", "stem"),
    ]


def test_lower_camel_case_with_trailing_acronym_is_split_at_each_case_change() -> None:
    parts = [t.term for t in tokens("getUserByID") if t.kind == "part"]
    assert parts == ["get", "user", "by", "id"]


def test_snake_case_identifier_is_kept_whole_and_split_into_parts() -> None:
    assert terms_of("snake_case") == [
        ("snake_case", "exact"),
        ("snake", "part"),
        ("~snake", "stem"),
        ("case", "part"),
        ("~case", "stem"),
    ]


def test_dotted_path_identifier_is_kept_whole_and_split_into_parts() -> None:
    toks = tokens("see pkg.mod/path now")
    assert [(t.term, t.kind) for t in toks if t.kind != "stem"] == [
        ("see", "exact"),
        ("pkg.mod/path", "exact"),
        ("pkg", "part"),
        ("mod", "part"),
        ("path", "part"),
        ("now", "exact"),
    ]


def test_version_number_is_kept_whole_with_its_dot_separated_parts() -> None:
    assert terms_of("v2.3.1") == [("v2.3.1", "exact"), ("v2", "part"), ("3", "part"), ("1", "part")]


def test_hyphenated_word_is_kept_whole_and_split_into_stemmed_parts() -> None:
    assert terms_of("well-known") == [
        ("well-known", "exact"),
        ("well", "part"),
        ("~well", "stem"),
        ("known", "part"),
        ("~known", "stem"),
    ]


def test_colon_joined_did_is_whole_with_parts_and_its_opaque_key_is_not_split() -> None:
    did = "did:plc:ewvi7nxzyoun6zhxrhs64oiz"
    assert terms_of(did) == [
        (did, "exact"),
        ("did", "part"),
        ("~did", "stem"),
        ("plc", "part"),
        ("~plc", "stem"),
        ("ewvi7nxzyoun6zhxrhs64oiz", "part"),
    ]


def test_url_is_kept_whole_and_split_into_parts() -> None:
    terms = index_terms("https://example.com/a_b")
    assert terms[0] == "https://example.com/a_b"
    assert {"https", "example", "com", "a", "b"} <= set(terms)


def test_trailing_sentence_period_is_not_part_of_a_word() -> None:
    assert terms_of("end of sentence.")[-2:] == [("sentence", "exact"), ("~sentenc", "stem")]
    assert index_terms("v2.3.1.")[0] == "v2.3.1"


def test_part_spans_point_at_the_parts_in_the_original_text() -> None:
    text = "é getUserByID"
    data = text.encode()
    got = [(t.term, data[t.start : t.end].decode()) for t in tokens(text) if t.kind == "part"]
    assert got == [("get", "get"), ("user", "User"), ("by", "By"), ("id", "ID")]


# --- opaque tokens ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "opaque",
    [
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm",
        "3jzfcijpj2z2a",
        "z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK",
        "deadbeefdeadbeef",
    ],
)
def test_opaque_tokens_are_single_exact_terms_never_split_or_stemmed(opaque: str) -> None:
    assert terms_of(opaque) == [(opaque.lower()[:MAX_TERM_CHARS], "exact")]


def test_words_mixing_few_letters_and_digits_are_not_opaque() -> None:
    assert terms_of("sha256Sum") == [
        ("sha256sum", "exact"),
        ("sha256", "part"),
        ("sum", "part"),
        ("~sum", "stem"),
    ]


def test_long_terms_are_truncated_to_max_term_chars_on_both_sides() -> None:
    word = "x" * 100
    assert index_terms(word) == ["x" * MAX_TERM_CHARS, STEM_PREFIX + "x" * (MAX_TERM_CHARS - 1)]
    assert query_words(word)[0].exact == "x" * MAX_TERM_CHARS
    assert all(len(t) <= MAX_TERM_CHARS for t in index_terms("y" * 300 + "_z"))


# --- CJK and mixed scripts -------------------------------------------------------------------


def test_cjk_runs_become_overlapping_bigrams_with_their_own_byte_spans() -> None:
    text = "我爱东京"
    data = text.encode()
    got = [(t.term, t.kind, data[t.start : t.end].decode()) for t in tokens(text)]
    assert got == [
        ("我爱", "exact", "我爱"),
        ("爱东", "exact", "爱东"),
        ("东京", "exact", "东京"),
    ]


def test_single_cjk_character_is_its_own_term() -> None:
    assert terms_of("猫") == [("猫", "exact")]


def test_mixed_script_word_splits_cjk_from_latin() -> None:
    assert index_terms("東京tower") == ["東京", "tower", "~tower"]


def test_hangul_and_kana_are_bigrammed_and_halfwidth_kana_is_normalized() -> None:
    assert index_terms("한국어") == ["한국", "국어"]
    assert index_terms("ｶﾞｲﾄﾞ") == index_terms("ガイド") == ["ガイ", "イド"]


# --- spans and robustness --------------------------------------------------------------------


def test_byte_spans_survive_emoji_accents_and_cjk_before_a_word() -> None:
    text = "🚀 naïve 東京 café\u0301 👍 résumé"
    data = text.encode()
    exact = [(t.term, data[t.start : t.end].decode()) for t in tokens(text) if t.kind == "exact"]
    assert exact == [
        ("naive", "naïve"),
        ("東京", "東京"),
        ("cafe", "café\u0301"),
        ("resume", "résumé"),
    ]
    spans_match_source(text)


def test_lone_surrogates_do_not_crash_and_count_as_three_bytes() -> None:
    text = "a\ud800 word"
    toks = tokens(text)
    assert [t.term for t in toks] == ["a", "word", "~word"]
    assert toks[1].start == 1 + 3 + 1
    spans_match_source(text)


def test_index_terms_equals_the_terms_of_tokens() -> None:
    text = "HTTPServer did:plc:abc123xyz987 東京tower Привет e\u0301te\u0301 v2.3.1. snake_case"
    assert index_terms(text) == [t.term for t in tokens(text)]
    assert term_set(text) == set(index_terms(text))


def test_tokens_are_ordered_by_position() -> None:
    toks = tokens("alpha HTTPServer 東京大学 omega")
    starts = [t.start for t in toks]
    assert starts == sorted(starts)
    assert isinstance(toks[0], Token)


def test_find_terms_gives_character_spans_of_the_requested_terms() -> None:
    text = "Ünïcode servers: HTTPServer"
    got = [(text[s:e], term) for s, e, term in find_terms(text, {"~server", "server"})]
    assert got == [("servers", "~server"), ("Server", "server"), ("Server", "~server")]


TRICKY = [
    "Plain ASCII text about servers, HTTPServer and snake_case.\nNew line\ttab",
    "Café résumé naïve — “quoted” don’t Alice’s cafe\u0301 re\u0301sume\u0301",
    "İstanbul STRASSE straße ﬁle ｆｕｌｌ ① hy\u00adphen",
    "東京都に住む 한국어 ｶﾞｲﾄﾞ 東京tower Привет мир हिन्दी مرحبا",
    "did:plc:ewvi7nxzyoun6zhxrhs64oiz at://did:plc:x/app.bsky.feed.post/3jzfcijpj2z2a v2.3.1.",
    "dying lying tying happy happiness skies ugly early a\ud800 word\u00a0nbsp",
    "mixed\u3000ideographic space, x" * 3 + "y" * 100 + " é" * 80 + " end",
]


@pytest.mark.parametrize("text", TRICKY)
def test_find_terms_agrees_with_a_full_scan_for_every_term(text: str) -> None:
    def size(chars: str) -> int:
        """Count UTF-8 bytes the way the analyzer does."""
        return len(chars.encode("utf-8", "surrogatepass"))

    every = [(t.term, t.start, t.end) for t in tokens(text)]
    terms = {term for term, _, _ in every}
    for term in [*sorted(terms), None]:
        wanted = terms if term is None else {term}
        got = [(found, size(text[:s]), size(text[:e])) for s, e, found in find_terms(text, wanted)]
        assert got == [tok for tok in every if tok[0] in wanted], term


# --- query words -----------------------------------------------------------------------------


def test_query_words_group_exact_stem_and_parts_per_word() -> None:
    words = query_words("Servers HTTPServer the")
    assert words == [
        QueryWord("servers", "~server", (), 0, 7),
        QueryWord("httpserver", None, ("http", "server"), 8, 18),
        QueryWord("the", None, (), 19, 22),
    ]


def test_query_words_make_each_cjk_bigram_its_own_word() -> None:
    words = query_words("東京大学")
    assert [(w.exact, w.start, w.end) for w in words] == [
        ("東京", 0, 6),
        ("京大", 3, 9),
        ("大学", 6, 12),
    ]


def test_query_words_use_the_same_analysis_as_indexing() -> None:
    text = "Café naïve getUserByID did:plc:ewvi7nxzyoun6zhxrhs64oiz"
    indexed = set(index_terms(text))
    for word in query_words(text):
        assert word.exact in indexed
        assert word.stem is None or word.stem in indexed
        assert set(word.parts) <= indexed


# --- long texts ----------------------------------------------------------------------------------


ENGLISH = (
    "The quick brown fox jumps over the lazy dog while the HTTPServer handles requests "
    "from snake_case clients at example.com/api/v2.3.1, storing memories about résumés, "
    "meetings and deployment plans for the garden index. "
)


def test_a_30000_byte_text_gives_every_token_with_spans_inside_the_text() -> None:
    text = (ENGLISH * 200)[:30_000]
    toks = tokens(text)
    assert len(toks) > 5_000
    assert all(0 <= t.start < t.end <= len(text.encode()) for t in toks)
    assert [t.term for t in toks] == index_terms(text)


@pytest.mark.parametrize(
    "text",
    [
        "The HTTPServer at example.com/api/v2.3.1 didn't fail: snake_case x::y a://b c:d e-f 'q' _x_ __",
        "trailing. dots.. and -- dashes - :colons: ://x a:// ''' 3jzfcijpj2z2a getUserByID",
    ],
)
def test_the_ascii_fast_path_cuts_the_same_chunks_as_the_unicode_pattern(text: str) -> None:
    from engram_index.engine import analyzer

    assert analyzer._ASCII_CHUNK_RE.findall(text) == analyzer._CHUNK_RE.findall(text)


def test_the_standard_library_fast_paths_cut_the_same_chunks_on_random_unicode() -> None:

    from engram_index.engine import analyzer

    pool = (
        "aZ09_ .-/:'’‐‑\u00ad\u0301\u0308éßøΩжщ€αβ–—…“”()[]·¹½①٣४ก\u0e31ह\u093fि東京ひらカナ한글ｶﾞ\u3099‿⁀🙂👍🏽\t\n"
    )
    rng = random.Random(7)
    for _ in range(3000):
        text = "".join(rng.choice(pool) for _ in range(rng.randint(0, 40)))
        assert analyzer._chunker(text).findall(text) == analyzer._CHUNK_RE.findall(text), text
