"""The text analyzer, versioned, and the same code for indexing and for queries.

Text is segmented over the ORIGINAL string, and every token is normalized afterwards, so
spans always point at the source text (UTF-8 byte offsets). The rules:

- Chunks: a run of word characters (letters, marks, numbers, connector punctuation) joined
  by single connectors ``. / - :`` (or ``::`` / ``://``) or by an apostrophe between
  letters, with no spaces; a trailing sentence period is not part of it. Emoji and symbols
  are never terms. Han, Hiragana, Katakana and Hangul runs are separate chunks.
- Normalization: NFKC, case folding, then the generic combining diacritics (and Arabic /
  Hebrew vowel points, variation selectors) are dropped and the rest recomposed. Marks of
  Indic, Thai or Japanese script are kept, since there they change the letter.
- Identifiers (a chunk with a connector or an internal case change) give the whole chunk
  as an "exact" term and every part as a "part" term: ``HTTPServer`` → httpserver, http,
  server; ``v2.3.1`` → v2.3.1, v2, 3, 1. Letter/digit boundaries do not split (``sha256``).
- Opaque segments are never split into parts nor stemmed: ASCII letters and digits only,
  and either ≥ 16 hex digits, or ≥ 8 characters with ≥ 3 letter/digit alternations (CIDs,
  TIDs like ``3jzfcijpj2z2a``, base58 keys, hashes).
- Stems: Snowball English, as separate "~stem" terms (kind "stem"), for words and parts made
  only of Latin letters and apostrophes, except stopwords and identifiers as a whole.
- An English possessive ``'s`` is dropped from the exact term (``Alice's`` → alice).
- CJK runs give overlapping character bigrams (one character alone gives itself).
- Every term is cut to MAX_TERM_CHARS characters, on both the index and the query side.
- Offsets count a lone surrogate as 3 bytes ("surrogatepass", which is also the size of
  U+FFFD, so a caller that replaces lone surrogates by U+FFFD keeps valid offsets).
"""

from __future__ import annotations

import threading
import unicodedata
from dataclasses import dataclass, field

import re

import regex
import Stemmer

from engram_index.bounded import Bounded
from engram_index.engine.types import TermKind

ANALYZER_VERSION: int = 1
STEM_PREFIX = "~"
MAX_TERM_CHARS = 64

STOPWORDS: frozenset[str] = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the "
    "their then there these they this to was will with".split()
)

# Characters that are bigrammed; the prolonged sound mark is script "Common" but belongs.
_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\u30FC\uFF70"
# Voicing marks (combining and half-width) stay with the kana before them.
_CJK_MARK = r"\p{M}\u3099-\u309C\uFF9E\uFF9F"
# Word characters of non-CJK chunks; the soft hyphen is invisible inside words.
_WORD = rf"[[\p{{L}}\p{{M}}\p{{N}}\p{{Pc}}\u00AD]--[{_CJK}\uFF9E\uFF9F]]"
_JOIN = r"(?:://|::|[./\-:\u2010\u2011'\u2019])"
_CHUNK_RE = regex.compile(rf"(?V1)(?:[{_CJK}][{_CJK_MARK}]*)+|{_WORD}+(?:{_JOIN}{_WORD}+)*")
# The same chunks for ASCII text with the standard library's engine, about 4x faster there:
# in ASCII, _WORD is [A-Za-z0-9_] and _JOIN is ://, :: or one of . / - : '.
_ASCII_CHUNK_RE = re.compile(r"[A-Za-z0-9_]+(?:(?:://|::|[./\-:'])[A-Za-z0-9_]+)*")


# Outside the characters below, _WORD is exactly the standard library's Unicode \w (letters,
# numbers, "_"), so a text without them can be cut by the standard engine too.
_UNICODE_CHUNK_RE = re.compile(r"\w+(?:(?:://|::|[./\-:\u2010\u2011'\u2019])\w+)*")
_NEEDS_FULL_PATTERN = regex.compile(rf"(?V1)[[\p{{M}}\p{{Pc}}\u00AD{_CJK}\uFF9E\uFF9F]--[_]]").search


def _chunker(text: str) -> regex.Pattern[str] | re.Pattern[str]:
    """The chunk pattern for a text: a standard-library one whenever it cuts the same chunks."""
    if text.isascii():
        return _ASCII_CHUNK_RE
    return _CHUNK_RE if _NEEDS_FULL_PATTERN(text) else _UNICODE_CHUNK_RE
