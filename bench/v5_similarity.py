"""Where the v5 face's 0-1 similarity puts relevant and unrelated results, on SciFact's judged pairs.

The face scores a result `0.7 * max(cosine, 0) + 0.3 * keywordCoverage` (with an embedder) and
keeps it when that reaches `threshold` (0.3 by default). This prints, for the 339 judged
(claim, abstract) pairs and for as many random pairs, the spread of each part and of the score,
and the share of each kept at thresholds 0.2-0.6, from the reference all-MiniLM-L6-v2 vectors.

    python bench/v5_similarity.py [--scifact DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from engram_index.engine.analyzer import query_words  # noqa: E402
from engram_index.engine.explain import match_terms  # noqa: E402
from engram_index.engine.keyword import searchable_words  # noqa: E402
from engram_index.supermemory.candidates import VECTOR_WEIGHT  # noqa: E402


def coverage(words: list, text: str) -> float:  # type: ignore[type-arg]
    """A text's keyword coverage, each word weighing 1 (the face's, KeywordIndex.coverage, weighs them by idf)."""
    matched = {t.term for t in match_terms(words, text, (), None)}
    if not words:
        return 0.0
    return sum(1.0 if w.exact in matched or (w.stem and w.stem in matched)
               else 0.5 if any(p in matched for p in w.parts) else 0.0 for w in words) / len(words)


def main() -> None:
    shared = Path(os.environ.get("ENGRAM_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    args = parser.parse_args()
    corpus = [json.loads(line) for line in (args.scifact / "corpus.jsonl").open()]
    queries = [json.loads(line) for line in (args.scifact / "queries.jsonl").open()]
    docs = np.load(args.scifact / "corpus.minilm.f16.npy").astype(np.float32)
    qvecs = np.load(args.scifact / "queries.minilm.f16.npy").astype(np.float32)
    doc_row = {d["_id"]: i for i, d in enumerate(corpus)}
    query_row = {q["_id"]: i for i, q in enumerate(queries)}
    judged = [line.split("\t")[:2] for line in (args.scifact / "qrels.tsv").read_text().splitlines()[1:]]
    pairs = [(query_row[q], doc_row[d]) for q, d in judged if q in query_row and d in doc_row]
    rng = np.random.default_rng(7)
    random_pairs = [(int(rng.integers(len(queries))), int(rng.integers(len(corpus)))) for _ in pairs]

    def scores(which: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cos, cov = [], []
        for qi, di in which:
            words = searchable_words(query_words(queries[qi]["text"]))
            text = corpus[di]["title"] + " " + corpus[di]["text"]
            cos.append(float(qvecs[qi] @ docs[di]))
            cov.append(coverage(words, text))
        c, k = np.array(cos), np.array(cov)
        return c, k, VECTOR_WEIGHT * np.maximum(c, 0) + (1 - VECTOR_WEIGHT) * k

    print("| pairs | part | p10 | p50 | p90 |")
    print("|---|---|---|---|---|")
    results = {}
    for name, which in (("judged relevant", pairs), ("random", random_pairs)):
        cos, cov, sim = scores(which)
        results[name] = sim
        results[name + " keyword"] = cov
        for part, values in (("cosine", cos), ("keyword coverage", cov), ("similarity", sim)):
            p10, p50, p90 = np.percentile(values, [10, 50, 90])
            print(f"| {name} ({len(which)}) | {part} | {p10:.3f} | {p50:.3f} | {p90:.3f} |")
    print("\n| threshold | relevant kept | random kept | keyword only: relevant kept | random kept |")
    print("|---|---|---|---|---|")
    for t in (0.2, 0.3, 0.4, 0.5, 0.6):
        print(f"| {t} | {np.mean(results['judged relevant'] >= t):.1%} | {np.mean(results['random'] >= t):.1%} |"
              f" {np.mean(results['judged relevant keyword'] >= t):.1%} | {np.mean(results['random keyword'] >= t):.1%} |")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
