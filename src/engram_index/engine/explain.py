"""Match explanations: which query terms a document holds, and a highlighted snippet.

Both work from the analyzer's own terms (exact forms, "~stems", identifier parts), so what
is explained is exactly what the keyword index matched. They run for every returned hit, so
they analyze only the parts of a text that can hold a query term where finding those pays (see
find_terms), with one TermFinder per query remembering what it learned across the hits.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from engram_index.bounded import Bounded
from engram_index.engine import _kernels
from engram_index.engine.analyzer import (
    STOPWORDS,
    QueryWord,
    _analysis,
    _chunk_cache,
    _stem,
    _stem_cache,
    index_terms,
    normalize,
    term_set,
)
from engram_index.engine.termfind import _FEW_PIECES, TermFinder, find_terms, find_terms_with
from engram_index.engine.types import FieldName, Snippet, TermKind, TermMatch

ELLIPSIS = "…"
_ELLIPSIS_BYTES = len(ELLIPSIS.encode("utf-8"))
_FIELDS: tuple[FieldName, ...] = ("text", "tags", "source")
_MAX_CHARS = 200
# Whether an ASCII text is explained in one compiled call (_kernels.ascii_explain); the Python below
# is the reference, and use_native(False) runs it alone (tests compare the two).
_native = [True]


def use_native(on: bool) -> None:
    """Explain ASCII texts with the compiled explainer (True, the default) or in Python alone (False)."""
    _native[0] = on


def _tag_body(tags: Sequence[str]) -> str:
    """Join tags into the one text that the tags snippet shows."""
    return ", ".join(tags)


def _content_words(words: Sequence[QueryWord]) -> list[QueryWord]:
    """The words that count: stopwords drop out unless the query is nothing else."""
    return [w for w in words if w.exact not in STOPWORDS] or list(words)


def _wanted(words: Sequence[QueryWord]) -> set[str]:
    """Every alternative term of the words: exact forms, stems and identifier parts."""
    wanted: set[str] = set()
    for word in words:
        wanted.add(word.exact)
        if word.stem is not None:
            wanted.add(word.stem)
        wanted.update(word.parts)
    return wanted


class Explainer:
    """The explanations of one query's hits: what depends on the query alone is worked out once."""

    __slots__ = ("words", "content", "wanted", "finder", "_matches", "_words")

    def __init__(self, words: Sequence[QueryWord]) -> None:
        """Take the analyzed query (stopwords and repeats already dropped, as the keyword index does)."""
        self.words = words
        # By the words' identities (analyzer.query_words answers a repeated text with the same words):
        # the plan holds its words, so no id in a key can be another object's while it is kept.
        key = tuple(map(id, words))
        plan = _plans.get(key)
        if plan is None:  # what depends on the words alone, made once for every search of them
            content = _content_words(words)
            wanted = _wanted(content)
            plan = (tuple(words), content, wanted, TermFinder(wanted), tuple((w.exact, w.stem, w.parts) for w in content))
            _plans.keep(key, plan)
        # (The plan's parts are never changed: the wanted set is read only, here and by the finder.)
        _, self.content, self.wanted, finder, self._words = plan
        # The hits of one query share its probes and many pieces ("cells", the query's own words);
        # the finder remembers them, and is not shared with other searches or threads.
        self.finder = finder.fresh()
        # Each (term, kind, field) is made once a query (they are immutable).
        self._matches: dict[tuple[str, TermKind, FieldName], TermMatch] = {}

    def explain(self, text: str, tags: Sequence[str], source: str | None) -> tuple[tuple[TermMatch, ...], Snippet]:
        """The matched terms and the snippet of one document, reading its text only once."""
        if _native[0] and text.isascii():
            # The same matches and snippet as below, in one call (the tags' or the source's snippet aside).
            finder = self.finder
            matches, snip = _kernels.ascii_explain(
                text, finder.wanted, finder.ascii_probes, _chunk_cache, _analysis, _stem, STOPWORDS, finder.stem_probes,
                finder.exact_terms, _stem_cache, self._words,
                _field_terms, tags, source, self._matches, TermMatch, Snippet, _MAX_CHARS)
            return matches, snip if snip is not None else snippet(text, tags, source, matches, self.words)
        if _native[0]:
            # The same for a text with few pieces of other characters (those pieces' tokens from the
            # finder, each distinct one analyzed once a query), else the matches alone in C.
            finder = self.finder
            got = _kernels.mostly_ascii_explain(
                text, finder.wanted, finder.ascii_probes, _chunk_cache, _analysis, _stem, STOPWORDS, finder.stem_probes,
                finder.exact_terms, _stem_cache, self._words, _field_terms, tags, source, self._matches, TermMatch,
                Snippet, _MAX_CHARS, finder.hits, _is_mark, _FEW_PIECES)
            if got is not None:
                matches, snip = got
                return matches, snip if snip is not None else snippet(text, tags, source, matches, self.words)
            spans = find_terms_with(text, finder)
            matches = _kernels.match_terms(self._words, {t for _, _, t in spans}, _field_terms, tags, source,
                                           self._matches, TermMatch) if self._words else ()
            return matches, snippet(text, tags, source, matches, self.words, text_spans=spans)
        spans = find_terms_with(text, self.finder)
        matches = self.match_terms(text, tags, source, text_terms={t for _, _, t in spans})
        return matches, snippet(text, tags, source, matches, self.words, text_spans=spans)

    def _other_fields(
        self, tags: Sequence[str], source: str | None
    ) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
        """The whole tags (normalized), and the terms of the tags and of the source (_field_terms)."""
        return _field_terms(tags, source)

    def match_terms(
        self, text: str, tags: Sequence[str], source: str | None, text_terms: set[str] | None = None
    ) -> tuple[TermMatch, ...]:
        """Say which query terms the document holds: per word its exact form, else stem, else parts.

        `text_terms`, when given, are the wanted terms already found in the text.
        """
        if not self.content:
            return ()
        wanted = self.wanted
        in_text = text_terms & wanted if text_terms is not None else _text_terms(text, wanted)
        others: tuple[frozenset[str], frozenset[str], frozenset[str]] | None = None
        found: dict[tuple[str, TermKind, FieldName], None] = {}  # in order, each once
        for word in self.content:
            # The best kind over all fields wins; among fields holding it, the first (text, tags, source).
            exact, stem = word.exact, word.stem
            if exact in in_text:
                found[exact, "exact", "text"] = None
                continue
            if others is None:
                others = self._other_fields(tags, source)
            whole, in_tags, in_source = others
            if exact in whole or exact in in_tags:
                found[exact, "exact", "tags"] = None
            elif exact in in_source:
                found[exact, "exact", "source"] = None
            elif stem is not None and stem in in_text:
                found[stem, "stem", "text"] = None
            elif stem is not None and stem in in_tags:
                found[stem, "stem", "tags"] = None
            elif stem is not None and stem in in_source:
                found[stem, "stem", "source"] = None
            else:
                for part in word.parts:
                    if part in in_text:
                        found[part, "part", "text"] = None
                    elif part in in_tags:
                        found[part, "part", "tags"] = None
                    elif part in in_source:
                        found[part, "part", "source"] = None
        made = self._matches
        out = []
        for key in found:
            match = made.get(key)
            if match is None:
                match = made[key] = TermMatch(*key)
            out.append(match)
        return tuple(out)


