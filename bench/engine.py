"""Engine benchmark: synthetic spaces of 10k / 100k / 1M memories, searched in-process, warm.

Prints one table per run: p50/p99 of keyword, vector and hybrid searches with and without
filters, vector-stage recall@10 against exact cosine, ingest rate, time until a write is
searchable, RSS and bytes on disk per memory, and the coarse scan's share of memory bandwidth
(against a large copy measured in the same run).

    python bench/engine.py                 # 10k and 100k
    python bench/engine.py --sizes 10000,100000,1000000
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn  # noqa: E402
from rich.table import Table  # noqa: E402
from synth import make_queries, make_space  # noqa: E402

from engram_index.engine.analyzer import index_terms  # noqa: E402
from engram_index.engine.types import Document, Filters, ModelIdentity, SearchRequest  # noqa: E402
from engram_index.collections import Collections  # noqa: E402
from engram_index.store.sqlite import StoredDocument  # noqa: E402

SPACE = "at://did:plc:bench234bench234bench234be/space/garden.engram.space/bench"
MODEL = ModelIdentity("all-MiniLM-L6-v2", "sha256:bench", 384)
console = Console(stderr=True)


def rss_mb() -> float:
    """The process's current resident set size in MB."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def dir_bytes(path: Path) -> int:
    """Bytes on disk under a directory."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def percentiles(samples: list[float]) -> tuple[float, float]:
    """p50 and p99 in milliseconds."""
    arr = np.asarray(samples) * 1000
    return float(np.percentile(arr, 50)), float(np.percentile(arr, 99))


def copy_bandwidth_gbs() -> float:
    """Memory bandwidth of a large copy (read + write bytes per second), median of 5."""
    src = np.ones(256 * 1024 * 1024 // 8, np.float64)
    dst = np.empty_like(src)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t)
    return 2 * src.nbytes / float(np.median(times)) / 1e9


def ingest(spaces: Collections, synth, n: int) -> float:
    """Write n synthetic memories in batches of 1,000 through the real write path; returns seconds."""
    batch = 1000
    began = time.perf_counter()
    with Progress(TextColumn(f"[bold]ingest {n:,}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("ingest", total=n)
        for start in range(0, n, batch):
            stop = min(n, start + batch)
            docs = [
                StoredDocument(Document(
                    id=f"{SPACE}/{synth.authors[i]}/garden.engram.memory/m{i:07d}",
                    author=synth.authors[i], text=synth.texts[i], tags=synth.tags[i],
                    created_ms=int(synth.created_ms[i]), indexed_ms=int(synth.created_ms[i]),
                    vector=synth.vectors[i].tobytes(),
                ))
                for i in range(start, stop)
            ]
            spaces.write(SPACE, docs)
            bar.advance(task, stop - start)
    spaces.commit()
    return time.perf_counter() - began


def timed(index, reqs: list[SearchRequest]) -> tuple[list[float], list]:
    """Run each request once (after a warm-up pass over the first 20) and time it."""
    for req in reqs[:20]:
        index.search(req)
    samples, results = [], []
    for req in reqs:
        t = time.perf_counter()
        results.append(index.search(req))
        samples.append(time.perf_counter() - t)
    return samples, results


def write_to_visible(spaces: Collections, index, rounds: int = 20) -> list[float]:
    """Seconds from a write's acknowledgement until a keyword search finds it."""
    out = []
    for r in range(rounds):
        word = f"freshword{r}x{time.monotonic_ns()}"
        doc = Document(id=f"{SPACE}/did:plc:fresh/garden.engram.memory/f{r}", author="did:plc:fresh",
                       text=f"a new memory {word}", created_ms=0, vector=np.ones(384, "<f2").tobytes())
        spaces.write(SPACE, [StoredDocument(doc)])
        began = time.perf_counter()
        req = SearchRequest(mode="keyword", q=word, limit=1, explain=False)
        while not index.search(req).hits:
            time.sleep(0.005)
        out.append(time.perf_counter() - began)
    return out


