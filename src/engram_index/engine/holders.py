"""Which documents hold given terms, and which terms a prefix begins (a v5 profile's buckets).

The holders come from the term counts' postings, and those written since from their rows. The terms
a prefix begins come from a sorted copy of the vocabulary, by bisection. Term counts number their
terms in the order they were first seen and only ever append to that list (or replace it whole:
cleared, or opened from files). The sorted copy takes in what was appended since it last looked,
one insertion each when few were (a write adds a handful of new terms), a sort of everything when
many were or the list was replaced. Written here, not taken from a library: it is the engine's own
vocabulary, and a bisection over a sorted list is all a prefix needs.
"""

from __future__ import annotations

import bisect
import threading
import weakref
from collections.abc import Collection, Iterable

import numpy as np

from engram_index.engine.termcounts import QueryPlan, TermCounts

# Past this many new terms at once, sorting the whole vocabulary again is cheaper than inserting each.
_INSERT_MAX = 256


class SortedTerms:
    """The sorted copy of one vocabulary, for the terms that begin with given prefixes."""

    def __init__(self) -> None:
        """Start with nothing seen."""
        self._source: list[str] | None = None
        self._sorted: list[str] = []
        self._lock = threading.Lock()  # searches on several threads share one copy

    def beginning(self, terms: list[str], prefixes: Iterable[str]) -> list[str]:
        """The terms of `terms` (the vocabulary, only ever appended to or replaced whole) that begin with
        any of `prefixes`, each once."""
        wanted = sorted(set(prefixes))
        if not wanted:
            return []
        out: dict[str, None] = {}
        with self._lock:
            view = self._caught_up(terms)
            for prefix in wanted:
                at = bisect.bisect_left(view, prefix)
                while at < len(view) and view[at].startswith(prefix):
                    out[view[at]] = None
                    at += 1
        return list(out)

    def _caught_up(self, terms: list[str]) -> list[str]:
        """The sorted copy, with what `terms` gained since the last look (under the lock)."""
        seen = len(self._sorted)
        if terms is not self._source or len(terms) < seen or len(terms) - seen > _INSERT_MAX:
            self._source, self._sorted = terms, sorted(terms)
        else:
            for term in terms[seen:]:
                bisect.insort(self._sorted, term)
        return self._sorted


_SORTED: weakref.WeakKeyDictionary[TermCounts, SortedTerms] = weakref.WeakKeyDictionary()
_SORTED_LOCK = threading.Lock()


def terms_beginning(counts: TermCounts, prefixes: Collection[str]) -> list[str]:
    """The terms of the vocabulary that begin with any of `prefixes` (held by a live document or not)."""
    with _SORTED_LOCK:
        sorted_terms = _SORTED.get(counts)
        if sorted_terms is None:
            sorted_terms = _SORTED[counts] = SortedTerms()
    return sorted_terms.beginning(counts.terms, prefixes)


def holders(counts: TermCounts, terms: Collection[str], allowed: np.ndarray | None = None) -> np.ndarray:
    """The live documents (ascending ordinals) holding any of `terms` that `allowed` (a mask over ordinals,
    None: all) lets through."""
    wanted = list(dict.fromkeys(terms))
    if not wanted or not len(counts):
        return np.zeros(0, np.int64)
    ords, _, stale = counts.matches(QueryPlan([(term, 0, 0, 1.0) for term in wanted]), allowed)
    if stale.size:  # written since the postings: judged from their rows (a removed one has none)
        if allowed is not None:
            stale = stale[stale < allowed.size]
            stale = stale[allowed[stale]]
        ords = np.concatenate([ords, stale[(counts.term_scores(wanted, stale) > 0).any(axis=1)]])
    return np.unique(ords)
