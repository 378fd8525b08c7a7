"""One query's candidates in columns, and their ranking: search.rank's answer without a Candidate each.

A hybrid search scores ~90 memories and chunks and returns a few; making each one a Candidate and
ranking those (search.rank) cost more than the engine's work after the vector. Here the
candidates are lists and arrays, ranked with numpy in search.rank's order and arithmetic (the
same float64 operations, ties broken the same way), and only the returned ones become
Candidates. search.rank stays the reference (and ranks the candidates of several queries, a
rewrite's); tests/supermemory/test_found.py checks the two agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engram_index.engine.types import Document, Hit
from engram_index.supermemory.candidates import _KEYWORD_WEIGHT, VECTOR_WEIGHT, Candidate, QueryExplainer
from engram_index.supermemory import statements
from engram_index.supermemory.tables import chunk_document

KINDS = ("chunk", "memory")  # a kind's code: its place here (the order search.rank breaks ties in)


@dataclass(slots=True)
class Found:
    """Candidates by column, each one's place the same in every list and array."""

    kinds: np.ndarray  # int8: 0 chunk, 1 memory
    ids: list[str]
    doc_ids: list[str | None]  # None: a chunk's is in its id, a memory's known once its row is read (Rows.read_found)
    texts: list[str]  # read where ranking or the page needs them
    sims: np.ndarray  # float64: the engine's cosine (NaN: none), as a hit holds it
    bm25: np.ndarray  # float64: the engine's BM25 (NaN: none)
    tags: list[tuple[str, ...]]  # the index's tags of each (what the explanation's terms may match)
    explainers: list[QueryExplainer]
    vector: np.ndarray  # bool: scored with its cosine
    coverage: np.ndarray  # float64
    order: np.ndarray  # int64: insertion order in its collection
    groups: list[str]
    own: np.ndarray  # float64: Candidate.own_similarity
    links: list[str]  # a chunk record's author: the memories whose statement it holds (statements.py); else ""

    @classmethod
    def of(cls, kind: str, ids: list[str], doc_ids: list[str | None], sims: np.ndarray, bm25: np.ndarray,
           tags: list[tuple[str, ...]], explainer: QueryExplainer, vector: bool, coverage: np.ndarray,
           order: np.ndarray, groups: list[str], links: list[str] | None = None) -> Found:
        """One collection's candidates, each scored alone as Candidate scores it (`links`: the chunks' records'
        authors, statements.py)."""
        n = len(ids)
        sims = np.asarray(sims, np.float64)
        if vector:
            # Candidate._score_alone's comparisons as ufuncs (maximum and minimum keep a NaN and a -0.0 as they
            # do); its `similarity or 0.0` makes none, 0.0 and -0.0 a 0.0.
            cosine = np.maximum(np.where(np.isnan(sims) | (sims == 0.0), 0.0, sims), 0.0)
            own = np.minimum(np.maximum(VECTOR_WEIGHT * cosine + _KEYWORD_WEIGHT * coverage, 0.0), 1.0)
        else:
            own = coverage.astype(np.float64, copy=True)
        return cls(np.full(n, KINDS.index(kind), np.int8), ids, doc_ids, [""] * n, sims,
                   np.asarray(bm25, np.float64), tags, [explainer] * n, np.full(n, vector, bool), coverage,
                   np.asarray(order, np.int64), groups, own, [""] * n if links is None else links)

    @classmethod
    def empty(cls) -> Found:
        """No candidates."""
        return cls(np.zeros(0, np.int8), [], [], [], np.zeros(0), np.zeros(0), [], [], np.zeros(0, bool), np.zeros(0),
                   np.zeros(0, np.int64), [], np.zeros(0), [])

    @classmethod
    def joined(cls, parts: Sequence[Found]) -> Found:
        """The candidates of several collections, in turn."""
        if len(parts) <= 1:
            return parts[0] if parts else cls.empty()
        return cls(np.concatenate([p.kinds for p in parts]), sum((p.ids for p in parts), []),
                   sum((p.doc_ids for p in parts), []), sum((p.texts for p in parts), []),
                   np.concatenate([p.sims for p in parts]), np.concatenate([p.bm25 for p in parts]),
                   sum((p.tags for p in parts), []), sum((p.explainers for p in parts), []),
                   np.concatenate([p.vector for p in parts]), np.concatenate([p.coverage for p in parts]),
                   np.concatenate([p.order for p in parts]), sum((p.groups for p in parts), []),
                   np.concatenate([p.own for p in parts]), sum((p.links for p in parts), []))

    def __len__(self) -> int:
        return len(self.ids)

    def candidate(self, i: int, backed: float | None = None) -> Candidate:
        """The i-th as a Candidate (its own score as worked out here)."""
        kind, doc_id = KINDS[self.kinds[i]], self.doc_ids[i]
        if doc_id is None:
            doc_id = chunk_document(self.ids[i]) if kind == "chunk" else ""
        made = Candidate(kind, self.ids[i], doc_id, self.texts[i], self.hit(i),
                         self.explainers[i], bool(self.vector[i]), float(self.coverage[i]), int(self.order[i]),
                         self.groups[i], backed=backed)
        return made

    def hit(self, i: int) -> Hit:
        """The i-th as the engine's hit of the index's columns (id and tags; no text), made when asked: a
        search makes a Candidate of the few it returns."""
        sim, bm25 = float(self.sims[i]), float(self.bm25[i])
        return Hit(Document(self.ids[i], "", "", tags=self.tags[i]), 0.0, similarity=None if sim != sim else sim,
                   bm25=None if bm25 != bm25 else bm25)

    def candidates(self) -> list[Candidate]:
        """Every one as a Candidate, in order."""
        return [self.candidate(i) for i in range(len(self))]

    def sharing_a_document(self) -> list[int]:
        """The places of the memories and chunks whose document has candidates of both kinds
        (page.sharing_a_document's)."""
        kinds, groups = self.kinds.tolist(), self.groups
        memories = {g for k, g in zip(kinds, groups) if k}
        both = {g for k, g in zip(kinds, groups) if not k and g in memories}
        both.discard("")
        return [i for i, g in enumerate(groups) if g in both]

    def unlinked(self, sharing: Sequence[int]) -> list[int]:
        """Of `sharing`'s places, those whose texts say which chunk a memory is a statement of: the memories and
        chunks of the documents one of whose chunks among them was written before chunks named the memories
        they hold (`statements.held_by`). The others' chunks name them."""
        kinds, groups, links = self.kinds, self.groups, self.links
        unnamed = {groups[i] for i in sharing if not kinds[i] and statements.held_by(links[i]) is None}
        return [i for i in sharing if groups[i] in unnamed] if unnamed else []


