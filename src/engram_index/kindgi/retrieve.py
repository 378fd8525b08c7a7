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
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from engram_index.embed.base import Embedder
from engram_index.embed.pass_start import LOOP_WAIT_S, PassStart, submit_first, tells_pass
from engram_index.embed.query_cache import EmbedSlots, QueryCache
from engram_index.engine.analyzer import QueryWord, query_words
from engram_index.engine.search import PENDING_SCAN, SpaceIndex
from engram_index.engine.types import Filters, Hit, SearchRequest, SearchResult
from engram_index.kindgi import explained, ranked, why_fewer
from engram_index.kindgi.auth import Principal
from engram_index.kindgi.conversations import ConversationCodes, Conversations, keyword_in_context
from engram_index.kindgi.errors import KindgiError
from engram_index.kindgi.facts import Facts
from engram_index.kindgi.join import Join
from engram_index.kindgi.models import Intent
from engram_index.kindgi.scope import reader_groups, scope_tags
from engram_index.ranking import Pairs, content_query, content_words, context_keyword
from engram_index.remodel import describe

log = logging.getLogger(__name__)

EXPIRE_EVERY_S = 1.0  # a tenant's expired facts are closed at most this often, in the background
# How deep each leg of `both` goes: LEG_DEPTH_PER_LIMIT times the limit, at least MIN_LEG_DEPTH.
MIN_LEG_DEPTH = 20
LEG_DEPTH_PER_LIMIT = 2.0
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


