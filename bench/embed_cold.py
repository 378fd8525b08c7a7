"""A query's embedding when the model's weights are not in the CPU's caches: in a loop, and after a pause.

The ratio goals of issue 25 divide a served search's p50 by the engine's and the embedding's own p50s,
each timed in a loop of its own, which keeps the model's weights and the index's arrays in the CPU's
caches. A served request finds them there only if nothing else ran since the last one. This times the
int8 MiniLM face embedder's `embed_queries` (thread CPU, one query, SciFact claims none repeated) in a
tight loop, then with a pause between queries (sleeping, or spinning so the core never idles), and
after reading `--thrash` MB of other memory between queries, the rounds alternating, so that each
condition meets the machine's load alike. It also times a hand-off to a thread of a pool (a served
request makes two: to its embedding thread, and back to the event loop) right after the thread's last
task, and after it idled.

    python bench/embed_cold.py [--queries 200] [--rounds 3] [--thrash 64] [--scifact DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
sys.path.insert(0, str(_HERE.parent / "src"))

from machine import print_machine  # noqa: E402


def _spin(seconds: float) -> None:
    """Keep the core busy (touching almost no memory) for `seconds`."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def main() -> None:
    """Time each condition, alternating rounds, and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--thrash", type=int, default=64, help="MB read between queries in the thrash condition")
    shared = Path(os.environ.get("ENGRAM_SHARED", _HERE.parents[1] / "shared"))
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    args = parser.parse_args()
    print_machine()
    import numpy as np

    from engram_index.embed.local import MiniLMEmbedder

    model = MiniLMEmbedder(int8=True)
    claims = [json.loads(line)["text"] for line in (args.scifact / "queries.jsonl").open()]
    other = np.ones(args.thrash << 20, np.uint8)
    conditions: list[tuple[str, Callable[[], object]]] = [
        ("a tight loop", lambda: None),
        ("1 ms asleep before each", lambda: time.sleep(0.001)),
        ("3 ms asleep before each", lambda: time.sleep(0.003)),
        ("10 ms asleep before each", lambda: time.sleep(0.010)),
        ("10 ms spinning before each", lambda: _spin(0.010)),
        (f"{args.thrash} MB read before each", lambda: int(other.sum(dtype=np.uint64))),
    ]
    cpu: dict[str, list[float]] = {name: [] for name, _ in conditions}
    model.embed_queries(["a warm-up query"])
    for r in range(args.rounds):
        for name, before in conditions:
            for q in claims[r * args.queries:(r + 1) * args.queries] or claims[:args.queries]:
                before()
                t = time.thread_time()
                model.embed_queries([q])
                cpu[name].append((time.thread_time() - t) * 1000)
    # A hand-off to a thread that idled (as a served request's to its embedding thread, and back to the event
    # loop): from the submission to the moment the task runs.
    pool = ThreadPoolExecutor(1)
    pool.submit(lambda: None).result()
    waits: dict[str, list[float]] = {"busy": [], "idle 5 ms": []}
    for _ in range(args.queries):
        for name in waits:
            if name != "busy":
                time.sleep(0.005)
            sent = time.perf_counter()
            waits[name].append((pool.submit(time.perf_counter).result() - sent) * 1e6)
            if name == "busy":
                pool.submit(lambda: None).result()
    pool.shutdown()
    tight = statistics.median(cpu[conditions[0][0]])
    print(f"\n{args.rounds} rounds of {args.queries} queries per condition, alternating\n")
    print("| before each query | embedding thread CPU p50 ms | ÷ the tight loop's |")
    print("|---|---:|---:|")
    for name, _ in conditions:
        p50 = statistics.median(cpu[name])
        print(f"| {name} | {p50:.2f} | {p50 / tight:.2f} |")
    print("\n| a task handed to a pool thread | µs from the submission to its start, p50 |")
    print("|---|---:|")
    print(f"| right after its last task | {statistics.median(waits['busy']):.0f} |")
    print(f"| after it idled 5 ms | {statistics.median(waits['idle 5 ms']):.0f} |")


if __name__ == "__main__":
    main()
