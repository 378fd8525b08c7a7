"""Embedder benchmark: all-MiniLM-L6-v2 in numpy (embed/local.py) on this machine's CPU.

Prints one table: the load time (read, sha256 check, parse), then texts per second for the
300 SciFact queries (batches of 32), for one query at a time, and for 300-character
documents (SciFact abstracts cut to 300 characters), each the median of --repeat runs.

    python bench/embed.py
    python bench/embed.py --blas-threads 0      # leave BLAS's own threading on
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from engram_index.embed.local import MiniLMEmbedder  # noqa: E402

DEFAULT_SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"


def median_seconds(run: Callable[[], object], repeat: int) -> float:
    """The median wall time of `repeat` runs."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scifact", type=Path, default=DEFAULT_SCIFACT, help="the SciFact folder")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--documents", type=int, default=128, help="300-character documents to embed")
    parser.add_argument("--blas-threads", type=int, default=1, help="BLAS threads in a forward pass (0: as is)")
    args = parser.parse_args()

    with open(args.scifact / "queries.jsonl", encoding="utf-8") as fh:
        queries = [json.loads(line)["text"] for line in fh]
    documents = []
    with open(args.scifact / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            text = (doc["title"] + " " + doc["text"])[:300]
            if len(text) == 300:
                documents.append(text)
            if len(documents) == args.documents:
                break

    start = time.perf_counter()
    emb = MiniLMEmbedder(blas_threads=args.blas_threads or None)
    load_s = time.perf_counter() - start
    emb.embed_queries(queries[:8])  # warm up

    def tokens(texts: list[str]) -> float:
        return statistics.mean(len(e.ids) for e in emb._tokenizer.encode_batch(texts))

    single = queries[:30]
    rows = [
        ("SciFact queries, batches of 32", queries, lambda: emb.embed_queries(queries)),
        ("SciFact queries, one at a time", single, lambda: [emb.embed_queries([q]) for q in single]),
        ("300-char documents, batches of 32", documents, lambda: emb.embed_documents(documents)),
    ]
    table = Table(title=f"all-MiniLM-L6-v2 in numpy ({os.cpu_count()} cores, BLAS threads "
                        f"{args.blas_threads or 'as is'}, median of {args.repeat}; load {load_s:.2f} s)")
    for column in ("workload", "texts", "tokens/text", "seconds", "texts/s"):
        table.add_column(column, justify="left" if column == "workload" else "right")
    for name, texts, run in rows:
        seconds = median_seconds(run, args.repeat)
        table.add_row(name, str(len(texts)), f"{tokens(texts):.1f}", f"{seconds:.2f}", f"{len(texts) / seconds:,.0f}")
    Console().print(table)
    emb.close()


if __name__ == "__main__":
    main()
