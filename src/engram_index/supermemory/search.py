"""v5 search: memories, chunks or both in one list ranked by a 0-1 similarity, filtered before ranking.

Each namespace's chunks and memories are two collections; a search asks the engine for the best
candidates of each (hybrid BM25 + vector when an embedder is configured, BM25 alone otherwise),
scores every candidate on one calibrated scale and keeps those at or above `threshold`:

    similarity = 0.7 × max(cosine, 0) + 0.3 × keyword coverage     (with an embedder)
    similarity = keyword coverage                                   (keyword only)

where keyword coverage is the share of the query's content words the result holds (an exact or
stemmed match counts 1, an identifier part 0.5). Cosine of all-MiniLM-L6-v2 is already a 0-1
scale in practice (unrelated texts sit near 0.0-0.2, paraphrases above 0.6), so the default
threshold 0.3 keeps what is on topic. docs/design/supermemory.md has the reasoning and numbers.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from engram_index.embed.after_vector import AfterVector
from engram_index.embed.pass_start import wait_for_pass
from engram_index.engine.analyzer import query_words
from engram_index.engine.keyword_query import held_columns_of
from engram_index.engine.started import StartedSearch
from engram_index.engine.types import Filters, SearchRequest, SearchResult
from engram_index.engine.analyzer import QueryWord
from engram_index.ranking import (
    content_query, content_words, one_per_source,
)
from engram_index.supermemory import context, expiry, filters as v5filters, statements, why_fewer
from engram_index.errors import UnknownSpace
from engram_index.shortfall import Gathered
from engram_index.supermemory.candidates import Candidate, QueryExplainer
from engram_index.supermemory.found import Found, ranked_candidates
from engram_index.supermemory.found import rank as found_rank
from engram_index.supermemory.errors import NotConfigured
from engram_index.supermemory.face import EXPIRED, FORGOTTEN, STATES, SUPERSEDED, Face, doc_tag, stamp
from engram_index.supermemory.related import related
from engram_index.supermemory.page import Rows, sharing_a_document
from engram_index.supermemory.tables import chunks_collection, iso, memories_collection
from engram_index.supermemory.views import included_document

RELATED_LIMIT = 5
FORMULA_VECTOR = "0.7 * max(cosine, 0) + 0.3 * keywordCoverage"
FORMULA_KEYWORD = "keywordCoverage"
COLLAPSE_INTO_CHUNK = False  # measured: LoCoMo dev hybrid R@10 0.664 into the chunk, 0.683 into the better
CONTEXT = True  # chunks count the words of the chunk before them in their conversation
# hybrid: a memory and the chunk that backs it are one result scored with the evidence of both
# (1 - (1 - memory)(1 - chunk)), rather than the better alone.
BACKED = True
WHERE_MADE = True  # the chunks' search and take run where the vector is made, beside the memories' (_found)
# Which chunk a memory is a statement of, from what the chunks' records name (statements.py) rather than from the
# texts of both, read for each search: the texts are read only for documents whose chunks name nothing.
LINKED = True
MEMORY_CONTEXT = True  # memories too: the memory before them (of their document, or of one of the same date)
# Each collection's engine hits a search scores: max(3 × limit, 30). Fewer cost recall, measured
# (bench/locomo_flags.py, limit 20): 2 × limit, LoCoMo dev hybrid R@10 0.789 -> 0.779; 1 ×, 0.769.
HITS_PER_RESULT, MIN_HITS = 3, 30


def _sources(found: Sequence[Candidate]) -> dict[tuple[str, str], tuple[str, str]]:
    """Each candidate's source: a chunk is its own; a memory is the candidate chunk of its document
    that holds its statement (a memory is a statement of its document), else its own. The texts of
    the memories and chunks of one document are read first (`page.sharing_a_document`)."""
    chunks: dict[str, list[Candidate]] = {}
    for c in found:
        if c.kind == "chunk" and c.group:
            chunks.setdefault(c.group, []).append(c)
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for c in found:
        out[(c.kind, c.id)] = (c.kind, c.id)
        if c.kind == "memory" and c.group in chunks:  # (no text, its row gone: held by none)
            for chunk in chunks[c.group]:
                if statements.holds(chunk.text, c.text):
                    out[(c.kind, c.id)] = ("chunk", chunk.id)
                    break
    return out


def _backed(found: Sequence[Candidate], source: dict[tuple[str, str], tuple[str, str]]) -> list[Candidate]:
    """One candidate per source that has both a memory and a chunk: the better of the two (ties as
    `rank` breaks them), backed by the other's similarity (the best memory's, for a chunk several
    memories came from); the others as they are."""
    ordered = sorted(found, key=lambda c: (-c.own_similarity, c.order, c.kind))  # (ranking.stable_order's)
    sources = [source[(c.kind, c.id)] for c in ordered]  # each looked up once, not three times
    best: dict[tuple[tuple[str, str], str], Candidate] = {}
    first: dict[tuple[str, str], Candidate] = {}
    for c, src in zip(ordered, sources):
        best.setdefault((src, c.kind), c)
        first.setdefault(src, c)
    out: list[Candidate] = []
    for c, src in zip(ordered, sources):
        other = best.get((src, "chunk" if c.kind == "memory" else "memory"))
        if other is None:
            c.backed = None
            out.append(c)
        elif first[src] is c:  # the lead of its source, backed by the other kind's best
            c.backed = other.own_similarity
            out.append(c)
        else:
            c.backed = None
    return out


def rank(found: Sequence[Candidate], limit: int, threshold: float) -> list[Candidate]:
    """The best `limit` candidates at or above `threshold`, one per source, ties by insertion order, then
    kind. A memory and the chunk it came from take one place: with BACKED, the better of the two, scored
    with both (`ranking.either`: LoCoMo dev hybrid R@10 0.748 -> see docs/design/ranking.md); else
    the better ranked one."""
    source = _sources(found)
    if BACKED:
        found = _backed(found, source)
    # ranking.stable_order's order, each similarity worked out once (a backed one multiplies two scores).
    scored = [(c.similarity, c) for c in found]
    kept = [c for _, c in sorted(((s, c) for s, c in scored if s >= threshold),
                                 key=lambda sc: (-sc[0], sc[1].order, sc[1].kind))]
    if COLLAPSE_INTO_CHUNK:
        covered = {source[(c.kind, c.id)] for c in kept if c.kind == "chunk"}
        kept = [c for c in kept if c.kind == "chunk" or source[(c.kind, c.id)] not in covered]
    return one_per_source(kept, lambda c: source[(c.kind, c.id)])[:limit]


def doc_filter(face: Face, ns: str, expr: dict[str, Any] | None) -> tuple[Filters, set[str] | None, bool]:
    """Engine filters selecting the documents that pass `expr`, the passing set, and whether none pass."""
    if expr is None:
        return Filters(), None, False
    # Compiled only when the namespace has not met this filter since its last write: compiling checks the
    # expression, and a bad one raises before anything is kept.
    compiled: tuple[Filters, set[str] | None, bool] = face.compiled_filter(
        ns, json.dumps(expr, sort_keys=True, separators=(",", ":")),
        lambda metadata: _doc_filter(metadata, v5filters.compile_filter(expr)),
        lambda metadata, held, named: _doc_filter_since(metadata, v5filters.compile_filter(expr), held, named))
    return compiled


def _doc_filter(metadata: Mapping[str, Any], test: Any) -> tuple[Filters, set[str] | None, bool]:
    """`doc_filter` computed over every document of the namespace (its `metadata`: see Face.compiled_filter)."""
    return _selecting(metadata, {doc_id for doc_id, md in metadata.items() if test(md)})


def _doc_filter_since(metadata: Mapping[str, Any], test: Any, held: tuple[Filters, set[str] | None, bool],
                      named: frozenset[str]) -> tuple[Filters, set[str] | None, bool] | None:
    """`doc_filter` brought up to date from what it was before writes that named these documents alone: those
    tested again (None when they are more than a quarter of the documents: then all of them are)."""
    if held[1] is None or len(named) > max(len(metadata) // 4, 1):
        return None
    passing = held[1] - named
    passing.update(d for d in named if d in metadata and test(metadata[d]))
    return _selecting(metadata, passing)


def _selecting(metadata: Mapping[str, Any], passing: set[str]) -> tuple[Filters, set[str] | None, bool]:
    """Engine filters selecting the `passing` documents among these, the passing set, and whether none pass."""
    if not passing:
        return Filters(), passing, True
    if len(passing) == len(metadata):
        return Filters(), passing, False
    return Filters(any_tags=(tuple(sorted(doc_tag(d) for d in passing)),)), passing, False


def check_features(face: Face, body: dict[str, Any]) -> None:
    """Refuse, naming the setting, a feature this server was started without."""
    rerank = body.get("rerank", "none")
    if rerank == "order" and face.reranker is None and face.llm is None:
        raise NotConfigured('rerank "order" needs a reranker', "start the server with --rerank SPEC (a /rerank"
                            " endpoint or a packaged cross-encoder) or --llm MODEL@URL")
    if rerank == "aggregate" and face.llm is None:
        raise NotConfigured('rerank "aggregate" needs an LLM', "start the server with --llm MODEL@URL (any"
                            " OpenAI-compatible endpoint)")
    if body.get("rewriteQuery") and face.llm is None:
        raise NotConfigured("rewriteQuery needs an LLM", "start the server with --llm MODEL@URL (any"
                            " OpenAI-compatible endpoint), or send rewriteQuery: false")


def candidates(face: Face, ns: str, query: str, mode: str, limit: int, flt: Filters, forgotten: bool,
               at_ms: int) -> list[Candidate]:
    """The scored candidates of one query in the mode's collections."""
    return found(face, ns, query, mode, limit, flt, forgotten, at_ms).candidates()


