"""A retrieve's legs ranked and fused with explanations (`X-Kindgi-Explain`): one hit per fact, with
the document whose text the matched terms and the snippet come from.

The same order and scores as kindgi/ranked.py, which a retrieve without explanations takes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from engram_index.context_columns import scores_in_context
from engram_index.engine.analyzer import QueryWord, query_words
from engram_index.engine.explain import Explainer
from engram_index.engine.fusion import RRF_K
from engram_index.engine.keyword import searchable_words
from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import Filters, Hit
from engram_index.kindgi.conversations import Conversations, same_conversation
from engram_index.ranking import column_documents, rrf, with_context

LEGS = ("keyword", "semantic")


def explained(hits: list[Hit], asked: str) -> list[Hit]:
    """The hits with the terms of the query's content words (`asked`) they match, and their snippets."""
    explainer = Explainer(searchable_words(query_words(asked)))
    for hit in hits:
        hit.terms, hit.snippet = explainer.explain(hit.document.text, hit.document.tags, None)
    return hits


def _explanation(hit: Hit | None, rank: int, leg: str) -> dict[str, Any]:
    """Why one leg found a fact: its rank and score there, and for keyword the terms it matched."""
    if hit is None:
        return {}
    if leg == "semantic":
        return {"rank": rank, "similarity": hit.similarity}
    return {"rank": rank, "bm25": hit.bm25,
            "terms": [{"term": t.term, "kind": t.kind, "field": t.field} for t in hit.terms]}


def _snippet(hit: Hit | None) -> dict[str, Any] | None:
    """A hit's snippet with its byte highlights, if it has one."""
    if hit is None or hit.snippet is None:
        return None
    return {"text": hit.snippet.text,
            "highlights": [{"byteStart": s, "byteEnd": e} for s, e in hit.snippet.highlights]}


def stable(index: SpaceIndex, hits: list[Hit]) -> list[Hit]:
    """`ranking.stable_order` of the hits by score, equal scores by `ranking.insertion_keys` (unknown ids
    last), with the ordinals as Python numbers at once (numpy scalars one by one cost more)."""
    ids = [h.document.id for h in hits]
    unknown = int(np.iinfo(np.int64).max)
    order = dict(zip(ids, [o if o >= 0 else unknown for o in index.columns.ids_to_ords(ids).tolist()]))
    return sorted(hits, key=lambda h: (-float(h.score), order[h.document.id]))


def by_words(index: SpaceIndex, asked: str, words: list[QueryWord], neighbours: Conversations,
             keyword: list[Hit], semantic: list[Hit], filters: Filters) -> list[Hit]:
    """`both`'s keyword leg: the keyword hits and the semantic leg's facts that hold a content word, all
    by BM25 with their context (as the keyword leg scores), so that a fact found by meaning has a rank
    among the keyword hits too."""
    seen = {h.document.id for h in keyword}
    extra = [h for h in semantic if h.document.id not in seen]
    if not extra:
        return keyword
    with index.reading():
        # These facts alone (their documents are at hand); the turns before them from the columns.
        ctx = with_context(index, extra, filters, neighbours, follow=False, fetch=column_documents(index))
        total = scores_in_context(index, words, ctx)
    docs = ctx.docs  # (as Python numbers at once: numpy scalars one by one cost more)
    scored = [Hit(docs[o], t, bm25=t) for o, t in zip(ctx.ords.tolist(), total.tolist()) if t > 0 and o in docs]
    return sorted(keyword + explained(scored, asked), key=lambda h: -float(h.score))


def by_meaning(index: SpaceIndex, vector: Any, semantic: list[Hit], keyword: list[Hit], filters: Filters,
               context: bool) -> list[Hit]:
    """`both`'s semantic leg: the semantic hits and the keyword leg's facts, all ranked by cosine, so that
    every fused fact has a rank in both legs; with `context`, a fact is as close as it or the fact
    before it in its conversation."""
    seen = {h.document.id for h in semantic}
    extra = [h for h in keyword if h.document.id not in seen]
    if index.vectors is None or not (extra or context):
        return semantic
    query = index.vectors.prepare(np.asarray(vector, np.float64))
    if context:
        with index.reading():
            ctx = with_context(index, [*semantic, *extra], filters, same_conversation)
            own = index.vectors.similarities(query, ctx.ords).astype(np.float64)
            before = np.full(ctx.ords.size, np.nan)
            if ctx.has_prev.any():
                before[ctx.has_prev] = index.vectors.similarities(query, ctx.prev[ctx.has_prev])
        best = np.fmax(own, before)
        scored = [Hit(ctx.docs[int(o)], float(s), similarity=float(s)) for o, s in zip(ctx.ords, best)
                  if not np.isnan(s) and int(o) in ctx.docs]
        return sorted(scored, key=lambda h: -float(h.score))
    with index.reading():
        ords = index.columns.ids_to_ords([h.document.id for h in extra])
        sims = index.vectors.similarities(query, ords)
    scored = list(semantic) + [Hit(h.document, s, similarity=s)  # as Python floats, at once
                               for h, s in zip(extra, sims.astype(np.float64).tolist()) if not math.isnan(s)]
    return sorted(scored, key=lambda h: -float(h.score))


def rank(mode: str, legs: dict[str, list[Hit]], limit: int) -> list[tuple[str, float, dict[str, Any]]]:
    """The best `limit` (fact id, score, explanation) for one mode's legs, each in `stable` order."""
    if mode in ("keyword", "semantic"):
        out = []
        for place, hit in enumerate(legs[mode][:limit], 1):
            score = hit.bm25 if mode == "keyword" else hit.similarity
            why: dict[str, Any] = {mode: _explanation(hit, place, mode)}
            snippet = _snippet(hit)
            if snippet is not None:
                why["snippet"] = snippet
            out.append((hit.document.id, float(score or 0.0), why))
        return out
    best = rrf([[h.document.id for h in legs["keyword"]], [h.document.id for h in legs["semantic"]]],
               RRF_K)[:limit]
    hits = {leg: {h.document.id: h for h in legs[leg]} for leg in LEGS}
    out = []
    for fid, score, leg_ranks in best:
        ranks = {LEGS[leg]: place for leg, place in leg_ranks.items()}
        why = {leg: _explanation(hits[leg].get(fid), place, leg) for leg, place in ranks.items()}
        why["fusion"] = {"method": "rrf", "k": RRF_K, "ranks": ranks}
        snippet = _snippet(hits["keyword"].get(fid))
        if snippet is not None:
            why["snippet"] = snippet
        out.append((fid, float(score), why))
    return out
