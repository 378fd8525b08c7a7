"""The ranking core every face shares: content words, stable tie-breaks, one place per source, rank fusion.

It knows no face. A face finds candidates through the engine, maps its own options (a
threshold, a search mode, filters) onto these steps and shapes its own response:

- `content_words`: the query words that say what is asked about. Question and function words
  ("what", "did", "I", "how") are in nearly every question and in many short turns of a
  conversation ("Cool! What did it look like?"), so a result holding them is no closer to the
  answer. `CONTENT_STOPWORDS` is the analyzer's own stopword list (which the index already
  leaves unstemmed) plus the question and function words of English questions; a query of
  nothing else keeps all its words.
- `stable_order`: best score first, ties by a key that two identical runs agree on (insertion
  order: the store's ordinal), never by a random id.
- `one_per_source`: a list never spends two places on one source (a memory and the chunk it
  came from): the better ranked one stays.
- `either`: two pieces of evidence for one result (a memory and the chunk that backs it) as the
  chance that at least one is right, 1 - Π(1 - s), on the same 0-1 scale.
- `rrf`: reciprocal rank fusion, Σ 1/(k + rank) with 1-based ranks per leg, ties in the order
  the legs first found them (the first leg first).
docs/design/ranking.md has the measurements behind each step.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np

from engram_index.embed.pass_start import wait_for_pass
from engram_index.engine.analyzer import STOPWORDS, QueryWord, query_words
from engram_index.engine.columns import Columns
from engram_index.engine.search import SpaceIndex
from engram_index.engine import fusion
from engram_index.engine.explain import Explainer
from engram_index.engine.keyword import searchable_words
from engram_index.engine.types import Document, Filters, Hit, SearchRequest, SearchResult

T = TypeVar("T")
# How many of the engine's best candidates are scored with their conversation context.
CONTEXT_DEPTH = 50
# Whether the turn just after a candidate is its context too (the turns before hits then join).
NEXT_CONTEXT = False

# English question words beyond the analyzer's list: interrogatives, the auxiliaries questions are
# built with, and personal pronouns. They drop out of questions only (`is_question`): a claim or a
# statement keeps them ("X has no effect", "class I"; SciFact lost nDCG when claims lost them).
# Prepositions, quantifiers and modals always stay: "before", "after", "more" carry meaning.
INTERROGATIVES: frozenset[str] = frozenset("what when where which who whom whose why how".split())
QUESTION_WORDS: frozenset[str] = INTERROGATIVES | frozenset(
    "do does did doing have has had having am were been being "
    "i me my mine myself we us our ours you your yours he him his she her hers its they them theirs".split()
)
_OPENERS = INTERROGATIVES | frozenset("do does did is are was were has have had can could will would should".split())
CONTENT_STOPWORDS: frozenset[str] = STOPWORDS | QUESTION_WORDS


def is_question(words: Sequence[QueryWord], text: str) -> bool:
    """Whether the query is a question: it ends with a question mark or opens with a question word."""
    return text.rstrip().endswith(("?", "？")) or (bool(words) and words[0].exact in _OPENERS)


def content_words(words: Sequence[QueryWord], text: str) -> list[QueryWord]:
    """The query's distinct content words: without the analyzer's stopwords, and in a question without
    its question words too (all its distinct words when that leaves none)."""
    drop = CONTENT_STOPWORDS if is_question(words, text) else STOPWORDS
    seen: set[str] = set()
    out: list[QueryWord] = []
    kept = [w for w in words if w.exact not in drop] or list(words)
    for word in kept:
        if word.exact not in seen:
            seen.add(word.exact)
            out.append(word)
    return out


def insertion_keys(index: SpaceIndex, ids: Sequence[str]) -> list[int]:
    """Each document's ordinal in its collection (its insertion order; unknown ids last)."""
    ords = index.columns.ids_to_ords(ids)
    big = np.iinfo(np.int64).max
    return [int(o) if o >= 0 else int(big) for o in ords]


def stable_order(items: Iterable[T], score: Callable[[T], float], key: Callable[[T], tuple[Hashable, ...]]) -> list[T]:
    """Best score first; equal scores by `key` (a stable, run-independent key such as insertion order)."""
    return sorted(items, key=lambda item: (-score(item), *key(item)))


def one_per_source(ranked: Iterable[T], source: Callable[[T], Hashable | None]) -> list[T]:
    """Keep the first (best) item of each source; items without a source all stay."""
    seen: set[Hashable] = set()
    out: list[T] = []
    for item in ranked:
        src = source(item)
        if src is not None:
            if src in seen:
                continue
            seen.add(src)
        out.append(item)
    return out