def found(face: Face, ns: str, query: str, mode: str, limit: int, flt: Filters, forgotten: bool, at_ms: int,
          vector: Any = None, meanwhile: Callable[[], object] | None = None) -> Found:
    """The scored candidates of one query in the mode's collections, in columns, in one job of the search
    pool (inline in one already). `vector`: the query's embedding started already (`Face.start_embedding`'s
    answer), None to start it here: all that needs no vector, the engine's keyword passes included, runs
    meanwhile, and `meanwhile` after them."""
    if vector is None:
        vector = face.start_embedding(query)
    return face.collections.run_job(_found, face, ns, query, mode, limit, flt, forgotten, at_ms, vector, meanwhile)


def _found(face: Face, ns: str, query: str, mode: str, limit: int, flt: Filters, forgotten: bool,
           at_ms: int, vector: Any, meanwhile: Callable[[], object] | None) -> Found:
    """`found`, on a search pool thread. Errors come in the order of a search that embeds, then searches
    each collection, then takes each one's hits: the embedding's, the searches', the takes'."""
    wait_for_pass(vector)  # the embedding takes the GIL first: the answer waits for it, not for this
    try:
        legs = _legs(face, ns, query, mode, limit, flt, forgotten, at_ms, vector)
        started = face.collections.start_many([(leg.name, leg.request) for leg in legs])
    except Exception:
        _resolved(vector)  # the embedding's error first, as when the query was embedded before the rest
        raise
    if meanwhile is not None:
        meanwhile()
    # The chunks' search and take run on the thread that makes the vector, as soon as it has (it is awake
    # then; this one has to be woken), while this one searches the memories, the larger collection: each
    # search's rest is one compiled call that holds no GIL (engine/hybrid_rest.py), so the chunks' take
    # (Python) runs during the memories' rest, and the memories' take after it.
    # One take at a time: both are Python, so two at once share one GIL and pass it to and fro.
    taking = threading.Lock()
    beside = (AfterVector(vector, lambda: _searched(face, ns, legs[1], started[1], vector, taking))
              if WHERE_MADE and len(legs) > 1 and isinstance(vector, Future) else None)
    done = [_searched(face, ns, leg, one, vector, taking) for leg, one in zip(legs, started)
            if beside is None or leg is legs[0]]
    if beside is not None:
        done.append(beside.result())
    for _, error in done:  # a search's error first, in the collections' order, then a take's
        if isinstance(error, _SearchFailed):
            raise error.cause
    for got, error in done:
        if error is not None:
            raise error
    if not done:
        _resolved(vector)  # (with no collection to search, the embedding's error all the same)
    return Found.joined([got if got is not None else Found.empty() for got, _ in done])


