"""The compiled explainer of ASCII texts (_kernels.ascii_explain) against the Python reference."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import pytest

from engram_index.engine import _kernels, explain
from engram_index.engine.analyzer import STOPWORDS, QueryWord, _analysis, _chunk_cache, _stem, _stem_cache, query_words
from engram_index.engine.explain import Explainer, match_terms, snippet
from engram_index.engine.keyword_query import searchable_words
from engram_index.engine.termfind import find_terms
from engram_index.engine.types import Snippet, TermMatch

# SciFact-like words: claims and abstracts with acronyms, numbers, units, genes, hyphens and stems.
WORDS = [
    "the", "of", "in", "and", "a", "to", "is", "with", "not", "for", "cells", "cell", "Cell", "CELLS",
    "protein", "proteins", "expression", "expressed", "expressing", "increases", "increased", "increase",
    "risk", "patients", "patient's", "mice", "mouse", "tumor", "tumour", "tumors", "T-cell", "T-cells",
    "IL-6", "p53", "TP53", "BRCA1", "mTOR", "mTORC1", "HIV-1", "COVID-19", "SARS-CoV-2", "DNA", "RNA",
    "miR-21", "CD4+", "10", "2.5", "95%", "0.001", "1,000", "mg/kg", "v2.3.1", "e.g.", "i.e.", "HTTPServer",
    "snake_case", "http_server", "camelCaseWord", "running", "runs", "ran", "studies", "study", "studied",
    "dying", "lying", "happy", "happiness", "x", "I", "A", "an", "as", "at", "by", "well-known", "long-term",
    "non-small-cell", "anti-inflammatory", "NF-kappaB", "TNF-alpha", "beta", "alpha", "α-synuclein",
    "café", "naïve", "Zürich", "東京大学", "résumé", "supercalifragilisticexpialidocious",
    "https://example.org/a/b", "std::vector", "don't", "O'Brien", "__init__", "a1b2", "ABCdef",
]
SEPARATORS = [" ", " ", " ", "  ", ", ", ". ", "; ", " (", ") ", "\n", "\t", " - ", "/", ":", "'"]


def random_text(rng: random.Random, ascii_only: bool) -> str:
    """A text of 0-400 random words with random separators."""
    pool = [w for w in WORDS if w.isascii()] if ascii_only else WORDS
    return "".join(rng.choice(pool) + rng.choice(SEPARATORS) for _ in range(rng.randint(0, 400)))


def random_query(rng: random.Random) -> str:
    """A query of 1-6 random words (stopwords, stems, identifiers, non-ASCII included)."""
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))


def random_tags(rng: random.Random) -> list[str]:
    """0-3 tags, some of them query words."""
    return [rng.choice(WORDS + ["infra", "oncology", "Cell Biology"]) for _ in range(rng.randint(0, 3))]


def random_source(rng: random.Random) -> str | None:
    """No source, or a path made of words."""
    return None if rng.random() < 0.4 else f"notes/{rng.choice(WORDS)}_{rng.choice(WORDS)}.md"


@pytest.fixture
def python_only() -> Iterator[None]:
    """Explain with the Python path alone for one test."""
    explain.use_native(False)
    try:
        yield
    finally:
        explain.use_native(True)


def explain_both(words: Sequence[object], texts: Sequence[tuple[str, list[str], str | None]]) -> tuple[list[object], list[object]]:
    """Every text explained by one Explainer per path, the compiled one first."""
    got_native: list[object] = []
    got_python: list[object] = []
    for native, out in ((True, got_native), (False, got_python)):
        explain.use_native(native)
        try:
            explainer = Explainer(words)  # type: ignore[arg-type]
            out.extend(explainer.explain(text, tags, source) for text, tags, source in texts)
        finally:
            explain.use_native(True)
    return got_native, got_python


def test_the_compiled_explainer_answers_as_the_python_one_on_random_scifact_like_texts() -> None:
    rng = random.Random(25)
    for _ in range(150):
        words = searchable_words(query_words(random_query(rng)))
        texts = [(random_text(rng, ascii_only=rng.random() < 0.8), random_tags(rng), random_source(rng))
                 for _ in range(12)]
        texts.append(texts[0])  # a repeated hit: the explainer's caches answer it
        native, python = explain_both(words, texts)
        for text, a, b in zip(texts, native, python):
            assert a == b, (words, text)


def test_the_compiled_explainer_answers_as_the_standalone_reference_at_every_window() -> None:
    rng = random.Random(7)
    for round_ in range(600):
        words = searchable_words(query_words(random_query(rng)))
        text, tags, source = random_text(rng, ascii_only=True), random_tags(rng), random_source(rng)
        max_chars = rng.choice([1, 5, 20, 60, 200, 1000])
        reference = Explainer(words)
        cache = _chunk_cache if round_ % 2 else {}  # a cold cache: chunks analyzed by the analyzer
        matches, snip = _kernels.ascii_explain(
            text, reference.finder.wanted, reference.finder.ascii_probes, cache, _analysis, _stem, STOPWORDS,
            reference.finder.stem_probes, reference.finder.exact_terms, _stem_cache if round_ % 3 else {},
            tuple((w.exact, w.stem, w.parts) for w in reference.content), reference._other_fields, tags, source,
            {}, TermMatch, Snippet, max_chars)
        _assert_as_python(words, text, tags, source, max_chars, matches, snip)


def _assert_as_python(words: Sequence[QueryWord], text: str, tags: Sequence[str], source: str | None,
                      max_chars: int, matches: tuple[TermMatch, ...], snip: Snippet | None) -> None:
    """The compiled path's matches and snippet are the Python reference's."""
    expected = match_terms(words, text, tags, source)
    assert matches == expected, (words, text, tags, source)
    if snip is None:  # the best field is not the text: explain.snippet makes that one
        assert expected and all(m.field != "text" for m in expected)
    else:
        assert snip == snippet(text, tags, source, expected, words, max_chars), (words, text, max_chars)


def test_each_term_match_is_made_once_per_explainer_on_both_paths() -> None:
    words = query_words("servers timeout")
    for native in (True, False):
        explain.use_native(native)
        try:
            explainer = Explainer(words)
            first, _ = explainer.explain("servers time out", [], None)
            again, _ = explainer.explain("our servers, timeouts", [], None)
        finally:
            explain.use_native(True)
        assert first[0] is again[0]


def test_the_tags_or_source_snippet_of_an_ascii_text_is_the_python_one(python_only: None) -> None:
    words = query_words("kubernetes")
    explain.use_native(True)
    got = Explainer(words).explain("nothing relevant here", ["kubernetes", "infra"], "k8s/kubernetes.md")
    explain.use_native(False)
    want = Explainer(words).explain("nothing relevant here", ["kubernetes", "infra"], "k8s/kubernetes.md")
    assert got == want
    assert got[1].field == "tags" and got[1].highlights == ((0, 10),)


def test_the_python_path_alone_explains_an_ascii_text_as_before(python_only: None) -> None:
    matches, snip = Explainer(query_words("http servers")).explain("The HTTPServer timed out; servers wait.", [], None)
    assert [m.term for m in matches] == ["http", "servers"]
    assert snip == Snippet("text", "The HTTPServer timed out; servers wait.", ((4, 8), (26, 33)))


def test_the_compiled_explainer_refuses_what_it_cannot_read() -> None:
    def call(text: object, words: object, others: object = lambda tags, source: (set(), set(), set()),
             max_chars: int = 200) -> object:
        """ascii_explain with everything else well formed."""
        return _kernels.ascii_explain(text, {"server"}, ("server",), {}, _analysis, _stem, STOPWORDS,  # type: ignore[arg-type]
                                      (), ("server",), {}, words, others, [], None, {}, TermMatch, Snippet, max_chars)  # type: ignore[arg-type]

    with pytest.raises(ValueError, match="ASCII"):
        call("café server", (("server", None, ()),))
    with pytest.raises(TypeError, match="word"):
        call("server", (("server", None),))
    with pytest.raises(TypeError, match="word"):
        call("server", (("server", 5, ()),))
    with pytest.raises(ValueError, match="max_chars"):
        call("server", (("server", None, ()),), max_chars=0)
    with pytest.raises(TypeError, match="three sets"):
        call("servers", (("server", None, ()),), others=lambda tags, source: None)
    with pytest.raises(ZeroDivisionError):
        call("servers", (("server", None, ()),), others=lambda tags, source: 1 / 0)
    # others is asked only when a word's exact form is not in the text.
    assert call("a server", (("server", None, ()),), others=lambda tags, source: 1 / 0)[0] == (
        TermMatch("server", "exact", "text"),)
    assert call("", ()) == ((), Snippet("text", "", ()))
    with pytest.raises(ValueError, match="probes"):
        _kernels.ascii_explain("servers", {"~server"}, ("serve",), {}, _analysis, _stem, STOPWORDS, ("",), (), {},
                               (("server", "~server", ()),), lambda tags, source: (set(), set(), set()), [], None,
                               {}, TermMatch, Snippet, 200)


def test_a_plain_word_holding_no_wanted_stems_probe_is_not_stemmed() -> None:
    stemmed: list[str] = []

    def stem(word: str) -> str:
        """The analyzer's stem, noting each word asked."""
        stemmed.append(word)
        return _stem(word)

    words = (("servers", "~server", ()), ("timeout", "~timeout", ()))
    got = _kernels.ascii_explain("servers serve timeouts", {"servers", "~server", "timeout", "~timeout"},
                                 ("serve", "timeou"), {}, _analysis, stem, STOPWORDS, ("timeou",),
                                 ("servers", "timeout"), {}, words,
                                 lambda tags, source: (set(), set(), set()), [], None, {}, TermMatch, Snippet, 200)
    assert stemmed == ["timeouts"]  # "servers" and "serve" hold no wanted stem's probe: not stemmed
    assert [m.term for m in got[0]] == ["servers", "~timeout"]
    # A word the stems' cache holds is read from it, not stemmed again.
    again = _kernels.ascii_explain("servers serve timeouts", {"servers", "~server", "timeout", "~timeout"},
                                   ("serve", "timeou"), {}, _analysis, stem, STOPWORDS, ("timeou",),
                                   ("servers", "timeout"), {"timeouts": "timeout"}, words,
                                   lambda tags, source: (set(), set(), set()), [], None, {}, TermMatch, Snippet, 200)
    assert stemmed == ["timeouts"] and again[0] == got[0]


