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
import math
import threading
import time
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from typing import Any

from engram_index.engine.fusion import RRF_K
from engram_index.engine.search import PENDING_SCAN, SpaceIndex
from engram_index.engine.types import Document, Filters, Hit, SearchRequest
from engram_index.kindgi.auth import Principal
from engram_index.kindgi.conversations import ConversationCodes, in_context, keyword_in_context, scores_in_context
from engram_index.kindgi.errors import KindgiError
from engram_index.kindgi import why_fewer
from engram_index.kindgi.facts import Facts
from engram_index.kindgi.join import Join
from engram_index.kindgi.models import Intent
from engram_index.kindgi.scope import reader_groups, scope_tags
from engram_index.engine.analyzer import QueryWord, query_words
from engram_index.engine.explain import Explainer
from engram_index.engine.keyword import searchable_words
from engram_index.ranking import (Pairs, column_documents, content_query, content_words, context_keyword,
                                  rrf, with_context)
from engram_index.remodel import describe
from engram_index.embed.base import Embedder
from engram_index.embed.query_cache import EmbedSlots, QueryCache

log = logging.getLogger(__name__)

EXPIRE_EVERY_S = 1.0  # a tenant's expired facts are closed at most this often, in the background
# How deep each leg of `both` goes: LEG_DEPTH_PER_LIMIT times the limit, at least MIN_LEG_DEPTH.
MIN_LEG_DEPTH = 20
LEG_DEPTH_PER_LIMIT = 2.0
LEGS = ("keyword", "semantic")
# The keyword leg scores this many BM25 candidates (and the turns after them) with their context.
CONTEXT_DEPTH = 50
CONTEXT = True
# `both`'s semantic leg also ranks the keyword leg's facts by cosine (every fused fact has a rank in
# both legs): LoCoMo dev R@10 0.675 -> 0.708 (docs/design/ranking.md).
SEMANTIC_OVER_KEYWORD = True
# And the other way round: `both`'s keyword leg also ranks the semantic leg's facts by BM25 (with context).
KEYWORD_OVER_SEMANTIC = True
# The fact before as context of the semantic leg too (max of the two cosines): measured worse,
# LoCoMo dev both R@10 0.740 -> 0.673; off.
SEMANTIC_CONTEXT = False


Conversation = tuple[list[str], list[str]]  # a fact's session tags and thread tags


def conversation(doc: Document) -> Conversation:
    """The fact's session tags and thread tags (in its tags' order)."""
    sessions: list[str] = []
    threads: list[str] = []
    for tag in doc.tags:
        if tag.startswith("s:"):
            if tag.startswith("s:sessionId="):
                sessions.append(tag)
            elif tag.startswith("s:threadId="):
                threads.append(tag)
    return sessions, threads


def _same(a: Conversation, b: Conversation) -> bool:
    """Whether two conversations are one: by session where either has one, else by thread."""
    for mine, theirs in zip(a, b):
        if mine or theirs:
            return bool(mine) and mine == theirs
    return False


def same_conversation(earlier: Document, later: Document) -> bool:
    """Whether `earlier` is the context of `later`: both facts of one session (else of one thread)."""
    return _same(conversation(earlier), conversation(later))


class Conversations:
    """`same_conversation` with each fact's conversation worked out once (a retrieve asks about the
    same facts many times: each is the later turn of one pair and the earlier of the next)."""

    def __init__(self) -> None:
        """No fact seen yet."""
        self._seen: dict[str, Conversation] = {}

    def _of(self, doc: Document) -> Conversation:
        """The fact's conversation, remembered by its id (one retrieve reads one index state)."""
        found = self._seen.get(doc.id)
        if found is None:
            found = self._seen[doc.id] = conversation(doc)
        return found

    def __call__(self, earlier: Document, later: Document) -> bool:
        """As `same_conversation`."""
        return _same(self._of(earlier), self._of(later))


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


def _stable(index: SpaceIndex, hits: list[Hit]) -> list[Hit]:
    """`ranking.stable_order` of the hits by score, equal scores by `ranking.insertion_keys` (unknown ids
    last), with the ordinals as Python numbers at once (numpy scalars one by one cost more)."""
    ids = [h.document.id for h in hits]
    unknown = int(np.iinfo(np.int64).max)
    order = dict(zip(ids, [o if o >= 0 else unknown for o in index.columns.ids_to_ords(ids).tolist()]))
    return sorted(hits, key=lambda h: (-float(h.score), order[h.document.id]))


KEYWORD, SEMANTIC = 0, 1  # a pooled retrieve's legs, in the order a retrieve on one thread runs them
Meaning = tuple[Any, list[Hit]]  # the query's vector and the vector search's hits


