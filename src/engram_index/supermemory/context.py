"""What a v5 search's hits hold of its query: keyword coverage, a chunk's with its conversation's context.

Keyword coverage is the share of the query's content words a result holds (an exact or stemmed
match counts 1, an identifier part 0.5), each word weighted by its idf (search.py's module doc).
A chunk or a memory holds a word when it or the one just before it in its conversation does (`in_context`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from engram_index import context_columns
from engram_index.engine.analyzer import QueryWord
from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import Filters, Fused
from engram_index.ranking import usable
from engram_index.supermemory.face import Face

IDF_COVERAGE = True
# Each word's weight is its idf to this power. Measured (bench/v5_scifact_levers.py --idf-power P): SciFact
# nDCG@10 through the face 0.7283 / 0.7355 / 0.7319 / 0.7285 at 0.5 / 1 / 1.5 / 2; coverage alone ranks better
# at 1.5 and 2 (0.6519, 0.6513 against 0.6397), the fused score does not.
IDF_POWER = 1.0


def word_weights(index: SpaceIndex, words: Sequence[QueryWord]) -> np.ndarray | None:
    """Each content word's idf in the collection, of the word as asked (its exact form: the commoner
    stem weighed less and measured worse, docs/design/ranking.md), or None when IDF_COVERAGE is off."""
    if not IDF_COVERAGE or not words:
        return None
    weights: np.ndarray = index.keyword.counts.idf([w.exact for w in words])
    return weights if IDF_POWER == 1.0 else weights ** IDF_POWER


@dataclass(slots=True)
class Taken:
    """One collection's candidates by column: ordinal, id, the index's tags, the engine's cosine and BM25
    (NaN: none), and keyword coverage (set once worked out)."""

    ords: np.ndarray
    ids: list[str]
    tags: list[tuple[str, ...]]
    sims: np.ndarray
    bm25: np.ndarray
    held: np.ndarray

    def only(self, keep: Sequence[int]) -> Taken:
        """These places alone, in this order."""
        return Taken(self.ords[keep], [self.ids[i] for i in keep], [self.tags[i] for i in keep], self.sims[keep],
                     self.bm25[keep], self.held[keep] if self.held.size else self.held)


class Hits(NamedTuple):
    """A collection's hits still to be taken: their ordinals, cosines (NaN: none) and BM25, as float64."""

    ords: np.ndarray
    sims: np.ndarray
    bm25: np.ndarray


def passing(index: SpaceIndex, found: Fused, skip: set[str], filters: Filters) -> Hits:
    """The engine's answer in columns (`SearchRequest.hits=False`) less what is gone since, what `skip` names
    and what the filters now keep out (every write applied changes the index's tags at once, before the
    keyword index's next commit: the filters' mask, as the turns joining them meet it, is checked again).
    Call inside `index.reading()`."""
    keep = usable(index.columns, index.columns.mask(filters), found.ords)
    if skip:  # (only then are the hits' ids looked up: `in_context` names its candidates itself)
        named = index.columns.ids
        keep &= np.fromiter((named[o] not in skip for o in found.ords.tolist()), bool, found.ords.size)
    sims = np.where(found.has_sim, found.sims, np.nan).astype(np.float64)
    bm25 = found.bm25.astype(np.float64)
    return Hits(found.ords, sims, bm25) if keep.all() else Hits(found.ords[keep], sims[keep], bm25[keep])


def taken(index: SpaceIndex, found: Fused, skip: set[str], filters: Filters) -> Taken:
    """`passing`'s hits with their ids and the index's tags. Call inside `index.reading()`."""
    hits = passing(index, found, skip, filters)
    ords = hits.ords.tolist()
    named = index.columns.ids
    return Taken(hits.ords, [named[o] for o in ords], index.columns.tags_many(ords), hits.sims, hits.bm25,
                 np.zeros(0))


def coverage_alone(index: SpaceIndex, got: Taken, topic: Sequence[QueryWord]) -> np.ndarray:
    """Each candidate's keyword coverage of its own words. Call inside `index.reading()`."""
    return index.keyword.coverage(topic, got.ords, None, word_weights(index, topic))


