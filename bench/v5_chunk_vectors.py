"""Chunk vectors three ways: the model on the whole chunk, or its sentences' vectors pooled.

The face's memories are the document's sentences, so embedding each sentence once and pooling a
chunk's sentences would halve what ingest embeds. This measures what it costs in retrieval: the
judged SciFact abstracts plus random others, chunked as the face chunks them, vector-only retrieval
of the 300 claims (a document scores its best chunk), nDCG@10 and Recall@10 for each way (the
plain mean of the sentences' unit vectors, and the mean weighted by each sentence's tokens × its
unnormalised norm, which is what the face uses), and the cosine between the model's vector of each
chunk and the pooled ones, with the time each way took.

    python bench/v5_chunk_vectors.py [--docs 600] [--scifact DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from engram_index.embed.base import pool  # noqa: E402
from engram_index.embed.local import MiniLMEmbedder  # noqa: E402
from engram_index.supermemory.chunking import chunk, sentences  # noqa: E402


def ndcg_recall(scores: np.ndarray, relevant: list[set[int]]) -> tuple[float, float]:
    """Mean nDCG@10 and Recall@10 over queries (binary relevance)."""
    ndcgs, recalls = [], []
    for qi, rel in enumerate(relevant):
        top = np.argsort(-scores[qi])[:10]
        dcg = sum(1 / math.log2(r + 2) for r, d in enumerate(top) if d in rel)
        ideal = sum(1 / math.log2(r + 2) for r in range(min(len(rel), 10)))
        ndcgs.append(dcg / ideal)
        recalls.append(len(rel & set(top.tolist())) / len(rel))
    return float(np.mean(ndcgs)), float(np.mean(recalls))


def main() -> None:
    shared = Path(os.environ.get("ENGRAM_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=600)
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    args = parser.parse_args()
    corpus = [json.loads(line) for line in (args.scifact / "corpus.jsonl").open()]
    queries = [json.loads(line) for line in (args.scifact / "queries.jsonl").open()]
    judged = [line.split("\t")[:2] for line in (args.scifact / "qrels.tsv").read_text().splitlines()[1:]]
    wanted = list(dict.fromkeys(d for _, d in judged))
    rng = np.random.default_rng(3)
    others = [corpus[i]["_id"] for i in rng.permutation(len(corpus))]
    chosen = list(dict.fromkeys(wanted + others))[:max(args.docs, len(wanted))]
    by_id = {d["_id"]: d for d in corpus}
    index = {d: i for i, d in enumerate(chosen)}
    relevant: list[set[int]] = [set() for _ in queries]
    qrow = {q["_id"]: i for i, q in enumerate(queries)}
    for q, d in judged:
        if q in qrow and d in index:
            relevant[qrow[q]].add(index[d])
    texts = [by_id[d]["title"] + ". " + by_id[d]["text"] for d in chosen]
    model = MiniLMEmbedder()
    chunk_texts, chunk_doc, chunk_sents = [], [], []
    sent_texts: list[str] = []
    for di, text in enumerate(texts):
        spans = sentences(text)
        for c in chunk(text):
            chunk_texts.append(c.text)
            chunk_doc.append(di)
            rows = [s for s in spans if s.start >= c.start and s.end <= c.end]
            chunk_sents.append(list(range(len(sent_texts), len(sent_texts) + len(rows))))
            sent_texts += [s.text for s in rows]
    began = time.perf_counter()
    whole = model.embed_documents(chunk_texts)
    whole_s = time.perf_counter() - began
    began = time.perf_counter()
    sent = model.embed_documents(sent_texts)
    sent_s = time.perf_counter() - began
    pooled = np.stack([sent[rows].mean(axis=0) for rows in chunk_sents])
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    # Token-weighted: each sentence's mean-pooled (unnormalised) vector weighted by its tokens, as
    # the model's own mean over the chunk's tokens weighs them.
    units, weights = model.embed_documents_weighted(sent_texts)
    weighted = np.stack([pool(units[rows], weights[rows], units.shape[1]) for rows in chunk_sents])
    qv = model.embed_queries([q["text"] for q in queries])
    print(f"{len(chosen)} documents, {len(chunk_texts)} chunks, {len(sent_texts)} sentences;"
          f" load average {os.getloadavg()[0]:.1f}")
    print("\n| chunk vector | nDCG@10 | Recall@10 | embedding seconds |")
    print("|---|---|---|---|")
    for name, vectors, seconds in (("model on the whole chunk", whole, whole_s),
                                   ("mean of its sentences", pooled, sent_s),
                                   ("token-weighted mean of its sentences", weighted, sent_s)):
        sims = qv @ vectors.T
        per_doc = np.full((len(queries), len(chosen)), -1.0)
        for ci, di in enumerate(chunk_doc):
            per_doc[:, di] = np.maximum(per_doc[:, di], sims[:, ci])
        nd, rc = ndcg_recall(per_doc, relevant)
        print(f"| {name} | {nd:.4f} | {rc:.4f} | {seconds:.1f} |")
    for name, vectors in (("pooled", pooled), ("token-weighted", weighted)):
        agree = np.sum(whole * vectors, axis=1)
        print(f"cosine(whole, {name}) per chunk: p10 {np.percentile(agree, 10):.3f}, p50 {np.median(agree):.3f}")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