KEYWORD, SEMANTIC = 0, 1  # a pooled retrieve's legs, in the order a retrieve on one thread runs them
Meaning = tuple[Any, SearchResult]  # the query's vector and the vector search's answer (in columns unless explained)


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
    keyword: ranked.Leg | None = None  # the keyword leg, once it ran (without explanations)
    keyword_hits: list[Hit] | None = None  # the same as hits, with explanations
    meaning: Meaning | None = None  # the semantic leg's, once it ran (pooled)
    asked: str = ""  # the query's content words (`content_query`) and their analysis, for both keyword legs
    words: list[QueryWord] = field(default_factory=list)
    neighbours: Conversations = field(default_factory=Conversations)
    tenant: str = ""
    # Bodies read ahead (`Facts.retrievable`) while the query is still being embedded: of the keyword
    # leg's best facts, which most answers hold.
    bodies: dict[str, dict[str, Any]] = field(default_factory=dict)
    # When the semantic leg's embedding began its pass (pooled): the keyword leg lets it take the GIL first.
    began: PassStart | None = None


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
        started = Started(intent, explain, name, filters, depth, tenant=tenant)
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
            if pooled:  # (from the event loop: it goes on once the pass has begun, when no other is under way)
                started.began = PassStart()
                # A held vector makes no pass (its leg goes straight to the search), nor does a remote embedder.
                told = tells_pass(embedder) and not self._queries.holds(embedder.identity, intent.query or "")
                wait = LOOP_WAIT_S if told else 0.0
                submit_first(started.began, partial(self._embedding.submit, self._semantic_part, started, embedder),
                             wait)
            else:
                started.semantic = self._embedding.submit(self._semantic_leg, started, embedder)
        return started

    def _semantic_leg(self, started: Started, embedder: Embedder) -> Meaning:
        """The query's vector and the facts nearest it, on the embedding thread: the vector search starts
        as soon as the embedding ends, while the keyword leg may still run (on this thread when pooled:
        the retrieve's keyword leg holds its search slot)."""
        vector = self._queries.vector(embedder, started.intent.query or "")
        # Without explanations a hit's ordinal and score are all a retrieve reads (its answer is the
        # revision's body): the engine reads no document and makes no hit (`documents=False, hits=False`).
        request = SearchRequest("vector", vector=vector, limit=started.depth, filters=started.filters, explain=False,
                                documents=started.explain, hits=started.explain)
        return vector, self._search(started, request)

    def _search(self, started: Started, request: SearchRequest) -> SearchResult:
        """A search's answer: on this thread when the retrieve is pooled, else on the search pool."""
        assert started.name is not None
        if started.join is not None:
            return self.facts.collections.index(started.name).search(request)
        return self.facts.collections.search(started.name, request)

    def _semantic_part(self, started: Started, embedder: Embedder) -> None:
        """A pooled retrieve's semantic leg, on the embedding thread; then its arrival at the join."""
        assert started.join is not None and started.began is not None
        try:
            with started.began.signalled():
                started.meaning = self._semantic_leg(started, embedder)
        except BaseException as exc:  # the request's answer is this error (unless the keyword leg failed too)
            started.join.arrive(SEMANTIC, exc)
        else:
            started.join.arrive(SEMANTIC)

    def keyword_part(self, started: Started) -> None:
        """A pooled retrieve's keyword leg (none in semantic mode), on a search pool thread holding a slot;
        then its arrival at the join."""
        assert started.join is not None
        if started.began is not None:  # the embedding, which the answer waits for, takes the GIL first
            started.began.wait()
        try:
            if started.intent.mode != "semantic":
                self._keyword_hits(started)
            if started.keyword is not None and started.intent.mode == "both" and not started.join.arrived(SEMANTIC):
                # The semantic leg is still running (its embedding): read ahead the bodies of the keyword
                # leg's best facts, so that the answer formed after it reads only the others.
                started.bodies = self.facts.retrievable(started.tenant, started.keyword[0][:started.intent.limit])
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
            self._keyword_leg(started)

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
        index = self.facts.collections.index(name)
        if explain:
            best = self._explained(index, started)
        else:
            best = [(fid, score, {}) for fid, score in self._fused(index, started)]
        found = started.bodies
        missing = [fid for fid, _, _ in best if fid not in found]
        if missing:
            found = {**found, **self.facts.retrievable(tenant, missing)}
        out: list[dict[str, Any]] = []
        for fid, score, why in best:
            fact = found.get(fid)
            if fact is None:
                continue  # changed between the search and the read: not current any more
            result: dict[str, Any] = {"fact": fact, "score": score}
            if explain:
                result["explanation"] = why
            out.append(result)
        return out

    def _fused(self, index: SpaceIndex, started: Started) -> list[tuple[str, float]]:
        """The best (fact id, score) of a retrieve without explanations (kindgi/ranked.py)."""
        intent = started.intent
        legs: dict[str, ranked.Leg] = {}
        if started.keyword is not None:
            legs["keyword"] = started.keyword
        if started.meaning is not None:
            vector, result = started.meaning
            assert result.columns is not None  # (asked with hits=False)
            legs["semantic"] = found_by_meaning = ranked.from_columns(index, result.columns)
            if intent.mode == "both" and SEMANTIC_OVER_KEYWORD:
                legs["semantic"] = ranked.by_meaning(index, vector, found_by_meaning, legs["keyword"], started.filters,
                                                     self._pairs(index), SEMANTIC_CONTEXT)
            if intent.mode == "both" and KEYWORD_OVER_SEMANTIC:
                legs["keyword"] = ranked.by_words(index, started.words, started.filters, self._pairs(index),
                                                  legs["keyword"], found_by_meaning)
        # Equal scores by insertion order, not by the facts' random ids.
        return ranked.fused(intent.mode, {leg: ranked.stable(index, got) for leg, got in legs.items()}, intent.limit)

    def _explained(self, index: SpaceIndex, started: Started) -> list[tuple[str, float, dict[str, Any]]]:
        """The best (fact id, score, explanation) of a retrieve with explanations (kindgi/explained.py)."""
        intent = started.intent
        legs: dict[str, list[Hit]] = {}
        if started.keyword_hits is not None:
            legs["keyword"] = started.keyword_hits
        if started.meaning is not None:
            vector, result = started.meaning
            legs["semantic"] = result.hits
            found_by_meaning = legs["semantic"]
            if intent.mode == "both" and SEMANTIC_OVER_KEYWORD:
                legs["semantic"] = explained.by_meaning(index, vector, found_by_meaning, legs["keyword"],
                                                        started.filters, SEMANTIC_CONTEXT)
            if intent.mode == "both" and KEYWORD_OVER_SEMANTIC:
                legs["keyword"] = explained.by_words(index, started.asked, started.words, started.neighbours,
                                                     legs["keyword"], found_by_meaning, started.filters)
        # Equal scores by insertion order, not by the facts' random ids.
        return explained.rank(intent.mode, {leg: explained.stable(index, got) for leg, got in legs.items()},
                              intent.limit)

    def _keyword_leg(self, started: Started) -> None:
        """BM25 of the query's content words (`asked`, analysed as `words`), each fact with the fact before
        it in its conversation as context (ranking.context_keyword): as a leg, or with explanations as
        hits whose terms are the content words'."""
        assert started.name is not None
        asked, words, filters, depth = started.asked, started.words, started.filters, started.depth
        result = self._search(started, SearchRequest(
            "keyword", q=asked, limit=max(depth, CONTEXT_DEPTH), filters=filters, explain=False,
            documents=started.explain, hits=started.explain))
        index = self.facts.collections.index(started.name)
        if started.explain:  # the explanation reads the turns around the hits from the store
            hits = result.hits
            if CONTEXT:
                hits = context_keyword(index, asked, hits, filters, started.neighbours, depth, words=words)
            started.keyword_hits = explained.explained(hits[:depth], asked)
            return
        assert result.columns is not None  # (asked with hits=False)
        if CONTEXT:  # judged from the columns: only the facts' ids and scores count (answers are the bodies)
            started.keyword = keyword_in_context(index, words, result.columns.ords, filters, depth, self._pairs(index))
        else:
            ids, scores = ranked.from_columns(index, result.columns)
            started.keyword = ids[:depth], scores[:depth]
