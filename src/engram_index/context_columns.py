"""Conversation context judged on ordinals: the turns around a search's hits, from the index's columns alone.

`ranking.with_context` takes hits and reads what it needs of their documents; a face that works on
the engine's answer in columns (`SearchRequest.hits=False`) has ordinals, and judges whether a
turn is the context of the next with a `Pairs` function over the columns (the Kindgi face by
conversation, the v5 face by document and date). The same context, in fewer array steps.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engram_index.engine import _kernels
from engram_index.engine.analyzer import QueryWord
from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import Filters, Hit
from engram_index.ranking import NEXT_CONTEXT, Context, Pairs, context_scores, with_context


def in_context(index: SpaceIndex, found: np.ndarray, filters: Filters, pairs: Pairs, follow: bool) -> Context:
    """`ranking.with_context(..., pairs=pairs)` of the hits found at these ordinals (-1: no longer in the
    index, left out), the same context in one compiled pass and the pairs' test; its `docs` are none
    (the caller knows its hits by their ordinals). Call inside `index.reading()`."""
    columns = index.columns
    if NEXT_CONTEXT:  # the turn after as context too: only the general version knows it
        docs = columns.documents(found[found >= 0].tolist())
        hits = [Hit(docs[o], 0.0) for o in found.tolist() if o in docs]
        ctx = with_context(index, hits, filters, None, follow=follow, pairs=pairs)
        return Context(ctx.ords, ctx.prev, ctx.has_prev, {}, ctx.next, ctx.has_next)
    # The hits and (following) the turns just after them, ascending, each once; whether the turn before each
    # is live and passes the filters: one compiled pass.
    found = np.ascontiguousarray(found, np.int64)
    cands = np.empty(2 * found.size, np.int64)
    has_prev = np.empty(2 * found.size, bool)
    m = _kernels.context_candidates(found, columns.live, columns.mask(filters), follow, cands, has_prev)
    cands, has_prev = cands[:m], has_prev[:m]
    prev = cands - 1
    if has_prev.any():
        has_prev[has_prev] = pairs(prev[has_prev], cands[has_prev])
    return Context(cands, prev, has_prev, {}, cands + 1, np.zeros(cands.size, bool))


def scores_in_context(index: SpaceIndex, words: Sequence[QueryWord], ctx: Context) -> np.ndarray:
    """`ranking.context_scores` bit for bit (each word's better part, in the turn or the turn before,
    summed word after word), each word's better part taken for all words in one step."""
    if ctx.has_next is not None and ctx.has_next.any():
        return context_scores(index, words, ctx)
    n = ctx.ords.size
    prev = ctx.prev[ctx.has_prev]
    per_word = index.keyword.word_scores(words, np.concatenate([ctx.ords, prev]))
    best = per_word[:n].astype(np.float64)
    if prev.size:
        best[ctx.has_prev] = np.maximum(best[ctx.has_prev], per_word[n:])
    total = np.zeros(n)
    for j in range(best.shape[1]):  # in the words' order, as context_scores adds them
        total += best[:, j]
    return total
