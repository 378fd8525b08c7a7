"""The supermemory v5 face under load: ingest rate, time to searchable, search latency over HTTP.

Part 1 (ingest) serves a fresh data directory with the local all-MiniLM-L6-v2 embedder and adds
~1 KB documents (SciFact abstracts packed to whole sentences) through the official SDK in batches,
timing the first add to the last `done`; it then adds single documents and measures, for each,
how long after `done` its unique marker is found by search.

Part 2 (scale) fills a namespace until it holds each size of chunks + memories and times hybrid
searches over HTTP (keep-alive, one client sending bytes made before the clock starts, bench/wire.py,
limit 10, the query embedded by the real local model on the server, which runs as its own process
once the index has loaded and the server is quiet). Filling 100k items with the real model would
take hours on a shared 2-core machine, so part 2 stores the chunks and memories with stand-in vectors (unit vectors seeded by
each text's hash, under the model's identity): a search does the same work on them; only what
it ranks first differs.

    python bench/v5.py [--ingest-docs 300] [--sizes 10000,100000] [--queries 200] [--scifact DIR]
                       [--face-embedders local,auto] [--rounds N] [--interleave BLOCK]

Beside each search p50 it prints, measured on the same machine in the same run, the engine's own
hybrid searches for one v5 search (its two collections, in process) and the query embedding alone:
p50 / (engine + embedding) is what the HTTP face adds. Each of those two is timed in a loop of
its own, which keeps its data (the model's weights, the index's arrays) in the CPU's caches; a
served search finds neither there, so the last columns time them in sequence, query by query
(embed, then search), and divide p50 by that too. Queries are not repeated (no cache hits).
Those in-process loops run after the served searches, or with `--interleave BLOCK` in blocks of
BLOCK queries alternating with them on one server, so that both sides of each ratio meet the same
load of a shared machine (paired.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from paired import Samples, blocks, each_ms, task_cpu_ns  # noqa: E402
from retrieve import face_model, server_cpu_s, wait_listening, wait_quiet  # noqa: E402
from supermemory import Supermemory  # noqa: E402
from wire import Connection, port_of, post  # noqa: E402

from engram_index.admission import Admission  # noqa: E402
from engram_index.app import create_app  # noqa: E402
from engram_index.collections import Collections  # noqa: E402
from engram_index.embed.base import finish  # noqa: E402
from engram_index.embed.local import MINILM_IDENTITY, MiniLMEmbedder  # noqa: E402
from engram_index.engine.types import ModelIdentity  # noqa: E402
from engram_index.engram.api.embedding import QueryEmbedding  # noqa: E402
from engram_index.engine.types import Filters, SearchRequest  # noqa: E402
from engram_index.engram.auth import InsecureOpen  # noqa: E402
from engram_index.engine.analyzer import query_words  # noqa: E402
from engram_index.ranking import content_query  # noqa: E402
from engram_index.keys import KeyStore  # noqa: E402
from engram_index.supermemory.chunking import sentences  # noqa: E402
from engram_index.supermemory.face import FORGOTTEN, SUPERSEDED  # noqa: E402
from engram_index.supermemory.tables import chunks_collection, memories_collection  # noqa: E402
from engram_index.testkit.serve import free_port, serving  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOC_BYTES = 1024
UNLIMITED = Admission(1e6, 1e6, 64)  # the bench's one client measures speed, not admission


class StandIn:
    """The local model for queries; seeded unit vectors (same identity) for stored texts."""

    def __init__(self, model: MiniLMEmbedder) -> None:
        self.model = model
        self.identity = model.identity

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        rows = [np.random.default_rng(int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "big"))
                .standard_normal(self.identity.dims) for t in texts]
        return finish(np.asarray(rows), self.identity.dims, len(texts))

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.model.embed_queries(texts)

    def close(self) -> None:
        self.model.close()


def documents(scifact: Path) -> Iterator[str]:
    """~1 KB documents of whole sentences from the SciFact abstracts, endlessly (each pass shifted)."""
    corpus = [json.loads(line)["text"] for line in (scifact / "corpus.jsonl").open()]
    shift = 0
    while True:
        pending: list[str] = []
        size = 0
        for text in corpus:
            for span in sentences(text)[shift:]:
                pending.append(span.text)
                size += len(span.text) + 1
                if size >= DOC_BYTES:
                    yield " ".join(pending)
                    pending, size = [], 0
        shift += 1


def wait_all_done(face: object, ns: str, total: int, timeout: float = 7200) -> None:
    """Wait until the namespace holds `total` documents and none is unfinished (read from the store of
    the in-process server: a list ordered by time cannot say that none is left)."""
    store = face.store  # type: ignore[attr-defined]
    deadline = time.monotonic() + timeout
    while True:
        count, unfinished = store.query(
            "SELECT count(*), sum(status NOT IN ('done', 'failed')) FROM sm_documents WHERE ns=?", (ns,))[0]
        if count >= total and not unfinished:
            return
        assert time.monotonic() < deadline, "documents did not finish"
        time.sleep(0.05)


def items(face: object, ns: str) -> int:
    """Chunks + memories stored in the namespace."""
    store = face.store  # type: ignore[attr-defined]
    chunks = store.query("SELECT count(*) FROM sm_chunks WHERE ns=?", (ns,))[0][0]
    memories = store.query("SELECT count(*) FROM sm_memories WHERE ns=?", (ns,))[0][0]
    return int(chunks) + int(memories)


def local_app(data: Path, face_spec: str = "auto") -> tuple[Any, str]:
    """An app over `data` with the local model (the v5 face's under `--face-embedder face_spec`), no
    admission in the way, and a key to every namespace."""
    app = create_app(data, "did:web:localhost", authenticator=InsecureOpen(),
                     embedding=QueryEmbedding(MiniLMEmbedder()), key_limits=UNLIMITED,
                     face_embedder=face_model(face_spec))
    key, _ = KeyStore(data).create("supermemory", {"namespaces": None})
    return app, key


def ingest(scifact: Path, n_docs: int, samples: int, face_spec: str = "auto") -> dict[str, float]:
    """Part 1: docs/s for 1 KB documents with the local embedder, and done → searchable."""
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        app, key = local_app(data, face_spec)
        with serving(app) as url:
            client = Supermemory(api_key=key, base_url=url, max_retries=0, timeout=120)
            docs = documents(scifact)
            batch = [next(docs) for _ in range(n_docs)]
            began = time.perf_counter()
            for start in range(0, n_docs, 100):
                client.documents.batch_add("ingest", documents=[{"content": t} for t in batch[start:start + 100]])
            wait_all_done(app.state.supermemory, "ingest", n_docs)
            elapsed = time.perf_counter() - began
            count = items(app.state.supermemory, "ingest")
            lags = []
            for i in range(samples):
                marker = f"qmarker{i}x"
                ref = client.add("ingest", content=f"{next(docs)} The sample carries {marker} for recall.")
                while client.documents.get("ingest", ref.id).system.status != "done":
                    time.sleep(0.005)
                done_at = time.perf_counter()
                while not client.search("ingest", query=marker, search_mode="chunks").results:
                    time.sleep(0.005)
                lags.append(time.perf_counter() - done_at)
    return {"docs": n_docs, "seconds": elapsed, "docs_per_s": n_docs / elapsed, "items": count,
            "searchable_p50_s": statistics.median(lags), "searchable_max_s": max(lags)}


def fill(scifact: Path, data: Path, size: int) -> tuple[int, float, int]:
    """Fill the namespace `scale` in process (stand-in vectors) until it holds `size` items; (documents,
    seconds, items)."""
    relabel(data, "scale", MINILM_IDENTITY)  # the stand-in's identity (a run before may have relabelled)
    app = create_app(data, "did:web:localhost", authenticator=InsecureOpen(),
                     embedding=QueryEmbedding(StandIn(MiniLMEmbedder())),
                     key_limits=UNLIMITED)
    key, _ = KeyStore(data).create("supermemory", {"namespaces": None})
    began = time.perf_counter()
    with serving(app) as url:
        face = app.state.supermemory
        client = Supermemory(api_key=key, base_url=url, max_retries=0, timeout=300)
        docs = documents(scifact)
        added = int(face.store.query("SELECT count(*) FROM sm_documents WHERE ns='scale'")[0][0])
        for _ in range(added):
            next(docs)
        while items(face, "scale") < size:
            client.documents.batch_add("scale", documents=[{"content": next(docs)} for _ in range(250)])
            added += 250
            wait_all_done(face, "scale", added)
        # What a quiet service does 10 s after its last write: merge the keyword segments.
        app.state.spaces.commit()
        app.state.spaces.maintain()
        count = items(face, "scale")
    return added, time.perf_counter() - began, count


def served(data: Path, face_spec: str = "auto") -> tuple[subprocess.Popen[bytes], str]:
    """`engram-index serve --embedder local` on the data directory, as its own process, once it answers."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "engram_index.cli", "serve", "--data", str(data), "--port", str(port),
         "--insecure-open", "--no-access-log", "--embedder", "local", "--key-rate", "1000000",
         "--key-burst", "1000000", "--face-embedder", face_spec],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_listening(url, proc)
    return proc, url


