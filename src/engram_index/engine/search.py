"""One space's hybrid index: keyword and vector indexes, exact filters, fusion and explanations."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np

from engram_index.engine import fusion
from engram_index.engine.analyzer import QueryWord, query_words
from engram_index.engine.columns import Columns
from engram_index.engine.doc_cache import DocumentCache
from engram_index.engine.explain import Explainer
from engram_index.engine.keyword import KeywordIndex, searchable_words
from engram_index.engine.rwlock import RWLock
from engram_index.engine.started import StartedSearch as StartedSearch  # (re-exported: Collections.start_many's)
from engram_index.engine.started import Starting
from engram_index.engine.types import (
    Document, Filters, Fused, Hit, Mode, Placed, SearchRequest, SearchResult, explainable,
)
from engram_index.engine.vector import PreparedQuery, VectorHits, VectorIndex, vector_problem

# Candidates per stage: at least this many, more when the limit asks (4 × limit).
MIN_CANDIDATES = 200
CANDIDATES_PER_RESULT = 4
# Keyword-only search finds every applied write by its words (the term counts hold them at once);
# callers that mix it with hybrid search, which waits for the keyword commit, commit first past this
# many uncommitted writes (kindgi/retrieve.py).
PENDING_SCAN = 4096

Fetch = Callable[[list[int]], dict[int, Document]]


def checked_vector(raw: bytes | None, dims: int) -> tuple[np.ndarray | None, str | None]:
    """A stored f16le vector as a float16 array, or None and why it is unusable (no reason when absent)."""
    if raw is None:
        return None, None
    if len(raw) % 2:
        return None, f"vector has {len(raw)} bytes, not whole float16 values"
    vec = np.frombuffer(raw, "<f2")
    problem = vector_problem(vec, dims)
    return (None, problem) if problem else (vec, None)


def checked_vectors(raws: Sequence[bytes], dims: int) -> tuple[np.ndarray, list[int], list[str | None]]:
    """`checked_vector` of many stored vectors at once (a load applies thousands, where a check each was a
    tenth of its time): the float16 rows of those of the right size, which of `raws` they are, and why each
    of `raws` is unusable (None: usable)."""
    whole = [i for i, raw in enumerate(raws) if len(raw) == 2 * dims]
    rows = np.frombuffer(b"".join(raws[i] for i in whole), "<f2").reshape(len(whole), dims)
    problems: list[str | None] = [None] * len(raws)
    # Tested on the halves' bits (a tenth of float16 arithmetic's time): NaN or infinity has every exponent
    # bit set; a row of zeros (either sign) has no bit set besides the signs.
    bits = rows.view(np.uint16)
    odd = ((bits & 0x7C00) == 0x7C00).any(axis=1) | ~(bits & 0x7FFF).any(axis=1)
    for k in np.flatnonzero(odd).tolist():
        problems[whole[k]] = vector_problem(rows[k], dims)  # its first problem, in checked_vector's order
    for i, raw in enumerate(raws):
        if len(raw) != 2 * dims:
            problems[i] = checked_vector(raw, dims)[1]
    return rows, whole, problems


def decode_vector(raw: bytes | None, dims: int) -> np.ndarray | None:
    """A stored f16le vector as a float16 array, or None when absent or unusable (checked_vector)."""
    return checked_vector(raw, dims)[0]


class SpaceIndex(Starting):
    """The searchable state of one space, rebuilt from (and kept in step with) its records."""

    def __init__(
        self, path: Path | None, dims: int | None, fetch: Fetch, read_only: bool = False
    ) -> None:
        """Open the index files under `path` (None: in memory) for vectors of `dims` dimensions."""
        self.dims = dims
        # The results' documents, cached by ordinal (every applied write drops its ordinal first).
        self.documents = DocumentCache(fetch)
        self.fetch: Fetch = self.documents
        self.columns = Columns()
        self.vectors = VectorIndex(dims) if dims else None
        self.keyword = KeywordIndex(path / "keyword" if path is not None else None, read_only=read_only)
        self.seq = 0
        # Stored vectors the index could not use (written before the entry checks that now refuse
        # them): ordinal -> (author, reason), reported beside the store's skipped records.
        self._unusable: dict[int, tuple[str, str]] = {}
        self._lock = RWLock()
        # Counts what changed under the write lock (writes applied, parts swapped): a started search
        # whose keyword pass saw an older count runs it again (`start`).
        self._generation = 0

    # -- writes -----------------------------------------------------------------------------

    def apply(
        self, changes: Iterable[tuple[int, Document | None]], seq: int, keyword: bool = True, vectors: bool = True
    ) -> None:
        """Apply documents written (or deleted, as None) up to sequence `seq` (to the keyword index
        and the vectors unless told not to: they may be loaded already)."""
        with self._lock.write():
            self._generation += 1
            pending: dict[int, tuple[str, bytes]] = {}  # vectors to check and add in bulk: author, bytes
            words: list[tuple[int, Document | None, bool]] = []  # keyword changes, in order, in bulk
            index = self.vectors if vectors else None
            changes = list(changes)
            self.documents.drop(ord_ for ord_, _ in changes)
            # The columns' puts are made in bulk: before the next removal (order holds), and at the end.
            put_ords: list[int] = []
            put_docs: list[Document] = []
            put_set: set[int] = set()
            for ord_, doc in changes:
                was_live = ord_ in put_set or ord_ < self.columns.size and bool(self.columns.live[ord_])
                pending.pop(ord_, None)
                self._unusable.pop(ord_, None)
                if doc is None:
                    self.columns.put_many(put_ords, put_docs)
                    put_ords, put_docs, put_set = [], [], set()
                    self.columns.remove(ord_)
                    if index is not None:
                        index.remove(ord_)
                    if keyword:
                        words.append((ord_, None, True))
                    continue
                put_ords.append(ord_)
                put_docs.append(doc)
                put_set.add(ord_)
                if index is not None:
                    if doc.vector is None:
                        index.remove(ord_)
                    else:
                        pending[ord_] = (doc.author, doc.vector)
                if keyword:
                    # An ordinal that was not live has nothing in the keyword index to replace.
                    words.append((ord_, doc, was_live))
            self.columns.put_many(put_ords, put_docs)
            self.keyword.write(words)
            if index is not None and pending:
                self._put_vectors(index, pending)
            self.seq = max(self.seq, seq)

    def place(self, rows: Sequence[tuple[int, Placed]], vectors: bool = True) -> None:
        """Put live records read for a load in their columns and (unless told not to) their vectors: what
        `apply` with `keyword=False` does with them, for ordinals not live yet (the load sets the sequence)."""
        with self._lock.write():
            self._generation += 1
            ords = [o for o, _ in rows]
            if ords and self.columns.alive(np.array(ords, np.int64)).any():
                raise ValueError("place puts ordinals that are not live yet: apply replaces live ones")
            self.columns.put_many(ords, [fields for _, fields in rows])
            if vectors and self.vectors is not None:
                pending = {o: (fields.author, fields.vector) for o, fields in rows if fields.vector is not None}
                if pending:
                    self._put_vectors(self.vectors, pending)

    def _put_vectors(self, index: VectorIndex, pending: dict[int, tuple[str, bytes]]) -> None:
        """Check the written vectors (by ordinal: author, bytes) at once, put the usable ones and leave the
        others out, reported (one bad row is never fatal to the load). Under the write lock."""
        ords = list(pending)
        rows, whole, problems = checked_vectors([raw for _, raw in pending.values()], index.dims)
        for o, problem in zip(ords, problems):
            if problem is not None:
                index.remove(o)
                self._unusable[o] = (pending[o][0], problem)
        good = [k for k, i in enumerate(whole) if problems[i] is None]
        if good:
            index.put_many(np.array([ords[whole[k]] for k in good], np.int64), rows[good])

    def commit(self) -> None:
        """Make keyword writes durable and searchable (vectors are searchable at once)."""
        with self._lock.read():  # not while the keyword index is being swapped
            self.keyword.commit(self.seq)

    def freeze_counts(self) -> Callable[[], None] | None:
        """When a save of the term counts is due: copy them while writes wait, and return what writes
        the copy while writes go on (docs/design/engine.md has the times)."""
        with self._lock.read():
            # Saved counts must not be ahead of the keyword index: commit the writes that came since
            # the last commit first, in this same hold (no write can come between). Waiting for a
            # moment with nothing new never comes under steady writes, as the lock lets writers first.
            if self.keyword.committed_seq != self.seq:
                self.keyword.commit(self.seq)
            return self.keyword.freeze_counts_if_due(self.seq)

    def save_counts(self) -> None:
        """Save the term counts now (after a commit), so that a restart need not count again."""
        with self._lock.read():
            self.keyword.commit(self.seq)
            if self.keyword.counts.changed or self.keyword.counts_seq != self.seq:
                self.keyword.save_counts(self.seq)

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold off searches and writes (for swapping the keyword index)."""
        with self._lock.write():
            self._generation += 1
            yield

    def close(self, save_counts: bool = True) -> None:
        """Commit, save the term counts (unless the index is about to be deleted) and release the keyword writer."""
        if save_counts:
            self.save_counts()
        else:
            self.commit()
        self.keyword.close(save_counts=save_counts)

    def __len__(self) -> int:
        """The number of live documents."""
        return self.columns.count

    def count(self, filters: Filters) -> int:
        """How many live documents pass the filters (every live one without filters)."""
        with self._lock.read():
            mask = self.columns.mask(filters)
            return self.columns.count if mask is None else int(mask.sum())

    def save_vectors(self, path: Path) -> None:
        """Save the vectors for other processes to map (`VectorIndex.save`), with the unusable ones' report."""
        with self._lock.read():
            if self.vectors is not None:
                unusable = [[o, author, reason] for o, (author, reason) in sorted(self._unusable.items())]
                self.vectors.save(path, self.seq, {"unusable": unusable})

    def use_saved(self, vectors: VectorIndex) -> None:
        """Search with vectors mapped from files `save_vectors` wrote, and report the unusable ones it noted."""
        with self._lock.write():
            self.vectors = vectors
            noted = vectors.notes.get("unusable", []) if isinstance(vectors.notes, dict) else []
            self._unusable = {int(o): (str(author), str(reason)) for o, author, reason in noted}

    def unusable_vectors(self) -> list[tuple[str, str, int]]:
        """The stored vectors left out of the index: (author, reason, count), by author and reason."""
        with self._lock.read():
            counts = Counter(self._unusable.values())
        return sorted((author, reason, n) for (author, reason), n in counts.items())

    def reading(self) -> contextlib.AbstractContextManager[None]:
        """Hold off writes while a caller reads the index's parts (the ranking core's exact scores)."""
        return self._lock.read()

    def has_vector(self, ord_: int) -> bool:
        """Whether the document at this ordinal has a vector in the index."""
        with self._lock.read():
            return self.vectors is not None and self.vectors.has(ord_)

    def pairwise(self, ords: Sequence[int]) -> np.ndarray:
        """Cosines among the given ordinals (zeros where one has no vector), read consistently."""
        with self._lock.read():
            if self.vectors is None:
                return np.zeros((len(ords), len(ords)), np.float32)
            return self.vectors.pairwise(np.asarray(ords, np.int64))

    # -- search -----------------------------------------------------------------------------

    def search(self, req: SearchRequest) -> SearchResult:
        """Run one search as the request asks; the result's mode says what ran."""
        explainable(req)
        with self._lock.read():
            if req.mode == "keyword":
                return self._keyword_search(req)
            if req.mode == "vector" or not req.q:
                return self._vector_search(req)
            return self._hybrid_search(req)

    def _documents(self, req: SearchRequest) -> Fetch:
        """Where the hits' documents come from: the store, or the columns alone (`documents=False`)."""
        return self.fetch if req.documents else self.columns.documents

    def _n_candidates(self, limit: int) -> int:
        """How many candidates each stage contributes."""
        return max(MIN_CANDIDATES, CANDIDATES_PER_RESULT * limit)

    def _deadline(self, req: SearchRequest) -> float | None:
        """The monotonic time by which exact re-ranking must be done."""
        if req.rerank_deadline_s is None:
            return None
        return time.monotonic() + req.rerank_deadline_s

    def _query_vector(self, req: SearchRequest) -> np.ndarray:
        """The request's query vector as float64 (as sent: no rounding), checked against the space's dimensions."""
        if self.vectors is None or req.vector is None:
            raise ValueError("a vector search needs a space with vectors and a query vector")
        query = np.asarray(req.vector, np.float64).reshape(-1)
        if query.size != self.vectors.dims:
            raise ValueError(f"query has {query.size} dimensions, the space {self.vectors.dims}")
        return query

    def _allowed(self, req: SearchRequest) -> np.ndarray | None:
        """The ordinals of the request's id allow-list (None without one), for the keyword side."""
        ids = req.filters.ids
        return None if ids is None else self.columns.id_ords(ids)

    def _order(self, ords: np.ndarray, scores: np.ndarray, limit: int) -> list[int]:
        """Indexes into `ords` of the best `limit`, ties broken by insertion ordinal (the earlier first)."""
        if not len(ords):
            return []
        top: list[int] = np.lexsort((ords, -np.asarray(scores, np.float64)))[:limit].tolist()
        return top

    def _vector_search(self, req: SearchRequest) -> SearchResult:
        """Rank by cosine alone."""
        query = self._query_vector(req)
        mask = self.columns.mask(req.filters)
        hits = self.vectors.search(  # type: ignore[union-attr]
            query, req.limit, allowed=mask, deadline=self._deadline(req)
        )
        top = self._order(hits.ords, hits.sims, req.limit)
        if not req.hits:
            sims = hits.sims[top].astype(np.float32)
            return self._in_columns("vector", Fused(hits.ords[top], sims.astype(np.float64), sims,
                                                    np.full(len(top), np.nan, np.float32), np.ones(len(top), np.bool_),
                                                    hits.approximate))
        docs = self._documents(req)([int(hits.ords[i]) for i in top])
        out: list[Hit] = []
        for i in top:
            doc = docs.get(int(hits.ords[i]))
            if doc is not None:
                sim = float(hits.sims[i])
                out.append(Hit(doc, sim, similarity=sim, vector_rank=len(out) + 1))
        return SearchResult(out, "vector", hits.approximate)

    def _keyword_search(self, req: SearchRequest) -> SearchResult:
        """Rank by BM25 alone: the exact top-k by our term counts (tantivy's own ranking plays no part)."""
        words = query_words(req.q or "")
        # The counts hold every applied write at once, so a write is found by its words before
        # the keyword commit; the columns' mask makes the filters (and liveness) exact.
        ords, bm25 = self.keyword.exact_top(words, req.limit, self.columns.mask(req.filters))
        ords, bm25 = self._live(ords, bm25)
        top = self._order(ords, bm25, req.limit)
        if not req.hits:
            scores = bm25[top].astype(np.float32)
            return self._in_columns("keyword", Fused(ords[top], scores.astype(np.float64), np.zeros(len(top), np.float32),
                                                     scores, np.zeros(len(top), np.bool_), False))
        docs = self._documents(req)([int(ords[i]) for i in top])
        out: list[Hit] = []
        for i in top:
            doc = docs.get(int(ords[i]))
            if doc is not None:
                score = float(bm25[i])
                out.append(Hit(doc, score, bm25=score, keyword_rank=len(out) + 1))
        if req.explain:
            self._explain(out, words)
        return SearchResult(out, "keyword")

    def _live(self, ords: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Drop ordinals deleted since the keyword index's last commit."""
        keep = self.columns.alive(ords)
        return ords[keep], scores[keep]

    def _hybrid_search(self, req: SearchRequest) -> SearchResult:
        """Union the top vector and keyword candidates, score each both ways, fuse."""
        vectors = self.vectors
        assert vectors is not None
        query = vectors.prepare(self._query_vector(req))  # once for the search and the similarities
        words = query_words(req.q or "")
        n = self._n_candidates(req.limit)
        mask = self.columns.mask(req.filters)
        vec = self._vector_candidates(req, query, n, mask)
        # The exact top n by our BM25 (ties: the earlier inserted), and every vector candidate's BM25.
        kw_ords, kw_scores, vec_bm25 = self.keyword.exact_top_and_score(words, n, mask, vec.ords)
        return self._hits(req, words, self._fuse(req, query, vec, vec_bm25, *self._keyword_top(kw_ords, kw_scores, n)))

    def _vector_candidates(self, req: SearchRequest, query: PreparedQuery, n: int, mask: np.ndarray | None) -> VectorHits:
        """The hybrid's vector side: the top n by exact cosine, from the coarse pool that holds recall for
        the requested limit (a pool sized for k = n would cost several times more for no better results)."""
        vectors = self.vectors
        assert vectors is not None
        pool = max(n, vectors.default_candidates(req.limit))
        return vectors.search(query, n, allowed=mask, candidates=pool, deadline=self._deadline(req))

    def _keyword_top(self, kw_ords: np.ndarray, kw_scores: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The hybrid's keyword side: the exact top n (ties: the earlier inserted) of those live now."""
        if kw_ords.size > n:
            keep = np.lexsort((kw_ords, -kw_scores.astype(np.float64)))[:n]
            kw_ords, kw_scores = kw_ords[keep], kw_scores[keep]
        return self._live(kw_ords, kw_scores)

    def _fuse(self, req: SearchRequest, query: PreparedQuery, vec: VectorHits, vec_bm25: np.ndarray,
              kw_ords: np.ndarray, kw_scores: np.ndarray) -> Fused:
        """Both sides' candidates fused: the hybrid's best `limit` ordinals and their scores."""
        vectors = self.vectors
        assert vectors is not None
        # One compiled call: the union, the keyword-only candidates' cosines, the fusion (as
        # engine/fusion.py computes it, bit for bit) and the best `limit` (ties: the lower ordinal).
        top = min(req.limit, vec.ords.size + kw_ords.size)
        ords = np.empty(top, np.int64)
        fused, sims, bm25 = np.empty(top, np.float64), np.empty(top, np.float32), np.empty(top, np.float32)
        has_sim = np.empty(top, np.bool_)
        method = 1 if req.fusion == "rrf" else 0
        got = vectors.fuse(query, vec.ords, vec.sims, vec_bm25.astype(np.float32, copy=False), kw_ords,
                           kw_scores.astype(np.float32, copy=False), method, fusion.CONVEX_ALPHA, fusion.RRF_K,
                           ords, fused, sims, bm25, has_sim)
        return Fused(ords[:got], fused[:got], sims[:got], bm25[:got], has_sim[:got], vec.approximate)

    def _hits(self, req: SearchRequest, words: Sequence[QueryWord], fused: Fused) -> SearchResult:
        """The fused ordinals' hits, with their documents (those gone since are left out); with
        `hits=False`, the fused columns of those still live, no hit made."""
        if not req.hits:
            return self._in_columns("hybrid", fused)
        found = fused.ords.tolist()
        docs = self._documents(req)(found)
        out: list[Hit] = []
        for ord_, score, sim, b, with_sim in zip(found, fused.scores.tolist(), fused.sims.tolist(),
                                                  fused.bm25.tolist(), fused.has_sim.tolist()):
            doc = docs.get(ord_)
            if doc is None:
                continue
            out.append(Hit(doc, score, similarity=sim if with_sim else None, bm25=b, fusion=req.fusion))
        _rank_among(out)
        if req.explain:
            self._explain(out, words)
        return SearchResult(out, "hybrid", fused.approximate)

    def _in_columns(self, mode: Mode, found: Fused) -> SearchResult:
        """A search's best as its answer in columns (`hits=False`): those gone since are left out, as a hit
        is whose document cannot be read."""
        live = self.columns.alive(found.ords)
        if not live.all():
            found = Fused(found.ords[live], found.scores[live], found.sims[live], found.bm25[live], found.has_sim[live],
                          found.approximate)
        return SearchResult([], mode, found.approximate, found)

    def _explain(self, hits: list[Hit], words: Sequence[QueryWord]) -> None:
        """Fill in the matched terms and the snippet of each hit."""
        explainer = Explainer(searchable_words(words))
        for hit in hits:
            doc = hit.document
            hit.terms, hit.snippet = explainer.explain(doc.text, doc.tags, doc.source)


def _rank_among(hits: list[Hit]) -> None:
    """Rank the returned results among themselves: by similarity where there is a vector, by BM25 where a word occurs."""
    with_sim = [i for i, h in enumerate(hits) if h.similarity is not None]
    for rank, i in enumerate(sorted(with_sim, key=lambda i: -(hits[i].similarity or 0.0)), 1):
        hits[i].vector_rank = rank
    matched = [i for i, h in enumerate(hits) if (h.bm25 or 0.0) > 0]
    for rank, i in enumerate(sorted(matched, key=lambda i: -(hits[i].bm25 or 0.0)), 1):
        hits[i].keyword_rank = rank
