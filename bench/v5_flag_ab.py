"""What a module flag costs a v5 search: thread CPU per search with the flag at each value, alternated.

Opens namespace `scale` of a bench/v5.py data directory in process (the search pool inline, the
query vectors cached beforehand so that the embedding is not counted) and searches every query once
at each value of the flag, in turns (the order alternating query by query), so that the machine's
drift falls on both alike. Prints each round's median thread CPU per search at each value and
their ratio to the first value's.

    python bench/v5_flag_ab.py --data DIR --flag supermemory.search.MEMORY_CONTEXT [--values False,True]
                               [--queries 200] [--rounds 3] [--mode hybrid]
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import importlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
sys.path.insert(0, str(_HERE.parent / "src"))

from machine import print_machine  # noqa: E402
from v5_parts import inline_face  # noqa: E402

from engram_index.supermemory import search  # noqa: E402


def main() -> None:
    """Print one line per round and the medians."""
    shared = Path(os.environ.get("ENGRAM_SHARED", _HERE.parents[1] / "shared"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--flag", required=True, help="module.NAME under engram_index")
    parser.add_argument("--values", default="False,True", help="comma-separated Python literals")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", default="hybrid", choices=["hybrid", "chunks", "memories"])
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    args = parser.parse_args()
    print_machine()
    module_name, _, flag = args.flag.rpartition(".")
    module = importlib.import_module(f"engram_index.{module_name}")
    values = [ast.literal_eval(v) for v in args.values.split(",")]
    texts = [json.loads(line)["text"] for line in (args.scifact / "queries.jsonl").open()][:args.queries + 10]
    def one(face: Any, value: object, query: str) -> float:
        setattr(module, flag, value)
        began = time.thread_time_ns()
        search.search(face, "scale", {"query": query, "limit": 10, "searchMode": args.mode}, False)
        return (time.thread_time_ns() - began) / 1e6

    async def run() -> None:
        async with inline_face(args.data, texts) as face:
            for q in texts[:10]:  # warm: masks, dates, caches
                for v in values:
                    one(face, v, q)
            medians: list[list[float]] = []
            for r in range(args.rounds):
                spent: list[list[float]] = [[] for _ in values]
                for i, q in enumerate(texts[10:]):
                    order = list(range(len(values)))
                    for k in order if i % 2 else order[::-1]:
                        spent[k].append(one(face, values[k], q))
                medians.append([statistics.median(s) for s in spent])
                print(f"round {r + 1}: " + ", ".join(f"{args.flag.rpartition('.')[2]}={v!r} {m:.3f} ms"
                                                       for v, m in zip(values, medians[-1])), flush=True)
            print(f"\n| {args.flag} ({args.mode}, limit 10) | median thread CPU ms a search | ÷ {values[0]!r} |")
            print("|---|---:|---:|")
            base = statistics.median(m[0] for m in medians)
            for k, v in enumerate(values):
                mid = statistics.median(m[k] for m in medians)
                print(f"| {v!r} | {mid:.3f} | {mid / base:.3f} |")

    asyncio.run(run())


if __name__ == "__main__":
    main()