@dataclass
class Started:
    """A retrieve past its checks (`Retriever.start`): its intent, the tenant's collection (None: list
    mode, or a tenant without facts), its filters, each leg's depth and its semantic leg under way.

    A `pooled` retrieve (`join` set) searches on the threads its legs run on (the keyword leg's holds a
    search pool slot, `Retriever.keyword_part`), each leg keeps its hits here, and the last leg to
    finish forms the answer (`join.done`); otherwise `Retriever.finish` runs it all on its thread."""

    intent: Intent
    explain: bool = False
    name: str | None = None
    filters: Filters = field(default_factory=Filters)
    depth: int = 0
    semantic: Future[Meaning] | None = None
    join: Join[dict[str, Any]] | None = None
    keyword: list[Hit] | None = None  # the keyword leg's hits, once it ran
    meaning: Meaning | None = None  # the semantic leg's, once it ran (pooled)
    asked: str = ""  # the query's content words (`content_query`) and their analysis, for both keyword legs
    words: list[QueryWord] = field(default_factory=list)
    neighbours: Conversations = field(default_factory=Conversations)


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
        # Each loaded index's facts' conversations as codes (kept while the index is: a reload is another).
        self._codes: weakref.WeakKeyDictionary[SpaceIndex, ConversationCodes] = weakref.WeakKeyDictionary()

    def _pairs(self, index: SpaceIndex) -> Pairs:
        """`same_conversation` judged from the index's columns for many pairs at once (call it, and what
        it returns, inside `index.reading()`)."""
        columns = index.columns
        with self._guard:
            codes = self._codes.get(index)
            if codes is None:
                codes = self._codes[index] = ConversationCodes()
                # Every fact's codes at once, off this retrieve: later retrieves find theirs made.
                self._expiry.submit(codes.warm, columns)
        return lambda earlier, later: codes.same(columns, earlier, later)

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

    def start(self, principal: Principal, intent: Intent, explain: bool = False, pooled: bool = False) -> Started:
        """Everything of a retrieve before its searches, its semantic leg set going at once (from the event
        loop: the query's embedding is the longest step of a semantic or both retrieve, so it starts before
        the hop to a worker thread); its errors are the retrieve's, in the same order. `pooled`: its legs
        search on their own threads and the last forms the answer (`Started.join`; not for list mode)."""
        self.check(intent)
        tenant = principal.tenant
        if intent.mode == "list" or not self.facts.has_space(tenant):
            return Started(intent)
        self._expire_later(tenant)  # reads skip expired facts already: closing them is not this read's work
        name = self.facts.space(tenant)
        tags = ([f"t:{intent.type}"] if intent.type else []) + scope_tags(intent.scope or {})
        filters = Filters(tags=tuple(tags), any_tags=reader_groups(principal))
        depth = intent.limit if intent.mode != "both" else max(int(LEG_DEPTH_PER_LIMIT * intent.limit), MIN_LEG_DEPTH)
        started = Started(intent, explain, name, filters, depth)
        if pooled:
            absent = {"keyword": [SEMANTIC], "semantic": [KEYWORD]}.get(intent.mode, [])
            started.join = Join(2, lambda: self.answer(principal, started), absent)
        if intent.mode in ("semantic", "both"):
            embedder = self.facts.embedder
            assert embedder is not None
            held = self.facts.collections.info(name).model
            if held != embedder.identity:  # being re-embedded (remodel.py): no mixing of two models
                raise KindgiError("semantic-unavailable", f"this tenant's facts are embedded with {describe(held)}"
                                  f" and are being re-embedded with {embedder.identity.model}: retry shortly,"
                                  " or use keyword", {"embeddingModel": embedder.identity.model})
            if pooled:
                self._embedding.submit(self._semantic_part, started, embedder)
            else:
                started.semantic = self._embedding.submit(self._semantic_leg, started, embedder)
        return started

    def _semantic_leg(self, started: Started, embedder: Embedder) -> Meaning:
        """The query's vector and the facts nearest it, on the embedding thread: the vector search starts
        as soon as the embedding ends, while the keyword leg may still run (on this thread when pooled:
        the retrieve's keyword leg holds its search slot)."""
        vector = self._queries.vector(embedder, started.intent.query or "")
        # Without explanations a hit's id and tags are all a retrieve reads (its answer is the
        # revision's body): the engine reads no document from the store (`documents=False`).
        request = SearchRequest("vector", vector=vector, limit=started.depth, filters=started.filters, explain=False,
                                documents=started.explain)
        return vector, self._search(started, request)

    def _search(self, started: Started, request: SearchRequest) -> list[Hit]:
        """A search's hits: on this thread when the retrieve is pooled, else on the search pool."""
        assert started.name is not None
        if started.join is not None:
            return self.facts.collections.index(started.name).search(request).hits
        return self.facts.collections.search(started.name, request).hits

    def _semantic_part(self, started: Started, embedder: Embedder) -> None:
        """A pooled retrieve's semantic leg, on the embedding thread; then its arrival at the join."""
        assert started.join is not None
        try:
            started.meaning = self._semantic_leg(started, embedder)
        except BaseException as exc:  # the request's answer is this error (unless the keyword leg failed too)
            started.join.arrive(SEMANTIC, exc)
        else:
            started.join.arrive(SEMANTIC)

    def keyword_part(self, started: Started) -> None:
        """A pooled retrieve's keyword leg (none in semantic mode), on a search pool thread holding a slot;
        then its arrival at the join."""
        assert started.join is not None
        try:
            if started.intent.mode != "semantic":
                self._keyword_hits(started)
        except BaseException as exc:
            started.join.arrive(KEYWORD, exc)
        else:
            started.join.arrive(KEYWORD)

    def _keyword_hits(self, started: Started) -> None:
        """The query's content words (analysed once for both keyword legs) and the keyword leg's hits."""
        assert started.name is not None
        query = started.intent.query or ""
        started.asked = content_query(query)
        started.words = content_words(query_words(started.asked), started.asked)
        if started.intent.mode in ("keyword", "both"):
            index = self.facts.collections.index(started.name)
            if index.keyword.pending_ords().size > PENDING_SCAN:
                index.commit()  # more uncommitted writes than a search scores itself: commit them first
            started.keyword = self._keyword_leg(started)

    def retrieve(self, principal: Principal, intent: Intent, explain: bool = False) -> dict[str, Any]:
        """The answer to one intent: its results `{fact, score?, explanation?}` best first (and whyFewer)."""
        return self.finish(principal, self.start(principal, intent, explain))

    def finish(self, principal: Principal, started: Started) -> dict[str, Any]:
        """The answer of a retrieve started without `pooled`: its legs, one after the other, on this thread
        (the searches on the search pool), then `answer`."""
        if started.name is not None and started.intent.mode != "semantic":
            self._keyword_hits(started)
        if started.semantic is not None:
            started.meaning = started.semantic.result()
        return self.answer(principal, started)

    def answer(self, principal: Principal, started: Started) -> dict[str, Any]:
        """A retrieve's answer once its legs ran: `{"results": [...]}`, with `whyFewer` when short."""
        intent = started.intent
        results = self._results(principal, started)
        out: dict[str, Any] = {"results": results}
        if len(results) < intent.limit:  # only a short answer pays for saying why (an extra field the SDK keeps)
            out["whyFewer"] = why_fewer.explain(self.facts, principal, intent, len(results))
        return out

    def _results(self, principal: Principal, started: Started) -> list[dict[str, Any]]:
        """The results of a retrieve whose legs ran: their fusion and the facts' bodies."""
        intent, explain, name = started.intent, started.explain, started.name
        tenant = principal.tenant
        if intent.mode == "list":
            facts, _ = self.facts.page(principal, limit=intent.limit, type_=intent.type, scope=intent.scope)
            return [{"fact": f} for f in facts]
        if name is None:  # the tenant has no facts
            return []
        filters = started.filters
        legs: dict[str, list[Hit]] = {}
        if started.keyword is not None:
            legs["keyword"] = started.keyword
        if started.meaning is not None:
            query_vector, legs["semantic"] = started.meaning
            found_by_meaning = legs["semantic"]
            if intent.mode == "both" and SEMANTIC_OVER_KEYWORD:
                legs["semantic"] = self._by_meaning(name, query_vector, legs["semantic"], legs["keyword"], filters)
            if intent.mode == "both" and KEYWORD_OVER_SEMANTIC:
                legs["keyword"] = self._by_words(name, started.asked, started.words, started.neighbours,
                                                 legs["keyword"], found_by_meaning, filters, explain)
        index = self.facts.collections.index(name)
        for leg, leg_hits in legs.items():  # equal scores by insertion order, not by the facts' random ids
            legs[leg] = _stable(index, leg_hits)
        ranked = self._rank(intent.mode, legs, intent.limit, explain)
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

    def _keyword_leg(self, started: Started) -> list[Hit]:
        """BM25 of the query's content words (`asked`, analysed as `words`), each fact with the fact before
        it in its conversation as context (ranking.context_keyword); the explanation's terms are the
        content words'."""
        assert started.name is not None
        name, asked, words, filters, explain = (started.name, started.asked, started.words, started.filters,
                                                started.explain)
        depth, neighbours = started.depth, started.neighbours
        hits = self._search(started, SearchRequest(
            "keyword", q=asked, limit=max(depth, CONTEXT_DEPTH), filters=filters, explain=False, documents=explain))
        if CONTEXT and explain:  # the explanation reads the turns around the hits from the store
            hits = context_keyword(self.facts.collections.index(name), asked, hits, filters, neighbours,
                                   depth, words=words)
        elif CONTEXT:  # judged from the columns: only the facts' ids and tags count (answers are the bodies)
            index = self.facts.collections.index(name)
            hits = keyword_in_context(index, words, hits, filters, depth, self._pairs(index))
        hits = hits[:depth]
        if explain:
            explainer = Explainer(searchable_words(query_words(asked)))
            for hit in hits:
                hit.terms, hit.snippet = explainer.explain(hit.document.text, hit.document.tags, None)
        return hits

    def _by_words(self, name: str, asked: str, words: list[QueryWord], neighbours: Conversations,
                  keyword: list[Hit], semantic: list[Hit], filters: Filters, explain: bool) -> list[Hit]:
        """`both`'s keyword leg: the keyword hits and the semantic leg's facts that hold a content word, all
        by BM25 with their context (as the keyword leg scores), so that a fact found by meaning has a rank
        among the keyword hits too."""
        seen = {h.document.id for h in keyword}
        extra = [h for h in semantic if h.document.id not in seen]
        if not extra:
            return keyword
        index = self.facts.collections.index(name)
        with index.reading():
            # These facts alone (their documents are at hand); the turns before them judged from the columns.
            ctx = (with_context(index, extra, filters, neighbours, follow=False, fetch=column_documents(index))
                   if explain else in_context(index, extra, filters, self._pairs(index), follow=False))
            total = scores_in_context(index, words, ctx)
        docs = ctx.docs  # (as Python numbers at once: numpy scalars one by one cost more)
        scored = [Hit(docs[o], t, bm25=t) for o, t in zip(ctx.ords.tolist(), total.tolist()) if t > 0 and o in docs]
        if explain:
            explainer = Explainer(searchable_words(query_words(asked)))
            for hit in scored:
                hit.terms, hit.snippet = explainer.explain(hit.document.text, hit.document.tags, None)
        return sorted(keyword + scored, key=lambda h: -float(h.score))

    def _by_meaning(self, name: str, vector: Any, semantic: list[Hit], keyword: list[Hit],
                    filters: Filters) -> list[Hit]:
        """`both`'s semantic leg: the semantic hits and the keyword leg's facts, all ranked by cosine, so that
        every fused fact has a rank in both legs."""
        index = self.facts.collections.index(name)
        seen = {h.document.id for h in semantic}
        extra = [h for h in keyword if h.document.id not in seen]
        if index.vectors is None or not (extra or SEMANTIC_CONTEXT):
            return semantic
        query = index.vectors.prepare(np.asarray(vector, np.float64))
        if SEMANTIC_CONTEXT:  # a fact is as close as it or the fact before it in its conversation
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

    def _rank(self, mode: str, legs: dict[str, list[Hit]], limit: int,
              explain: bool) -> list[tuple[str, float, dict[str, Any]]]:
        """The best `limit` (fact id, score, explanation) for one mode's legs; the explanations (only
        with `explain`, else empty) are built for those alone."""
        if mode in ("keyword", "semantic"):
            out = []
            for rank, hit in enumerate(legs[mode][:limit], 1):
                score = hit.bm25 if mode == "keyword" else hit.similarity
                why: dict[str, Any] = {}
                if explain:
                    why[mode] = _explanation(hit, rank, mode)
                    snippet = _snippet(hit)
                    if snippet is not None:
                        why["snippet"] = snippet
                out.append((hit.document.id, float(score or 0.0), why))
            return out
        best = rrf([[h.document.id for h in legs["keyword"]], [h.document.id for h in legs["semantic"]]],
                   RRF_K)[:limit]
        hits = {leg: {h.document.id: h for h in legs[leg]} for leg in ("keyword", "semantic")} if explain else {}
        out = []
        for fid, score, leg_ranks in best:
            why = {}
            if explain:
                ranks = {LEGS[leg]: rank for leg, rank in leg_ranks.items()}
                why = {leg: _explanation(hits[leg].get(fid), rank, leg) for leg, rank in ranks.items()}
                why["fusion"] = {"method": "rrf", "k": RRF_K, "ranks": ranks}
                snippet = _snippet(hits["keyword"].get(fid))
                if snippet is not None:
                    why["snippet"] = snippet
            out.append((fid, float(score), why))
        return out
