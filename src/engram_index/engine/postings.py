"""The term counts inverted (per term, its holders) and the query plans scored over them.

`TermCounts.inverted` builds the postings; `TermCounts.matches` scores a `QueryPlan` over them in one
compiled pass (`_kernels.postings_top`). A word counts by its stem where a document holds it, else
by its exact form: the exact form's holders are read only for those without the stem. For most
words every holder of the exact form holds the stem (an inflection is indexed with its stem), and
reading them is then a third of the pass for nothing. So when a pass reads an exact form whole and
its stem had marked every holder, it writes that stem beside the form in `Postings.covered_by`, and
later passes over the same postings leave the form's holders unread (and make the stem plain: its
marks would serve nothing). What is learnt lives as long as the postings: a new inversion starts
again from nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engram_index.engine import _kernels

K1 = 1.2
B = 0.75
_LENGTHS_CHUNK = 1 << 20  # postings entries whose lengths are gathered at once (Postings)


class QueryPlan:
    """How a query's terms add up to a document's score, for the postings' scoring.

    One column per (term, role): kind 0 adds its part, kind 1 (a word's stem) adds it and marks the
    document with its group, kind 2 (the word's exact form) adds it where the stem did not.
    """

    def __init__(self, columns: Sequence[tuple[str, int, int, float]]) -> None:
        """Hold the columns as (term, kind, group, weight), and their kinds, groups and weights as arrays."""
        self.columns = list(columns)
        self.kinds = np.array([c[1] for c in self.columns], np.int64)
        self.groups = np.array([c[2] for c in self.columns], np.int64)
        self.weights = np.array([c[3] for c in self.columns], np.float64)
        for values in (self.kinds, self.groups, self.weights):
            values.flags.writeable = False  # a plan is shared by the searches of one query


class Postings:
    """The term counts inverted at one moment: per term id, its holders (ascending) and their counts."""

    def __init__(
        self, starts: np.ndarray, ords: np.ndarray, tfs: np.ndarray, doc_lengths: np.ndarray, average: float
    ) -> None:
        """Hold the offsets (one more than the vocabulary), the holders and their counts, and per term
        the largest tf / (tf + norm) of its holders at the lengths' average now (MaxScore's bounds)."""
        self.starts, self.ords, self.tfs, self.average = starts, ords, tfs, average
        self.max_part = np.empty(starts.size - 1, np.float64)
        _kernels.postings_bounds(starts, ords, tfs, doc_lengths, K1, B, average, self.max_part)
        # Each entry's holder's length beside it, which the pruned pass reads with the entry (reading
        # it at the holder cost a cache miss an entry: a third of the pass, measured); a document's
        # length changes only by a write, which makes it stale in the postings (skipped there). None
        # when a length does not fit 16 bits: the pass then reads the holders' own.
        self.lengths: np.ndarray | None = None
        if int(doc_lengths.max(initial=0)) <= np.iinfo(np.uint16).max:
            self.lengths = np.empty(ords.size, np.uint16)
            for start in range(0, ords.size, _LENGTHS_CHUNK):  # chunks: no int64 copy of every entry
                part = ords[start : start + _LENGTHS_CHUNK]
                self.lengths[start : start + part.size] = np.take(doc_lengths, part, mode="clip")
        # Per term id, the stem term id known to cover it (-1: none known), written by the pass
        # (postings_top): every holder of the form not stale holds that stem. Stale holders are
        # skipped, and only more become stale until the next inversion replaces these postings, so
        # what holds when learnt holds while they serve. 4 bytes a term, against some 470 a document.
        self.covered_by = np.full(starts.size - 1, -1, np.int32)
