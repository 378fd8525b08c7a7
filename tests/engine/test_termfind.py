"""Tests of finding a query's terms in texts: the finder, the compiled ASCII finder, against filtering every token."""

from __future__ import annotations

import random

import pytest

from engram_index.engine.analyzer import (
    STOPWORDS,
    query_words,
    term_set,
    tokens,
)
from engram_index.engine.termfind import TermFinder, find_terms


# --- finding terms in short texts ------------------------------------------------------------

FRAGMENTS = [
    "servers", "Server", "the", "of", "running", "runs", "happiness", "happy", "dying", "lying", "tying", "skies",
    "studies", "ugly", "early", "résumé", "naïve",
    "HTTPServer", "getUserByID", "snake_case", "__init__", "v2.3.1", "x::y", "e-mail", "did:plc:ewvi7nxzyoun6zhxrhs64oiz",
    "https://example.com/api/v2?q=1", "at://did:plc:x/app.bsky.feed.post/3jzfcijpj2z2a", "example.com.",
    "don't", "Alice's", "O'Brien", "don’t", "Alice’s", "'quoted'", "cafe\u0301", "re\u0301sume\u0301", "Zu\u0308rich",
    "東京大学", "東京tower", "ひらがな", "カタカナー", "한국어", "ｶﾞｲﾄﾞ", "ｆｕｌｌ", "ﬁle", "İstanbul", "STRASSE", "straße",
    "hy\u00adphen", "\u00adsoft", "Привет", "مرحبا", "हिन्दी", "ภาษาไทย", "①", "٣४", "🙂", "👍🏽", "—", "…", "3jzfcijpj2z2a",
    "deadbeefdeadbeefdeadbeef", "sha256", "A", "1", "_", "___", "‿", "a\u2010b", "x\u2011y", "\ud800", "a\udfffb",
]
SEPARATORS = [" ", " ", " ", "", ", ", ". ", "\n", "\t", " — ", "(", ")", "'", "-", ":", "/", "\u3000", "\u00a0", "\u00ad"]


ASCII_FRAGMENTS = [f for f in FRAGMENTS if f.isascii()]
ASCII_SEPARATORS = [s for s in SEPARATORS if s.isascii()]


def random_text(rng: random.Random) -> str:
    """Join random fragments with random separators (sometimes none, which glues chunks together)."""
    count = rng.choice([0, 1, 2, 5, 20, 60, 300])
    # Half the texts are mostly ASCII, like most memories, with a non-ASCII piece now and then.
    other_share = rng.choice([1.0, 0.03])
    parts = []
    for _ in range(count):
        mixed = rng.random() < other_share
        parts.append(rng.choice(FRAGMENTS if mixed else ASCII_FRAGMENTS))
        parts.append(rng.choice(SEPARATORS if mixed else ASCII_SEPARATORS))
    return "".join(parts)[:4000]


def random_wanted(rng: random.Random, text: str) -> set[str]:
    """Wanted terms as a search makes them: a query's exact forms, ~stems and parts, plus some of the text's."""
    query = " ".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 4)))
    wanted: set[str] = set()
    for word in query_words(query):
        wanted.add(word.exact)
        if word.stem is not None:
            wanted.add(word.stem)
        wanted.update(word.parts)
    own = sorted(term_set(text))
    wanted.update(rng.sample(own, min(len(own), rng.randint(0, 3))))
    return wanted


def spans_by_filtering_tokens(text: str, wanted: set[str]) -> list[tuple[int, int, str]]:
    """The character spans of the wanted terms, found by filtering every token (the definition)."""
    char_at: dict[int, int] = {}
    byte = 0
    for i, char in enumerate(text):
        char_at[byte] = i
        byte += len(char.encode("utf-8", "surrogatepass"))
    char_at[byte] = len(text)
    return [(char_at[t.start], char_at[t.end], t.term) for t in tokens(text) if t.term in wanted]


def test_find_terms_in_short_random_texts_gives_exactly_the_filtered_tokens() -> None:
    rng = random.Random(11)
    for _ in range(800):
        text = random_text(rng)
        wanted = random_wanted(rng, text)
        assert find_terms(text, wanted) == spans_by_filtering_tokens(text, wanted), (text, wanted)


def test_one_finder_over_many_short_texts_of_a_query_gives_exactly_the_filtered_tokens() -> None:
    from engram_index.engine import termfind

    rng = random.Random(12)
    probed = 0
    for _ in range(150):
        texts = [random_text(rng) for _ in range(10)]
        wanted = random_wanted(rng, " ".join(texts))
        expected = [spans_by_filtering_tokens(text, wanted) for text in texts]
        finder = TermFinder(wanted)
        for text, spans in zip(texts + texts, expected + expected):  # the second time, every piece is known
            assert find_terms(text, wanted, finder) == spans, (text, wanted)
            probed += termfind._worth_probing(text, finder)
    assert probed > 800  # the probing path, not only the scan, was compared


def test_a_finder_made_for_other_terms_does_not_change_what_is_found() -> None:
    text = "The HTTPServer serves servers; snake_case servers run."
    finder = TermFinder({"server", "~server"})
    assert find_terms(text, {"server", "~server"}, finder) != []
    assert find_terms(text, {"snake", "run"}, finder) == find_terms(text, {"snake", "run"}) != []
    assert find_terms(text, {"kubernetes"}, finder) == []
    assert find_terms(text, {"server", "~server"}, finder) == find_terms(text, {"server", "~server"})