def run_size(n: int, scifact: Path, queries: int, bandwidth: float) -> dict[str, str]:
    """Build one space of n memories and measure everything for it."""
    console.print(f"[bold]{n:,} memories[/]: generating")
    synth = make_space(n, scifact_dir=scifact, seed=1)
    q_texts, q_vecs = make_queries(synth, queries, seed=2)
    q_vecs = q_vecs.astype(np.float32)
    tmp = Path(tempfile.mkdtemp(prefix="engram-bench-"))
    try:
        rss_before = rss_mb()
        spaces = Collections(tmp)
        spaces.ensure_collection(SPACE, MODEL)
        index = spaces.index(SPACE)
        seconds = ingest(spaces, synth, n)
        segments = index.keyword.segments()
        # What the background compaction does once writes go quiet: one keyword segment.
        began = time.perf_counter()
        spaces.maintain()
        compact_s = time.perf_counter() - began
        index = spaces.index(SPACE)
        rss_after = rss_mb()
        disk = dir_bytes(tmp)

        common_tag = max(((t, c) for t, c in _tag_counts(synth).items()), key=lambda x: x[1])[0]
        filters = Filters(tags=(common_tag,), since_ms=int(synth.created_ms[n // 4]))

        def reqs(mode: str, filt: Filters | None) -> list[SearchRequest]:
            return [SearchRequest(mode=mode, q=q_texts[i], vector=q_vecs[i], limit=10,  # type: ignore[arg-type]
                                  filters=filt or Filters()) for i in range(queries)]

        row: dict[str, str] = {"memories": f"{n:,}"}
        for mode in ("keyword", "vector", "hybrid"):
            for label, filt in (("", None), (" +filter", filters)):
                samples, _ = timed(index, reqs(mode, filt))
                p50, p99 = percentiles(samples)
                row[f"{mode}{label} p50/p99 ms"] = f"{p50:.2f} / {p99:.2f}"
        samples, _ = timed(index, [SearchRequest(mode="hybrid", q=q_texts[i], vector=q_vecs[i], limit=10, explain=False)
                                   for i in range(queries)])
        row["hybrid no-explain p50 ms"] = f"{percentiles(samples)[0]:.2f}"

        # Vector-stage recall@10 against exact cosine over every live vector.
        vecs = index.vectors
        recall = []
        for i in range(min(queries, 200)):
            got = vecs.search(q_vecs[i], 10).ords
            exact = vecs.similarities(q_vecs[i], np.arange(vecs.size))
            truth = np.argsort(-np.nan_to_num(exact, nan=-2))[:10]
            recall.append(len(set(got.tolist()) & set(truth.tolist())) / 10)
        row["vector recall@10"] = f"{np.mean(recall):.4f}"

        # Coarse scan alone: the bytes it reads per second, as a share of copy bandwidth.
        code = np.packbits(q_vecs[0] > 0)
        scan = []
        for _ in range(30):
            t = time.perf_counter()
            vecs._distances(code, None)
            scan.append(time.perf_counter() - t)
        scan_bytes = vecs.size * vecs._code_bytes
        row["scan GB/s (share)"] = f"{scan_bytes / np.median(scan) / 1e9:.1f} ({scan_bytes / np.median(scan) / 1e9 / bandwidth:.0%})"

        row["ingest /s"] = f"{n / seconds:,.0f}"
        row["keyword segments → compaction s"] = f"{segments} → {compact_s:.1f}"
        row["write→visible p50 ms"] = f"{percentiles(write_to_visible(spaces, index))[0]:.0f}"
        row["RSS MB (Δ)"] = f"{rss_after:.0f} ({rss_after - rss_before:+.0f})"
        row["disk B/memory"] = f"{disk / n:,.0f}"
        spaces.close()
        return row
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _tag_counts(synth) -> dict[str, int]:
    """How many memories carry each tag."""
    counts: dict[str, int] = {}
    for tags in synth.tags:
        for t in tags:
            counts[t] = counts.get(t, 0) + 1
    return counts


def analyzer_rate(scifact: Path) -> float:
    """index_terms throughput on 300-character texts of real sentences (texts per second)."""
    synth = make_space(5000, scifact_dir=scifact, seed=3)
    texts = [t[:300] for t in synth.texts]
    t = time.perf_counter()
    for text in texts:
        index_terms(text)
    return len(texts) / (time.perf_counter() - t)


def main() -> None:
    """Parse arguments, run every size, print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--scifact", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact")
    args = parser.parse_args()
    bandwidth = copy_bandwidth_gbs()
    rows = [run_size(int(s), args.scifact, args.queries, bandwidth) for s in args.sizes.split(",")]
    from peers_common import cpu_model  # here: peers_common imports this module

    table = Table(title=f"engram-index engine, in-process, warm ({cpu_model()[0]}, {os.cpu_count()} cores; copy bandwidth {bandwidth:.1f} GB/s; analyzer {analyzer_rate(args.scifact):,.0f} texts/s)")
    table.add_column("metric")
    for row in rows:
        table.add_column(row["memories"], justify="right")
    for key in rows[0]:
        if key != "memories":
            table.add_row(key, *[r[key] for r in rows])
    Console(width=200).print(table)
    console.print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