_IS_CJK = regex.compile(rf"(?V1)[{_CJK}]").match
_CJK_UNIT_RE = regex.compile(rf"(?V1)[{_CJK}][{_CJK_MARK}]*")
_HAS_ALNUM = regex.compile(r"[\p{L}\p{N}]").search
# Segments of an identifier lie between connectors (the apostrophe does not separate).
_SEGMENT_RE = regex.compile(r"[^./\-:\u2010\u2011\p{Pc}]+")
# Case-change split: an upper-case run before a capitalized word, a (capitalized) lower run,
# or a trailing upper-case run; digits stay with the letters before them.
_CAMEL_RE = regex.compile(
    r"(?:\p{Lu}[\p{M}\p{N}\u00AD]*)+(?=\p{Lu}\p{Ll})"
    r"|[\p{Lu}\p{Lt}]?[^\p{Lu}\p{Lt}]+"
    r"|(?:\p{Lu}[\p{M}\p{N}\u00AD]*)+"
)
_ALNUM_RUN_RE = regex.compile(r"[0-9]+|[A-Za-z]+")
_HEX = frozenset("0123456789abcdefABCDEF")
_LATIN_WORD = regex.compile(r"[\p{Latin}']*\p{Latin}[\p{Latin}']*").fullmatch


def _strip_table() -> dict[int, str | None]:
    """Build the translate table that drops accents and maps the curly apostrophe."""
    table: dict[int, str | None] = {0x2019: "'", 0x00AD: None, 0x0640: None}
    ranges = [
        (0x0300, 0x036F),  # combining diacritical marks: Latin, Greek, Cyrillic accents
        (0x1AB0, 0x1AFF),
        (0x1DC0, 0x1DFF),
        (0x20D0, 0x20FF),  # combining marks for symbols (keycaps, circles)
        (0xFE00, 0xFE0F),  # variation selectors: presentation only
        (0xFE20, 0xFE2F),
        (0x0591, 0x05C7),  # Hebrew points: optional in writing
        (0x064B, 0x065F),  # Arabic harakat: optional in writing
        (0x0670, 0x0670),
        (0xE0100, 0xE01EF),
    ]
    for low, high in ranges:
        for code in range(low, high + 1):
            if unicodedata.category(chr(code)) in ("Mn", "Me"):
                table[code] = None
    return table


_STRIP = _strip_table()

_stemmer = Stemmer.Stemmer("english")
_stem_lock = threading.Lock()  # a Snowball stemmer object is not safe to share across threads
# Analyses kept per distinct word, chunk and piece: words repeat (Zipf), so indexing mostly hits them.
_CACHE_LIMIT = 200_000
_stem_cache: Bounded[str, str] = Bounded(_CACHE_LIMIT)

_chunk_cache: Bounded[str, tuple[tuple[str, ...], tuple[tuple[TermKind, int, int], ...]]] = Bounded(_CACHE_LIMIT)
_piece_cache: Bounded[str, tuple[tuple[str, int, int], ...]] = Bounded(_CACHE_LIMIT)


@dataclass(frozen=True, slots=True)
class Token:
    """One indexed term occurrence, with the UTF-8 byte span of its source in the original text."""

    term: str
    kind: TermKind
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class QueryWord:
    """One query word with its alternatives: exact form, "~stem" (or None) and identifier parts."""

    exact: str
    stem: str | None
    parts: tuple[str, ...]
    start: int
    end: int
    # The hash, taken once: a query's words key the caches of what they make (keyword_query), and the
    # generated hash built a tuple of the fields on every lookup, a word at a time.
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Take the hash of the fields once."""
        object.__setattr__(self, "_hash", hash((self.exact, self.stem, self.parts, self.start, self.end)))

    def __hash__(self) -> int:
        """The fields' hash, as the generated one gave it."""
        return self._hash


# A word of a chunk: (exact, stem, parts as (term, stem, start, end), start, end), char offsets.
_Part = tuple[str, str | None, int, int]
_Word = tuple[str, str | None, tuple[_Part, ...], int, int]