def sources(found: Found, sharing: Sequence[int]) -> np.ndarray:
    """Each candidate's source as a place: a chunk is its own; a memory is the first chunk of its document
    among the candidates that holds its statement, else its own (search._sources). `sharing`: the places of
    the memories and chunks whose document has both (`Found.sharing_a_document`). A chunk whose record
    names the memories it holds says so itself; the others' texts (`Found.unlinked`) say it by
    `statements.held_in`."""
    out = np.arange(len(found))
    kinds, groups, texts, ids = found.kinds, found.groups, found.texts, found.ids
    chunks: dict[str, list[int]] = {}
    memories: dict[str, list[int]] = {}
    for i in sharing:
        (memories if kinds[i] else chunks).setdefault(groups[i], []).append(i)
    for group, places in chunks.items():
        held = [statements.held_by(found.links[j]) for j in places]
        if any(h is None for h in held):  # written before chunks named their memories: the texts say it
            said = [(ids[i], texts[i]) for i in memories[group]]
            held = [frozenset(statements.held_in(texts[j], said)) for j in places]
        for i in memories[group]:
            for j, names in zip(places, held):
                if names is not None and ids[i] in names:
                    out[i] = j
                    break
    return out


def either(own: np.ndarray, backed: np.ndarray) -> np.ndarray:
    """ranking.either of (own, backed) per candidate, in its float64 operations."""
    def held(x: np.ndarray) -> np.ndarray:
        out: np.ndarray = np.minimum(np.maximum(x, 0.0), 1.0)
        return out

    miss = (1.0 - held(own)) * (1.0 - held(backed))
    out: np.ndarray = 1.0 - miss
    return out


@dataclass(slots=True)
class Ranked:
    """A ranking: the best places in order, each candidate's backing (NaN: none) and final score."""

    places: list[int]
    backed: np.ndarray
    similarity: np.ndarray

    def below(self, threshold: float) -> int:
        """How many candidates the threshold cut (why_fewer.threshold_cut of one query's)."""
        return int(np.count_nonzero(self.similarity < threshold))


def rank(found: Found, sharing: Sequence[int], limit: int, threshold: float) -> Ranked:
    """search.rank (BACKED, not COLLAPSE_INTO_CHUNK) in columns: one per source, a memory and the chunk
    it came from scored with both, ties by insertion order, then kind (`sharing`: as `sources` takes it)."""
    n = len(found)
    src = sources(found, sharing)
    kinds = found.kinds.astype(np.int64)
    own = found.own
    # ranking.stable_order's order: best own score first, then insertion order, then kind (a stable sort).
    ordered = np.lexsort((kinds, found.order, -own))
    codes = src[ordered] * 2 + kinds[ordered]
    best = np.full(2 * n, -1, np.int64)  # per (source, kind): its best candidate
    _, first_at = np.unique(codes, return_index=True)
    best[codes[first_at]] = ordered[first_at]
    is_lead = np.zeros(n, bool)  # per source: its best candidate of either kind
    _, lead_at = np.unique(src[ordered], return_index=True)
    is_lead[ordered[lead_at]] = True
    other = best[src * 2 + (1 - kinds)]
    backed = np.full(n, np.nan)
    leads = is_lead & (other >= 0)
    backed[leads] = own[other[leads]]
    similarity = own.copy()
    similarity[leads] = either(own[leads], backed[leads])
    kept = ordered[(other[ordered] < 0) | is_lead[ordered]]  # search._backed's list, in its order
    kept = kept[similarity[kept] >= threshold]
    kept = kept[np.lexsort((kinds[kept], found.order[kept], -similarity[kept]))]
    _, first = np.unique(src[kept], return_index=True)  # ranking.one_per_source: the first of each source
    places = kept[np.sort(first)][:limit].tolist()
    return Ranked(places, backed, similarity)


def ranked_candidates(found: Found, ranked: Ranked) -> list[Candidate]:
    """The ranking's places as Candidates, each with its backing."""
    out = []
    for i in ranked.places:
        b = ranked.backed[i]
        out.append(found.candidate(i, None if b != b else float(b)))
    return out
