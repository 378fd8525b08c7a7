"""One hand-off from uvloop's event loop to a thread and back, each way woken as the standard library
does or through a pipe (kindgi/wakes.py): the round trip's wall time.

The loop submits a call (~50 µs of Python) to two threads (a ThreadPoolExecutor, or PipeThreads) and
awaits its result, handed back with call_soon_threadsafe or a LoopWake; `--trips` round trips per
variant, one at a time with a short pause between, in `--rounds` rounds alternating the variants.

    python bench/loop_wakes.py [--trips 3000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from engram_index.kindgi.wakes import LoopWakes, PipeThreads  # noqa: E402


def work() -> int:
    """About 50 µs of Python."""
    total = 0
    for i in range(2000):
        total += i
    return total


async def trips(threads: str, back: str, n: int) -> tuple[float, float, float]:
    """p50, p90 and p99 µs of n round trips."""
    loop = asyncio.get_running_loop()
    wakes = LoopWakes()
    wake = wakes.of(loop)
    executor: Executor = ThreadPoolExecutor(2) if threads == "ThreadPoolExecutor" else PipeThreads(2, "bench")
    walls = []
    for _ in range(n):
        answer: asyncio.Future[int] = loop.create_future()

        def job() -> None:
            result = work()
            if back == "call_soon_threadsafe":
                loop.call_soon_threadsafe(answer.set_result, result)
            else:
                wake.call(answer.set_result, result)

        began = time.perf_counter()
        executor.submit(job)
        await answer
        walls.append((time.perf_counter() - began) * 1e6)
        await asyncio.sleep(0.0005)
    executor.shutdown()
    wakes.close()
    walls.sort()
    return statistics.median(walls), walls[int(len(walls) * 0.9)], walls[int(len(walls) * 0.99)]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trips", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    print("| round | to the thread | back to the loop | p50 µs | p90 µs | p99 µs |\n|---|---|---|---:|---:|---:|")
    for k in range(args.rounds):
        for threads, back in (("ThreadPoolExecutor", "call_soon_threadsafe"), ("PipeThreads", "LoopWake"),
                              ("ThreadPoolExecutor", "LoopWake"), ("PipeThreads", "call_soon_threadsafe")):
            p50, p90, p99 = await trips(threads, back, args.trips)
            print(f"| {k + 1} | {threads} | {back} | {p50:.0f} | {p90:.0f} | {p99:.0f} |", flush=True)


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    uvloop.run(main())