_NO_TAGS: frozenset[str] = frozenset()
# The other fields' analyses by (tags, source), for every query: most hits lack a query word in
# their text, so their tags and source are looked at, and analyzing them again for each query
# was a third of an explained search's cost (docs/benchmarks.md). Their whole term sets are kept,
# not only a query's wanted ones: the matches ask only whether a wanted term is among them.
_FIELDS_LIMIT = 16_384
_fields: Bounded[tuple[tuple[str, ...], str | None], tuple[frozenset[str], frozenset[str], frozenset[str]]] = Bounded(
    _FIELDS_LIMIT)


def _field_terms(tags: Sequence[str], source: str | None) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """The whole tags (normalized), the tags' terms and the source's terms, each (tags, source) analyzed once."""
    key = (tuple(tags), source)
    found = _fields.get(key)
    if found is None:
        whole = frozenset(normalize(tag) for tag in tags) if tags else _NO_TAGS
        tag_terms = frozenset(term_set(_tag_body(tags))) if tags else _NO_TAGS
        source_terms = frozenset(term_set(source)) if source else _NO_TAGS
        found = (whole, tag_terms, source_terms)
        _fields.keep(key, found)
    return found
# The words' plans (the words, content words, wanted terms, a finder's probes, the compiled path's
# words), by the words' ids, up to 4,096 (the analyzed queries' bound), started over when full.
_Plan = tuple[
    tuple[QueryWord, ...], list[QueryWord], set[str], TermFinder, tuple[tuple[str, str | None, tuple[str, ...]], ...]
]
_plans: Bounded[tuple[int, ...], _Plan] = Bounded(4096)


