"""What the exact keyword top-k costs against the tantivy window it replaced, on one synthetic space.

Keyword-only search took tantivy's top max(5 x limit, 50) by tantivy's own sum and re-scored them
with our BM25; it now scores every document holding a query term over the term counts' postings
(engine/termcounts.py) and re-scores the best. For 200 SciFact claims against n synthetic memories
(compacted, as the background pass leaves a quiet space), per limit: p50 / p99 ms of each, and how
many queries' top-k the window got wrong (a document missing or out of order); then the postings'
inversion time and size.

    python bench/keyword_exact.py --n 100000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers_common import cpu_model  # noqa: E402
from synth import keyword_collection, make_queries, make_space  # noqa: E402

from engram_index.engine.analyzer import QueryWord, query_words  # noqa: E402
from engram_index.engine.search import SpaceIndex  # noqa: E402

SPACE = "at://did:plc:kwbench/space/garden.engram.space/exact"


def timed(fn: Callable[[int], object], runs: int, warmup: int = 20) -> tuple[float, float]:
    """p50 and p99 milliseconds of fn(i) over i in range(runs), after warm-up calls."""
    for i in range(warmup):
        fn(i % runs)
    samples = []
    for i in range(runs):
        began = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - began)
    return float(np.percentile(samples, 50) * 1000), float(np.percentile(samples, 99) * 1000)


def window_top(index: SpaceIndex, words: list[QueryWord], limit: int) -> list[tuple[int, float]]:
    """The replaced path: tantivy's best max(5 x limit, 50), re-scored by the term counts, ordered."""
    ords, scores = index.keyword.search(words, max(5 * limit, 50))
    top = index._order(ords, scores, limit)
    return [(int(ords[i]), float(scores[i])) for i in top]


def exact_top(index: SpaceIndex, words: list[QueryWord], limit: int) -> list[tuple[int, float]]:
    """The path now: every holder of a query term scored over the postings, the best re-scored, ordered."""
    ords, scores = index.keyword.exact_top(words, limit)
    top = index._order(ords, scores, limit)
    return [(int(ords[i]), float(scores[i])) for i in top]


def main() -> None:
    """Build the space through the real write path, compact it, measure both paths."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--limits", default="10,100")
    parser.add_argument("--scifact", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact")
    args = parser.parse_args()
    synth = make_space(args.n, scifact_dir=args.scifact, seed=1)
    texts, _ = make_queries(synth, 200, seed=2)
    words = [query_words(t) for t in texts]
    model, usable = cpu_model()
    print(f"CPU: {model} ({usable} usable cores); {args.n:,} memories, {len(words)} SciFact claims")
    with tempfile.TemporaryDirectory() as tmp:
        spaces = keyword_collection(Path(tmp), SPACE, synth, args.n)
        spaces.maintain()
        index = spaces.index(SPACE)
        counts = index.keyword.counts
        builds = []
        for _ in range(5):
            counts._postings = None
            began = time.perf_counter()
            postings, _, _ = counts.inverted()
            builds.append(time.perf_counter() - began)
        size = postings.starts.nbytes + postings.ords.nbytes + postings.tfs.nbytes
        print(f"postings: inverted in {np.median(builds) * 1000:.1f} ms (median of 5), {size / 1e6:.1f} MB, "
              f"{size / args.n:.0f} bytes a memory")
        print(f"{'limit':>6} {'window p50 / p99 ms':>22} {'exact p50 / p99 ms':>22} {'window wrong':>14}")
        for limit in (int(x) for x in args.limits.split(",")):
            wrong = sum(window_top(index, w, limit) != exact_top(index, w, limit) for w in words)
            window = timed(lambda i: window_top(index, words[i], limit), len(words))
            exact = timed(lambda i: exact_top(index, words[i], limit), len(words))
            print(f"{limit:>6} {window[0]:>13.2f} / {window[1]:<6.2f} {exact[0]:>13.2f} / {exact[1]:<6.2f}"
                  f" {wrong:>6} of {len(words)}")
        spaces.close()


if __name__ == "__main__":
    main()