def test_a_finder_gives_the_same_spans_on_long_texts() -> None:
    text = "filler " * 700 + "HTTPServer servers"
    wanted = {"server", "~server"}
    assert len(text) > 4000
    assert find_terms(text, wanted, TermFinder(wanted)) == find_terms(text, wanted) != []


@pytest.mark.parametrize("text", ["", " ", "... — 🙂 ‿ \n\t", "\u00ad\u0301", "(-) , ."])
def test_texts_without_terms_give_no_spans_with_or_without_a_finder(text: str) -> None:
    for wanted in [{"a", "~a"}, {"server", "~server"}, {"東京"}]:
        assert find_terms(text, wanted) == []
        assert find_terms(text, wanted, TermFinder(wanted)) == []


@pytest.mark.parametrize("repeats", [1, 60, 100, 150])
def test_a_mostly_ascii_text_with_many_accented_words_gives_every_one_with_a_finder(repeats: int) -> None:
    text = "servers run fast on the café terrace; " * repeats  # one accented piece per 39 characters
    wanted = {"cafe", "~server", "~terrac", "kubernetes"}
    expected = spans_by_filtering_tokens(text, wanted)
    assert len(expected) == 3 * repeats
    assert find_terms(text, wanted, TermFinder(wanted)) == expected


@pytest.mark.parametrize("q", ["die", "lie", "tie", "happiness", "sky", "study"])
def test_a_finder_finds_words_whose_stem_is_more_than_their_last_letter_off(q: str) -> None:
    text = "They were dying and lying, tying knots; happy skies, ugly studies early on."
    wanted = {term for w in query_words(q) for term in (w.exact, w.stem) if term is not None}
    expected = spans_by_filtering_tokens(text, wanted)
    assert expected != []
    assert find_terms(text, wanted, TermFinder(wanted)) == expected


def test_a_finder_with_non_ascii_wanted_terms_finds_them_in_mixed_script_texts() -> None:
    wanted = {"東京", "zurich", "~zurich"}
    finder = TermFinder(wanted)
    for text in ["plain ascii text", "東京大学 in Zürich", "Zurich 東京", "ｶﾞｲﾄﾞ 東京tower zurich's"]:
        assert find_terms(text, wanted, finder) == spans_by_filtering_tokens(text, wanted), text


JOINER_EDGES = ["a://b", "a:/b", "a::b", "a:::b", "a::/b", "x.-y", "a..b", "a'b", "a''b", "end.", ".start", "a-",
                "-a", "::", "://", "a://", "v2.3.1.", "x_y-z::w://v.u'TS"]


def test_the_compiled_ascii_finder_gives_exactly_the_filtered_tokens_of_random_ascii_texts() -> None:
    from engram_index.engine import _kernels, termfind
    from engram_index.engine.analyzer import _analysis, _chunk_cache, _stem

    rng = random.Random(13)
    compared = 0
    for _ in range(1500):
        count = rng.choice([0, 1, 2, 5, 20, 60])
        pieces = [rng.choice(ASCII_FRAGMENTS + JOINER_EDGES) + rng.choice(ASCII_SEPARATORS) for _ in range(count)]
        text = "".join(pieces)
        wanted = random_wanted(rng, text)
        expected = spans_by_filtering_tokens(text, wanted)
        probes = termfind._ascii_probes(wanted)
        assert _kernels.ascii_spans(text, wanted, probes, _chunk_cache, _analysis, _stem, STOPWORDS) == expected
        # With nothing cached, plain words take the compiled fast path and the rest the analyzer.
        assert _kernels.ascii_spans(text, wanted, probes, {}, _analysis, _stem, STOPWORDS) == expected, (text, wanted)
        assert find_terms(text, wanted, TermFinder(wanted)) == expected == find_terms(text, wanted)
        compared += bool(expected)
    assert compared > 500  # most texts held a wanted term


def test_the_compiled_ascii_finder_refuses_what_it_cannot_read() -> None:
    from engram_index.engine import _kernels
    from engram_index.engine.analyzer import _analysis, _chunk_cache, _stem

    with pytest.raises(ValueError):
        _kernels.ascii_spans("café", {"cafe"}, ("caf",), _chunk_cache, _analysis, _stem, STOPWORDS)
    with pytest.raises(ValueError):
        _kernels.ascii_spans("server", {"server"}, ("",), _chunk_cache, _analysis, _stem, STOPWORDS)
    with pytest.raises(TypeError):
        _kernels.ascii_spans("snake_case", {"snake"}, ("snake",), {}, lambda chunk: None, _stem, STOPWORDS)
    assert _kernels.ascii_spans("server", {"server"}, (), _chunk_cache, _analysis, _stem, STOPWORDS) == []
    with pytest.raises(TypeError):
        _kernels.ascii_spans("running", {"~run"}, ("ru",), {}, _analysis, lambda word: None, STOPWORDS)


def test_the_compiled_ascii_finder_analyzes_a_plain_word_itself_whatever_a_cache_holds() -> None:
    from engram_index.engine import _kernels
    from engram_index.engine.analyzer import _analysis, _stem

    # A plain word's terms are the analyzer's fast path's, made in C: the cache is not read for it
    # (the analyzer's cache holds exactly those terms for it), but it is for any other chunk.
    wrong = {"Running": (("elsewhere",), (("exact", 0, 7),)), "x_y": (("x_y",), (("exact", 0, 3),))}
    spans = _kernels.ascii_spans("Running x_y", {"running", "~run", "x_y"}, ("ru", "x_y"), wrong, _analysis,
                                 _stem, STOPWORDS)
    assert spans == [(0, 7, "running"), (0, 7, "~run"), (8, 11, "x_y")]