class _SearchFailed(Exception):
    """A collection's search failed (its cause), rather than its take."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _searched(face: Face, ns: str, leg: _Leg, started: StartedSearch, vector: Any, taking: threading.Lock
              ) -> tuple[Found | None, Exception | None]:
    """One collection's search finished and its hits taken; an error is returned (a search's wrapped in
    `_SearchFailed`, the embedding's first), not raised, so that the caller raises them in order."""
    try:
        result = started.finish()
    except Exception as exc:
        failed: Exception = exc
        try:
            _resolved(vector)  # the embedding's error first
        except Exception as embedding:
            failed = embedding
        return None, _SearchFailed(failed)
    try:
        resolved = _resolved(vector)
        with taking:
            return _take(face, ns, leg, result, resolved), None
    except Exception as exc:
        return None, exc


def _legs(face: Face, ns: str, query: str, mode: str, limit: int, flt: Filters, forgotten: bool, at_ms: int,
          vector: Any) -> list[_Leg]:
    """What one query asks of the mode's collections."""
    words = query_words(query)
    explainer = QueryExplainer(words)
    topic = content_words(words, query)  # coverage counts what the query is about, not its question words
    held_columns_of(topic)  # made now, while the query is embedded: each collection's take finds it made
    asked = content_query(query, words)  # once for both collections, from the words analysed above
    legs: list[_Leg] = []
    kinds = {"hybrid": ("memory", "chunk"), "memories": ("memory",), "chunks": ("chunk",)}[mode]
    for kind in kinds:
        name = memories_collection(ns) if kind == "memory" else chunks_collection(ns)
        try:  # one read of the collection's info: whether it exists, and its model
            info = face.collections.info(name)
        except UnknownSpace:
            continue
        use_vector = vector is not None and info.model == face.model()
        engine_filters = flt
        skip: set[str] = set()
        if kind == "memory":
            none = (SUPERSEDED,) if forgotten else (SUPERSEDED, FORGOTTEN, EXPIRED)
            engine_filters = Filters(any_tags=flt.any_tags, none_tags=none)
            if not forgotten:  # the swept ones are left out by their tag; those expired since, by id
                skip = expiry.unswept(face, ns, at_ms)
                if skip:
                    expiry.sweep_later(face, ns)
        want = min(max(HITS_PER_RESULT * limit, MIN_HITS), 300) + len(skip)
        in_context = CONTEXT and (kind == "chunk" or MEMORY_CONTEXT)
        # The hits are the engine's columns (ordinals and scores: no hit made, nothing read from the store):
        # a candidate's document is known from its id (a chunk) or its author (a memory: page.Rows reads
        # its row), its text where it is needed (page.Rows).
        request = SearchRequest("hybrid" if use_vector else "keyword", q=asked,
                                vector=vector if use_vector else None, limit=want, filters=engine_filters,
                                explain=False, documents=False, hits=False)
        legs.append(_Leg(kind, name, use_vector, engine_filters, skip, in_context, request, topic, explainer))
    return legs


