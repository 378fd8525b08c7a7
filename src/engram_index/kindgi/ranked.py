"""A retrieve's legs ranked and fused without explanations: each leg's fact ids and scores in arrays.

A retrieve without `X-Kindgi-Explain` answers with the facts' bodies, so of its legs it needs each
fact's id and score alone. They are kept as (ids, scores) here, and `both`'s cross-leg rankings, the
tie-breaks and the fusion work on those, where the explained path (retrieve.py) builds a hit and a
document per fact: the same order, the same scores, bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from engram_index.context_columns import in_context, scores_in_context
from engram_index.engine.analyzer import QueryWord
from engram_index.engine.fusion import RRF_K
from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import Filters, Fused
from engram_index.ranking import Pairs, rrf

# A leg: its facts' ids, best first, and their scores (float64: each the float the explained path holds).
Leg = tuple[list[str], np.ndarray]
UNKNOWN = int(np.iinfo(np.int64).max)  # the tie-break place of a fact no longer in the index: last


def from_columns(index: SpaceIndex, found: Fused) -> Leg:
    """A search's answer in columns (`SearchRequest.hits=False`) as a leg: its facts still in the index, with
    their scores as a hit holds them."""
    with index.reading():
        named = index.columns.ids
        ids = [named[o] for o in found.ords.tolist()]
    keep = [i for i, d in enumerate(ids) if d is not None]
    return [str(ids[i]) for i in keep], found.scores[keep].astype(np.float64)


def stable(index: SpaceIndex, leg: Leg) -> Leg:
    """The leg by score, equal scores by insertion order (`ranking.insertion_keys`: unknown ids last), as
    retrieve's `_stable` orders hits."""
    ids, scores = leg
    if len(ids) < 2:
        return leg
    ords = index.columns.ids_to_ords(ids)
    ords[ords < 0] = UNKNOWN
    order = np.lexsort((ords, -scores))  # stable, as sorted() with the key (-score, ordinal)
    return [ids[i] for i in order.tolist()], scores[order]


def by_meaning(index: SpaceIndex, query: Any, semantic: Leg, keyword: Leg, filters: Filters, pairs: Pairs,
               context: bool) -> Leg:
    """`both`'s semantic leg: its facts and the keyword leg's others, each at its cosine to the query (a
    fact without a vector is left out); with `context`, a fact is as close as it or the fact before it
    in its conversation. `stable` orders it."""
    ids, sims = semantic
    seen = set(ids)
    extra = [i for i in keyword[0] if i not in seen]
    if index.vectors is None or not (extra or context):
        return semantic
    prepared = index.vectors.prepare(np.asarray(query, np.float64))
    if context:  # the turns after them too, as `ranking.with_context` adds them
        with index.reading():
            found = index.columns.ids_to_ords(ids + extra)
            ctx = in_context(index, found, filters, pairs, follow=True)
            own = index.vectors.similarities(prepared, ctx.ords).astype(np.float64)
            before = np.full(ctx.ords.size, np.nan)
            if ctx.has_prev.any():
                before[ctx.has_prev] = index.vectors.similarities(prepared, ctx.prev[ctx.has_prev])
            best = np.fmax(own, before)
            keep = np.flatnonzero(~np.isnan(best)).tolist()
            found_ids = _ids(index, ctx.ords[keep])
        return [i for i in found_ids if i is not None], best[[k for k, i in zip(keep, found_ids) if i is not None]]
    with index.reading():
        found = index.vectors.similarities(prepared, index.columns.ids_to_ords(extra)).astype(np.float64)
    keep = ~np.isnan(found)
    return ids + [i for i, k in zip(extra, keep.tolist()) if k], np.concatenate([sims, found[keep]])


def _ids(index: SpaceIndex, ords: np.ndarray) -> list[str | None]:
    """The fact id at each ordinal (None: not in the index). Call inside `index.reading()`."""
    named = index.columns.ids
    return [named[o] for o in ords.tolist()]


def by_words(index: SpaceIndex, words: Sequence[QueryWord], filters: Filters, pairs: Pairs, keyword: Leg,
             semantic: Leg) -> Leg:
    """`both`'s keyword leg: its facts and the semantic leg's others that hold a content word, each by
    BM25 with its context (the fact before it in its conversation), as the keyword leg scores; `stable`
    orders it."""
    ids, scores = keyword
    seen = set(ids)
    extra = [i for i in semantic[0] if i not in seen]
    if not extra:
        return keyword
    with index.reading():
        found = index.columns.ids_to_ords(extra)
        ctx = in_context(index, found, filters, pairs, follow=False)
        total = scores_in_context(index, words, ctx)
    id_of = dict(zip(found.tolist(), extra))  # the candidates that are these facts (their context is not)
    scored = [(id_of.get(o), t) for o, t in zip(ctx.ords.tolist(), total.tolist()) if t > 0]
    kept = [(i, t) for i, t in scored if i is not None]
    return ids + [i for i, _ in kept], np.concatenate([scores, np.array([t for _, t in kept], np.float64)])


def fused(mode: str, legs: dict[str, Leg], limit: int) -> list[tuple[str, float]]:
    """The best `limit` (fact id, score) of one mode's legs, each leg in `stable` order: keyword and
    semantic by their own score, both by reciprocal rank fusion (`ranking.rrf`, k = RRF_K)."""
    if mode in ("keyword", "semantic"):
        ids, scores = legs[mode]
        return list(zip(ids[:limit], scores[:limit].tolist()))
    best = rrf([legs["keyword"][0], legs["semantic"][0]], RRF_K)[:limit]
    return [(fid, float(score)) for fid, score, _ in best]
