"""The coarse scan's loops side by side: `nearest` on each loop this CPU runs, in one process.

The compiled scan has up to four loops (AVX-512 VPOPCNTDQ, AVX2, popcnt, portable), chosen at run
time; `use_avx512`, `use_avx2` and `use_portable` hold it to the lower ones. For n random sign codes
of each width (the kernel's cost does not depend on the values), each round runs `nearest` (the
distances, the cut and the rows under it: the coarse stage of a hybrid search, 1,032 rows kept) once
on every loop, in a new order each round, with the caches warm (the same codes just read) and with
them cold (a 64 MB buffer written before the call, as a search's other stages leave them). Prints
the CPU model and each loop's median thread-CPU µs a call, and its ratio to the popcnt loop's.

    python bench/scan_loops.py [--n 100000] [--widths 48,96] [--rounds 200]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from machine import print_machine  # noqa: E402

from engram_index.engine import _kernels  # noqa: E402

KEPT = 1032  # the pool a k=10 hybrid search keeps at 100k rows


def hold(loop: str) -> None:
    """Hold the scan to `loop` ("fastest", "avx2", "popcnt" or "portable")."""
    _kernels.use_portable(loop == "portable")
    _kernels.use_avx512(loop == "fastest")
    _kernels.use_avx2(loop in ("fastest", "avx2"))


def loops_here() -> dict[str, str]:
    """Each distinct scan loop this CPU runs, by its name: the setting that holds the scan to it."""
    found: dict[str, str] = {}
    for setting in ("fastest", "avx2", "popcnt", "portable"):
        hold(setting)
        found.setdefault(_kernels.loops()["scan"], setting)
    hold("fastest")
    return found


def timed(call: Callable[[], object]) -> float:
    """One call's thread CPU µs."""
    start = time.thread_time_ns()
    call()
    return (time.thread_time_ns() - start) / 1000


def main() -> None:
    """Time every loop on every width, warm and cold; print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--widths", default="48,96", help="bytes a row (48: 384 dimensions)")
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    print_machine()
    loops = loops_here()
    rng = np.random.default_rng(7)
    flush = np.zeros(64 << 20, dtype=np.uint8)
    out = np.empty(KEPT, dtype=np.int64)
    print(f"\n`nearest` over {args.n:,} random codes, {KEPT:,} kept, median thread-CPU µs of {args.rounds} rounds")
    print("\n| width (bytes) | loop | warm µs | cold µs | warm ÷ popcnt | cold ÷ popcnt |")
    print("|---:|---|---:|---:|---:|---:|")
    try:
        for width in [int(w) for w in args.widths.split(",")]:
            codes = rng.integers(0, 256, (args.n, width), dtype=np.uint8)
            query = rng.integers(0, 256, width, dtype=np.uint8)
            warm: dict[str, list[float]] = {name: [] for name in loops}
            cold: dict[str, list[float]] = {name: [] for name in loops}
            order = list(loops)
            for _ in range(args.rounds):
                random.shuffle(order)
                for name in order:
                    hold(loops[name])
                    flush[::64] += 1
                    cold[name].append(timed(lambda: _kernels.nearest(query, codes, None, out)))
                    warm[name].append(timed(lambda: _kernels.nearest(query, codes, None, out)))
            base_warm = statistics.median(warm.get("popcnt", warm[order[0]]))
            base_cold = statistics.median(cold.get("popcnt", cold[order[0]]))
            for name in loops:
                w, c = statistics.median(warm[name]), statistics.median(cold[name])
                print(f"| {width} | {name} | {w:,.1f} | {c:,.1f} | {w / base_warm:.2f} | {c / base_cold:.2f} |")
    finally:
        hold("fastest")


if __name__ == "__main__":
    main()
