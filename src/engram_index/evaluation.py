"""Retrieval quality on SciFact (BEIR test split): nDCG@10 and Recall@100 per search method."""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from engram_index.engine.types import Document, ModelIdentity, SearchRequest
from engram_index.collections import Collections
from engram_index.store.base import StoredDocument

EVAL_SPACE = "at://did:plc:evaluation0000000000000000/space/garden.engram.space/scifact"
MINILM = ModelIdentity(
    "all-MiniLM-L6-v2",
    "sha256:53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    384,
)
METHODS = {
    "keyword": ("keyword", "convex"),
    "vector": ("vector", "convex"),
    "hybrid_convex": ("hybrid", "convex"),
    "hybrid_rrf": ("hybrid", "rrf"),
}


def ndcg_at(ranked: list[str], relevant: dict[str, int], k: int = 10) -> float:
    """nDCG@k with graded gains and log2 discounts (as BEIR / trec_eval compute it)."""
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranked: list[str], relevant: dict[str, int], k: int = 100) -> float:
    """The share of relevant documents found in the top k."""
    hits = sum(1 for d in ranked[:k] if relevant.get(d, 0) > 0)
    return hits / len(relevant) if relevant else 0.0


def load_scifact(
    data_dir: Path,
) -> tuple[list[dict[str, str]], list[dict[str, str]], dict[str, dict[str, int]]]:
    """The corpus, the queries and the relevance judgements."""
    corpus = [json.loads(line) for line in open(data_dir / "corpus.jsonl", encoding="utf-8")]
    queries = [json.loads(line) for line in open(data_dir / "queries.jsonl", encoding="utf-8")]
    qrels: dict[str, dict[str, int]] = {}
    with open(data_dir / "qrels.tsv", encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            qid, did, score = line.rstrip("\n").split("\t")
            qrels.setdefault(qid, {})[did] = int(score)
    return corpus, queries, qrels


def evaluate(
    data_dir: Path,
    progress: Callable[[str, int, int], None] | None = None,
    query_ids: set[str] | None = None,
    store: str | None = None,
    content_only: bool = True,
    vectors: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, dict[str, float]]:
    """Import SciFact with its reference vectors (or `vectors`: corpus and query rows of another embedder, e.g.
    bench/embed_int8.py's) into a temporary space (of `store`, when given) and score each method; the keyword
    side searches the query's content words as the faces do (ranking.content_query) unless `content_only` is
    False."""
    from engram_index.ranking import content_query, same_source, search

    corpus, queries, qrels = load_scifact(data_dir)
    if vectors is None:
        doc_vecs = np.load(data_dir / "corpus.minilm.f16.npy")
        query_vecs = np.load(data_dir / "queries.minilm.f16.npy").astype(np.float32)
    else:
        doc_vecs, query_vecs = vectors[0], np.asarray(vectors[1], np.float32)
    with tempfile.TemporaryDirectory(prefix="engram-eval-") as tmp:
        spaces = Collections(Path(tmp), store=store)
        try:
            spaces.ensure_collection(EVAL_SPACE, MINILM)
            batch = [
                StoredDocument(
                    Document(
                        id=doc["_id"],
                        author="did:plc:evaluation0000000000000000",
                        text=(doc["title"] + " " + doc["text"]).strip(),
                        created_ms=i,
                        vector=doc_vecs[i].astype("<f2").tobytes(),
                    )
                )
                for i, doc in enumerate(corpus)
            ]
            spaces.write(EVAL_SPACE, batch)
            index = spaces.index(EVAL_SPACE)
            judged = [
                (i, q) for i, q in enumerate(queries)
                if q["_id"] in qrels and (query_ids is None or q["_id"] in query_ids)
            ]
            out: dict[str, dict[str, float]] = {}
            for name, (mode, fusion) in METHODS.items():
                ndcg: list[float] = []
                recall: list[float] = []
                for n, (i, q) in enumerate(judged):
                    req = SearchRequest(
                        mode=mode,  # type: ignore[arg-type]
                        q=content_query(q["text"]) if content_only else q["text"],
                        vector=query_vecs[i],
                        limit=100,
                        fusion=fusion,  # type: ignore[arg-type]
                        explain=False,
                    )
                    # Through the ranking core, as garden.engram searches (context needs a source: none here).
                    ranked = [h.document.id for h in search(index, req, same_source).hits]
                    ndcg.append(ndcg_at(ranked, qrels[q["_id"]]))
                    recall.append(recall_at(ranked, qrels[q["_id"]]))
                    if progress is not None:
                        progress(name, n + 1, len(judged))
                out[name] = {
                    "ndcg@10": round(float(np.mean(ndcg)), 4),
                    "recall@100": round(float(np.mean(recall)), 4),
                }
            return out
        finally:
            spaces.close()
