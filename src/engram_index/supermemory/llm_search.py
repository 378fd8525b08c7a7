"""The search features that need a model: query rewriting, reordering and aggregation."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from engram_index.supermemory.errors import NotConfigured
from engram_index.supermemory.face import Face, stamp
from engram_index.supermemory.tables import iso

if TYPE_CHECKING:
    from engram_index.supermemory.candidates import Candidate

MAX_REWRITES = 3


def rewrites(face: Face, query: str) -> list[str]:
    """Up to MAX_REWRITES retrieval-oriented rewrites of the query, from the LLM."""
    if face.llm is None:
        raise NotConfigured("rewriteQuery needs an LLM", "start the server with --llm MODEL@URL")
    from engram_index.llm.query import rewrite_query

    return [q for q in rewrite_query(face.llm, query) if q.strip() and q != query][:MAX_REWRITES]


def reorder(face: Face, query: str, ranked: list[Candidate]) -> list[Candidate]:
    """The results reordered by the reranker's relevance (its score kept for the explanation)."""
    reranker = face.reranker
    if reranker is None:
        if face.llm is None:
            raise NotConfigured('rerank "order" needs a reranker', "start the server with --rerank SPEC or --llm")
        from engram_index.rerank import LLMReranker

        reranker = LLMReranker(face.llm)
    scores = reranker.scores(query, [c.text for c in ranked])
    for cand, score in zip(ranked, scores):
        cand.rerank = float(score)
    return sorted(ranked, key=lambda c: (-(c.rerank or 0.0), -c.similarity, c.id))


def aggregate(face: Face, query: str, ranked: list[Candidate]) -> dict[str, Any]:
    """One result that merges the results' overlapping context into an answer (id `aggregated_...`)."""
    if face.llm is None:
        raise NotConfigured('rerank "aggregate" needs an LLM', "start the server with --llm MODEL@URL")
    from engram_index.llm.query import aggregate as llm_aggregate

    text = llm_aggregate(face.llm, query, [c.text for c in ranked])
    now = iso(stamp())
    digest = hashlib.blake2b("\0".join([query, *(c.id for c in ranked)]).encode(), digest_size=8).hexdigest()
    return {
        "id": f"aggregated_{digest}",
        "memory": text,
        "metadata": {"aggregatedFrom": [c.id for c in ranked]},
        "similarity": round(max(c.similarity for c in ranked), 6),
        "isLatest": True,
        "isInference": True,
        "system": {"createdAt": now, "updatedAt": now},
    }