def relabel(data: Path, ns: str, model: ModelIdentity) -> None:
    """Declare the namespace's collections as embedded with `model`: their vectors are stand-ins of no
    model, so that either embedder searches them without re-embedding (a bench-only shortcut)."""
    spaces = Collections(data)
    try:
        for name in (chunks_collection(ns), memories_collection(ns)):
            spaces.ensure_collection(name, model)
    finally:
        spaces.close()


class Reference:
    """The engine's own hybrid searches for one v5 search (its two collections, as the face asks them, in
    this process) and the query embedding alone, each timed in a loop of its own over a block of queries
    (wall and thread CPU ms), then the two in sequence, query by query (embed, then search), as a served
    search meets them: each loop of its own keeps its own data in the caches, which a search never finds so."""

    def __init__(self, data: Path, ns: str, model: MiniLMEmbedder) -> None:
        """Open the namespace's collections read-only (beside a server that holds them)."""
        self.spaces = Collections(data, read_only=True, lock=False)
        self.model = model
        self.asks = [(self.spaces.index(memories_collection(ns)), Filters(none_tags=(SUPERSEDED, FORGOTTEN))),
                     (self.spaces.index(chunks_collection(ns)), Filters())]
        self.samples = Samples()

    def search_both(self, q: str, v: np.ndarray) -> None:
        """One v5 search's engine searches, answered as hits (as the engine answers any caller: the reference
        of issue 25's ratio goal since it was set)."""
        for index, flt in self.asks:
            index.search(SearchRequest("hybrid", q=q, vector=v, limit=30, filters=flt, explain=False))

    def search_asked(self, q: str, v: np.ndarray) -> None:
        """The same searches exactly as the face asks them (supermemory/search.py `_legs`): the query's content
        words, answered in columns (no hit made, no document read)."""
        asked = content_query(q, query_words(q))
        for index, flt in self.asks:
            index.search(SearchRequest("hybrid", q=asked, vector=v, limit=30, filters=flt, explain=False,
                                       documents=False, hits=False))

    def block(self, queries: Sequence[str], warm: str | None = None) -> None:
        """Time a block of queries on each side (`warm`: a query of its own, embedded and searched untimed
        before each loop, so that its first timed call follows one of its kind)."""
        embed = self.model.embed_queries
        if warm is not None:
            embed([warm])
        vectors, embed_ms, embed_cpu = [], [], []
        for q in queries:
            t, c = time.perf_counter(), time.thread_time()
            vectors.append(embed([q])[0])
            embed_ms.append((time.perf_counter() - t) * 1000)
            embed_cpu.append((time.thread_time() - c) * 1000)
        self.search_both(queries[0] if warm is None else warm, vectors[0])  # warm: masks, caches
        engine_ms, engine_cpu = [], []
        for q, v in zip(queries, vectors):
            t, c = time.perf_counter(), time.thread_time()
            self.search_both(q, v)
            engine_ms.append((time.perf_counter() - t) * 1000)
            engine_cpu.append((time.thread_time() - c) * 1000)
        asked_ms = each_ms(self.search_asked, zip(queries, vectors))
        if warm is not None:
            self.search_both(warm, embed([warm])[0])
        in_sequence = []
        for q in queries:
            t = time.perf_counter()
            self.search_both(q, embed([q])[0])
            in_sequence.append((time.perf_counter() - t) * 1000)
        for name, values in (("engine", engine_ms), ("embed", embed_ms), ("engine_cpu", engine_cpu),
                             ("embed_cpu", embed_cpu), ("sequence", in_sequence), ("asked", asked_ms)):
            self.samples.add(name, values)

    def p50s(self) -> dict[str, float]:
        """p50 ms of the engine, the embedding (wall), the two's thread CPU, the two in sequence (wall) and
        the engine as the face asks it (wall), by name."""
        return {name: self.samples.p50(name) for name in self.samples.by_name}

    def close(self) -> None:
        """Close the collections."""
        self.spaces.close()