def test_the_mostly_ascii_finder_gives_the_finders_spans_on_random_mixed_texts() -> None:
    from engram_index.engine.termfind import TermFinder, find_terms, find_terms_mostly_ascii

    rng = random.Random(11)
    unicode_words = ["β-catenin", "α", "–", "±5%", "“quoted”", "10×", "≥2", "μg", "Zürich", "東京大学", "naïve",
                     "don’t", "ﬁne", "İstanbul", "e\u0301t\u00e9", "αβγδ", "x—y"]
    for _ in range(400):
        pieces = [rng.choice(WORDS + unicode_words) + rng.choice(SEPARATORS) for _ in range(rng.randint(0, 150))]
        text = "".join(pieces)
        words = searchable_words(query_words(random_query(rng) + " " + rng.choice(unicode_words + WORDS)))
        explainer = Explainer(words)
        got = find_terms_mostly_ascii(text, TermFinder(explainer.wanted))
        if got is None:  # more than _FEW_PIECES pieces of other characters
            assert sum(not p.isascii() for p in text.split(" ")) > 0
            continue
        assert got == find_terms(text, explainer.wanted), (text, words)


def test_explainers_of_the_same_words_share_their_plan_but_not_their_memo() -> None:
    words = query_words("café servers timeout")
    first, second = Explainer(words), Explainer(list(words))
    assert first.wanted is second.wanted and first.finder.ascii_probes is second.finder.ascii_probes
    assert first.finder.memo is not second.finder.memo
    text = "café servers time out"
    assert first.explain(text, [], None) == second.explain(text, [], None)
    other = Explainer(query_words("kubernetes"))
    assert other.wanted is not first.wanted


