"""The query embedding alone and with hybrid searches running beside it: what an overlap costs it.

A v5 search now embeds its query on one thread while another runs the searches' keyword passes
(docs/design/supermemory.md); both read far more than a core's cache holds (the int8 graph's
weights, the term counts' postings). This times the local int8 embedder on queries of SciFact, in
turns alone and with a second thread searching both collections of a bench/v5.py namespace
without pause, and prints the median wall and thread CPU of one embedding each way.

    python bench/embed_beside.py --data DIR [--queries 150]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parent / "src"))

from engram_index.collections import Collections  # noqa: E402
from engram_index.embed.local import MiniLMEmbedder  # noqa: E402
from engram_index.engine.types import Filters, SearchRequest  # noqa: E402
from engram_index.supermemory.face import FORGOTTEN, SUPERSEDED  # noqa: E402
from engram_index.supermemory.tables import chunks_collection, memories_collection  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a bench/v5.py data directory (read only)")
    parser.add_argument("--queries", type=int, default=150)
    shared = Path(os.environ.get("ENGRAM_SHARED", _HERE.parents[1] / "shared"))
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    args = parser.parse_args()
    texts = [json.loads(line)["text"] for line in (args.scifact / "queries.jsonl").open()][:args.queries + 50]
    model = MiniLMEmbedder(int8=True)
    spaces = Collections(args.data, read_only=True, lock=False)
    asks = [(spaces.index(memories_collection("scale")), Filters(none_tags=(SUPERSEDED, FORGOTTEN))),
            (spaces.index(chunks_collection("scale")), Filters())]
    vectors = [model.embed_queries([q])[0] for q in texts[:50]]
    stop = threading.Event()

    def searching() -> None:
        i = 0
        while not stop.is_set():
            for index, flt in asks:
                index.search(SearchRequest("hybrid", q=texts[i % 50], vector=vectors[i % 50], limit=30, filters=flt,
                                           explain=False, documents=False))
            i += 1

    took: dict[str, list[tuple[float, float]]] = {"alone": [], "beside searches": []}
    for turn, q in enumerate(texts[50:]):
        way = "alone" if turn % 2 == 0 else "beside searches"
        beside = threading.Thread(target=searching) if way != "alone" else None
        if beside is not None:
            stop.clear()
            beside.start()
            time.sleep(0.002)  # the searches under way
        began, cpu = time.perf_counter(), time.thread_time()
        model.embed_queries([f"{q} ({turn})"])
        took[way].append(((time.perf_counter() - began) * 1000, (time.thread_time() - cpu) * 1000))
        if beside is not None:
            stop.set()
            beside.join()
    spaces.close()
    model.close()
    print(f"load average {os.getloadavg()[0]:.1f}; {len(texts) - 50} embeddings, alone and beside in turns\n")
    print("| the query embedding | wall ms p50 | thread CPU ms p50 |\n|---|---:|---:|")
    for way, times in took.items():
        print(f"| {way} | {statistics.median(t[0] for t in times):.2f} | {statistics.median(t[1] for t in times):.2f} |")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