def either(scores: Iterable[float]) -> float:
    """1 - Π(1 - s) over 0-1 scores: the chance that at least one of independent pieces of evidence holds
    (never below the best one, never above 1)."""
    miss = 1.0
    for score in scores:
        miss *= 1.0 - min(max(score, 0.0), 1.0)
    return 1.0 - miss


def rrf(legs: Sequence[Sequence[str]], k: int) -> list[tuple[str, float, dict[int, int]]]:
    """(id, Σ 1/(k + rank), {leg: rank}) best first; ties keep the order the legs first found them."""
    fused: dict[str, tuple[float, int, dict[int, int]]] = {}
    for leg, ids in enumerate(legs):
        for rank, item in enumerate(ids, 1):
            score, first, ranks = fused.get(item, (0.0, len(fused), {}))
            if leg in ranks:
                continue  # a leg counts an item once, at its best rank
            ranks[leg] = rank
            fused[item] = (score + 1.0 / (k + rank), first, ranks)
    best = sorted(fused.items(), key=lambda kv: (-kv[1][0], kv[1][1]))
    return [(item, score, ranks) for item, (score, _, ranks) in best]


def content_query(query: str, words: Sequence[QueryWord] | None = None) -> str:
    """The query's text without its question and function words (as the keyword leg searches it);
    `words`: the query's `query_words` when the caller has them already."""
    if words is None:
        words = query_words(query)
    if not is_question(words, query):
        return query
    kept = [w for w in words if w.exact not in CONTENT_STOPWORDS]
    return " ".join(query[w.start:w.end] for w in kept) if kept else query


Neighbours = Callable[[Document, Document], bool]  # (earlier, later): whether `earlier` is context of `later`
# The same judged from the index's columns, many pairs at once: (earlier ordinals, later ordinals) → whether
# each earlier one is context of its later one.
Pairs = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _usable(index: SpaceIndex, ords: np.ndarray, filters: Filters) -> np.ndarray:
    """Which ordinals are live and pass the filters."""
    return usable(index.columns, index.columns.mask(filters), ords)


def usable(columns: Columns, mask: np.ndarray | None, ords: np.ndarray) -> np.ndarray:
    """`_usable` with the filters' mask at hand (`Columns.mask`, looked up once by a caller that asks often)."""
    ok = columns.alive(ords)
    if mask is not None:
        inside = ok & (ords < mask.size)
        ok &= inside
        ok[inside] = mask[ords[inside]]
    return ok


@dataclass
class Context:
    """Candidates with their conversation context: each candidate's ordinal and document, and the
    turn before it (its ordinal, and whether it is its context)."""

    ords: np.ndarray
    prev: np.ndarray
    has_prev: np.ndarray
    docs: dict[int, Document]
    next: np.ndarray | None = None  # with NEXT_CONTEXT: the turn after each candidate, and whether
    has_next: np.ndarray | None = None  # the candidate is its context


Fetch = Callable[[Sequence[int]], dict[int, Document]]  # ordinals → the live documents among them


def column_documents(index: SpaceIndex) -> Fetch:
    """A reader of documents from the index's own columns (`Columns.documents`: id, tags and creation
    time, no text, no store read): what `with_context` needs of the turns around the hits when the
    caller reads its answers elsewhere and `neighbours` looks at tags alone. Call it inside
    `index.reading()`."""
    return index.columns.documents


