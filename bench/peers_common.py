"""What every system in bench/peers.py shares: the workloads, the adapter interface, the measurements.

A workload is a corpus (texts, tags, vectors) and queries (texts, vectors) with what to check them
against: exact cosine top-10 for the vector stage's recall, or SciFact's relevance judgements for
nDCG@10. Each adapter loads the corpus its own way and answers hybrid top-10 queries with the
ordinals (corpus positions) of what it found, so every system is scored by the same code.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import resource
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
# After the standard library and site-packages, never before (bench/http.py would shadow http).
for _folder in (str(BENCH), str(BENCH.parent / "src")):
    if _folder not in sys.path:
        sys.path.append(_folder)

import machine  # noqa: E402
import synth  # noqa: E402
from engine import _tag_counts, dir_bytes, percentiles  # noqa: E402
from synth import YEAR_START_MS, _exact_top, make_queries, make_space  # noqa: E402

from engram_index.evaluation import load_scifact, ndcg_at  # noqa: E402

# bench/engine.py puts this folder first again on import: back to the end with it.
sys.path[:] = [p for p in sys.path if p != str(BENCH)] + [str(BENCH)]

K = 10
# Candidates each peer's vector and keyword stages hand to fusion: the depth of the SciFact
# reference numbers (top 100 of each), which costs peers half of what our 200 would.
PEER_CANDIDATES = 100
RRF_K = 60
MIN_TIMED = 20

Search = Callable[[str, np.ndarray, "str | None"], list[int]]


class Unsupported(Exception):
    """A peer that cannot run on this machine (say a wheel built for CPU features it lacks): reported, not failed."""


@dataclass(slots=True)
class Corpus:
    """Parallel per-memory columns, shaped like synth.SynthSpace so bench/engine.py can ingest it."""

    texts: list[str]
    tags: list[tuple[str, ...]]
    authors: list[str]
    created_ms: np.ndarray
    vectors: np.ndarray  # (n, dims) float16, L2-normalised

    def __len__(self) -> int:
        """The number of memories."""
        return len(self.texts)


@dataclass(slots=True)
class Workload:
    """A corpus, its queries, and what their answers are checked against."""

    name: str
    corpus: Corpus
    query_texts: list[str]
    query_vectors: np.ndarray  # (m, dims) float32
    tag: str | None = None  # the filter's tag (synthetic spaces only)
    exact: np.ndarray | None = None  # (m, 10) exact cosine top-10 ordinals
    qrels: list[dict[int, int]] = field(default_factory=list)  # per query: ordinal -> gain
    # Queries run untimed before each timed pass: None is the whole pass (the same queries, the
    # same filter and the same budget rule as the timed pass), for every system alike; the first
    # passes after a load run slow (page reclaim, background merges), so no system's timed pass
    # may be its first. --quick warms up on a few only.
    warmup: int | None = None
    budget_s: float = 60.0  # a timed pass stops after this long, having run at least min_timed
    min_timed: int = MIN_TIMED
    profile: bool = False  # also profile a pass of the first variant (not timed)


def synthetic_workload(n: int, queries: int, scifact: Path) -> Workload:
    """The engine benchmark's synthetic space of n memories and its queries (same seeds)."""
    # Smaller chunks give the same memories and exact neighbours without a transient peak
    # (511 MB instead of 194 MB at 100k) that would hide the systems' own peaks.
    synth.CHUNK = 4096
    space = make_space(n, scifact_dir=scifact, seed=1)
    texts, vectors = make_queries(space, queries, seed=2)
    corpus = Corpus(space.texts, space.tags, space.authors, space.created_ms, space.vectors)
    # The commonest tag, as bench/engine.py filters on.
    tag = max(_tag_counts(space).items(), key=lambda item: item[1])[0]
    exact, _ = _exact_top(space.vectors, vectors, K)
    return Workload(f"{n:,}", corpus, texts, vectors.astype(np.float32), tag, exact)


def scifact_workload(scifact: Path, quick: bool) -> Workload:
    """SciFact's judged claims against its corpus (quick: 10 claims, their documents and 400 others)."""
    docs, queries, qrels = load_scifact(scifact)
    vectors = np.load(scifact / "corpus.minilm.f16.npy")
    query_vectors = np.load(scifact / "queries.minilm.f16.npy").astype(np.float32)
    judged = [i for i, q in enumerate(queries) if q["_id"] in qrels]
    keep = np.arange(len(docs))
    if quick:
        judged = judged[:10]
        wanted = {d for i in judged for d in qrels[queries[i]["_id"]]}
        rng = np.random.default_rng(0)
        others = rng.choice(len(docs), 400, replace=False)
        keep = np.array(sorted({i for i, d in enumerate(docs) if d["_id"] in wanted} | set(others.tolist())))
    ordinal = {docs[int(d)]["_id"]: o for o, d in enumerate(keep)}
    corpus = Corpus(
        texts=[(docs[int(d)]["title"] + " " + docs[int(d)]["text"]).strip() for d in keep],
        tags=[() for _ in keep],
        authors=["did:plc:scifact" for _ in keep],
        created_ms=YEAR_START_MS + np.arange(len(keep), dtype=np.int64),
        vectors=vectors[keep],
    )
    return Workload(
        "SciFact",
        corpus,
        [queries[i]["text"] for i in judged],
        query_vectors[judged],
        qrels=[{ordinal[d]: g for d, g in qrels[queries[i]["_id"]].items() if d in ordinal} for i in judged],
    )


