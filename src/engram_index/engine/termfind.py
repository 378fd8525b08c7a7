"""Finding a query's terms in a text, with their spans, without analyzing all of it.

The same spans as filtering the analyzer's tokens (analyzer.tokens) by term, but fast on long
texts and across the hits of one query: no chunk spans a space, so only the space-free pieces
that can hold a wanted term are analyzed, each distinct piece once, and a piece is ruled out when
it lacks every wanted term's probe (explain.py uses it for every returned hit).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection
from itertools import accumulate

import regex

from engram_index.bounded import Bounded
from engram_index.engine import _kernels
from engram_index.engine.analyzer import (
    MAX_TERM_CHARS,
    STEM_PREFIX,
    STOPWORDS,
    _analysis,
    _chunk_cache,
    _chunker,
    _CACHE_LIMIT,
    _piece_cache,
    _stem,
)

_NON_ASCII = regex.compile(r"[^\x00-\x7F]")
_FEW_PIECES = 64  # beyond this many non-ASCII pieces, splitting the whole text is cheaper
_fold_cache: Bounded[str, str] = Bounded(_CACHE_LIMIT)

def _piece_tokens(piece: str) -> tuple[tuple[str, int, int], ...]:
    """Give every (term, start, end) of a whitespace-free piece, character offsets, cached."""
    cached = _piece_cache.get(piece)
    if cached is not None:
        return cached
    out: list[tuple[str, int, int]] = []
    for m in _chunker(piece).finditer(piece):
        base = m.start()
        chunk_terms, meta = _analysis(m.group())
        for term, (_, start, end) in zip(chunk_terms, meta):
            out.append((term, base + start, base + end))
    result = tuple(out)
    if len(piece) <= MAX_TERM_CHARS:
        _piece_cache.keep(piece, result)
    return result


def _probe(term: str) -> str:
    """Give a lower-case substring that any ASCII source of the term must contain."""
    if not term.startswith(STEM_PREFIX):
        return term  # exact and part terms are the lowered source itself (or a prefix of it)
    stem = term[len(STEM_PREFIX) :]
    # Snowball changes at most the last letter of a word (happy → happi), except for the
    # dying/lying/tying → die/lie/tie exceptions.
    return stem[0] if stem in ("die", "lie", "tie") else stem[: max(1, len(stem) - 1)]


def _ascii_probes(wanted: Collection[str]) -> tuple[str, ...]:
    """The distinct probes of the ASCII wanted terms (the only ones an ASCII text can hold), in order."""
    return _fewest(sorted({_probe(t) for t in wanted if t.isascii()}))


def _stem_probes(wanted: Collection[str]) -> tuple[str, ...]:
    """The probes of the ASCII wanted stems alone (a plain word holding none need not be stemmed)."""
    return _fewest(sorted({_probe(t) for t in wanted if t.isascii() and t.startswith(STEM_PREFIX)}))


def _fewest(probes: list[str]) -> tuple[str, ...]:
    """The probes without those made of word characters alone that hold another probe: wherever such
    a probe occurs, in one chunk, the one it holds occurs too, in the same chunk (half of a query's
    probes go: "cel" stands for "cell" and "cells")."""
    return tuple(p for p in probes if not (_WORD_CHARS.fullmatch(p) and any(q != p and q in p for q in probes)))


_WORD_CHARS = regex.compile(r"[a-z0-9_]+")


def _piece_at(text: str, pos: int) -> tuple[int, int]:
    """Give the bounds of the space-free run of text around a position."""
    # Any character outside chunks would do as a bound; plain spaces are found fastest.
    end = text.find(" ", pos)
    return text.rfind(" ", 0, pos) + 1, (len(text) if end < 0 else end)


def _ascii_fold(piece: str) -> str:
    """Fold a piece to the ASCII characters that its ASCII terms can be made of."""
    folded = _fold_cache.get(piece)
    if folded is None:
        # NFKD + casefold yields every ASCII character that normalize() can; drop the rest.
        decomposed = unicodedata.normalize("NFKD", piece.replace("\u2019", "'")).casefold()
        folded = decomposed.encode("ascii", "ignore").decode("ascii")
        _fold_cache.keep(piece, folded)
    return folded


class TermFinder:
    """Finds one set of wanted terms in texts, analyzing each distinct piece at most once (one query, one thread)."""

    __slots__ = ("wanted", "probes", "ascii_probes", "stem_probes", "exact_terms", "fold", "memo", "probe_short_texts")

    def __init__(self, wanted: Collection[str]) -> None:
        """Prepare the probes of the wanted terms."""
        self.wanted = set(wanted)
        self.probes = {_probe(t) for t in self.wanted if t.isascii()}
        self.ascii_probes = _ascii_probes(self.wanted)
        self.stem_probes = _stem_probes(self.wanted)
        # The other ASCII wanted terms: a plain word's exact term is one of them or not wanted.
        self.exact_terms = tuple(sorted(t for t in self.wanted if t.isascii() and not t.startswith(STEM_PREFIX)))
        # Folding can rule a non-ASCII piece out only when every wanted term has a probe.
        self.fold = len(self.probes) > 0 and all(t.isascii() for t in self.wanted)
        self.memo: dict[str, list[tuple[str, int, int]]] = {}
        # A one-letter probe is in most pieces of a text (a digit is in few), and visiting them
        # all costs a short text more than the scan (bench/find_terms.py).
        self.probe_short_texts = all(len(p) >= 2 or p.isdigit() for p in self.probes)

    def fresh(self) -> TermFinder:
        """A finder of the same terms, sharing what depends on them alone (never changed), with a memo of its own."""
        other = TermFinder.__new__(TermFinder)
        other.wanted, other.probes, other.ascii_probes = self.wanted, self.probes, self.ascii_probes
        other.stem_probes, other.exact_terms = self.stem_probes, self.exact_terms
        other.fold, other.probe_short_texts = self.fold, self.probe_short_texts
        other.memo = {}
        return other

    def hits(self, piece: str) -> list[tuple[str, int, int]]:
        """Give the piece's wanted tokens (term, start, end), with character offsets."""
        found = self.memo.get(piece)
        if found is None:
            lowered = None
            if piece not in _piece_cache:  # an analyzed piece is cheaper to filter than to fold
                if piece.isascii():
                    lowered = piece.lower()
                elif self.fold:
                    lowered = _ascii_fold(piece)
            if lowered is not None and not any(p in lowered for p in self.probes):
                found = []
            else:
                found = [tok for tok in _piece_tokens(piece) if tok[0] in self.wanted]
            self.memo[piece] = found
        return found