def in_context(face: Face, ns: str, index: SpaceIndex, hits: Hits, filters: Filters,
               topic: Sequence[QueryWord], vector: Any, kind: str = "chunk") -> Taken:
    """Chunks or memories (`kind`) with their conversation context (`context_columns.in_context`, as
    ranking.with_context): one holds a content word when it or the one just before it does, when that one
    is of the same document or of a document of the same date (a conversation's turns of one session);
    the ones just after the hits join them, with their cosine to `vector`. Nothing is read from the store
    but the dates of the documents of pairs of two: a chunk's document is in its id, a memory's is its
    record's author (`Columns.authors`). The candidates (ascending ordinals) with their coverage. Call
    inside `index.reading()`."""

    def chunk_pairs(earlier: np.ndarray, later: np.ndarray) -> np.ndarray:
        """Whether each pair of chunks is of one document, or of two of one date. A chunk's one tag is its
        document's (face.doc_tag), so two chunks leading with one tag are of one document; the others'
        documents are in their ids, and only they ask their dates."""
        codes = index.columns.first_tag
        a = codes[earlier]
        out: np.ndarray = (a == codes[later]) & (a != 0)
        apart = np.flatnonzero(~out)
        dated = face.dated(ns) if apart.size else False
        # Without dates, two chunks leading with two tags are of two documents that no date joins.
        if apart.size and (dated or not a[apart].all() or not codes[later[apart]].all()):
            column = index.columns.ids
            # (chunk_document's own rpartition inline)
            x = [(column[o] or "").rpartition("c")[0] for o in earlier[apart].tolist()]
            y = [(column[o] or "").rpartition("c")[0] for o in later[apart].tolist()]
            dates = face.dates(ns, x + y, dated)
            out[apart] = [p == q or (dates[p] is not None and dates[p] == dates[q]) for p, q in zip(x, y)]
        return out

    def memory_pairs(earlier: np.ndarray, later: np.ndarray) -> np.ndarray:
        """The same of memories, whose record names its document as its author: one document is one
        author code; only the pairs of two documents ask their names and dates."""
        codes = index.columns.author
        a, b = codes[earlier], codes[later]
        unnamed = index.columns.author_code("")  # written before records named their document: no neighbours
        named = np.ones(a.size, bool) if unnamed is None else (a != unnamed) & (b != unnamed)
        out: np.ndarray = named & (a == b)
        apart = np.flatnonzero(named & (a != b))
        if apart.size and face.dated(ns):  # (without dates, memories of two documents are never joined)
            x, y = index.columns.authors(earlier[apart]), index.columns.authors(later[apart])
            dates = face.dates(ns, x + y, True)
            out[apart] = [dates[p] is not None and dates[p] == dates[q] for p, q in zip(x, y)]
        return out

    ctx = context_columns.in_context(index, hits.ords, filters, memory_pairs if kind == "memory" else chunk_pairs,
                                     follow=True)
    ords = ctx.ords  # the hits and the ones after them, ascending, each live and passing the filters
    at = np.searchsorted(ords, hits.ords)  # (every hit is among them)
    sims = np.full(ords.size, np.nan)
    bm25 = np.full(ords.size, np.nan)
    joined = np.ones(ords.size, bool)
    joined[at] = False
    if vector is not None and index.vectors is not None and joined.any():  # a joined one's cosine (NaN: none)
        sims[joined] = index.vectors.similarities(index.vectors.prepare(np.asarray(vector, np.float64)), ords[joined])
    sims[at], bm25[at] = hits.sims, hits.bm25  # a hit's own, as the engine worked them out
    # The candidates and the ones before them weighed in one pass over the term counts.
    coverage = index.keyword.coverage(topic, ords, np.where(ctx.has_prev, ctx.prev, -1) if ctx.has_prev.any() else None,
                                      word_weights(index, topic))
    ord_list = ords.tolist()
    named = index.columns.ids
    return Taken(ords, [named[o] for o in ord_list], index.columns.tags_many(ord_list), sims, bm25,
                 coverage)