def in_process(data: Path, ns: str, queries: Sequence[str], model: MiniLMEmbedder) -> dict[str, float]:
    """`Reference`'s p50s over one block of every query (after the server has gone)."""
    reference = Reference(data, ns, model)
    try:
        reference.block(queries)
    finally:
        reference.close()
    return reference.p50s()


def scale(scifact: Path, sizes: Sequence[int], n_queries: int, keep: Path | None = None,
          face_specs: Sequence[str] = ("auto",), rounds: int = 1, interleave: int = 0) -> list[dict[str, Any]]:
    """Part 2: search p50/p99 over HTTP at each size of chunks + memories (`keep`: a data directory to
    fill once and reuse), per face embedder, beside the engine's in-process p50 and the query
    embedding's. The server runs as its own process, as an operator runs it, so that the client's
    work is not on the server's interpreter. With `rounds` > 1 each face embedder is measured that
    many times in turn (a fresh server each round, so no answer comes from the query cache): one row
    per round. The in-process figures come right after the served ones, or with `interleave` (a block
    size) in alternating blocks with them (paired.py)."""
    queries = [json.loads(line)["text"] for line in (scifact / "queries.jsonl").open()][:n_queries]
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        data = keep or Path(tmp)
        for size in sizes:
            added, fill_s, count = fill(scifact, data, size)
            key, _ = KeyStore(data).create("supermemory", {"namespaces": None})
            for spec in [spec for _ in range(rounds) for spec in face_specs]:
                model = face_model(spec)
                relabel(data, "scale", model.identity)
                try:
                    row = one_round(data, spec, key, queries, model, interleave)
                finally:
                    model.close()
                out.append({"items": count, "docs": added, "fill_s": fill_s, "embedder": model.identity.model,
                            "interleaved": interleave, **row})
    return out


