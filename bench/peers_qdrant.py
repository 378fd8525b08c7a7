"""Qdrant embedded (Qdrant Edge): dense HNSW + BM25 sparse vectors with IDF, fused by RRF or DBSF."""

from __future__ import annotations

import numpy as np
from peers_common import K, PEER_CANDIDATES, RRF_K, Corpus, Peer, Search
from qdrant_edge import (
    Bm25,
    Bm25Config,
    Distance,
    EdgeConfig,
    EdgeShard,
    EdgeSparseVectorParams,
    EdgeVectorParams,
    FieldCondition,
    Filter,
    Fusion,
    HnswIndexConfig,
    MatchValue,
    Modifier,
    PayloadSchemaType,
    Point,
    Prefetch,
    Query,
    QueryRequest,
    SearchParams,
    UpdateOperation,
)

M, EF_CONSTRUCT, HNSW_EF = 16, 100, 128
BATCH = 1000


class QdrantEdge(Peer):
    """One Edge Shard in this process: named dense and sparse vectors, the text and tags as payload."""

    name = "qdrant-edge"

    def settings(self) -> str:
        """Index settings."""
        return (f"dense: HNSW (m={M}, ef_construct={EF_CONSTRUCT}) cosine, hnsw_ef={HNSW_EF}; sparse: the package's "
                f"BM25 embedder (English stemming and stop words, k=1.2, b=0.75, avg_len={self.avg_len:.1f} measured "
                f"on the corpus) with the IDF modifier; keyword payload index on tags; top {PEER_CANDIDATES} per "
                f"prefetch, fused by RRF (k={RRF_K}) or DBSF; upserts of {BATCH}, then optimize() until done")

    def load(self, corpus: Corpus) -> None:
        """Upsert every memory with its dense and BM25 vectors, index tags, optimize."""
        probe = Bm25()
        sample = corpus.texts[:: max(1, len(corpus) // 2000)]
        # Query embeddings keep one entry per distinct token: a close, slightly low, document length.
        self.avg_len = float(np.mean([len(probe.embed_query(t).indices) for t in sample]))
        self.bm25 = Bm25(Bm25Config(avg_len=self.avg_len))
        config = EdgeConfig(
            vectors={"dense": EdgeVectorParams(size=corpus.vectors.shape[1], distance=Distance.Cosine)},
            sparse_vectors={"bm25": EdgeSparseVectorParams(modifier=Modifier.Idf)},
            hnsw_config=HnswIndexConfig(m=M, ef_construct=EF_CONSTRUCT, full_scan_threshold=10_000),
        )
        self.shard = EdgeShard.create(str(self.workdir / "shard"), config)
        self.shard.update(UpdateOperation.create_field_index("tags", PayloadSchemaType.Keyword))
        vectors = corpus.vectors.astype(np.float32)
        for start in range(0, len(corpus), BATCH):
            points = [
                Point(i, {"dense": vectors[i].tolist(), "bm25": self.bm25.embed_document(corpus.texts[i])},
                      {"text": corpus.texts[i], "tags": list(corpus.tags[i])})
                for i in range(start, min(len(corpus), start + BATCH))
            ]
            self.shard.update(UpdateOperation.upsert_points(points))
        self.shard.optimize()
        self.shard.flush()

    def _prefetches(self, text: str, vector: np.ndarray, tag: str | None) -> list[Prefetch]:
        """The dense and sparse stages, each filtered by the tag when there is one."""
        where = Filter(must=[FieldCondition("tags", match=MatchValue(tag))]) if tag else None
        return [
            Prefetch(limit=PEER_CANDIDATES, query=Query.Nearest(vector.tolist(), using="dense"), filter=where,
                     params=SearchParams(hnsw_ef=HNSW_EF)),
            Prefetch(limit=PEER_CANDIDATES, query=Query.Nearest(self.bm25.embed_query(text), using="bm25"),
                     filter=where),
        ]

    def _search(self, fusion: Fusion.Rrf | Fusion.Dbsf) -> Search:
        """A hybrid top-10 with the given fusion, returning payloads as an application would."""
        def search(text: str, vector: np.ndarray, tag: str | None) -> list[int]:
            req = QueryRequest(limit=K, prefetches=self._prefetches(text, vector, tag), query=fusion,
                               with_payload=True)
            return [int(p.id) for p in self.shard.query(req)]  # type: ignore[arg-type]
        return search

    def variants(self) -> dict[str, Search]:
        """RRF and distribution-based score fusion."""
        return {"RRF": self._search(Fusion.Rrf(k=RRF_K)), "DBSF": self._search(Fusion.Dbsf())}

    def vector_top(self, vector: np.ndarray, k: int) -> list[int]:
        """The dense stage alone, at the hnsw_ef hybrid queries use."""
        req = QueryRequest(limit=k, query=Query.Nearest(vector.tolist(), using="dense"),
                           params=SearchParams(hnsw_ef=HNSW_EF))
        return [int(p.id) for p in self.shard.query(req)]  # type: ignore[arg-type]

    def close(self) -> None:
        """Close the shard."""
        self.shard.close()