def explain(
    words: Sequence[QueryWord], text: str, tags: Sequence[str], source: str | None
) -> tuple[tuple[TermMatch, ...], Snippet]:
    """The matched terms and the snippet of one document, reading its text only once."""
    return Explainer(words).explain(text, tags, source)


def match_terms(
    words: Sequence[QueryWord],
    text: str,
    tags: Sequence[str],
    source: str | None,
    text_terms: set[str] | None = None,
) -> tuple[TermMatch, ...]:
    """Say which query terms the document holds: per word its exact form, else stem, else parts.

    `text_terms`, when given, are the wanted terms already found in the text.
    """
    return Explainer(words).match_terms(text, tags, source, text_terms)


def _text_terms(text: str, wanted: set[str]) -> set[str]:
    """The wanted terms a text holds: all its terms when short, a targeted search when long."""
    if len(text) <= 4000:
        return set(index_terms(text)) & wanted
    return {term for _, _, term in find_terms(text, wanted)}


def snippet(
    text: str,
    tags: Sequence[str],
    source: str | None,
    matches: Sequence[TermMatch],
    words: Sequence[QueryWord],
    max_chars: int = _MAX_CHARS,
    text_spans: list[tuple[int, int, str]] | None = None,
) -> Snippet:
    """Cut about max_chars of the best-matching field around its matches, with byte highlights.

    `words` is accepted so callers can pass the query as analyzed; the matches already carry
    every term to highlight (exact and part terms at their own spans, stems at their words).
    """
    del words  # the matches say everything needed
    if not matches:
        return Snippet("text", _head(text, max_chars), ())
    field: FieldName = "text" if any(m.field == "text" for m in matches) else matches[0].field
    body = text if field == "text" else _tag_body(tags) if field == "tags" else source or ""
    terms = {m.term for m in matches if m.field == field}
    if field == "text" and text_spans is not None:
        spans = [span for span in text_spans if span[2] in terms]
    else:
        spans = find_terms(body, terms)
    if field == "tags":
        spans = sorted(spans + _whole_tag_spans(tags, terms), key=lambda span: span[0])
    if not spans:
        return Snippet(field, _head(body, max_chars), ())
    if len(body) <= max_chars:
        start, end = 0, len(body)
    else:
        start, end = _window(body, spans, max_chars)
    prefix = ELLIPSIS if start > 0 else ""
    suffix = ELLIPSIS if end < len(body) else ""
    # A word longer than the window (or cut at its edge) is highlighted as far as it shows.
    inside = [(max(s, start), min(e, end)) for s, e, _ in spans if s < end and e > start]
    highlights = _byte_ranges(body, start, _merge(inside), _ELLIPSIS_BYTES if prefix else 0)
    return Snippet(field, prefix + body[start:end] + suffix, highlights)


def _whole_tag_spans(tags: Sequence[str], terms: set[str]) -> list[tuple[int, int, str]]:
    """Give the character spans, in the joined tags, of tags that equal a matched term whole."""
    out: list[tuple[int, int, str]] = []
    pos = 0
    for tag in tags:
        whole = normalize(tag)
        if whole in terms:
            out.append((pos, pos + len(tag), whole))
        pos += len(tag) + 2  # ", "
    return out