def with_context(index: SpaceIndex, hits: Sequence[Hit], filters: Filters, neighbours: Neighbours | None,
                 prepare: Callable[[Iterable[Document]], None] | None = None, follow: bool = True,
                 fetch: Fetch | None = None, pairs: Pairs | None = None) -> Context:
    """The hits and (with `follow`) the turns just after them (an answer often holds none of the
    question's words: the question before it does), each with the turn just before it when
    `neighbours` says it is its context. `prepare`, when given, sees every document before
    `neighbours` is asked (to read what it needs of them at once); `fetch` reads the documents not
    at hand (the store's, `index.fetch`, by default). With `pairs` (what `neighbours` says, judged
    from the columns) no document is read, and neither `neighbours` (None will do) nor `prepare` is
    called: the context's `docs` are the hits' own, and the caller reads those of the others it
    returns. Call inside `index.reading()`."""
    found = index.columns.ids_to_ords([h.document.id for h in hits])
    # The hits' documents are at hand: only their neighbours are read from the store.
    known = {o: h.document for o, h in zip(found.tolist(), hits) if o >= 0}  # (Python ints, made at once)
    ords = found[found >= 0]
    after = ords + 1
    joined = [ords, after[_usable(index, after, filters)] if follow else ords[:0]]
    if NEXT_CONTEXT:
        before = ords - 1
        joined.append(before[_usable(index, before, filters)])
    cands = np.unique(np.concatenate(joined))
    prev = cands - 1
    has_prev = _usable(index, prev, filters)
    nxt = cands + 1
    has_next = _usable(index, nxt, filters) if NEXT_CONTEXT else np.zeros(cands.size, bool)
    if pairs is not None:  # judged from the columns: the turns around the hits need not be read
        if has_prev.any():
            has_prev[has_prev] = pairs(prev[has_prev], cands[has_prev])
        if has_next.any():
            has_next[has_next] = pairs(cands[has_next], nxt[has_next])
        return Context(cands, prev, has_prev, known, nxt, has_next)
    if neighbours is None:
        raise ValueError("with_context needs `neighbours` or `pairs`")
    wanted = {int(o) for o in cands} | {int(o) for o in prev[has_prev]} | {int(o) for o in nxt[has_next]}
    docs = (fetch or index.fetch)(sorted(wanted - known.keys()))
    docs.update((o, known[o]) for o in wanted & known.keys())
    if prepare is not None:
        prepare(docs.values())
    for i, (c, p, n) in enumerate(zip(cands, prev, nxt)):
        if has_prev[i]:
            earlier, later = docs.get(int(p)), docs.get(int(c))
            has_prev[i] = earlier is not None and later is not None and neighbours(earlier, later)
        if has_next[i]:
            earlier, later = docs.get(int(c)), docs.get(int(n))
            has_next[i] = earlier is not None and later is not None and neighbours(earlier, later)
    return Context(cands, prev, has_prev, docs, nxt, has_next)


def context_scores(index: SpaceIndex, words: Sequence[QueryWord], ctx: Context) -> np.ndarray:
    """Per candidate, Σ over the words of the word's best BM25 part in the turn or its context."""
    total = np.zeros(ctx.ords.size)
    n = ctx.ords.size
    prev = ctx.prev[ctx.has_prev]
    following = (ctx.next[ctx.has_next] if ctx.next is not None and ctx.has_next is not None
                 else ctx.ords[:0])
    # Each ordinal's score is its own, so one call per word scores the turns and their contexts at once.
    ords = np.concatenate([ctx.ords, prev, following])
    per_word = index.keyword.word_scores(words, ords)  # each word's own scores, one pass over the counts
    for j in range(len(words)):
        scores = per_word[:, j]
        best = scores[:n].astype(np.float64)
        if prev.size:
            best[ctx.has_prev] = np.maximum(best[ctx.has_prev], scores[n:n + prev.size])
        if following.size:
            assert ctx.has_next is not None
            best[ctx.has_next] = np.maximum(best[ctx.has_next], scores[n + prev.size:])
        total += best
    return total


def context_keyword(index: SpaceIndex, query: str, hits: Sequence[Hit], filters: Filters, neighbours: Neighbours,
                    limit: int, words: Sequence[QueryWord] | None = None, columns: bool = False) -> list[Hit]:
    """Re-score keyword hits with their conversation context (`with_context`): each query word counts
    with its better BM25 part, in the turn or in the turn just before it; best first, ties by
    insertion order. `words`: the query's content words when the caller has them already;
    `columns`: the turns around the hits are read from the columns (`column_documents`)."""
    if words is None:
        asked = content_query(query)
        words = content_words(query_words(asked), asked)
    with index.reading():
        ctx = with_context(index, hits, filters, neighbours, fetch=column_documents(index) if columns else None)
        total = context_scores(index, words, ctx)  # each word once, where it scores best
    order = sorted(range(ctx.ords.size), key=lambda i: (-float(total[i]), int(ctx.ords[i])))
    out: list[Hit] = []
    for i in order:
        doc = ctx.docs.get(int(ctx.ords[i]))
        if doc is None or total[i] <= 0:
            continue
        out.append(Hit(doc, float(total[i]), bm25=float(total[i]), keyword_rank=len(out) + 1))
        if len(out) == limit:
            break
    return out


def same_source(earlier: Document, later: Document) -> bool:
    """Whether `earlier` is context of `later` in a space of memories: both name one source (a
    conversation reference, a file, a task)."""
    return bool(earlier.source) and earlier.source == later.source