# Below this many characters one pass over every chunk beats probing a text on its own; the
# texts of one query sharing a TermFinder share its probes and pieces, which makes probing
# the cheaper on short texts too (bench/find_terms.py), unless _worth_probing says no.
_SCAN_CHARS = 4000
# A short text is probed only with at most one UTF-8 byte beyond ASCII per this many characters:
# each non-ASCII character puts its piece on the list to visit, which costs more than scanning it.
_CHARS_PER_OTHER_BYTE = 16


def find_terms(text: str, terms: Collection[str], finder: TermFinder | None = None) -> list[tuple[int, int, str]]:
    """Give the CHARACTER spans (start, end, term) of the tokens whose term is wanted, in order.

    The same spans as filtering tokens(text), but fast on long texts: no chunk spans a
    space, so only the space-free pieces that can hold a wanted term are analyzed, each
    distinct piece once, and a piece is ruled out when it lacks every wanted term's probe.
    A finder made for the same terms carries what it learned over to the next text, and then
    short texts are probed as well; a finder made for other terms is not used.
    """
    wanted = set(terms)
    if not wanted:
        return []
    if text.isascii():
        # An ASCII text holds only ASCII terms: its chunks are cut in C, and only those holding a
        # probe are looked up in the analyzer's cache (the finder's probes when it fits).
        fits = finder is not None and finder.wanted == wanted
        probes = finder.ascii_probes if finder is not None and fits else _ascii_probes(wanted)
        return _kernels.ascii_spans(text, wanted, probes, _chunk_cache, _analysis, _stem, STOPWORDS)
    short = len(text) <= _SCAN_CHARS
    if finder is None or finder.wanted != wanted:
        if short:
            return _find_by_scan(text, wanted)
        finder = TermFinder(wanted)
    elif short and not _worth_probing(text, finder):
        return _find_by_scan(text, wanted)
    lowered = text.lower()
    if len(lowered) == len(text):  # not so with a rare letter such as İ
        # Mostly ASCII: look for the probes at C speed, and visit the few non-ASCII pieces.
        others: list[tuple[int, int]] = []
        pos = 0
        while (m := _NON_ASCII.search(text, pos)) is not None and len(others) < _FEW_PIECES:
            others.append(_piece_at(text, m.start()))
            pos = others[-1][1] + 1
        if m is None:
            return _find_by_probes(text, lowered, finder, others)
    return _find_by_scan(text, wanted) if short else _find_by_split(text, finder)