def normalize(word: str) -> str:
    """Normalize a word, tag or id: NFKC, case folding, accent stripping (see the module doc)."""
    if word.isascii():
        return word.lower()  # NFKC is the identity on ASCII, and casefold equals lower
    folded = unicodedata.normalize("NFKC", word).casefold()
    stripped = unicodedata.normalize("NFD", folded).translate(_STRIP)
    # NFKC again (not NFC) so that normalize() is idempotent.
    return unicodedata.normalize("NFKC", stripped)


def _stem(word: str) -> str:
    """Return the Snowball English stem of a normalized word, cached."""
    stem = _stem_cache.get(word)
    if stem is None:
        with _stem_lock:
            stem = _stemmer.stemWord(word)
        _stem_cache.keep(word, stem)
    return stem


def _is_opaque(segment: str) -> bool:
    """Say whether a segment looks machine-made (hash, CID, record key): see the module doc."""
    if len(segment) < 8 or not segment.isascii() or not segment.isalnum():
        return False
    if len(segment) >= 16 and all(c in _HEX for c in segment):
        return True
    return len(_ALNUM_RUN_RE.findall(segment)) >= 4  # ≥ 3 letter/digit alternations


def _is_plain_ascii_word(chunk: str) -> bool:
    """Say whether an ASCII chunk is letters without inner case change and not opaque."""
    return (
        chunk.isalpha()
        and (chunk.islower() or chunk.isupper() or chunk[1:].islower())
        and (len(chunk) < 16 or not _is_opaque(chunk))
    )


def _exact_and_stem(raw: str, stemmable: bool) -> tuple[str, str | None]:
    """Normalize a word or part and give its stem term when it should have one."""
    term = normalize(raw)
    if len(term) > 2 and term.endswith("'s") and _LATIN_WORD(term):
        term = term[:-2]  # English possessive: "Alice's" is about alice
    stem = None
    if stemmable and term not in STOPWORDS and _LATIN_WORD(term):
        stem = (STEM_PREFIX + _stem(term))[:MAX_TERM_CHARS]
    return term[:MAX_TERM_CHARS], stem


def _chunk_words(chunk: str) -> list[_Word]:
    """Analyze one chunk into words with their alternatives, with chunk-relative char offsets."""
    if chunk.isascii() and (chunk.isdigit() or _is_plain_ascii_word(chunk)):
        # Fast path for most words; the same result as the general rules below.
        term = chunk.lower()
        stem = None
        if not chunk.isdigit() and term not in STOPWORDS:
            stem = (STEM_PREFIX + _stem(term))[:MAX_TERM_CHARS]
        return [(term[:MAX_TERM_CHARS], stem, (), 0, len(chunk))]
    if _IS_CJK(chunk):
        units = [m.span() for m in _CJK_UNIT_RE.finditer(chunk)]
        if len(units) == 1:
            return [(normalize(chunk)[:MAX_TERM_CHARS], None, (), 0, len(chunk))]
        words: list[_Word] = []
        for (start, _), (_, end) in zip(units, units[1:]):
            words.append((normalize(chunk[start:end])[:MAX_TERM_CHARS], None, (), start, end))
        return words
    if not _HAS_ALNUM(chunk):
        return []  # "___" or marks alone are punctuation, not words
    spans: list[tuple[int, int, bool]] = []  # part spans, and whether each is opaque
    for seg in _SEGMENT_RE.finditer(chunk):
        text, offset = seg.group(), seg.start()
        if _is_opaque(text):
            spans.append((offset, offset + len(text), True))
        elif "'" in text or "\u2019" in text:
            spans.append((offset, offset + len(text), False))  # O'Brien is one word
        else:
            for m in _CAMEL_RE.finditer(text):
                if _HAS_ALNUM(m.group()):
                    spans.append((offset + m.start(), offset + m.end(), False))
    if len(spans) == 1 and spans[0][:2] == (0, len(chunk)):
        exact, stem = _exact_and_stem(chunk, not spans[0][2])
        return [(exact, stem, (), 0, len(chunk))]
    whole = normalize(chunk)[:MAX_TERM_CHARS]
    parts: list[_Part] = []
    for start, end, opaque in spans:
        term, stem = _exact_and_stem(chunk[start:end], not opaque)
        if term:
            parts.append((term, stem, start, end))
    if len(parts) == 1 and parts[0][0] == whole:
        parts = []
    return [(whole, None, tuple(parts), 0, len(chunk))]