def test_the_compiled_matches_of_any_text_are_the_python_ones() -> None:
    rng = random.Random(3)
    for _ in range(300):
        words = searchable_words(query_words(random_query(rng)))
        text, tags, source = random_text(rng, ascii_only=False), random_tags(rng), random_source(rng)
        explainer = Explainer(words)
        found = {t for _, _, t in find_terms(text, explainer.wanted)}
        got = _kernels.match_terms(explainer._words, found, explainer._other_fields, tags, source, {}, TermMatch)
        assert got == match_terms(words, text, tags, source, text_terms=found), (words, text, tags, source)
    with pytest.raises(TypeError, match="word"):
        _kernels.match_terms((("server",),), set(), lambda tags, source: (set(), set(), set()), [], None, {}, TermMatch)


# Words of other characters: accents, combining marks (alone, too), other spaces, astral characters.
OTHER_WORDS = ["β-catenin", "α", "–", "±5%", "“quoted”", "10×", "≥2", "μg", "Zürich", "東京大学", "naïve", "don’t",
               "ﬁne", "İstanbul", "e\u0301t\u00e9", "\u0301cell", "cell\u0301", "αβγδ", "x—y", "a\u00a0cell", "b\u3000c",
               "😀cells", "cells😀", "𝔘nicode", "café", "\u2028", "\u0301\u0302", "résumé"]


