"""The record store's page size: file size, write time and the fetch of a search's results.

Writes the same synthetic memories (bench/synth.py: SciFact sentences, 384-dimension float16
vectors, tags) into two fresh stores, one with SQLite's default 4 KB pages (as stores made
before this measurement have) and one with the 16 KB pages new stores get, in batches of 2,000
as an import does. Then fetches 10 random live memories at a time, as a search fetches its
results (without their vectors), with the caches warm and cold (a 64 MB buffer written before
each fetch, outside the timing, as other work does between searches). Thread CPU ms, median of
--fetches fetches per round, rounds alternating between the stores.

    python bench/store_pages.py [--n 100000] [--rounds 3] [--fetches 200]
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
sys.path.insert(0, str(_HERE.parent / "src"))

import http_load  # noqa: E402
from synth import SynthSpace, make_space  # noqa: E402

from engram_index.store.sqlite import Store  # noqa: E402


def fill(path: Path, page_size: int, synth: SynthSpace) -> tuple[Store, int, float]:
    """Make a store with this page size, write every memory; return it, its space id and the seconds taken."""
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA page_size={page_size}")  # before the first table: the store keeps it
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    store = Store(path)
    sid = store.ensure_collection(http_load.SPACE, http_load.MODEL).id
    began = time.perf_counter()
    for batch in http_load.memory_batches(synth):
        store.write(sid, batch)
    took = time.perf_counter() - began
    store._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # so that the file holds everything
    return store, sid, took


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fetches", type=int, default=200)
    parser.add_argument("--scifact", type=Path, default=_HERE.parents[1] / "shared" / "data" / "scifact")
    args = parser.parse_args()
    synth = make_space(args.n, scifact_dir=args.scifact, seed=1)
    flush = np.zeros(64 << 20, np.uint8)
    with tempfile.TemporaryDirectory(prefix="engram-pages-") as tmp:
        stores = {size: fill(Path(tmp) / f"p{size}.sqlite", size, synth) for size in (4096, 16384)}
        fetch: dict[tuple[int, bool], list[float]] = {}
        for r in range(args.rounds):
            for size, (store, sid, _) in stores.items():
                picks = random.Random(r)
                for cold in (False, True):
                    times = []
                    for _ in range(args.fetches):
                        ords = picks.sample(range(args.n), 10)
                        if cold:
                            np.add(flush, 1, out=flush)
                        began = time.thread_time()
                        store.documents(sid, ords, vectors=False)
                        times.append(time.thread_time() - began)
                    fetch.setdefault((size, cold), []).append(float(np.median(times)) * 1000)
        print(f"record store of {args.n:,} memories (384-dimension vectors), by page size;"
              f" fetch: 10 random memories, thread CPU ms, median of {args.fetches}, per round")
        print(f"  {'page':>6} {'file MB':>8} {'write s':>8}   {'fetch warm':<22} {'fetch cold':<22}")
        for size, (store, _, took) in stores.items():
            megabytes = store.path.stat().st_size / 1e6
            warm = " ".join(f"{v:.3f}" for v in fetch[size, False])
            chilled = " ".join(f"{v:.3f}" for v in fetch[size, True])
            print(f"  {size // 1024:>4} KB {megabytes:>8.0f} {took:>8.1f}   {warm:<22} {chilled:<22}")
            store.close()


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