def _rank_among(hits: list[Hit]) -> None:
    """Rank the returned results among themselves: by similarity where there is one, by BM25 where a word occurs."""
    for rank, hit in enumerate(sorted((h for h in hits if h.similarity is not None), key=lambda h: -(h.similarity or 0)), 1):
        hit.vector_rank = rank
    for rank, hit in enumerate(sorted((h for h in hits if h.bm25), key=lambda h: -(h.bm25 or 0)), 1):
        hit.keyword_rank = rank


def _engine(index: SpaceIndex, req: SearchRequest) -> SearchResult:
    """The engine's search (`start(req).finish()` answers as `search`); with a vector still being embedded,
    its keyword pass while the embedding's pass runs, the rest once the vector is there."""
    wait_for_pass(req.vector)  # the embedding, which the answer waits for, takes the GIL first (if any)
    return index.start(req).finish()


def search(index: SpaceIndex, req: SearchRequest, neighbours: Neighbours | None = None) -> SearchResult:
    """One search with conversation context: keyword and hybrid results re-scored as `context_keyword`
    does (hybrid then fused again, convex over the candidates, as the engine fuses); a search none of
    whose candidates has context returns the engine's own answer unchanged. `same_source` is judged
    from the index's columns (`Columns.same_source`): only the documents returned are read. The
    request's vector may be a Future of it (its query being embedded): the engine's keyword pass runs
    first (`SpaceIndex.start`), and the embedding's error is the search's."""
    if neighbours is None or req.mode == "vector" or not req.q or req.vector is None and req.mode == "hybrid":
        return _engine(index, req)
    if neighbours is same_source and not index.columns.sourced:
        # No memory names a source, so none has context: the engine's own answer at the limit asked
        # (a search at the context's depth would only widen the vector scan's pool, and read 50).
        return _engine(index, req)
    depth = max(CONTEXT_DEPTH, req.limit)
    found = _engine(index, replace(req, limit=depth, explain=False))
    # (a Future's vector is there: the engine's search waited for it)
    vector = req.vector.result() if isinstance(req.vector, Future) else req.vector
    asked = query_words(req.q)  # analysed once for the content words and the explanations
    q = content_query(req.q, asked)
    words = content_words(asked if q == req.q else query_words(q), q)
    pairs = index.columns.same_source if neighbours is same_source else None
    with index.reading():
        ctx = with_context(index, found.hits, req.filters, neighbours, pairs=pairs)
        if not ctx.has_prev.any() and not (ctx.has_next is not None and ctx.has_next.any()):  # nothing has context: the engine's own ranking at the depth
            top = found.hits[:req.limit]
            _rank_among(top)
            if req.explain:
                plain = Explainer(searchable_words(asked))
                for hit in top:
                    hit.terms, hit.snippet = plain.explain(hit.document.text, hit.document.tags, hit.document.source)
            return SearchResult(top, found.mode, found.approximate)
        bm25 = context_scores(index, words, ctx)
        sims = np.full(ctx.ords.size, np.nan)
        if found.mode == "hybrid" and index.vectors is not None:
            sims = index.vectors.similarities(index.vectors.prepare(np.asarray(vector, np.float64)),
                                              ctx.ords).astype(np.float64)
        no_vector = np.isnan(sims)
        if found.mode == "hybrid":
            scores = fusion.convex(np.where(no_vector, 0.0, sims), bm25)
        else:
            scores = bm25
        keep = [i for i in range(ctx.ords.size) if bm25[i] > 0 or found.mode == "hybrid"]
        keep.sort(key=lambda i: (-float(scores[i]), int(ctx.ords[i])))  # ties: insertion order, as the engine's
        page = keep[:req.limit]
        # Only the returned documents that are not among the engine's hits are read, in one call.
        unread = [int(ctx.ords[i]) for i in page if int(ctx.ords[i]) not in ctx.docs]
        docs = {**ctx.docs, **index.fetch(unread)} if unread else ctx.docs
    hits: list[Hit] = []
    for i in page:
        doc = docs.get(int(ctx.ords[i]))
        if doc is None:
            continue
        sim = None if no_vector[i] else float(sims[i])
        hits.append(Hit(doc, float(scores[i]), similarity=sim if found.mode == "hybrid" else None,
                        bm25=float(bm25[i]), fusion=req.fusion if found.mode == "hybrid" else None))
    _rank_among(hits)
    if req.explain:
        explainer = Explainer(words)
        for hit in hits:
            hit.terms, hit.snippet = explainer.explain(hit.document.text, hit.document.tags, hit.document.source)
    return SearchResult(hits, found.mode, found.approximate)
