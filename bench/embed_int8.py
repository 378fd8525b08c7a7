"""The int8 all-MiniLM-L6-v2 beside the float32 one, in one interleaved run on one machine.

Prints: thread-CPU p50 of one SciFact query embedded alone (the two models alternating, so that
both see the same machine), corpus texts per CPU-second, load time, cosine of the int8 query
vectors to the float32 reference, and SciFact nDCG@10 / Recall@100 of dense and hybrid search with
each model's own corpus and query vectors (the engine's path, as `engram-index eval`).

    python bench/embed_int8.py [--rounds 3] [--corpus 5183] [--no-eval] [--scifact DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from engram_index.embed.local import MiniLMEmbedder  # noqa: E402
from engram_index.evaluation import evaluate  # noqa: E402


def query_cpu_ms(model: MiniLMEmbedder, queries: list[str]) -> list[float]:
    """Thread-CPU ms of each query embedded alone."""
    out = []
    for q in queries:
        t = time.thread_time()
        model.embed_queries([q])
        out.append((time.thread_time() - t) * 1000)
    return out


def main() -> None:
    shared = Path(os.environ.get("ENGRAM_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the two models")
    parser.add_argument("--corpus", type=int, default=5183, help="corpus texts embedded for nDCG (all: 5183)")
    parser.add_argument("--no-eval", action="store_true", help="skip the SciFact quality runs")
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    args = parser.parse_args()
    queries = [json.loads(line)["text"] for line in (args.scifact / "queries.jsonl").open()]
    corpus = [(d["title"] + " " + d["text"]).strip()
              for d in map(json.loads, (args.scifact / "corpus.jsonl").open())]
    models, loads = {}, {}
    for name, int8 in (("float32", False), ("int8", True)):
        t = time.perf_counter()
        models[name] = MiniLMEmbedder(int8=int8)
        loads[name] = time.perf_counter() - t
    print(f"load average {os.getloadavg()[0]:.1f} at start")
    cpu: dict[str, list[float]] = {name: [] for name in models}
    docs_per_cpu_s: dict[str, list[float]] = {name: [] for name in models}
    sample = corpus[:200]
    for _ in range(args.rounds):
        for name, model in models.items():
            cpu[name] += query_cpu_ms(model, queries)
            t = time.thread_time()
            model.embed_documents(sample)
            docs_per_cpu_s[name].append(len(sample) / (time.thread_time() - t))
    reference = np.load(args.scifact / "queries.minilm.f32.npy").astype(np.float64)
    got = models["int8"].embed_queries(queries).astype(np.float64)
    cos = (got * reference).sum(1) / np.linalg.norm(reference, axis=1) / np.linalg.norm(got, axis=1)
    print("\n| model | one query: p50 CPU ms | corpus texts per CPU-s | load s |\n|---|---:|---:|---:|")
    for name in models:
        print(f"| {models[name].identity.model} | {statistics.median(cpu[name]):.2f} |"
              f" {statistics.median(docs_per_cpu_s[name]):.0f} | {loads[name]:.1f} |")
    ratio = statistics.median(cpu["float32"]) / statistics.median(cpu["int8"])
    print(f"\nint8 vs float32: one query {ratio:.2f}x cheaper; cosine of int8 query vectors to the reference:"
          f" min {cos.min():.4f}, mean {cos.mean():.4f}")
    if not args.no_eval:
        print("\n| vectors | dense nDCG@10 | hybrid (convex) nDCG@10 | hybrid Recall@100 |\n|---|---:|---:|---:|")
        runs = {"reference float32 (../shared/data/scifact)": None}
        n = min(args.corpus, len(corpus))
        for name, model in models.items():
            runs[f"{model.identity.model}, embedded here"] = (
                model.embed_documents(corpus[:n]).astype("<f2"), model.embed_queries(queries))
        for label, vectors in runs.items():
            if vectors is not None and n < len(corpus):
                continue  # a partial corpus cannot be scored against the full judgements
            scores = evaluate(args.scifact, vectors=vectors)
            print(f"| {label} | {scores['vector']['ndcg@10']:.4f} | {scores['hybrid_convex']['ndcg@10']:.4f} |"
                  f" {scores['hybrid_convex']['recall@100']:.4f} |", flush=True)
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
