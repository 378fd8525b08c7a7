"""engram-index in-process: the record store and the engine's SpaceIndex, as the service runs them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from engine import MODEL, SPACE, ingest
from peers_common import Corpus, Peer, Search

from engram_index.engine.search import SpaceIndex
from engram_index.engine.types import Filters, SearchRequest
from engram_index.collections import Collections


def _ordinal(memory_id: str) -> int:
    """The corpus position in an id written by bench/engine.py's ingest (…/m0000042)."""
    return int(memory_id.rsplit("/", 1)[1][1:])


class Engram(Peer):
    """engram-index: SQLite records plus the in-memory vector index and tantivy keyword index."""

    name = "engram-index"

    def settings(self) -> str:
        """The engine as shipped."""
        return ("in-process `SpaceIndex` behind the SQLite record store (the service's write path); "
                "200 candidates per stage, convex fusion (z-scores, alpha 0.6); keyword index compacted "
                "after loading, as the background compaction does once writes go quiet")

    def load(self, corpus: Corpus) -> None:
        """Write through the real write path in batches of 1,000, then compact the keyword index."""
        self.spaces = Collections(self.workdir)
        self.spaces.ensure_collection(SPACE, MODEL)
        self.spaces.index(SPACE)
        ingest(self.spaces, corpus, len(corpus))
        self.spaces.maintain()
        self.index: SpaceIndex = self.spaces.index(SPACE)

    def _search(self, explain: bool) -> Search:
        """A hybrid top-10 search with or without explanations."""
        def search(text: str, vector: np.ndarray, tag: str | None) -> list[int]:
            req = SearchRequest(mode="hybrid", q=text, vector=vector, limit=10, explain=explain,
                                filters=Filters(tags=(tag,)) if tag else Filters())
            return [_ordinal(hit.document.id) for hit in self.index.search(req).hits]
        return search

    def variants(self) -> dict[str, Search]:
        """With explanations (what the service returns) and without (to show what they cost)."""
        return {"hybrid, explanations": self._search(True), "hybrid, no explanations": self._search(False)}

    def vector_top(self, vector: np.ndarray, k: int) -> list[int]:
        """The vector index's own top k (coarse scan and exact re-rank), as hybrid search uses it."""
        assert self.index.vectors is not None
        ids = self.index.columns.ids
        return [_ordinal(ids[int(o)]) for o in self.index.vectors.search(vector, k).ords]

    def close(self) -> None:
        """Commit and close the data directory."""
        self.spaces.close()


def reused_space(data: Path, corpus: Corpus) -> Collections:
    """The directory's collections, the synthetic space built in it first when the directory is missing."""
    if not data.exists():
        data.mkdir(parents=True)
        peer = Engram(data)
        peer.load(corpus)
        peer.close()
    return Collections(data)