def _resolved(vector: Any) -> np.ndarray | None:
    """The query vector of a started embedding (waited for)."""
    out: np.ndarray | None = vector.result() if isinstance(vector, Future) else vector
    return out


def _take(face: Face, ns: str, leg: _Leg, result: SearchResult, vector: np.ndarray | None) -> Found:
    """One collection's hits (the engine's answer in columns) as scored candidates."""
    assert result.columns is not None  # (asked with hits=False)
    index = face.collections.index(leg.name)
    with index.reading():  # the hits, the ones around them and which content words each holds, as of now
        if leg.in_context:
            got = context.in_context(face, ns, index, context.passing(index, result.columns, leg.skip, leg.filters),
                                     leg.filters, leg.topic, vector if leg.use_vector else None, leg.kind)
            if leg.skip:  # a joined memory may be expired
                got = got.only([i for i, d in enumerate(got.ids) if d not in leg.skip])
        else:
            got = context.taken(index, result.columns, leg.skip, leg.filters)
            got.held = context.coverage_alone(index, got, leg.topic)
        # A chunk's record names the memories whose statement it holds (statements.py), as its author.
        links = index.columns.authors(got.ords) if leg.kind == "chunk" and LINKED else None
    # Each one's first tag that is not a state: its document's, which face.memory_tags and the chunks' records
    # put first, so the search for it runs only where a record's first tag is a state.
    groups = [tags[0] if tags and tags[0] not in STATES else _group(tags) for tags in got.tags]
    return Found.of(leg.kind, got.ids, [None] * len(got.ids), got.sims, got.bm25, got.tags, leg.explainer,
                    leg.use_vector, got.held, got.ords, groups, links)


