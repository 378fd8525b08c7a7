"""One v5 search result before it is answered: what the engine found and its 0-1 similarity (search.py's scale)."""

from __future__ import annotations

from dataclasses import dataclass, field

from collections.abc import Sequence

from engram_index.engine.analyzer import QueryWord
from engram_index.engine.explain import Explainer
from engram_index.engine.keyword import searchable_words
from engram_index.engine.types import Hit
from engram_index.ranking import either

VECTOR_WEIGHT = 0.7  # similarity = 0.7 x max(cosine, 0) + 0.3 x keyword coverage (search.py's module doc)
_KEYWORD_WEIGHT = 1 - VECTOR_WEIGHT  # (0.30000000000000004, as the score has always been worked out)


class QueryExplainer:
    """A query's explainer, made when a result is first explained (most searches explain nothing)."""

    __slots__ = ("words", "_made")

    def __init__(self, words: Sequence[QueryWord]) -> None:
        """Hold the query's analysed words."""
        self.words = words
        self._made: Explainer | None = None

    def get(self) -> Explainer:
        """The explainer of the query's searchable words, made once."""
        if self._made is None:
            self._made = Explainer(searchable_words(self.words))
        return self._made


@dataclass(slots=True)
class Candidate:
    """One result the engine found, on the 0-1 scale."""

    kind: str  # memory / chunk
    id: str
    doc_id: str  # a memory's is known once its row is read (search.Rows); a chunk's from its id
    text: str  # read from its row where it is needed: which chunk a memory is a statement of, the page
    hit: Hit
    explainer: QueryExplainer  # the query's, for the explanation
    vector: bool  # scored with its cosine (an embedder is configured)
    coverage: float
    order: int = 0  # insertion order in its collection (documents are processed in the order sent): the tie-break
    # The tag every chunk and memory of its document carries (face.doc_tag): a memory and a chunk of one
    # document share it, so that search groups them without reading which document each is of.
    group: str = ""
    rerank: float | None = None
    backed: float | None = None  # hybrid: the similarity of the other kind of the same source (search.rank)
    # The 0-1 score of this memory or chunk alone, worked out once (its hit, coverage and kind do not change
    # after it is made): ranking, the threshold and whyFewer ask it hundreds of times a search, and a field
    # is read sooner than a property.
    own_similarity: float = field(init=False, repr=False, compare=False, default=0.0)

    def __post_init__(self) -> None:
        """Score the candidate alone once."""
        self.own_similarity = self._score_alone()

    @property
    def similarity(self) -> float:
        """The 0-1 score (see the module doc); in hybrid, with the evidence of the memory or chunk of the
        same source (`ranking.either`)."""
        backed = self.backed
        return self.own_similarity if backed is None else either((self.own_similarity, backed))

    def _score_alone(self) -> float:
        """The 0-1 score of this memory or chunk alone, from its cosine and coverage."""
        if not self.vector:
            return self.coverage
        # max(x, 0.0) and min(x, 1.0) spelled as the comparisons they make (a NaN and -0.0 kept as they
        # keep them), without two builtin calls each: a search makes ~90 candidates.
        cosine = self.hit.similarity or 0.0
        if 0.0 > cosine:
            cosine = 0.0
        score = VECTOR_WEIGHT * cosine + _KEYWORD_WEIGHT * self.coverage
        if 0.0 > score:
            score = 0.0
        return 1.0 if 1.0 < score else score