class Peer(ABC):
    """One system under test: loads a corpus into `workdir`, answers hybrid top-10 queries."""

    name: str = ""  # the modules each system needs are listed once, in bench/peers.py's PEERS

    def __init__(self, workdir: Path) -> None:
        """Remember where the system may keep its files."""
        self.workdir = workdir

    @abstractmethod
    def settings(self) -> str:
        """How the system is configured, in one line for the docs."""

    @abstractmethod
    def load(self, corpus: Corpus) -> None:
        """Store every memory and build every index, ready to search."""

    @abstractmethod
    def variants(self) -> dict[str, Search]:
        """Hybrid top-10 searches by label: (query text, query vector, tag or None) -> ordinals."""

    @abstractmethod
    def vector_top(self, vector: np.ndarray, k: int) -> list[int]:
        """The vector stage alone, as hybrid search runs it: the top k ordinals by cosine."""

    def disk_bytes(self) -> int:
        """Bytes the system keeps on disk."""
        return dir_bytes(self.workdir)

    def server_rss_mb(self) -> float:
        """Memory held by server processes outside this one (0 for in-process systems)."""
        return 0.0

    def close(self) -> None:
        """Release files and processes."""


class _ServerSampler:
    """Samples a peer's server memory every 0.2 s while it loads (index builds peak there)."""

    def __init__(self, peer: Peer) -> None:
        """Start sampling in a thread."""
        self.peer, self.peak = peer, 0.0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        """Keep the largest sample until stopped."""
        while not self.done.wait(0.2):
            try:
                self.peak = max(self.peak, self.peer.server_rss_mb())
            except Exception:  # the server may not be up yet, or be restarting
                pass

    def stop(self) -> float:
        """Stop sampling; the peak seen, including one last sample."""
        self.done.set()
        self.thread.join()
        return max(self.peak, self.peer.server_rss_mb())


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(search: Search, work: Workload, tag: str | None, budget: bool = True) -> tuple[list[float], list[list[int]]]:
    """Run each query once after a whole untimed warm-up pass of them, timing each; with a budget, stop early when over it."""
    warm = len(work.query_texts) if work.warmup is None else min(work.warmup, len(work.query_texts))
    began = time.perf_counter()
    for i in range(warm):
        search(work.query_texts[i], work.query_vectors[i], tag)
        # The warm-up pass obeys the timed pass's budget, so a slow system is not warmed for minutes.
        if budget and i + 1 >= work.min_timed and time.perf_counter() - began > work.budget_s:
            break
    samples: list[float] = []
    results = []
    for text, vector in zip(work.query_texts, work.query_vectors):
        began = time.perf_counter()
        results.append(search(text, vector, tag))
        samples.append(time.perf_counter() - began)
        if budget and len(samples) >= work.min_timed and sum(samples) > work.budget_s:
            break
    return samples, results


def measure(peer: Peer, work: Workload, log: Callable[[str], None]) -> dict[str, object]:
    """Load the workload into the peer and measure everything the table reports."""
    out: dict[str, object] = {"system": peer.name, "dataset": work.name, "memories": len(work.corpus),
                              "queries": len(work.query_texts)}
    out["baseline_mb"] = peak_rss_mb()  # the workload itself, before the system holds anything
    log(f"{peer.name}: loading {len(work.corpus):,} memories ({work.name})")
    sampler = _ServerSampler(peer)
    began = time.perf_counter()
    peer.load(work.corpus)
    out["load_s"] = time.perf_counter() - began
    server_peak = sampler.stop()
    out["disk_bytes"] = peer.disk_bytes()
    variants: dict[str, dict[str, float]] = {}
    for label, search in peer.variants().items():
        row: dict[str, float] = {}
        if work.qrels:
            log(f"{peer.name} {label}: nDCG@10 over {len(work.qrels)} claims")
            _, results = timed(search, work, None, budget=False)
            row["ndcg"] = float(np.mean([
                ndcg_at([str(o) for o in found], {str(o): g for o, g in rel.items()}, K)
                for found, rel in zip(results, work.qrels)
            ]))
        else:
            for suffix, tag in (("", None), ("_tag", work.tag)):
                log(f"{peer.name} {label}: {len(work.query_texts)} queries" + (f", tag {tag!r}" if tag else ""))
                samples, _ = timed(search, work, tag)
                row["p50" + suffix], row["p99" + suffix] = percentiles(samples)
                row["n" + suffix] = len(samples)
        server_peak = max(server_peak, peer.server_rss_mb())
        variants[label] = row
    out["variants"] = variants
    if work.exact is not None:
        found = [peer.vector_top(v, K) for v in work.query_vectors]
        out["recall"] = float(np.mean([len(set(f) & set(e.tolist())) / K for f, e in zip(found, work.exact)]))
    if work.profile and work.exact is not None:
        out["profile"] = profile(next(iter(peer.variants().values())), work)
    out["settings"] = peer.settings()
    out["server_mb"] = server_peak
    peer.close()
    return out


def profile(search: Search, work: Workload, top: int = 25) -> str:
    """Where one pass of unfiltered queries spends its time, by function (cumulative), after the timed passes."""
    profiler = cProfile.Profile()
    profiler.enable()
    for text, vector in zip(work.query_texts, work.query_vectors):
        search(text, vector, None)
    profiler.disable()
    report = io.StringIO()
    pstats.Stats(profiler, stream=report).sort_stats("cumulative").print_stats(top)
    text = report.getvalue().split("\n\n", 1)[-1]
    for prefix in (str(BENCH.parent), sys.prefix, sys.base_prefix):  # no machine paths in the output
        text = text.replace(prefix + "/", "")
    return f"{len(work.query_texts)} queries\n" + text


def cpu_model() -> tuple[str, int]:
    """The CPU's model name (with its vector instructions) and the number of cores this process may use."""
    return machine.cpu_model(), len(os.sched_getaffinity(0))
