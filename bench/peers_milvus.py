"""Milvus Lite through pymilvus: a local .db, the BM25 function on the text, dense HNSW, RRF hybrid search."""

from __future__ import annotations

import logging

import numpy as np
from peers_common import K, PEER_CANDIDATES, RRF_K, Corpus, Peer, Search
from pymilvus import AnnSearchRequest, DataType, Function, FunctionType, MilvusClient, RRFRanker

M, EF_CONSTRUCTION, EF = 16, 200, 128
BATCH = 1000
COLLECTION = "memories"


class MilvusLite(Peer):
    """Milvus Lite 3 (pure Python, FAISS indexes per segment) behind pymilvus's MilvusClient."""

    name = "milvus-lite"

    def settings(self) -> str:
        """Schema and index settings."""
        return (f"MilvusClient on a local .db (Milvus Lite serves it over gRPC from a thread of this process); "
                f"dense: HNSW (M={M}, efConstruction={EF_CONSTRUCTION}) cosine, ef={EF}; text: the BM25 function "
                f"with Milvus Lite's standard analyzer (\\w+, lowercase, English stop words, no stemming: the only "
                f"one it has besides jieba) into a SPARSE_INVERTED_INDEX; tags: ARRAY<VARCHAR>, "
                f"array_contains(); top {PEER_CANDIDATES} per request, RRFRanker({RRF_K}); inserts of {BATCH}, "
                f"then flush and load")

    def load(self, corpus: Corpus) -> None:
        """Create the collection with its indexes, insert, flush, load."""
        logging.getLogger("milvus_lite").setLevel(logging.WARNING)
        self.client = MilvusClient(str(self.workdir / "milvus.db"))
        schema = MilvusClient.create_schema(auto_id=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("text", DataType.VARCHAR, max_length=65535, enable_analyzer=True)
        schema.add_field("tags", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=16, max_length=64)
        schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
        schema.add_field("dense", DataType.FLOAT_VECTOR, dim=corpus.vectors.shape[1])
        schema.add_function(Function(name="bm25", function_type=FunctionType.BM25, input_field_names=["text"],
                                     output_field_names=["sparse"]))
        index = self.client.prepare_index_params()
        index.add_index(field_name="dense", index_type="HNSW", metric_type="COSINE",
                        params={"M": M, "efConstruction": EF_CONSTRUCTION})
        index.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25", params={})
        self.client.create_collection(COLLECTION, schema=schema, index_params=index)
        vectors = corpus.vectors.astype(np.float32)
        for start in range(0, len(corpus), BATCH):
            stop = min(len(corpus), start + BATCH)
            self.client.insert(COLLECTION, [
                {"id": i, "text": corpus.texts[i], "tags": list(corpus.tags[i]), "dense": vectors[i].tolist()}
                for i in range(start, stop)
            ])
        self.client.flush(COLLECTION)
        self.client.load_collection(COLLECTION)

    def _search(self) -> Search:
        """A hybrid top-10 returning the text, as an application would."""
        def search(text: str, vector: np.ndarray, tag: str | None) -> list[int]:
            expr = f'array_contains(tags, "{tag}")' if tag else ""
            reqs = [
                AnnSearchRequest(data=[vector.tolist()], anns_field="dense", param={"ef": EF},
                                 limit=PEER_CANDIDATES, expr=expr),
                AnnSearchRequest(data=[text], anns_field="sparse", param={}, limit=PEER_CANDIDATES, expr=expr),
            ]
            hits = self.client.hybrid_search(COLLECTION, reqs, RRFRanker(RRF_K), limit=K, output_fields=["text"])
            return [int(h["id"]) for h in hits[0]]
        return search

    def variants(self) -> dict[str, Search]:
        """RRF (WeightedRanker would need per-query score scaling, which is what DBSF-like fusion does)."""
        return {"RRF": self._search()}

    def vector_top(self, vector: np.ndarray, k: int) -> list[int]:
        """The dense stage alone, at the ef hybrid queries use."""
        hits = self.client.search(COLLECTION, data=[vector.tolist()], anns_field="dense", limit=k,
                                  search_params={"params": {"ef": EF}}, output_fields=["id"])
        return [int(h["id"]) for h in hits[0]]

    def close(self) -> None:
        """Close the client (the embedded server stops when the process exits)."""
        self.client.close()
