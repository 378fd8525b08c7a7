"""Plain data types shared by the engine's modules."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import numpy as np

Mode = Literal["hybrid", "vector", "keyword"]
Fusion = Literal["convex", "rrf"]
TermKind = Literal["exact", "stem", "part"]
FieldName = Literal["text", "tags", "source"]


@dataclass(frozen=True, slots=True)
class ModelIdentity:
    """An embedding model, identified exactly: vectors compare only when all three match."""

    model: str
    digest: str
    dims: int


@dataclass(slots=True)
class Document:
    """One indexed document of a space.

    `created_ms` / `indexed_ms` are milliseconds since the Unix epoch (UTC). `vector` is the
    float16 little-endian bytes as received, or None for a document without a usable vector.
    `next_vector` is the same for the model the space is moving to, while it moves.
    """

    id: str
    author: str
    text: str
    tags: tuple[str, ...] = ()
    source: str | None = None
    created_ms: int = 0
    indexed_ms: int = 0
    metadata: dict[str, Any] | None = None
    vector: bytes | None = None
    next_vector: bytes | None = None


class Placed(NamedTuple):
    """What a collection's filter columns and vectors are built from: a record's fields besides its text and
    metadata (a load reads only these when its keyword index has nothing to replay)."""

    id: str
    author: str
    tags: tuple[str, ...]
    source: str | None
    created_ms: int
    vector: bytes | None


@dataclass(frozen=True, slots=True)
class Filters:
    """Exact filters: every given condition must hold.

    `tags`: all of them; `any_tags`: for each group, at least one of its tags (a conjunction of
    disjunctions, which is how faces say "one of these containers" per kind); `none_tags`: none of
    them; `since_ms` / `until_ms`: created at or after / before; `ids`: only these document ids
    (for predicates a face evaluates over its own tables).
    """

    author: str | None = None
    tags: tuple[str, ...] = ()
    since_ms: int | None = None
    any_tags: tuple[tuple[str, ...], ...] = ()
    none_tags: tuple[str, ...] = ()
    until_ms: int | None = None
    ids: frozenset[str] | None = None

    def is_empty(self) -> bool:
        """Say whether no condition is set."""
        return (
            self.author is None
            and not self.tags
            and self.since_ms is None
            and not self.any_tags
            and not self.none_tags
            and self.until_ms is None
            and self.ids is None
        )


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """What one search asks of a space's index."""

    mode: Mode
    q: str | None = None
    vector: Any = None  # numpy float32 array of the space's dims, or None
    limit: int = 10
    filters: Filters = field(default_factory=Filters)
    fusion: Fusion = "convex"
    explain: bool = True
    rerank_deadline_s: float | None = None
    # False: each hit's document is the index's columns' (id, tags and creation time; no text,
    # source, metadata or vector) and the store is not read, for callers that use only ids and
    # tags (Columns.documents); such a search cannot explain (it has no text).
    documents: bool = True
    # False: the answer is in `SearchResult.columns` (ordinals, scores, similarities, BM25), with no
    # Hit or Document made, for callers that work on ordinals; such a search cannot explain.
    hits: bool = True


@dataclass(frozen=True, slots=True)
class TermMatch:
    """One query term found in a document: its normalized form, how it matched, and where."""

    term: str
    kind: TermKind
    field: FieldName


@dataclass(frozen=True, slots=True)
class Snippet:
    """Up to about 200 characters of a field around the matches, with UTF-8 byte highlights."""

    field: FieldName
    text: str
    highlights: tuple[tuple[int, int], ...]


@dataclass(slots=True)
class Hit:
    """One search result, with everything its explanation needs."""

    document: Document
    score: float
    similarity: float | None = None  # cosine, -1..1
    vector_rank: int | None = None  # rank among the returned results
    bm25: float | None = None
    keyword_rank: int | None = None
    terms: tuple[TermMatch, ...] = ()
    snippet: Snippet | None = None
    fusion: Fusion | None = None


@dataclass(frozen=True, slots=True)
class Fused:
    """A search's best in columns: ordinals, scores, similarities (float32, where `has_sim`), BM25
    (float32; NaN where the search had none: a vector search's); whether the vector side was
    approximate (its re-rank cut by a deadline)."""

    ords: np.ndarray
    scores: np.ndarray
    sims: np.ndarray
    bm25: np.ndarray
    has_sim: np.ndarray
    approximate: bool


@dataclass(slots=True)
class SearchResult:
    """What a search returns: the hits (or, asked with `hits=False`, their columns), the mode that
    ran, and whether ranking was approximate."""

    hits: list[Hit]
    mode: Mode
    approximate: bool = False
    columns: Fused | None = None


def explainable(req: SearchRequest) -> None:
    """Refuse a search asked to explain without what explaining needs: the documents' text, its hits."""
    if req.explain and not req.documents:
        raise ValueError("an explained search needs the documents' text: documents=False cannot explain")
    if req.explain and not req.hits:
        raise ValueError("an explained search needs its hits: a search in columns (hits=False) cannot explain")
