"""What a v5 search's hits hold of its query: keyword coverage, a chunk's with its conversation's context.

Keyword coverage is the share of the query's content words a result holds (an exact or stemmed
match counts 1, an identifier part 0.5), each word weighted by its idf (search.py's module doc).
A chunk or a memory holds a word when it or the one just before it in its conversation does (`in_context`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from engram_index.engine.analyzer import QueryWord
from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import Filters, Hit
from engram_index.ranking import with_context
from engram_index.supermemory.face import Face

IDF_COVERAGE = True


def coverages(whole: np.ndarray, part: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Per document, the share of the query's content words it holds (an identifier part counts half),
    each word weighted by `weights` (its idf: a rare word says more than a common one) when given."""
    if not whole.shape[1]:
        return np.zeros(whole.shape[0])
    w = np.ones(whole.shape[1]) if weights is None or not weights.sum() > 0 else weights
    score: np.ndarray = (whole @ w + 0.5 * (part & ~whole) @ w) / w.sum()
    return score


def word_weights(index: SpaceIndex, words: Sequence[QueryWord]) -> np.ndarray | None:
    """Each content word's idf in the collection, of the word as asked (its exact form: the commoner
    stem weighed less and measured worse, docs/design/ranking.md), or None when IDF_COVERAGE is off."""
    if not IDF_COVERAGE or not words:
        return None
    weights: np.ndarray = index.keyword.counts.idf([w.exact for w in words])
    return weights


def holds(index: SpaceIndex, words: Sequence[QueryWord], ords: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`SpaceIndex.holds` of ordinals the caller has (-1: none, holding nothing), inside `index.reading()`."""
    known = ords >= 0
    whole = np.zeros((ords.size, len(words)), bool)
    part = np.zeros((ords.size, len(words)), bool)
    if known.any():
        whole[known], part[known] = index.keyword.holds(words, ords[known])
    return whole, part


def in_context(face: Face, ns: str, index: SpaceIndex, hits: list[Hit], filters: Filters,
               topic: Sequence[QueryWord], vector: Any, kind: str = "chunk") -> tuple[list[Hit], np.ndarray, list[int]]:
    """Chunks or memories (`kind`) with their conversation context (ranking.with_context): one holds a
    content word when it or the one just before it does, when that one is of the same document or of a
    document of the same date (a conversation's turns of one session); the ones just after the hits
    join them. Neither they nor the ones around them are read from the store: a chunk's document is in
    its id, a memory's is its record's author (`Columns.authors`). The candidates, each one's coverage
    and its ordinal."""

    def chunk_pairs(earlier: np.ndarray, later: np.ndarray) -> np.ndarray:
        """Whether each pair of chunks is of one document, or of two of one date (a chunk's document is
        in its id)."""
        column = index.columns.ids
        # (chunk_document's own rpartition inline: two hundred ids a search)
        a = [(column[o] or "").rpartition("c")[0] for o in earlier.tolist()]
        b = [(column[o] or "").rpartition("c")[0] for o in later.tolist()]
        # Only chunks of two documents ask their dates (most context is a chunk of the same document).
        apart = [d for x, y in zip(a, b) if x != y for d in (x, y)]
        known_dates = face.dates(ns, apart) if apart else {}
        return np.fromiter((x == y or (known_dates[x] is not None and known_dates[x] == known_dates[y])
                            for x, y in zip(a, b)), bool, len(a))

    def memory_pairs(earlier: np.ndarray, later: np.ndarray) -> np.ndarray:
        """The same of memories, whose record names its document as its author: one document is one
        author code; only the pairs of two documents ask their names and dates."""
        codes = index.columns.author
        a, b = codes[earlier], codes[later]
        unnamed = index.columns.author_code("")  # written before records named their document: no neighbours
        named = np.ones(a.size, bool) if unnamed is None else (a != unnamed) & (b != unnamed)
        out: np.ndarray = named & (a == b)
        apart = np.flatnonzero(named & (a != b))
        if apart.size:
            x, y = index.columns.authors(earlier[apart]), index.columns.authors(later[apart])
            dates = face.dates(ns, x + y)
            out[apart] = [dates[p] is not None and dates[p] == dates[q] for p, q in zip(x, y)]
        return out

    known = {h.document.id: h for h in hits}
    with index.reading():
        ctx = with_context(index, hits, filters, None, pairs=memory_pairs if kind == "memory" else chunk_pairs)
        ords = ctx.ords.tolist()
        # the ones after the hits, from the columns (the hits' own are at hand)
        ctx.docs.update(index.columns.documents([o for o in ords if o not in ctx.docs]))
        column_ids = index.columns.ids
        cosines = (index.vectors.similarities(index.vectors.prepare(np.asarray(vector, np.float64)), ctx.ords)
                   if vector is not None and index.vectors is not None else None)
        docs = [ctx.docs.get(o) for o in ords]
        # The ordinals of the chunks read (a chunk whose document is gone holds nothing) and of those before
        # them: what SpaceIndex.holds would find from their ids, without looking the ids up again.
        own = np.array([o if d is not None else -1 for o, d in zip(ords, docs)], np.int64)
        if ctx.has_prev.any():  # the chunks and the chunks before them in one pass over the term counts
            prev = np.where(ctx.has_prev, ctx.prev, -1)
            prev[prev >= 0] = [o if column_ids[o] is not None else -1 for o in prev[prev >= 0].tolist()]
            both_whole, both_part = holds(index, topic, np.concatenate([own, prev]))
            n = own.size
            whole, part = both_whole[:n] | both_whole[n:], both_part[:n] | both_part[n:]
        else:
            whole, part = holds(index, topic, own)
        held = coverages(whole, part, word_weights(index, topic))
    sims = cosines.tolist() if cosines is not None else None  # (floats: NaN where a chunk has no vector)
    out: list[Hit] = []
    kept: list[int] = []
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        hit = known.get(doc.id)
        if hit is None:
            sim = None if sims is None or sims[i] != sims[i] else sims[i]
            hit = Hit(doc, 0.0, similarity=sim)
        out.append(hit)
        kept.append(i)
    if len(kept) < len(docs):
        held, ords = held[kept], [ords[i] for i in kept]
    return out, held, ords
