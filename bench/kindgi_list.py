"""Kindgi listings at 100k facts, in process: list mode's (and GET /v1/memory/facts') pages, now and as of
a time, as the measured reader of bench/retrieve.py sees them (a user holding 3 of its 10 projects).

Opens a data directory filled by bench/retrieve.py (`--data DIR/n100000`; give it a copy: the checkout's
migrations run on it) and times `Facts.page` for the reader: the newest page, the page after it (its
cursor), and the newest page as of three times (the newest fact's, and a third and two thirds of the way
through the facts' creation times). Prints, per listing, the p50 and p90 ms of `--rounds` calls after
one that warms it. bench/retrieve.py's write measurements fill a project the reader does not hold, so
the newest facts of a directory it measured often are ones this reader may not see. `--src` picks
the checkout whose code runs.

    python bench/kindgi_list.py --data DIR/n100000 [--rounds 50] [--limit 10] [--src CHECKOUT]
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
    """Time each listing and print the table."""
    args = parsed(__doc__, rounds=50, limit=10)
    from engram_index.collections import Collections
    from engram_index.kindgi.auth import Principal
    from engram_index.kindgi.facts import Facts
    from engram_index.kindgi.schema import migrate

    collections = Collections(args.data)
    try:
        migrate(collections.store)
        facts = Facts(collections, None)
        reader = Principal("bench", "bench", user="u0", projects=frozenset({"p0", "p1", "p2"}))
        first, last = collections.store.query(
            "SELECT min(created_ms), max(created_ms) FROM kindgi_revisions WHERE tenant='bench'")[0]
        _, cursor = facts.page(reader, limit=args.limit)
        listings = {
            "newest page": {},
            "the page after it (cursor)": {"cursor": cursor},
            "as of the newest fact": {"as_of": last},
            "as of two thirds through": {"as_of": first + 2 * (last - first) // 3},
            "as of a third through": {"as_of": first + (last - first) // 3},
        }
        print(f"\n{collections.store.query('SELECT count(*) FROM kindgi_revisions')[0][0]:,} revisions;"
              f" `{args.src.resolve().name}`'s code\n")
        print("| listing | p50 ms | p90 ms |\n|---|---:|---:|")
        for label, options in listings.items():
            facts.page(reader, limit=args.limit, **options)  # type: ignore[arg-type]
            spent = []
            for _ in range(args.rounds):
                began = time.perf_counter()
                facts.page(reader, limit=args.limit, **options)  # type: ignore[arg-type]
                spent.append((time.perf_counter() - began) * 1000)
            p90 = statistics.quantiles(spent, n=10)[-1]
            print(f"| {label} | {statistics.median(spent):.2f} | {p90:.2f} |")
    finally:
        collections.close()


if __name__ == "__main__":
    main()