def _window(body: str, spans: list[tuple[int, int, str]], max_chars: int) -> tuple[int, int]:
    """Choose about max_chars of body covering the most distinct terms (then the earliest)."""
    if body.isascii():  # the same choice, compiled (_kernels.snippet_bounds)
        return _kernels.snippet_bounds(body, spans, max_chars)
    return _window_any(body, spans, max_chars)


def _window_any(body: str, spans: list[tuple[int, int, str]], max_chars: int) -> tuple[int, int]:
    """_window for any body, in Python."""
    best_count, best_first, best_last = 0, 0, 0
    counts: dict[str, int] = {}
    j, n = 0, len(spans)
    # Two pointers over the spans (sorted by start): spans[i..j) fit in a window at spans[i].
    for i in range(n):
        first_start, _, term_i = spans[i]
        if j < i:
            j = i
        while j < n:
            _, end_j, term_j = spans[j]
            if end_j - first_start > max_chars:
                break
            counts[term_j] = counts.get(term_j, 0) + 1
            j += 1
        if len(counts) > best_count:
            best_count, best_first, best_last = len(counts), i, j - 1
        if j > i:  # spans[i] was counted; slide past it
            left = counts[term_i]
            if left == 1:
                del counts[term_i]
            else:
                counts[term_i] = left - 1
    covered_start = spans[best_first][0]
    covered_end = max([span[1] for span in spans[best_first : best_last + 1]])
    covered_end = min(covered_end, covered_start + max_chars)
    # Center the covered span, then keep the window inside the body.
    start = max(0, covered_start - (max_chars - (covered_end - covered_start)) // 2)
    end = min(len(body), start + max_chars)
    start = max(0, end - max_chars)
    return _snap(body, start, end, covered_start, covered_end)


# The first whitespace character in a range, and the last (re's \s is str.isspace() for one character).
_SPACE = re.compile(r"\s")
_LAST_SPACE = re.compile(r"\s\S*\Z")


def _snap(body: str, start: int, end: int, keep_start: int, keep_end: int) -> tuple[int, int]:
    """Move window bounds to word boundaries, never cutting into [keep_start, keep_end)."""
    if start > 0 and not body[start - 1].isspace():
        # Drop the cut word at the start, when a space comes before the matches.
        space = _SPACE.search(body, start, keep_start)
        if space is not None:
            start = space.start() + 1
    while start < keep_start and body[start].isspace():
        start += 1
    while 0 < start < keep_start and _is_mark(body[start]):
        start += 1  # a combining mark belongs to the character before the cut
    if end < len(body) and not body[end].isspace() and not body[end - 1].isspace():
        space = _LAST_SPACE.search(body, keep_end, end)
        if space is not None:
            end = space.start()
    while end > keep_end and body[end - 1].isspace():
        end -= 1
    while end < len(body) and _is_mark(body[end]):
        end += 1
    return start, end


def _is_mark(char: str) -> bool:
    """Say whether a character is a combining mark (Unicode category M)."""
    return not char.isascii() and unicodedata.category(char).startswith("M")


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sort ranges and merge the overlapping ones."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _byte_ranges(
    body: str, start: int, ranges: list[tuple[int, int]], offset: int
) -> tuple[tuple[int, int], ...]:
    """Turn character ranges of body into UTF-8 byte ranges of the snippet text."""

    def size(a: int, b: int) -> int:
        """Count the UTF-8 bytes of body[a:b] (a lone surrogate counts 3, as the analyzer's)."""
        return len(body[a:b].encode("utf-8", "surrogatepass"))

    if body.isascii():  # one byte a character
        return tuple((offset + a - start, offset + b - start) for a, b in ranges)
    out: list[tuple[int, int]] = []
    char, byte = start, offset
    for a, b in ranges:
        byte += size(char, a)
        length = size(a, b)
        out.append((byte, byte + length))
        char, byte = b, byte + length
    return tuple(out)


def _head(text: str, max_chars: int) -> str:
    """Give the start of a text, cut at a word boundary near max_chars, with … when cut."""
    if len(text) <= max_chars:
        return text
    _, end = _snap(text, 0, max_chars, 0, max_chars // 2)
    return text[:end] + ELLIPSIS