def _group(tags: Sequence[str]) -> str:
    """The first of a record's tags that is not a state ("" when none is)."""
    return next((tag for tag in tags if tag not in STATES), "")


@dataclass(frozen=True, slots=True)
class _Leg:
    """What one search asks of one of its namespace's collections, and how its hits are taken."""

    kind: str  # memory / chunk
    name: str  # the collection
    use_vector: bool
    filters: Filters
    skip: set[str]  # expired memories' ids
    in_context: bool
    request: SearchRequest
    topic: Sequence[QueryWord]  # the query's content words (its keyword coverage)
    explainer: QueryExplainer


def search(face: Face, ns: str, body: dict[str, Any], explain: bool, vector: Any = None) -> dict[str, Any]:
    """Run one v5 search and shape its response (`vector`: the query's embedding started already, or None)."""
    began = time.perf_counter()
    check_features(face, body)
    mode = body.get("searchMode", "hybrid")
    limit = body.get("limit", 10)
    threshold = body.get("threshold", 0.3)
    include = body.get("include", {})
    at_ms = stamp()
    flt, passing, nothing = doc_filter(face, ns, body.get("filter"))
    ranked: list[Candidate] = []
    cut = 0  # the candidates the threshold cut (whyFewer)
    # What whyFewer says of the namespace, read while the query is embedded (for a short answer).
    why = _Why(lambda: why_fewer.gather(face, ns, body, flt=flt, nothing=nothing))
    rows = Rows(face, ns)
    if not nothing:
        queries = [body["query"]]
        if body.get("rewriteQuery"):
            from engram_index.supermemory.llm_search import rewrites

            queries += rewrites(face, body["query"])
        forgotten = bool(include.get("forgotten"))
        if len(queries) == 1 and BACKED and not COLLAPSE_INTO_CHUNK:  # in columns (found.py)
            cols = found(face, ns, queries[0], mode, limit, flt, forgotten, at_ms, vector, meanwhile=why.gather)
            sharing = cols.sharing_a_document()
            # The texts that say which chunk a memory is a statement of, where no chunk's record says it.
            rows.read_found(cols, cols.unlinked(sharing) if LINKED else sharing)
            order = found_rank(cols, sharing, limit, threshold)
            ranked, cut = ranked_candidates(cols, order), order.below(threshold)
        else:
            pool = [found(face, ns, q, mode, limit, flt, forgotten, at_ms, vector if i == 0 else None).candidates()
                    for i, q in enumerate(queries)]
            merged = _best_of(pool)
            rows.read(sharing_a_document(merged))  # the texts that say which chunk a memory is a statement of
            ranked = rank(merged, limit, threshold)
            cut = why_fewer.threshold_cut(pool, threshold)
        rows.read(ranked)  # the page's rows: its texts (for a reranker, the explanations) and documents
    aggregated: dict[str, Any] | None = None
    if body.get("rerank", "none") != "none" and ranked:
        from engram_index.supermemory.llm_search import aggregate, reorder

        ranked = reorder(face, body["query"], ranked)
        if body["rerank"] == "aggregate":
            aggregated = aggregate(face, body["query"], ranked)
    results = shape(face, ns, ranked, rows, include, passing, at_ms, explain)
    if aggregated is not None:
        results.insert(0, aggregated)
    out = {"results": results, "searchTime": round((time.perf_counter() - began) * 1000, 3)}
    if len(results) < limit:  # only a short answer pays for saying why (an extra field the SDK keeps)
        out["whyFewer"] = why_fewer.explain(face, ns, body, flt=flt, nothing=nothing, cut=cut, returned=len(results),
                                            gathered=why.gathered())
    return out


class _Why:
    """whyFewer's reading of the namespace, made early (`gather`) or when it is asked for; a reading that
    failed early is made again then (its error is the answer's only if the answer needs one)."""

    __slots__ = ("read", "held")

    def __init__(self, read: Callable[[], Gathered]) -> None:
        self.read = read
        self.held: Gathered | None = None

    def gather(self) -> None:
        """Read it now (a search's spare moment); an error waits for `gathered`."""
        try:
            self.held = self.read()
        except Exception:
            self.held = None

    def gathered(self) -> Gathered:
        """What was read, or a reading now."""
        return self.held if self.held is not None else self.read()


