"""Per-document term counts (a forward index) and the BM25 scores of given documents.

tantivy finds the best keyword matches with block-max WAND, but it cannot score a list of
documents it did not find (the vector side's candidates) short of a query with one key term per
document, which cost ~1 ms for 200 candidates at 100k memories. Here each document's distinct
terms are kept as vocabulary ids with their frequencies, so scoring any documents is one compiled
pass over their rows (`_kernels.bm25_parts`; docs/design/engine.md has the measurements).

Every BM25 score the engine reports comes from here: k1 = 1.2, b = 0.75, idf
ln(1 + (N - df + 0.5) / (df + 0.5)) over the live documents, and exact lengths (tantivy
quantizes lengths to a byte; its ranking only chooses which documents get scored).

Rows live in one arena: a rewrite appends a new row and leaves the old one as garbage until the
arena is compacted. The state can be saved with the sequence it reflects and opened again; a
read-only open maps the files (shared between processes) until something is written.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from engram_index.engine import _kernels
from engram_index.engine.postings import B as B  # (re-exported: the rows' scoring uses them too)
from engram_index.engine.postings import K1 as K1
from engram_index.engine.postings import Postings
from engram_index.engine.postings import QueryPlan as QueryPlan  # (re-exported)
from engram_index.engine.saved import read_saved, write_saved

_ARRAYS = ("ids", "tfs", "starts", "lengths", "doc_lengths", "df")
_VERSION = 1
_MIN_CAPACITY = 1024
_MAX_TF = int(np.iinfo(np.uint16).max)
_ABSENT = -1  # the length of an ordinal without a document
_NONE_BESIDE = np.zeros(0, np.int64)  # `presence` without rows beside the ordinals
_NO_STALE = np.zeros(0, np.int64)  # `inverted` when nothing was written since
_NO_STALE.flags.writeable = False
# A compiled pass over rows for query words: ords, beside, starts, lengths, ids, qids, term_whole, term_part, table.
_WordsPass = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                   np.ndarray]
# Documents written since the postings were inverted are scored from their rows; past this many
# (or a share of the live ones) the postings are inverted again, in one compiled pass.
STALE_MAX = 256
STALE_SHARE = 64


def _bm25_idf(live: float, df: float) -> float:
    """A term's BM25 idf over `live` documents, `df` of them holding it: through the C library's log1p, term
    by term (numpy's takes a vectorised path on some CPUs, AVX-512, whose results differ from it in the last
    bit, which would make scores differ between CPUs; the postings pass's C code calls the same log1p)."""
    return math.log1p((live - df + 0.5) / (df + 0.5))


class Scoring(NamedTuple):
    """A query's terms as a pass over the rows scores them: the vocabulary ids of those held, their
    columns among the terms, their idf, and the live documents' average length."""

    qids: np.ndarray
    cols: np.ndarray
    idf: np.ndarray
    average: float


class TermCounts:
    """The distinct terms of every document (by ordinal), their frequencies, and df per term."""

    def __init__(self) -> None:
        """Start empty."""
        self._vocab: dict[str, int] = {}
        self._terms: list[str] = []
        self._df = np.zeros(0, np.int64)  # per term id: live documents holding it
        self._ids = np.zeros(0, np.uint32)  # the arena: term ids of every row, back to back
        self._tfs = np.zeros(0, np.uint16)  # and their frequencies in the row's document
        self._used = 0  # arena entries written, garbage included
        self._garbage = 0  # arena entries of replaced or removed rows
        self._starts = np.zeros(0, np.int64)  # per ordinal: where its row starts
        self._lengths = np.zeros(0, np.int32)  # per ordinal: its distinct terms, or _ABSENT
        self._doc_lengths = np.zeros(0, np.int64)  # per ordinal: its terms, repeats counted
        self._live = 0
        self._tokens = 0  # the live documents' lengths, summed
        self._mapped = False
        self._tables = threading.local()
        self.changed = False  # written since created, opened or saved
        # The inverted postings (built when first searched) and the ordinals written since.
        self._postings: Postings | None = None
        self._stale: set[int] = set()
        self._stale_mask: np.ndarray | None = None
        self._postings_lock = threading.Lock()
        self.skipped = 0  # postings entries the last pruned scoring did not read (for tests and benches)
        self.unread = 0  # exact forms' entries the last scoring left unread, covered by their stems (the same)

    def __len__(self) -> int:
        """The number of documents held."""
        return self._live

    @property
    def terms(self) -> list[str]:
        """Every term ever seen, by term id: only ever appended to (or replaced whole), never to be changed."""
        return self._terms

    @property
    def vocabulary(self) -> int:
        """The number of distinct terms ever seen."""
        return len(self._terms)

    # -- writes -------------------------------------------------------------------------------

    def put_many(self, rows: Iterable[tuple[int, Sequence[str] | None]]) -> None:
        """Hold each document's terms (repeats counted), or forget it (None), replacing what its
        ordinal held; for an ordinal given more than once, the last wins."""
        batch: dict[int, tuple[Counter[str], int] | None] = {}
        for ord_, terms in rows:
            if ord_ < 0:
                raise ValueError("ordinals must be non-negative")
            batch[ord_] = None if terms is None else (Counter(terms), len(terms))
        if not batch:
            return
        self._writable()
        ords = np.fromiter(batch, np.int64, len(batch))
        with self._postings_lock:
            if self._postings is not None:
                self._stale.update(batch)
                self._stale_mask = None
        self._reserve_ords(int(ords.max()) + 1)
        self._drop(ords)
        held = [(ord_, row) for ord_, row in batch.items() if row is not None]
        if not held:
            self.changed = True
            return
        ords = np.fromiter((ord_ for ord_, _ in held), np.int64, len(held))
        vocab, known = self._vocab, self._terms
        ids: list[int] = []
        tfs: list[int] = []
        lengths: list[int] = []
        doc_lengths: list[int] = []
        for _, (counts, doc_length) in held:
            for term, tf in counts.items():
                tid = vocab.get(term)
                if tid is None:
                    tid = vocab[term] = len(known)
                    known.append(term)
                ids.append(tid)
                tfs.append(min(tf, _MAX_TF))
            lengths.append(len(counts))
            doc_lengths.append(doc_length)
        new_ids = np.asarray(ids, np.uint32)
        if len(known) > self._df.size:
            self._df = np.concatenate([self._df, np.zeros(len(known) - self._df.size, np.int64)])
        if new_ids.size:
            self._df += np.bincount(new_ids, minlength=self._df.size)
        first = self._reserve_arena(new_ids.size)
        self._ids[first : first + new_ids.size] = new_ids
        self._tfs[first : first + new_ids.size] = tfs
        self._used = first + new_ids.size
        row_lengths = np.asarray(lengths, np.int32)
        self._starts[ords] = first + np.cumsum(row_lengths) - row_lengths
        self._lengths[ords] = row_lengths
        self._doc_lengths[ords] = doc_lengths
        self._live += len(held)
        self._tokens += sum(doc_lengths)
        self.changed = True

    def remove(self, ord_: int) -> None:
        """Forget the document at an ordinal (nothing happens when there is none)."""
        if 0 <= ord_ < self._lengths.size and self._lengths[ord_] != _ABSENT:
            self.put_many([(ord_, None)])

    def clear(self) -> None:
        """Forget every document and term."""
        self.__init__()  # type: ignore[misc]
        self.changed = True

    def _drop(self, ords: np.ndarray) -> None:
        """Forget the rows of these ordinals (distinct, within the arrays), where there are rows."""
        held = ords[self._lengths[ords] != _ABSENT]
        if not held.size:
            return
        offsets = self._gather(held)
        if offsets.size:
            self._df -= np.bincount(self._ids[offsets], minlength=self._df.size)
        self._garbage += int(offsets.size)
        self._live -= int(held.size)
        self._tokens -= int(self._doc_lengths[held].sum())
        self._lengths[held] = _ABSENT
        self._doc_lengths[held] = 0

    def _writable(self) -> None:
        """Copy mapped arrays into memory before the first write."""
        if self._mapped:
            self._ids, self._tfs = np.array(self._ids[: self._used]), np.array(self._tfs[: self._used])
            self._starts, self._lengths = np.array(self._starts), np.array(self._lengths)
            self._doc_lengths, self._df = np.array(self._doc_lengths), np.array(self._df)
            self._mapped = False

    def _reserve_ords(self, needed: int) -> None:
        """Grow the per-ordinal arrays geometrically so that ordinals below `needed` fit."""
        size = self._lengths.size
        if needed <= size:
            return
        capacity = max(needed, 2 * size, _MIN_CAPACITY)
        grow = capacity - size
        self._starts = np.concatenate([self._starts, np.zeros(grow, np.int64)])
        self._lengths = np.concatenate([self._lengths, np.full(grow, _ABSENT, np.int32)])
        self._doc_lengths = np.concatenate([self._doc_lengths, np.zeros(grow, np.int64)])

    def _reserve_arena(self, extra: int) -> int:
        """Make room for `extra` more entries (compacting when half is garbage); return where they go."""
        if self._used + extra <= self._ids.size:
            return self._used
        if self._garbage * 2 > self._used:
            self._compact()
        capacity = max(self._used + extra, 2 * self._ids.size, _MIN_CAPACITY)
        ids, tfs = np.zeros(capacity, np.uint32), np.zeros(capacity, np.uint16)
        ids[: self._used], tfs[: self._used] = self._ids[: self._used], self._tfs[: self._used]
        self._ids, self._tfs = ids, tfs
        return self._used

    def _compact(self) -> None:
        """Rewrite the arena with the live rows only, in ordinal order."""
        self._ids, self._tfs, self._starts = self._packed()
        self._used, self._garbage = int(self._ids.size), 0

    def _packed(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The live rows back to back in ordinal order (term ids, frequencies) and where each ordinal's row starts."""
        held = np.flatnonzero(self._lengths != _ABSENT)
        offsets = self._gather(held)
        starts = np.zeros(self._lengths.size, np.int64)
        row = self._lengths[held].astype(np.int64)
        starts[held] = np.cumsum(row) - row
        return self._ids[offsets], self._tfs[offsets], starts

    # -- reads --------------------------------------------------------------------------------

    def _gather(self, ords: np.ndarray) -> np.ndarray:
        """The arena offsets of these ordinals' rows, back to back."""
        inside = (ords >= 0) & (ords < self._lengths.size)
        lengths = np.zeros(ords.size, np.int64)
        lengths[inside] = np.maximum(self._lengths[ords[inside]], 0)
        total = int(lengths.sum())
        if total == 0:
            return np.zeros(0, np.int64)
        starts = np.zeros(ords.size, np.int64)
        starts[inside] = self._starts[ords[inside]]
        # Each entry's offset: its row's start, plus its place in the row.
        before = np.cumsum(lengths) - lengths
        offsets: np.ndarray = np.arange(total, dtype=np.int64) + np.repeat(starts - before, lengths)
        return offsets

    def bm25(self, terms: Sequence[str], ords: np.ndarray | Sequence[int]) -> np.ndarray:
        """The BM25 score (float32) of each ordinal for a query of these terms (a repeated term counts again)."""
        query = Counter(terms)
        per_term = self.term_scores(list(query), ords)
        return (per_term @ np.fromiter(query.values(), np.float64, len(query))).astype(np.float32)

    def idf(self, terms: Sequence[str]) -> np.ndarray:
        """Each term's BM25 idf, as scores use it; a term no live document holds counts as held by one
        (the rarest a present term can be). Zeros when no document is live."""
        out = np.zeros(len(terms), np.float64)
        if not self._live:
            return out
        for i, term in enumerate(terms):
            tid = self._vocab.get(term)
            df = float(self._df[tid]) if tid is not None and tid < self._df.size else 0.0
            out[i] = _bm25_idf(float(self._live), max(df, 1.0))
        return out

    def term_scores(self, terms: Sequence[str], ords: np.ndarray | Sequence[int]) -> np.ndarray:
        """Each (distinct) term's BM25 part in each ordinal's score: shape (ordinals, terms), float64; 0 where absent."""
        ords = np.ascontiguousarray(ords, np.int64).reshape(-1)
        out = np.zeros((ords.size, len(terms)), np.float64)
        scoring = self.scoring(terms) if ords.size else None
        if scoring is None:
            return out
        # One compiled pass over the ordinals' rows, finding each entry's query term through a
        # lookup table over the vocabulary (the numpy version of it made some forty calls).
        _kernels.bm25_parts(ords, *self.rows(), scoring.qids, scoring.cols, scoring.idf, self.table(), K1, B,
                            scoring.average, out)
        return out

    def scoring(self, terms: Sequence[str]) -> Scoring | None:
        """What `term_scores` scores these terms with (None: nothing, no term being held or no document live)."""
        qids, columns = self._known(terms)
        if not columns or not self._live:
            return None
        return Scoring(qids, np.array(columns, np.int64), self._idf(qids), self._tokens / self._live)

    def rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The arrays a pass over the rows reads (bm25_parts'): starts, lengths, doc_lengths, ids, tfs."""
        return self._starts, self._lengths, self._doc_lengths, self._ids, self._tfs

    def presence(self, terms: Sequence[str], term_whole: np.ndarray, term_part: np.ndarray, ords: np.ndarray,
                 prev: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The words each ordinal's row holds, whole and in part (booleans, ordinals x words), from the
        rows' `terms` and which words each term holds (`term_whole`, `term_part`: booleans, terms x words);
        with `prev` (an ordinal beside each, -1: none), the words either row holds."""
        ords = np.ascontiguousarray(ords, np.int64).reshape(-1)
        whole = np.zeros((ords.size, term_whole.shape[1]), np.bool_)
        part = np.zeros_like(whole)
        passed = self._words_pass(terms, term_whole, term_part, ords, prev)
        if passed is not None:
            # One compiled pass marks each row's words, and the row's beside it (`bm25_parts` > 0, turned
            # into words by a product with each word's terms, made some twenty array steps of it).
            _kernels.word_presence(*passed, whole, part)
        return whole, part

    def coverage(self, terms: Sequence[str], term_whole: np.ndarray, term_part: np.ndarray, ords: np.ndarray,
                 prev: np.ndarray | None, weights: np.ndarray) -> np.ndarray:
        """`presence`'s words weighed (float64 `weights`, one per word): per ordinal, the weights of the words
        held whole plus half those held only in part, over all the weights, each sum taken in the words' order."""
        ords = np.ascontiguousarray(ords, np.int64).reshape(-1)
        out = np.zeros(ords.size)
        passed = self._words_pass(terms, term_whole, term_part, ords, prev)
        if passed is not None:
            _kernels.word_coverage(*passed, weights, out)
        return out

    def _words_pass(self, terms: Sequence[str], term_whole: np.ndarray, term_part: np.ndarray, ords: np.ndarray,
                    prev: np.ndarray | None) -> _WordsPass | None:
        """The arguments of a compiled pass over these ordinals' rows for the query terms the vocabulary holds
        (word_presence's and word_coverage's, up to their outputs); None when it would find nothing."""
        qids, rows = self._known(terms)
        if not rows or not self._live or not ords.size:
            return None
        if len(rows) < len(terms):
            term_whole, term_part = term_whole[rows], term_part[rows]
        beside = _NONE_BESIDE if prev is None else np.ascontiguousarray(prev, np.int64).reshape(-1)
        return (ords, beside, self._starts, self._lengths, self._ids, qids, np.ascontiguousarray(term_whole),
                np.ascontiguousarray(term_part), self.table())

    def _known(self, terms: Sequence[str]) -> tuple[np.ndarray, list[int]]:
        """The term ids of those of `terms` the vocabulary holds (int64), and where each is among `terms`."""
        known = [(self._vocab[t], i) for i, t in enumerate(terms) if t in self._vocab]
        return np.array([q for q, _ in known], np.int64), [i for _, i in known]

    def _idf(self, qids: np.ndarray) -> np.ndarray:
        """The idf of each term id (over the live documents)."""
        live = float(self._live)
        return np.array([_bm25_idf(live, df) for df in self._df[qids].tolist()], np.float64)

    def inverted(self) -> tuple[Postings, np.ndarray, np.ndarray | None]:
        """The postings, the ordinals written since they were inverted, and those as a mask (None: none);
        inverted again when none are built yet or too many writes came since (the caller holds off writes)."""
        with self._postings_lock:
            if self._postings is None or len(self._stale) > max(STALE_MAX, self._live // STALE_SHARE):
                held = self._lengths > 0
                total = int(self._lengths[held].sum(dtype=np.int64))
                starts = np.empty(len(self._terms) + 1, np.int64)
                ords, tfs = np.empty(total, np.int32), np.empty(total, np.uint16)
                _kernels.build_postings(self._starts, self._lengths, self._ids, self._tfs, starts, ords, tfs)
                average = self._tokens / self._live if self._live else 0.0
                self._postings = Postings(starts, ords, tfs, self._doc_lengths, average)
                self._stale, self._stale_mask = set(), None
            if not self._stale:  # (most searches: no array made)
                return self._postings, _NO_STALE, None
            stale = np.fromiter(self._stale, np.int64, len(self._stale))
            if self._stale_mask is None:
                mask = np.zeros(self._lengths.size, bool)
                mask[stale] = True
                self._stale_mask = mask
            return self._postings, stale, self._stale_mask

    def matches(
        self, plan: QueryPlan, allowed: np.ndarray | None, k: int = 0, margin: float = 0.0
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every document holding a query term that the postings hold (and `allowed` lets through), with
        its score by the plan (float64, equal to `term_scores`' sums but for rounding), and the
        ordinals written since the postings were inverted (not scored here: their postings are stale).

        With k > 0, only those that can score at least the k-th best less `margin` x its magnitude are
        sure to be there (MaxScore skips the rest: `_kernels.postings_top`); `skipped` counts the
        postings entries it did not read (0 when nothing was pruned). The exact forms the postings know
        their stems cover are left unread (`unread` counts their entries; postings.py says why)."""
        self.unread = 0
        postings, stale, stale_mask = self.inverted()
        vocab, held = self._vocab, postings.starts.size - 1
        # Terms new since the inversion: only stale documents hold them.
        ids = [tid if tid < held else -1 for tid in [vocab.get(term, -1) for term, _, _, _ in plan.columns]]
        if max(ids, default=-1) < 0 or not self._live:
            return np.zeros(0, np.int64), np.zeros(0, np.float64), stale
        acc, mark = self._scratch()
        # Fresh outputs: their pages are committed only as far as they are written.
        touched, values = np.empty(acc.size, np.int64), np.empty(acc.size, np.float64)
        # The pass works out each term's idf from df itself, and which exact forms their stems cover.
        n, self.skipped, self.unread = _kernels.postings_top(
            postings.starts, postings.ords, postings.tfs, self._doc_lengths, postings.max_part, postings.average,
            np.array(ids, np.int64), plan.kinds, plan.groups, plan.weights, None, K1, B, self._tokens / self._live,
            stale_mask, allowed, k, margin, acc, mark, touched, values, postings.lengths, postings.covered_by,
            self._df, float(self._live))
        return touched[:n], values[:n], stale

    def _scratch(self) -> tuple[np.ndarray, np.ndarray]:
        """This thread's zeroed accumulators and marks for the postings' scoring, one per ordinal (the
        kernel leaves them zeroed): 12 bytes an ordinal a searching thread."""
        size = self._lengths.size
        scratch: tuple[np.ndarray, np.ndarray] | None = getattr(self._tables, "scratch", None)
        if scratch is None or scratch[0].size != size:
            scratch = (np.zeros(size, np.float64), np.zeros(size, np.int32))
            self._tables.scratch = scratch
        return scratch

    def table(self) -> np.ndarray:
        """This thread's zeroed lookup table over the vocabulary (searches run on several threads)."""
        table: np.ndarray | None = getattr(self._tables, "table", None)
        if table is None or table.size < len(self._terms):
            table = self._tables.table = np.zeros(max(len(self._terms) * 3 // 2, _MIN_CAPACITY), np.int32)
        return table

    def terms_of(self, ord_: int) -> dict[str, int]:
        """The terms of one document with their frequencies (empty when none is held)."""
        offsets = self._gather(np.array([ord_], np.int64))
        return {self._terms[int(i)]: int(f) for i, f in zip(self._ids[offsets], self._tfs[offsets])}

    # -- files --------------------------------------------------------------------------------

    def save(self, path: Path, seq: int) -> None:
        """Write the state as of sequence `seq` (compacted) to a directory, replacing what was there."""
        self.frozen().write(path, seq)
        self.changed = False

    def frozen(self) -> FrozenCounts:
        """A compacted copy of the state, to be written while writes go on (no disk waits while it is taken)."""
        ids, tfs, starts = self._packed()
        arrays = (ids, tfs, starts, self._lengths.copy(), self._doc_lengths.copy(), self._df.copy())
        return FrozenCounts(arrays, list(self._terms), self._live, self._tokens)

    @classmethod
    def open(cls, path: Path, *, shared: bool = False) -> tuple[TermCounts, int] | None:
        """The state saved in a directory and its sequence; None when missing, torn or of another version.

        shared: map the arrays read-only (processes share the pages) until the first write.
        """
        saved = read_saved(path, _ARRAYS, ("terms",), mapped=shared)
        if saved is None:
            return None
        meta, arrays, (terms,) = saved
        if meta.get("version") != _VERSION:
            return None
        try:
            seq, live, tokens = int(meta["seq"]), int(meta["live"]), int(meta["tokens"])
        except (ValueError, KeyError, TypeError):
            return None
        ids, tfs, starts, lengths, doc_lengths, df = arrays
        consistent = (
            ids.shape == tfs.shape and starts.shape == lengths.shape == doc_lengths.shape
            and df.shape == (len(terms),) and isinstance(terms, list)
            and int(np.count_nonzero(lengths != _ABSENT)) == live
        )
        if not consistent:
            return None
        counts = cls()
        counts._terms = terms
        counts._vocab = {term: i for i, term in enumerate(terms)}
        counts._ids, counts._tfs, counts._used = ids, tfs, int(ids.size)
        counts._starts, counts._lengths, counts._doc_lengths, counts._df = starts, lengths, doc_lengths, df
        counts._live, counts._tokens, counts._mapped = live, tokens, shared
        return counts, seq


class FrozenCounts:
    """A copy of term counts, detached from them, that can be written to files."""

    def __init__(self, arrays: tuple[np.ndarray, ...], terms: list[str], live: int, tokens: int) -> None:
        """Hold the arrays (in _ARRAYS order), the vocabulary and the totals."""
        self.arrays, self.terms, self.live, self.tokens = arrays, terms, live, tokens

    def write(self, path: Path, seq: int) -> None:
        """Write to a directory as the state of sequence `seq`, replacing what was there."""
        # The parent must still exist: a space dropped meanwhile leaves nothing behind.
        write_saved(path, dict(zip(_ARRAYS, self.arrays)),
                    {"version": _VERSION, "seq": seq, "live": self.live, "tokens": self.tokens},
                    {"terms": self.terms}, parents=False)
