"""A keyword query's words and how their terms add up (no index here: keyword.py and the search use it).

A word counts once: by its stem where the document holds it (every inflection, the exact form
included), else by its exact form (an identifier is indexed whole without a stem), plus
PART_WEIGHT x each identifier part. Stopwords and repeated words drop out unless the query is
nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from engram_index.bounded import Bounded
from engram_index.engine.analyzer import STOPWORDS, QueryWord
from engram_index.engine.termcounts import QueryPlan

T = TypeVar("T")


def searchable_words(words: Sequence[QueryWord]) -> list[QueryWord]:
    """Drop stopwords and repeated words, unless the query is nothing but stopwords."""
    seen: set[str] = set()
    kept = [w for w in words if w.exact not in STOPWORDS]
    out: list[QueryWord] = []
    for word in kept or list(words):
        if word.exact not in seen:
            seen.add(word.exact)
            out.append(word)
    return out


# What an identifier part counts for, against 1 for the word itself (tuned on SciFact: 0.4 / 0.6 / 0.8 / 1).
PART_WEIGHT = 0.6


def query_terms(words: Sequence[QueryWord]) -> list[str]:
    """The distinct terms the query looks for: every word's exact form, stem and identifier parts."""
    out: dict[str, None] = {}
    for word in words:
        out[word.exact] = None
        if word.stem:
            out[word.stem] = None
        out.update(dict.fromkeys(word.parts))
    return list(out)


def _parts(word: QueryWord) -> list[str]:
    """A word's distinct identifier parts, other than the word itself."""
    return [p for p in dict.fromkeys(word.parts) if p != word.exact]


def query_plan(words: Sequence[QueryWord]) -> QueryPlan:
    """How the (searchable) words' terms add up, as `KeywordIndex._score` adds them: per word its stem
    where the document holds it, else its exact form, plus PART_WEIGHT x each identifier part."""
    columns: list[tuple[str, int, int, float]] = []
    for group, word in enumerate(words, 1):
        if word.stem and word.stem != word.exact:
            columns += [(word.stem, 1, group, 1.0), (word.exact, 2, group, 1.0)]
        else:
            columns.append((word.exact, 0, 0, 1.0))
        columns += [(part, 0, 0, PART_WEIGHT) for part in _parts(word)]
    return QueryPlan(columns)


class KeywordQuery:
    """What a keyword search needs of its words and nothing of the index: the searchable words, their
    terms, the plan, and the term columns of `KeywordIndex._score`'s sums by role. Immutable (shared
    by the searches of one query text, on any thread)."""

    __slots__ = ("words", "terms", "plan", "plain", "stems", "exacts", "part_columns")

    def __init__(self, words: Sequence[QueryWord]) -> None:
        """Work it all out for these words (searchable_words applied here)."""
        kept = searchable_words(words)
        self.words: tuple[QueryWord, ...] = tuple(kept)
        self.terms: tuple[str, ...] = tuple(query_terms(kept))
        self.plan = query_plan(kept)
        column = {term: i for i, term in enumerate(self.terms)}
        # Each role's columns word after word: the order the sums have always added them in.
        roles = [_roles(w, column) for w in kept]
        self.plain, self.stems, self.exacts, self.part_columns = (
            _frozen([c for word in roles for c in word[role]]) for role in range(4))


