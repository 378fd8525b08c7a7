"""What MaxScore saves in the keyword top-k's postings pass, at the k a search asks for.

Opens (or builds, --data) the synthetic space bench/peers.py loads for engram-index and runs each
SciFact claim's keyword plan through `TermCounts.matches`, unpruned (k = 0) and pruned for the top
10, 50 and 200 (the hybrid's keyword candidates), two rounds. Prints the CPU model, the pass's
thread-CPU p50 and mean per query, the postings entries MaxScore did not read, the documents it
hands to the top-k's pick, and the share of queries it pruned at all.

    python bench/maxscore.py --n 100000 --data DIR
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))

from engine import SPACE  # noqa: E402
from peers_common import cpu_model, synthetic_workload  # noqa: E402
from peers_engram import reused_space  # noqa: E402

from engram_index.engine.analyzer import query_words  # noqa: E402
from engram_index.engine.keyword import _EXACT_MARGIN  # noqa: E402
from engram_index.engine.keyword_query import query_plan, searchable_words  # noqa: E402


def main() -> None:
    """Load or reuse the space, then time the postings pass at each k."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--data", type=Path, required=True, help="the space's directory (built when missing)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--scifact", type=Path, default=_HERE.parents[1] / "shared" / "data" / "scifact")
    args = parser.parse_args()
    work = synthetic_workload(args.n, args.queries, args.scifact)
    spaces = reused_space(args.data, work.corpus)
    counts = spaces.index(SPACE).keyword.counts
    model, usable = cpu_model()
    print(f"CPU: {model} ({usable} usable cores); {args.n:,} memories, {len(work.query_texts)} queries")
    plans = [query_plan(searchable_words(query_words(q))) for q in work.query_texts]
    counts.inverted()  # built before timing, as a search's first keyword pass builds it
    for k in (0, 10, 50, 200):
        cpu, skipped, handed = [], [], []
        for _ in range(2):
            for plan in plans:
                began = time.thread_time()
                ords, _, _ = counts.matches(plan, None, k, _EXACT_MARGIN)
                cpu.append(time.thread_time() - began)
                skipped.append(counts.skipped)
                handed.append(ords.size)
        print(f"k={k:<3} ({'unpruned' if k == 0 else 'MaxScore'}): CPU p50 {np.median(cpu) * 1000:.3f} ms, "
              f"mean {np.mean(cpu) * 1000:.3f} ms; entries not read {np.mean(skipped):,.0f}; "
              f"handed to the pick {np.mean(handed):,.0f}; queries pruned {np.mean(np.array(skipped) > 0):.0%}")
    spaces.close()


if __name__ == "__main__":
    main()
