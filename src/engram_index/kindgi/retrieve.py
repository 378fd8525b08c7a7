"""POST /v1/memory/retrieve: list, keyword, semantic and both, over the facts the caller may see.

- list: newest first, no score (straight from the revisions table, visibility in its WHERE);
- keyword: the engine's BM25; the score is the BM25 value (higher is better);
- semantic: cosine similarity of the query's embedding, in [-1, 1];
- both: reciprocal rank fusion of the keyword and the semantic leg, Σ 1/(60 + rank) with 1-based
  ranks per leg; ties keep the order in which the legs (keyword first) found them.

Visibility, `scope` and `type` are engine filters, applied inside each search before its limit.
A fact is retrievable as soon as its write is answered: vectors are searchable at once, and the
keyword search scores the documents written since its last commit from the term counts (which
hold them at once); past `PENDING_SCAN` of those it commits first (docs/design/kindgi.md).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from engram_index.engine.fusion import RRF_K
from engram_index.engine.search import PENDING_SCAN
from engram_index.engine.types import Filters, Hit, SearchRequest
from engram_index.kindgi.auth import Principal
from engram_index.kindgi.errors import KindgiError
from engram_index.kindgi.facts import Facts
from engram_index.kindgi.models import Intent
from engram_index.kindgi.scope import reader_groups, scope_tags
from engram_index.remodel import describe
from engram_index.embed.query_cache import EmbedSlots, QueryCache

log = logging.getLogger(__name__)

EXPIRE_EVERY_S = 1.0  # a tenant's expired facts are closed at most this often, in the background
# How deep each leg of `both` goes: twice the limit, at least this many.
MIN_LEG_DEPTH = 20


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


class Retriever:
    """Retrieval by intent over one deployment's facts."""

    def __init__(self, facts: Facts) -> None:
        """Retrieve from `facts` (its embedder embeds queries too)."""
        self.facts = facts
        # The query's embedding runs here while the keyword leg searches (both release the GIL).
        self._embedding = ThreadPoolExecutor(2, thread_name_prefix="kindgi-embed")
        self._queries = QueryCache(slots=EmbedSlots())  # exact query text → vector (embed/query_cache.py)
        # Facts past their retention are closed here, off the read path (a retrieve never writes).
        self._expiry = ThreadPoolExecutor(1, thread_name_prefix="kindgi-expiry")
        self._expired: dict[str, float] = {}  # tenant → when its expiry last ran (monotonic)
        self._guard = threading.Lock()

    def close(self) -> None:
        """Stop the embedding and expiry threads."""
        self._embedding.shutdown(wait=True)
        self._expiry.shutdown(wait=True)

    def _expire_later(self, tenant: str) -> None:
        """Close the tenant's facts whose retention ended, on the expiry thread, at most once a second."""
        now = time.monotonic()
        with self._guard:
            if now - self._expired.get(tenant, -EXPIRE_EVERY_S) < EXPIRE_EVERY_S:
                return
            self._expired[tenant] = now
        self._expiry.submit(self._expire, tenant)

    def _expire(self, tenant: str) -> None:
        """Close expired facts (a failure is logged: the next retrieve tries again)."""
        try:
            self.facts.expire_due(tenant)
        except Exception:
            log.exception("closing the expired facts of %s failed", tenant)
            with self._guard:
                self._expired.pop(tenant, None)

    def check(self, intent: Intent) -> None:
        """422 semantic-unavailable when the intent searches by meaning and this deployment cannot."""
        if intent.mode not in ("semantic", "both"):
            return
        embedder = self.facts.embedder
        if embedder is None:
            raise KindgiError("semantic-unavailable",
                              f"mode {intent.mode} searches by meaning, and this deployment has no embeddings"
                              " (start it with an embedder): use keyword or list")
        if intent.embedding_model is not None and intent.embedding_model != embedder.identity.model:
            raise KindgiError("semantic-unavailable",
                              f"this deployment embeds with {embedder.identity.model}, not {intent.embedding_model}",
                              {"embeddingModel": embedder.identity.model})

    def retrieve(self, principal: Principal, intent: Intent, explain: bool = False) -> list[dict[str, Any]]:
        """The results of one intent: `{fact, score?, explanation?}` best first."""
        self.check(intent)
        tenant = principal.tenant
        if intent.mode == "list":
            facts, _ = self.facts.page(principal, limit=intent.limit, type_=intent.type, scope=intent.scope)
            return [{"fact": f} for f in facts]
        if not self.facts.has_space(tenant):
            return []
        self._expire_later(tenant)  # reads skip expired facts already: closing them is not this read's work
        name = self.facts.space(tenant)
        tags = ([f"t:{intent.type}"] if intent.type else []) + scope_tags(intent.scope or {})
        filters = Filters(tags=tuple(tags), any_tags=reader_groups(principal))
        query = intent.query or ""
        legs: dict[str, list[Hit]] = {}
        depth = intent.limit if intent.mode != "both" else max(2 * intent.limit, MIN_LEG_DEPTH)
        vector: Future[Any] | None = None
        if intent.mode in ("semantic", "both"):
            embedder = self.facts.embedder
            assert embedder is not None
            held = self.facts.collections.info(name).model
            if held != embedder.identity:  # being re-embedded (remodel.py): no mixing of two models
                raise KindgiError("semantic-unavailable", f"this tenant's facts are embedded with {describe(held)}"
                                  f" and are being re-embedded with {embedder.identity.model}: retry shortly,"
                                  " or use keyword", {"embeddingModel": embedder.identity.model})
            vector = self._embedding.submit(self._queries.vector, embedder, query)
        if intent.mode in ("keyword", "both"):
            index = self.facts.collections.index(name)
            if index.keyword.pending_ords().size > PENDING_SCAN:
                index.commit()  # more uncommitted writes than a search scores itself: commit them first
            legs["keyword"] = self.facts.collections.search(name, SearchRequest(
                "keyword", q=query, limit=depth, filters=filters, explain=explain)).hits
        if vector is not None:
            legs["semantic"] = self.facts.collections.search(name, SearchRequest(
                "vector", vector=vector.result(), limit=depth, filters=filters, explain=False)).hits
        ranked = self._rank(intent.mode, legs)[: intent.limit]
        found = self.facts.retrievable(tenant, [fid for fid, _, _ in ranked])
        out: list[dict[str, Any]] = []
        for fid, score, why in ranked:
            fact = found.get(fid)
            if fact is None:
                continue  # changed between the search and the read: not current any more
            result: dict[str, Any] = {"fact": fact, "score": score}
            if explain:
                result["explanation"] = why
            out.append(result)
        return out

    def _rank(self, mode: str, legs: dict[str, list[Hit]]) -> list[tuple[str, float, dict[str, Any]]]:
        """(fact id, score, explanation) best first, for one mode's legs."""
        if mode in ("keyword", "semantic"):
            out = []
            for rank, hit in enumerate(legs[mode], 1):
                score = hit.bm25 if mode == "keyword" else hit.similarity
                why: dict[str, Any] = {mode: _explanation(hit, rank, mode)}
                snippet = _snippet(hit)
                if snippet is not None:
                    why["snippet"] = snippet
                out.append((hit.document.id, float(score or 0.0), why))
            return out
        fused: dict[str, dict[str, Any]] = {}
        order = 0
        for leg in ("keyword", "semantic"):
            for rank, hit in enumerate(legs[leg], 1):
                entry = fused.get(hit.document.id)
                if entry is None:
                    entry = fused[hit.document.id] = {"score": 0.0, "first": order, "ranks": {}, "hits": {}}
                    order += 1
                if leg not in entry["ranks"]:
                    entry["score"] += 1.0 / (RRF_K + rank)
                    entry["ranks"][leg] = rank
                    entry["hits"][leg] = hit
        best = sorted(fused.items(), key=lambda kv: (-kv[1]["score"], kv[1]["first"]))
        out = []
        for fid, entry in best:
            why = {leg: _explanation(entry["hits"].get(leg), entry["ranks"].get(leg, 0), leg)
                   for leg in ("keyword", "semantic") if leg in entry["ranks"]}
            why["fusion"] = {"method": "rrf", "k": RRF_K, "ranks": entry["ranks"]}
            snippet = _snippet(entry["hits"].get("keyword"))
            if snippet is not None:
                why["snippet"] = snippet
            out.append((fid, float(entry["score"]), why))
        return out
