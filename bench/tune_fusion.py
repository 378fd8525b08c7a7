"""How the identifier-part weight and the fusion were chosen: a grid on SciFact, tuned on one half.

For each weight of an identifier part (keyword_query.PART_WEIGHT, against 1 for the word), collect every
query's candidates once (top 200 by vector ∪ top 200 by BM25, each scored both ways), then
score each fusion on the even-numbered queries (the tuning half) and the odd ones (held out).

    python bench/tune_fusion.py --scifact ../shared/data/scifact
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from engram_index.engine import fusion  # noqa: E402
from engram_index.engine.analyzer import query_words  # noqa: E402
from engram_index.engine import keyword_query  # noqa: E402
from engram_index.engine.types import Document  # noqa: E402
from engram_index.evaluation import EVAL_SPACE, MINILM, load_scifact, ndcg_at  # noqa: E402
from engram_index.collections import Collections  # noqa: E402
from engram_index.store.sqlite import StoredDocument  # noqa: E402

WEIGHTS = [0.4, 0.6, 0.8, 1.0]
FUSIONS = {
    **{f"convex minmax a={a}": (lambda s, b, a=a: fusion.convex(s, b, a, "minmax")) for a in (0.5, 0.6)},
    **{f"convex zscore a={a}": (lambda s, b, a=a: fusion.convex(s, b, a, "zscore")) for a in (0.5, 0.6, 0.7)},
    "rrf k=60": fusion.rrf,
    "keyword only": lambda s, b: b,
    "vector only": lambda s, b: s,
}


def main() -> None:
    """Print nDCG@10 (even / odd / all) per part weight and fusion."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scifact", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact")
    args = parser.parse_args()
    corpus, queries, qrels = load_scifact(args.scifact)
    doc_vecs = np.load(args.scifact / "corpus.minilm.f16.npy")
    query_vecs = np.load(args.scifact / "queries.minilm.f16.npy").astype(np.float32)
    judged = [(i, q) for i, q in enumerate(queries) if q["_id"] in qrels]
    with tempfile.TemporaryDirectory() as tmp:
        spaces = Collections(Path(tmp))
        spaces.ensure_collection(EVAL_SPACE, MINILM)
        spaces.write(EVAL_SPACE, [
            StoredDocument(Document(id=d["_id"], author="did:plc:eval", text=(d["title"] + " " + d["text"]).strip(),
                                    created_ms=i, vector=doc_vecs[i].astype("<f2").tobytes()))
            for i, d in enumerate(corpus)
        ])
        index = spaces.index(EVAL_SPACE)
        ids = index.columns.ids
        print(f"{'part weight':<16}{'fusion':<22}{'even':>8}{'odd':>8}{'all':>8}")
        for weight in WEIGHTS:
            keyword_query.PART_WEIGHT = weight
            pools = []
            for i, q in judged:
                words = query_words(q["text"])
                vec = index.vectors.search(query_vecs[i], 200)
                kw_ords, _ = index.keyword.search(words, 200)
                ords = np.unique(np.concatenate([vec.ords, kw_ords]))
                pools.append((q["_id"], ords, index.vectors.similarities(query_vecs[i], ords),
                              index.keyword.scores(words, ords.tolist())))
            for name, fuse in FUSIONS.items():
                per_query = []
                for qid, ords, sims, bm25 in pools:
                    top = ords[np.argsort(-fuse(sims, bm25), kind="stable")[:10]]
                    per_query.append(ndcg_at([ids[o] for o in top], qrels[qid]))
                even, odd = np.mean(per_query[0::2]), np.mean(per_query[1::2])
                print(f"{weight:<16}{name:<22}{even:>8.4f}{odd:>8.4f}{np.mean(per_query):>8.4f}")
        spaces.close()


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
