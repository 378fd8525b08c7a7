"""An erasure's scrub of the Kindgi face's kept answers: the time to withhold every kept answer naming any
of N fact ids, in process, over the answers a bench/retrieve.py directory holds.

Every keyed request's answer is kept for a day (Idempotency-Key replays), so a directory that served
bench/retrieve.py's runs keeps ~100k of them, most of them retrieves' answers of ~7 KB. Opens such a
directory (`--data DIR/n100000`; give it a copy: the scrub rewrites the answers it matches) and times
`Idempotency.withhold` of `--ids` fact ids (of the tenant's facts, so each names kept answers), a
fresh set for each of `--rounds` rounds. `--src` picks the checkout whose code runs.

    python bench/kindgi_scrub.py --data DIR/n100000 [--ids 1,10] [--rounds 2] [--src CHECKOUT]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))

from in_process import parsed  # noqa: E402


def main() -> None:
    """Time each scrub and print the table."""
    args = parsed(__doc__, ids="1,10", rounds=2)
    from engram_index.collections import Collections
    from engram_index.kindgi.idempotency import Idempotency

    collections = Collections(args.data)
    kept = Idempotency(collections.store)
    try:
        query = collections.store.query
        answers, size = query("SELECT count(*), sum(length(body)) FROM kindgi_idempotency")[0]
        sizes = [int(n) for n in args.ids.split(",")]
        ids = [r[0] for r in query("SELECT fact_id FROM kindgi_revisions WHERE tenant='bench' ORDER BY fact_id"
                                   " LIMIT ?", (sum(sizes) * args.rounds,))]
        print(f"\n{answers:,} kept answers ({size / 1e6:,.0f} MB); `{args.src.resolve().name}`'s code\n")
        print("| fact ids withheld at once | seconds, each round | median |\n|---:|---|---:|")
        for n in sizes:
            spent = []
            for _ in range(args.rounds):
                chosen, ids = ids[:n], ids[n:]
                began = time.perf_counter()
                kept.withhold(chosen)
                spent.append(time.perf_counter() - began)
            print(f"| {n} | {', '.join(f'{s:.2f}' for s in spent)} | {statistics.median(spent):.2f} |")
    finally:
        kept.close()
        collections.close()


if __name__ == "__main__":
    main()
