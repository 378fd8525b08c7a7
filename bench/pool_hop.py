"""The CPU of one hand-off to a thread and back, from an event loop: `SearchPool.run` of an empty search,
and a face's synchronous handler through `endpoints.in_thread` beside Starlette's `run_in_threadpool`.

Runs --n empty calls one at a time in --rounds alternating rounds (after a warm-up) on asyncio's loop
and on uvloop's, and prints each hand-off's median process CPU and wall time. Run it from two
revisions to compare them.

    python bench/pool_hop.py [--n 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from starlette.concurrency import run_in_threadpool  # noqa: E402

from engram_index.endpoints import in_thread  # noqa: E402
from engram_index.search_pool import SearchPool  # noqa: E402


async def timed(n: int, hop: Callable[[], Any]) -> tuple[float, float]:
    """Microseconds of process CPU and of wall time per awaited hand-off."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        await hop()
    return (time.process_time() - cpu) / n * 1e6, (time.perf_counter() - wall) / n * 1e6


async def hops(n: int, rounds: int) -> dict[str, tuple[float, float]]:
    """Each hand-off's median CPU and wall microseconds over `rounds` alternating rounds: the search pool's,
    the handlers' and Starlette's."""
    pool = SearchPool(2)
    kinds: dict[str, Callable[[], Any]] = {
        "SearchPool.run": lambda: pool.run(lambda: None),
        "endpoints.in_thread": lambda: in_thread(lambda: None),
        "starlette run_in_threadpool": lambda: run_in_threadpool(lambda: None)}
    try:
        for hop in kinds.values():  # warm: threads started
            await timed(200, hop)
        seen: dict[str, list[tuple[float, float]]] = {name: [] for name in kinds}
        for _ in range(rounds):
            for name, hop in kinds.items():
                seen[name].append(await timed(n, hop))
        return {name: (statistics.median(c for c, _ in got), statistics.median(w for _, w in got))
                for name, got in seen.items()}
    finally:
        pool.close()


def main() -> None:
    """Time the hand-off on each loop."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000, help="hand-offs per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    import uvloop

    runners: dict[str, Callable[[Coroutine[Any, Any, dict[str, tuple[float, float]]]], dict[str, tuple[float, float]]]] = {
        "asyncio": asyncio.run, "uvloop": uvloop.run}
    for name, run in runners.items():
        for what, (cpu, wall) in run(hops(args.n, args.rounds)).items():
            print(f"{name:8s} {what:28s} one hand-off: {cpu:6.1f} us CPU, {wall:6.1f} us wall")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