def _analysis(chunk: str) -> tuple[tuple[str, ...], tuple[tuple[TermKind, int, int], ...]]:
    """Give a chunk's terms in token order and their (kind, start, end) char offsets, cached."""
    cached = _chunk_cache.get(chunk)
    if cached is not None:
        return cached
    terms: list[str] = []
    meta: list[tuple[TermKind, int, int]] = []
    for exact, stem, parts, start, end in _chunk_words(chunk):
        if not exact:
            continue
        terms.append(exact)
        meta.append(("exact", start, end))
        if stem is not None:
            terms.append(stem)
            meta.append(("stem", start, end))
        for part, part_stem, part_start, part_end in parts:
            terms.append(part)
            meta.append(("part", part_start, part_end))
            if part_stem is not None:
                terms.append(part_stem)
                meta.append(("stem", part_start, part_end))
    result = (tuple(terms), tuple(meta))
    if len(chunk) <= MAX_TERM_CHARS:  # long CJK runs rarely repeat; keep the cache small
        _chunk_cache.keep(chunk, result)
    return result


class _ByteOffsets:
    """Convert increasing character offsets of a text to UTF-8 byte offsets, incrementally."""

    __slots__ = ("_text", "_char", "_byte", "_ascii")

    def __init__(self, text: str) -> None:
        """Start at the beginning of the text."""
        self._text = text
        self._char = 0
        self._byte = 0
        self._ascii = text.isascii()

    def at(self, char: int) -> int:
        """Return the byte offset of a char offset not before the previous one asked."""
        if self._ascii:
            return char
        self._byte += len(self._text[self._char : char].encode("utf-8", "surrogatepass"))
        self._char = char
        return self._byte


def tokens(text: str) -> list[Token]:
    """Give every indexed term occurrence of a text, in order, with UTF-8 byte spans."""
    out: list[Token] = []
    offsets = _ByteOffsets(text)
    for m in _chunker(text).finditer(text):
        chunk = m.group()
        terms, meta = _chunk_cache.get(chunk) or _analysis(chunk)
        if not terms:
            continue
        base = offsets.at(m.start())
        if chunk.isascii():
            for term, (kind, start, end) in zip(terms, meta):
                out.append(Token(term, kind, base + start, base + end))
        else:
            for term, (kind, start, end) in zip(terms, meta):
                byte_start = base + len(chunk[:start].encode("utf-8"))
                byte_end = byte_start + len(chunk[start:end].encode("utf-8"))
                out.append(Token(term, kind, byte_start, byte_end))
    return out


def index_terms(text: str) -> list[str]:
    """Give the same terms as tokens(text), in the same order, without spans (the indexing path)."""
    out: list[str] = []
    get = _chunk_cache.get
    for chunk in _chunker(text).findall(text):
        cached = get(chunk)
        out += cached[0] if cached is not None else _analysis(chunk)[0]
    return out


def term_set(text: str) -> set[str]:
    """Give the set of distinct terms of a text (analyzes each distinct chunk once)."""
    out: set[str] = set()
    for chunk in set(_chunker(text).findall(text)):
        out.update(_analysis(chunk)[0])
    return out


# Analyzed queries by text: agents and pages repeat their queries, and the words are immutable.
# Bounded like the chunk cache (started over when full), but smaller: a query can be long.
_QUERY_CACHE_LIMIT = 4096
_query_cache: Bounded[str, tuple[QueryWord, ...]] = Bounded(_QUERY_CACHE_LIMIT)


def query_words(q: str) -> list[QueryWord]:
    """Analyze a query like a document, grouping the alternatives of each word (stopwords kept)."""
    cached = _query_cache.get(q)
    if cached is None:
        cached = _analyze_query(q)
        _query_cache.keep(q, cached)
    return list(cached)  # a list of the caller's own: callers may change it


def _analyze_query(q: str) -> tuple[QueryWord, ...]:
    """query_words without the cache."""
    out: list[QueryWord] = []
    offsets = _ByteOffsets(q)
    for m in _chunker(q).finditer(q):
        chunk = m.group()
        for exact, stem, parts, start, end in _chunk_words(chunk):
            if not exact:
                continue
            byte_start = offsets.at(m.start() + start)
            byte_end = byte_start + len(chunk[start:end].encode("utf-8"))
            # Parts are alternatives, so each distinct part counts once.
            unique = tuple(dict.fromkeys(part[0] for part in parts))
            out.append(QueryWord(exact, stem, unique, byte_start, byte_end))
    return tuple(out)
