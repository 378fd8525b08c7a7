"""LanceDB embedded: a Lance table with an HNSW vector index, native BM25 full-text index, RRF reranker."""

from __future__ import annotations

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import FTS, HnswFlat, LabelList
from lancedb.rerankers import RRFReranker
from peers_common import K, PEER_CANDIDATES, RRF_K, Corpus, Peer, Search

M, EF_CONSTRUCTION, EF = 16, 150, 128


class LanceDB(Peer):
    """One LanceDB table in a local directory, searched in this process."""

    name = "lancedb"

    def settings(self) -> str:
        """Index settings."""
        return (f"IVF_HNSW_FLAT with one partition (one HNSW graph, m={M}, ef_construction={EF_CONSTRUCTION}) cosine, "
                f"ef={EF}; native FTS index (BM25; English stemming and stop words); LabelList index on tags, "
                f"array_has_any() prefilter; hybrid query with limit {PEER_CANDIDATES} per stage and "
                f"RRFReranker(K={RRF_K}), top {K} kept; loaded as one Arrow table, indexes built after")

    def load(self, corpus: Corpus) -> None:
        """Create the table from Arrow columns and build its three indexes."""
        dims = corpus.vectors.shape[1]
        flat = pa.array(corpus.vectors.astype(np.float32).ravel())
        table = pa.table({
            "id": pa.array(np.arange(len(corpus), dtype=np.int32)),
            "text": corpus.texts,
            "tags": pa.array([list(t) for t in corpus.tags], pa.list_(pa.string())),
            "vector": pa.FixedSizeListArray.from_arrays(flat, dims),
        })
        self.db = lancedb.connect(str(self.workdir / "lance"))
        self.table = self.db.create_table("memories", data=table)
        self.table.create_index("vector", config=HnswFlat(distance_type="cosine", num_partitions=1, m=M,
                                                          ef_construction=EF_CONSTRUCTION))
        self.table.create_index("text", config=FTS(language="English", stem=True, remove_stop_words=True))
        self.table.create_index("tags", config=LabelList())
        self.reranker = RRFReranker(K=RRF_K)

    def _search(self) -> Search:
        """A hybrid top-10 returning the text, as an application would."""
        def search(text: str, vector: np.ndarray, tag: str | None) -> list[int]:
            query = (self.table.search(query_type="hybrid").vector(vector).text(text).distance_type("cosine")
                     .ef(EF).limit(PEER_CANDIDATES).rerank(self.reranker).select(["id", "text"]))
            if tag:
                query = query.where(f"array_has_any(tags, ['{tag}'])", prefilter=True)
            return [int(i) for i in query.to_arrow()["id"].to_pylist()[:K]]
        return search

    def variants(self) -> dict[str, Search]:
        """The RRF reranker (LanceDB's default for hybrid queries)."""
        return {"RRF": self._search()}

    def vector_top(self, vector: np.ndarray, k: int) -> list[int]:
        """The vector stage alone, at the ef hybrid queries use."""
        hits = self.table.search(vector).distance_type("cosine").ef(EF).limit(k).select(["id"]).to_arrow()
        return [int(i) for i in hits["id"].to_pylist()]