def one_round(data: Path, spec: str, key: str, queries: Sequence[str], model: MiniLMEmbedder,
              interleave: int) -> dict[str, float]:
    """One round of part 2 on a fresh server: each of queries[20:] searched once (the first 20 warm it)."""
    proc, url = served(data, spec)
    reference: Reference | None = None
    try:
        http = Searches(url, key)
        for q in queries[:20]:  # warm-up: the index loads, the caches fill
            http.search(q)
        wait_quiet(proc.pid)
        if interleave:
            reference = Reference(data, "scale", model)
            latencies, server_cpu = served_blocks(http, proc.pid, queries[20:], reference, interleave)
        else:
            latencies = []
            cpu_before = server_cpu_s(proc.pid)
            # Each query once, and not one of the warm-up's: no answer comes from the query cache.
            for q in queries[20:]:
                latencies.append(http.search(q))
            cpu_after = server_cpu_s(proc.pid)
            server_cpu = (cpu_after - cpu_before) / len(latencies) * 1000 if cpu_before and cpu_after else 0.0
        http.close()
    finally:
        proc.terminate()
        proc.wait(60)
        if reference is not None:
            reference.close()
    if reference is not None:
        ref = reference.p50s()
        p50 = statistics.median(latencies)
    else:
        ref = in_process(data, "scale", queries[20:], model)
        p50 = sorted(latencies)[len(latencies) // 2]
    ordered = sorted(latencies)
    return {"p50_ms": p50, "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
            "engine_p50_ms": ref["engine"], "embed_p50_ms": ref["embed"], "ratio": p50 / (ref["engine"] + ref["embed"]),
            "sequence_p50_ms": ref["sequence"], "sequence_ratio": p50 / ref["sequence"], "server_cpu_ms": server_cpu,
            "engine_cpu_ms": ref["engine_cpu"], "embed_cpu_ms": ref["embed_cpu"],
            "cpu_ratio": server_cpu / (ref["engine_cpu"] + ref["embed_cpu"]),
            "asked_p50_ms": ref["asked"], "asked_ratio": p50 / (ref["asked"] + ref["embed"])}


class Searches:
    """The served searches, each timed from its first byte sent to its answer's last read: the request's
    bytes made before, over one keep-alive socket (bench/wire.py: httpx's own work is not the face's)."""

    def __init__(self, url: str, key: str) -> None:
        """Connect to the server at this base URL, with this API key."""
        self.key = key
        self.conn = Connection(port_of(url))

    def search(self, query: str) -> float:
        """Search the `scale` namespace for the query (limit 10); the ms it took, the answer checked."""
        request = post("/ns/scale/search", orjson.dumps({"query": query, "limit": 10}),
                       {"authorization": f"Bearer {self.key}"})
        began = time.perf_counter()
        status, body = self.conn.send(request)
        elapsed = (time.perf_counter() - began) * 1000
        assert status == 200, body[:300]
        return elapsed

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


def served_blocks(http: Searches, pid: int, queries: Sequence[str], reference: Reference,
                  size: int) -> tuple[list[float], float]:
    """The served searches of `queries` (ms each) and the server's CPU ms per search, in blocks of `size`,
    each block's in-process reference timed right after it (`reference.block`). Each block, on each side,
    starts with an untimed query of its own (the block's first, marked), so that no answer comes from
    the query cache."""
    latencies: list[float] = []
    cpu_ns = 0
    for part in blocks(queries, size):
        http.search(f"{part[0]} (warm-up)")
        before = task_cpu_ns(pid)
        for q in part:
            latencies.append(http.search(q))
        after = task_cpu_ns(pid)
        if before is not None and after is not None:
            cpu_ns += after - before
        reference.block(part, warm=f"{part[0]} (in-process warm-up)")
    return latencies, cpu_ns / len(latencies) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ingest-docs", type=int, default=300)
    parser.add_argument("--samples", type=int, default=10, help="documents timed from done to searchable")
    parser.add_argument("--sizes", default="10000,100000", help="chunks + memories, comma-separated")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--data", type=Path, help="fill this data directory once and reuse it (part 2)")
    parser.add_argument("--skip-ingest", action="store_true", help="part 2 only")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure part 2 this many times in turn, each with a fresh server and its in-process"
                             " figures right after: the host's speed drifts between minutes, a median of rounds less")
    parser.add_argument("--face-embedders", default="auto",
                        help="--face-embedder specs to compare in this run, e.g. local,auto (float32, int8)")
    parser.add_argument("--interleave", type=int, default=0, metavar="N",
                        help="time the in-process references in blocks of N queries alternating with the served"
                             " ones on one server (paired.py), not after it: both sides meet one machine state")
    shared = Path(os.environ.get("ENGRAM_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    args = parser.parse_args()
    print(f"# bench/v5.py on {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    specs = [s for s in args.face_embedders.split(",") if s]
    if not args.skip_ingest:
        print("\n| ingest, face embedder | documents | items | seconds | documents/s | done → searchable p50 | max |")
        print("|---|---|---|---|---|---|---|")
        for spec in specs:
            result = ingest(args.scifact, args.ingest_docs, args.samples, spec)
            print(f"| {spec} | {result['docs']} | {result['items']} | {result['seconds']:.1f} |"
                  f" {result['docs_per_s']:.1f} | {result['searchable_p50_s'] * 1000:.0f} ms |"
                  f" {result['searchable_max_s'] * 1000:.0f} ms |", flush=True)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if sizes:
        print("\nin-process references: " + (f"in blocks of {args.interleave} queries alternating with the served ones"
                                            " (paired.py)" if args.interleave else "after each round's served searches"))
        print("\n| chunks + memories | documents | fill s (stand-in vectors) | face embedder | search p50 ms |"
              " p99 ms | engine in-process p50 ms | query embedding p50 ms | p50 / (engine + embedding) |"
              " server CPU ms per search | engine CPU ms | embedding CPU ms | CPU / (engine + embedding) |"
              " embedding then engine, in sequence, p50 ms | p50 / that |"
              " engine as the face asks it (content words, columns) p50 ms | p50 / (that + embedding) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        rows = scale(args.scifact, sizes, args.queries, args.data, specs, args.rounds, args.interleave)
        for row in rows:
            print(f"| {row['items']} | {row['docs']} | {row['fill_s']:.0f} | {row['embedder']} | {row['p50_ms']:.2f} |"
                  f" {row['p99_ms']:.2f} | {row['engine_p50_ms']:.2f} | {row['embed_p50_ms']:.2f} |"
                  f" {row['ratio']:.2f} | {row['server_cpu_ms']:.2f} | {row['engine_cpu_ms']:.2f} |"
                  f" {row['embed_cpu_ms']:.2f} | {row['cpu_ratio']:.2f} | {row['sequence_p50_ms']:.2f} |"
                  f" {row['sequence_ratio']:.2f} | {row['asked_p50_ms']:.2f} | {row['asked_ratio']:.2f} |", flush=True)
        if args.rounds > 1:
            print("\n| chunks + memories | face embedder | rounds | median p50 / (engine + embedding) |"
                  " median CPU / (engine + embedding) | median p50 / (in sequence) |"
                  " median p50 / (engine as the face asks it + embedding) |\n|---|---|---|---|---|---|---|")
            for items_, model_ in dict.fromkeys((r["items"], r["embedder"]) for r in rows):
                mine = [r for r in rows if (r["items"], r["embedder"]) == (items_, model_)]
                print(f"| {items_} | {model_} | {len(mine)} | {statistics.median(r['ratio'] for r in mine):.2f} |"
                      f" {statistics.median(r['cpu_ratio'] for r in mine):.2f} |"
                      f" {statistics.median(r['sequence_ratio'] for r in mine):.2f} |"
                      f" {statistics.median(r['asked_ratio'] for r in mine):.2f} |")
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