def _best_of(pool: list[list[Candidate]]) -> list[Candidate]:
    """The candidates of one query, or of several (a rewrite's): each result scored against every query that
    found it, the best kept."""
    if len(pool) == 1:
        return pool[0]
    best: dict[tuple[str, str], Candidate] = {}
    for cand in (c for cands in pool for c in cands):
        key = (cand.kind, cand.id)
        if key not in best or best[key].similarity < cand.similarity:
            best[key] = cand
    return list(best.values())


def shape(face: Face, ns: str, ranked: list[Candidate], rows: Rows, include: dict[str, Any],
          passing: set[str] | None, at_ms: int, explain: bool) -> list[dict[str, Any]]:
    """The response's results (their rows read by `rows`): every field the SDK requires, includes when asked."""
    rows.read(ranked)  # (read already, unless a reranker brought others)
    memories, chunks = rows.memories, rows.chunks
    wanted = [c.doc_id for c in ranked if c.doc_id]
    # The documents' whole rows only for `include.documents`; else their metadata alone (no content read).
    docs = face.documents(ns, wanted) if include.get("documents") else {}
    metadata = ({d: doc.metadata for d, doc in docs.items()} if include.get("documents")
                else face.documents_metadata(ns, wanted))
    allowed = (lambda d: d in passing) if passing is not None else None
    out: list[dict[str, Any]] = []
    for cand in ranked:
        doc = docs.get(cand.doc_id)
        item: dict[str, Any] = {"id": cand.id}
        if cand.kind == "memory":
            memory = memories.get(cand.id)
            if memory is None:
                continue  # deleted since the engine answered
            item["memory"] = memory.memory
            latest, inference = memory.is_latest and not memory.forgotten(at_ms), memory.is_inference
            created, updated = memory.created_ms, memory.updated_ms
        else:
            chunk = chunks.get(cand.id)
            if chunk is None:
                continue
            item["chunk"] = chunk.content
            latest, inference, created, updated = True, False, chunk.created_ms, chunk.created_ms
        item.update(metadata=metadata.get(cand.doc_id, {}), similarity=round(cand.similarity, 6),
                    isLatest=latest, isInference=inference, system={"createdAt": iso(created), "updatedAt": iso(updated)})
        included: dict[str, Any] = {}
        if include.get("documents") and doc is not None:
            included["document"] = included_document(doc)
        if include.get("related"):
            included["related"] = (related(face, ns, cand.id, RELATED_LIMIT, at_ms, allowed) if cand.kind == "memory"
                                   else {"parents": [], "children": [], "siblings": []})
        if included:
            item["included"] = included
        if explain:
            item["explanation"] = explanation(cand, face.embedder is not None and cand.hit.similarity is not None)
        out.append(item)
    return out


def explanation(cand: Candidate, vector: bool) -> dict[str, Any]:
    """Why a result matched: the terms, a highlighted snippet, the vector similarity and the fusion."""
    hit = cand.hit
    hit.terms, hit.snippet = cand.explainer.get().explain(cand.text, hit.document.tags, None)
    out: dict[str, Any] = {
        "matchedTerms": [{"term": t.term, "kind": t.kind, "field": t.field} for t in hit.terms],
        "keywordCoverage": round(cand.coverage, 6),
        "bm25": None if hit.bm25 is None else round(float(hit.bm25), 6),
        "vectorSimilarity": None if hit.similarity is None else round(float(hit.similarity), 6),
        "similarity": FORMULA_VECTOR if vector else FORMULA_KEYWORD,
    }
    if cand.backed is not None:  # hybrid: one result for a memory and the chunk that backs it
        out["similarity"] = f"1 - (1 - ({out['similarity']})) * (1 - backedBy)"
        out["backedBy"] = round(cand.backed, 6)
    if hit.snippet is not None:
        out["snippet"] = {"text": hit.snippet.text,
                          "highlights": [{"byteStart": s, "byteEnd": e} for s, e in hit.snippet.highlights]}
    if cand.rerank is not None:
        out["rerankScore"] = round(cand.rerank, 6)
    return out

