"""Hybrid search with its keyword side from tantivy's window (before) or the exact top-n (now), in one process.

Loads one synthetic space as bench/peers.py does (engram-index's adapter), then runs the same
hybrid top-10 queries with each keyword side in turn, alternating, several rounds, with and without
explanations: wall-clock p50 ms per round. Alternating in one process keeps the machine's state
(other work, caches) about the same for both, which separate runs on a shared machine do not.

    python bench/hybrid_keyword_ab.py --n 100000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers_common import cpu_model, synthetic_workload  # noqa: E402
from peers_engram import Engram  # noqa: E402

from engram_index.engine.analyzer import QueryWord  # noqa: E402
from engram_index.engine.types import SearchRequest  # noqa: E402


def main() -> None:
    """Load, then time both keyword sides alternately."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scifact", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact")
    args = parser.parse_args()
    work = synthetic_workload(args.n, args.queries, args.scifact)
    with tempfile.TemporaryDirectory() as tmp:
        peer = Engram(Path(tmp))
        peer.load(work.corpus)
        index, keyword = peer.index, peer.index.keyword
        exact = keyword.exact_top_and_score

        def window(words: list[QueryWord], k: int, mask: np.ndarray | None, candidates: np.ndarray) -> tuple[
                np.ndarray, np.ndarray, np.ndarray]:
            """The replaced keyword side: tantivy's top k by its own sum, re-scored (no filters here)."""
            return keyword.search_and_score(words, k, None, candidates, None)

        def p50(explain: bool) -> float:
            """The median wall-clock ms of the hybrid top-10 over the queries."""
            samples = []
            for text, vector in zip(work.query_texts, work.query_vectors):
                req = SearchRequest(mode="hybrid", q=text, vector=vector, limit=10, explain=explain)
                began = time.perf_counter()
                index.search(req)
                samples.append(time.perf_counter() - began)
            return float(np.median(samples) * 1000)

        model, usable = cpu_model()
        print(f"CPU: {model} ({usable} usable cores); {args.n:,} memories, {len(work.query_texts)} queries")
        p50(True)  # warm-up
        rows: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            for name, side in (("tantivy window (before)", window), ("exact top-n (now)", exact)):
                keyword.exact_top_and_score = side  # type: ignore[method-assign]
                rows.setdefault(f"{name}, explanations", []).append(p50(True))
                rows.setdefault(f"{name}, no explanations", []).append(p50(False))
        keyword.exact_top_and_score = exact  # type: ignore[method-assign]
        for name, values in rows.items():
            print(f"{name:42} " + " / ".join(f"{v:.2f}" for v in values))
        peer.close()


if __name__ == "__main__":
    main()