def find_terms_with(text: str, finder: TermFinder) -> list[tuple[int, int, str]]:
    """find_terms(text, finder.wanted, finder), without checking that the finder fits (it is its own)."""
    if text.isascii():
        return _kernels.ascii_spans(text, finder.wanted, finder.ascii_probes, _chunk_cache, _analysis, _stem, STOPWORDS)
    return find_terms(text, finder.wanted, finder)


def find_terms_mostly_ascii(text: str, finder: TermFinder) -> list[tuple[int, int, str]] | None:
    """find_terms(text, finder.wanted, finder) for a text with few space-free pieces holding other
    characters, or None when it has more: those pieces are analyzed as _find_by_probes analyzes
    them (each distinct one once a query), the rest of the text by the compiled finder, with the
    pieces blanked out (spaces: no chunk crosses one, and every position stays a character's). The
    reference of _kernels.mostly_ascii_explain's finding, which explanations use."""
    others: list[tuple[int, int]] = []
    pos = 0
    while (m := _NON_ASCII.search(text, pos)) is not None:
        if len(others) == _FEW_PIECES:
            return None
        others.append(_piece_at(text, m.start()))
        pos = others[-1][1] + 1
    parts: list[str] = []
    last = 0
    for left, right in others:
        parts.append(text[last:left])
        parts.append(" " * (right - left))
        last = right
    parts.append(text[last:])
    spans = _kernels.ascii_spans("".join(parts), finder.wanted, finder.ascii_probes, _chunk_cache, _analysis, _stem,
                                 STOPWORDS)
    out: list[tuple[int, int, str]] = []
    i = 0
    for left, right in others:  # in order: the spans before each piece, then the piece's own
        while i < len(spans) and spans[i][0] < left:
            out.append(spans[i])
            i += 1
        out.extend((left + start, left + end, term) for term, start, end in finder.hits(text[left:right]))
    out.extend(spans[i:])
    return out


def _worth_probing(text: str, finder: TermFinder) -> bool:
    """Say whether probing a short text beats the scan: no one-letter probe, few non-ASCII characters."""
    if not finder.probe_short_texts:
        return False
    return text.isascii() or len(text.encode("utf-8", "surrogatepass")) - len(text) <= len(text) // _CHARS_PER_OTHER_BYTE


def _find_by_scan(text: str, wanted: set[str]) -> list[tuple[int, int, str]]:
    """Find the wanted tokens in one pass over the chunks (cheapest for short texts)."""
    out: list[tuple[int, int, str]] = []
    get = _chunk_cache.get
    for m in _chunker(text).finditer(text):
        chunk = m.group()
        terms, meta = get(chunk) or _analysis(chunk)
        if wanted.isdisjoint(terms):
            continue
        base = m.start()
        for term, (_, start, end) in zip(terms, meta):
            if term in wanted:
                out.append((base + start, base + end, term))
    return out


def _find_by_probes(
    text: str, lowered: str, finder: TermFinder, others: list[tuple[int, int]]
) -> list[tuple[int, int, str]]:
    """Find the wanted tokens in the pieces holding a probe, plus the given other pieces."""
    pieces: set[tuple[int, int]] = set(others)
    for probe in finder.probes:
        pos = lowered.find(probe)
        while pos >= 0:
            piece = _piece_at(text, pos)
            pieces.add(piece)
            pos = lowered.find(probe, max(piece[1], pos + 1))
    out: list[tuple[int, int, str]] = []
    for left, right in sorted(pieces):
        for term, start, end in finder.hits(text[left:right]):
            out.append((left + start, left + end, term))
    return out


def _find_by_split(text: str, finder: TermFinder) -> list[tuple[int, int, str]]:
    """Find the wanted tokens by splitting the text at spaces (for texts of other scripts)."""
    pieces = text.split(" ")
    found = {p for p in set(pieces) if finder.hits(p)}
    out: list[tuple[int, int, str]] = []
    if not found:
        return out
    starts = list(accumulate(map(len, pieces), initial=0))  # plus one space per piece before
    for i in [i for i, piece in enumerate(pieces) if piece in found]:
        pos = starts[i] + i
        out.extend((pos + start, pos + end, term) for term, start, end in finder.hits(pieces[i]))
    return out