def test_the_compiled_explainer_of_other_characters_answers_as_the_python_one_at_every_window() -> None:
    from engram_index.engine.explain import _is_mark
    from engram_index.engine.termfind import _FEW_PIECES

    rng = random.Random(27)
    for round_ in range(800):
        pool = WORDS + OTHER_WORDS * rng.choice([1, 4])
        text = "".join(rng.choice(pool) + rng.choice(SEPARATORS) for _ in range(rng.randint(0, 250)))
        q = random_query(rng) + " " + rng.choice(OTHER_WORDS + WORDS)
        words = searchable_words(query_words(q))
        tags, source = random_tags(rng), random_source(rng)
        max_chars = rng.choice([1, 5, 20, 60, 200, 1000])
        reference = Explainer(words)
        finder = reference.finder
        got = _kernels.mostly_ascii_explain(
            text, finder.wanted, finder.ascii_probes, _chunk_cache if round_ % 2 else {}, _analysis, _stem, STOPWORDS,
            finder.stem_probes, finder.exact_terms, _stem_cache, reference._words, reference._other_fields, tags,
            source, {}, TermMatch, Snippet, max_chars, finder.hits, _is_mark, _FEW_PIECES)
        if got is None:  # more pieces of other characters than it takes
            assert sum(not piece.isascii() for piece in text.split(" ")) > _FEW_PIECES
            continue
        matches, snip = got
        _assert_as_python(words, text, tags, source, max_chars, matches, snip)
    assert _kernels.mostly_ascii_explain(
        "é " * (_FEW_PIECES + 1), set(), (), {}, _analysis, _stem, STOPWORDS, (), (), {}, (),
        lambda tags, source: (set(), set(), set()), [], None, {}, TermMatch, Snippet, 200, lambda piece: [], _is_mark,
        _FEW_PIECES) is None


def test_one_explainer_over_hits_of_other_characters_answers_as_the_python_path() -> None:
    rng = random.Random(2)
    for _ in range(150):
        words = searchable_words(query_words(random_query(rng) + " " + rng.choice(OTHER_WORDS)))
        texts = [("".join(rng.choice(WORDS + OTHER_WORDS) + rng.choice(SEPARATORS) for _ in range(rng.randint(0, 120))),
                  random_tags(rng), random_source(rng)) for _ in range(10)]
        texts.append(texts[0])  # a repeated hit: the finder's memo answers its pieces
        native, python = explain_both(words, texts)
        for text, a, b in zip(texts, native, python):
            assert a == b, (words, text)


def test_the_compiled_explainer_makes_snippets_as_their_type_makes_them() -> None:
    from dataclasses import dataclass

    @dataclass(frozen=True, slots=True)
    class Checked:
        """A snippet type of slots whose __post_init__ must run."""

        field: str
        text: str
        highlights: tuple[tuple[int, int], ...]

        def __post_init__(self) -> None:
            """Refuse every snippet, to show that it ran."""
            raise RuntimeError("post-init ran")

    reference = Explainer(query_words("servers"))
    finder = reference.finder

    def call(snippet_type: object) -> object:
        """Explain one text with the given snippet type."""
        return _kernels.ascii_explain(
            "the servers", finder.wanted, finder.ascii_probes, _chunk_cache, _analysis, _stem, STOPWORDS,
            finder.stem_probes, finder.exact_terms, _stem_cache, reference._words, reference._other_fields, [], None,
            {}, TermMatch, snippet_type, 200)[1]

    made = call(Snippet)
    assert type(made) is Snippet and made == Snippet("text", "the servers", ((4, 11),))
    with pytest.raises(RuntimeError, match="post-init ran"):
        call(Checked)
    assert call(lambda field, text, highlights: (field, text, highlights)) == ("text", "the servers", ((4, 11),))
    assert call(Snippet) == made  # the fast type again after others
