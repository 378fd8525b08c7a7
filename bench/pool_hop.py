"""The CPU of one hand-off to the search pool and back: `SearchPool.run` of an empty search, from an event loop.

Runs --n empty searches one at a time (after a warm-up) on asyncio's loop and on uvloop's, and
prints the process CPU and the wall time per hand-off. Run it from two revisions to compare them.

    python bench/pool_hop.py [--n 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from engram_index.search_pool import SearchPool  # noqa: E402


async def hops(n: int) -> tuple[float, float]:
    """Microseconds of process CPU and of wall time per empty search handed to the pool."""
    pool = SearchPool(2)
    try:
        for _ in range(200):
            await pool.run(lambda: None)
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(n):
            await pool.run(lambda: None)
        return (time.process_time() - cpu) / n * 1e6, (time.perf_counter() - wall) / n * 1e6
    finally:
        pool.close()


def main() -> None:
    """Time the hand-off on each loop."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=3000)
    args = parser.parse_args()
    import uvloop

    runners: dict[str, Callable[[Coroutine[Any, Any, tuple[float, float]]], tuple[float, float]]] = {
        "asyncio": asyncio.run, "uvloop": uvloop.run}
    for name, run in runners.items():
        cpu, wall = run(hops(args.n))
        print(f"{name:8s} one hand-off: {cpu:6.1f} us CPU, {wall:6.1f} us wall")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