def word_columns(word: QueryWord, column: dict[str, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One word's term columns by role (plain, stems, exacts, parts) in a matrix whose columns are
    `column`'s terms (holding every term of the word): what `KeywordQuery((word,))` holds of its own."""
    plain, stems, exacts, parts = _roles(word, column)
    return _frozen(plain), _frozen(stems), _frozen(exacts), _frozen(parts)


def _roles(word: QueryWord, column: dict[str, int]) -> tuple[list[int], list[int], list[int], list[int]]:
    """A word's term columns by role: its exact form alone when it has no other stem, else its stem
    and its exact form (the document's stem part where it holds the stem), and its parts."""
    if word.stem and word.stem != word.exact:
        return [], [column[word.stem]], [column[word.exact]], [column[p] for p in _parts(word)]
    return [column[word.exact]], [], [], [column[p] for p in _parts(word)]


def _frozen(values: list[int]) -> np.ndarray:
    """A read-only int64 array of the values."""
    out = np.array(values, np.int64)
    out.flags.writeable = False
    return out


# Prepared queries by their words (query_words caches the words of a text, so a repeated query
# meets its own): bounded, started over when full, as the analyzer's caches are.
_PREPARED_LIMIT = 4096
_prepared: Bounded[tuple[QueryWord, ...], KeywordQuery] = Bounded(_PREPARED_LIMIT)


def _made_once(cache: Bounded[tuple[QueryWord, ...], T], make: Callable[[tuple[QueryWord, ...]], T],
               words: Sequence[QueryWord]) -> T:
    """`make(words)`, made once while `cache` (bounded, started over when full) holds it."""
    key = tuple(words)
    found = cache.get(key)
    if found is None:
        found = make(key)
        cache.keep(key, found)
    return found


def prepared(words: Sequence[QueryWord]) -> KeywordQuery:
    """The KeywordQuery of these words, made once while it is cached."""
    return _made_once(_prepared, KeywordQuery, words)


class WordColumns:
    """Each word's own term columns (`word_columns`) over the terms of all the words (`query_terms`):
    what `KeywordIndex.word_scores` sums per word, as `_kernels.word_sums` reads them (per word its
    counts of plain, stem, exact and part columns, and the columns back to back). Immutable (shared by
    the calls of one query)."""

    __slots__ = ("terms", "counts", "cols")

    def __init__(self, words: Sequence[QueryWord]) -> None:
        """Work them out for these words (as given: no searchable_words here)."""
        self.terms: tuple[str, ...] = tuple(query_terms(words))
        column = {term: i for i, term in enumerate(self.terms)}
        # Two arrays for all the words: four small arrays a word cost a fresh query ~0.25 ms in all.
        roles = [_roles(word, column) for word in words]
        self.counts = _frozen([len(role) for word in roles for role in word]).reshape(len(roles), 4)
        self.cols = _frozen([c for word in roles for role in word for c in role])

    @property
    def columns(self) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], ...]:
        """Each word's columns by role (plain, stems, exacts, parts), as `word_columns` gives them: views of
        `cols` (for the tests and bench/holds.py; the engine reads `counts` and `cols`)."""
        out = []
        at = 0
        for plain, stems, exacts, parts in self.counts.tolist():
            ends = (at, at + plain, at + plain + stems, at + plain + stems + exacts, at + plain + stems + exacts + parts)
            out.append((self.cols[ends[0]:ends[1]], self.cols[ends[1]:ends[2]], self.cols[ends[2]:ends[3]],
                        self.cols[ends[3]:ends[4]]))
            at = ends[4]
        return tuple(out)


_word_columns: Bounded[tuple[QueryWord, ...], WordColumns] = Bounded(_PREPARED_LIMIT)


def word_columns_of(words: Sequence[QueryWord]) -> WordColumns:
    """The WordColumns of these words, made once while it is cached (a retrieve scores its words twice)."""
    return _made_once(_word_columns, WordColumns, words)


class HeldColumns:
    """Which of the words' terms (`query_terms`) hold each word whole (its plain, stem and exact columns of
    `WordColumns`) and which in part (its identifier parts'): boolean matrices of shape (terms, words), from
    which `KeywordIndex.holds` marks the words of each row's terms (`_kernels.word_presence`). Immutable
    (shared)."""

    __slots__ = ("terms", "whole", "part")

    def __init__(self, words: Sequence[QueryWord]) -> None:
        """Work them out for these words (as given: no searchable_words here)."""
        self.terms: tuple[str, ...] = tuple(query_terms(words))
        column = {term: i for i, term in enumerate(self.terms)}
        whole_at: list[tuple[int, int]] = []  # (term, word) places: held whole, held in part
        part_at: list[tuple[int, int]] = []
        for j, word in enumerate(words):  # (each word's roles as lists: no WordColumns' arrays to make)
            plain, stems, exacts, parts = _roles(word, column)
            whole_at += [(t, j) for t in plain + stems + exacts]
            part_at += [(t, j) for t in parts]
        self.whole = _marked((len(self.terms), len(words)), whole_at)
        self.part = _marked((len(self.terms), len(words)), part_at)


def _marked(shape: tuple[int, int], places: list[tuple[int, int]]) -> np.ndarray:
    """A read-only boolean matrix, True at these (row, column) places (one indexed assignment)."""
    out = np.zeros(shape, np.bool_)
    if places:
        rows, cols = zip(*places)
        out[list(rows), list(cols)] = True
    out.flags.writeable = False
    return out


_held_columns: Bounded[tuple[QueryWord, ...], HeldColumns] = Bounded(_PREPARED_LIMIT)


def held_columns_of(words: Sequence[QueryWord]) -> HeldColumns:
    """The HeldColumns of these words, made once while it is cached (a v5 search asks them of each
    collection)."""
    return _made_once(_held_columns, HeldColumns, words)
