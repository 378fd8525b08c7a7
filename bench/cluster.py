"""Nodes over one PostgreSQL: write rate against SQLite, cross-node visibility, search per node, a new node's start.

Starts a throwaway PostgreSQL (testkit/postgres.py: fsync off, as a test server; so the write rate
is PostgreSQL's work and round trips, not a disk's flush), and two nodes (two Collections, each with
its own cache directory) in this process. Measures:

- writes/s of one-memory writes through the PostgreSQL store, and through the SQLite store (its
  default synchronous=FULL: each commit waits for the disk);
- cross-node visibility: a memory written on node A, until a keyword search on node B finds it
  (p50 / p99 over --probes writes);
- keyword search p50 on each node;
- the time for a new node (an empty cache directory) to load a collection of --n memories;
- with --kills K: three `engram-index serve --store` processes; Kindgi facts written through node A,
  which is killed (SIGKILL) mid-write K times and restarted; then every acknowledged fact is read
  through nodes B and C (acknowledged writes lost, the figure that must be 0).

    python bench/cluster.py [--n 20000] [--writes 300] [--probes 200] [--kills 20]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parent / "src"))
sys.path.insert(0, str(_HERE.parent))  # the test suite's serve process (roomy limits)

from engram_index.collections import Collections  # noqa: E402
from engram_index.engine.types import Document, SearchRequest  # noqa: E402
from engram_index.keys import KeyStore  # noqa: E402
from engram_index.store.postgres import PostgresStore  # noqa: E402
from engram_index.store.base import StoredDocument  # noqa: E402
from engram_index.testkit.postgres import PostgresServer  # noqa: E402
from tests.limits import ServeProcess  # noqa: E402
from machine import cpu_model  # noqa: E402

URI = "at://did:plc:bench234bench234bench234be/space/garden.engram.space/s"
WORDS = ("harbour", "lantern", "ledger", "compass", "violin", "orchard", "quilt", "atlas", "kettle", "garden")


def memory(i: int, text: str | None = None) -> StoredDocument:
    """One synthetic memory."""
    words = " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 6))
    return StoredDocument(Document(id=f"m{i}", author="did:plc:a", text=text or f"{words} note {i}", created_ms=i))


def write_rate(spaces: Collections, writes: int, start: int) -> float:
    """One-memory writes a second."""
    began = time.perf_counter()
    for i in range(start, start + writes):
        spaces.write(URI, [memory(i)])
    return writes / (time.perf_counter() - began)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def cluster_node(cache: Path, url: str) -> ServeProcess:
    """One `engram-index serve --store` process on a free loopback port (limits lifted), started by start()."""
    return ServeProcess(cache, "--store", url, "--embedder", "hashing:64")


def kills(root: Path, url: str, count: int) -> tuple[int, int, int]:
    """Kill the writing node `count` times mid-write; (acknowledged, lost, reads answered by B meanwhile)."""
    store = PostgresStore(url)
    token, _ = KeyStore(root, store).create("kindgi", {"tenant": "acme", "user": "alice", "orgs": [],
                                                       "projects": ["web"], "admin": False})
    store.close()
    headers = {"Authorization": f"Bearer {token}"}
    nodes = [cluster_node(root / f"proc-{name}", url) for name in "abc"]
    for node in nodes:
        node.start()
    a, b, c = nodes
    rng = random.Random(27)
    acknowledged: list[str] = []
    answered = 0

    def write(stop: threading.Event) -> None:
        with httpx.Client(base_url=a.url, headers=headers, timeout=10) as client:
            while not stop.is_set():
                try:
                    r = client.post("/v1/memory/facts", json={"type": "note", "content": f"entry {len(acknowledged)}",
                                                              "scope": {"tenantId": "acme", "projectId": "web"}})
                except httpx.TransportError:
                    return
                if r.status_code == 201:
                    acknowledged.append(r.json()["id"])

    try:
        for _ in range(count):
            stop = threading.Event()
            writer = threading.Thread(target=write, args=(stop,))
            writer.start()
            time.sleep(rng.uniform(0.3, 1.0))
            a.kill()
            stop.set()
            writer.join()
            # B answers meanwhile: the last acknowledged fact (or, before any, its health).
            probe = f"/v1/memory/facts/{acknowledged[-1]}" if acknowledged else "/xrpc/_health"
            if httpx.get(f"{b.url}{probe}", headers=headers).status_code == 200:
                answered += 1
            a.start()
        lost = sum(1 for node in (b, c) for i in acknowledged
                   if httpx.get(f"{node.url}/v1/memory/facts/{i}", headers=headers).status_code != 200)
    finally:
        for node in nodes:
            node.kill()
    return len(acknowledged), lost, answered


def main() -> None:
    """Run every measurement and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20000, help="memories of the collection a new node loads")
    parser.add_argument("--writes", type=int, default=300, help="one-memory writes per store for the write rate")
    parser.add_argument("--probes", type=int, default=200, help="writes on A timed until B finds them")
    parser.add_argument("--kills", type=int, default=0, help="SIGKILLs of a writing serve process (0: none)")
    args = parser.parse_args()
    server = PostgresServer()
    rows: list[tuple[str, str]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="engram-cluster-") as tmp:
            root = Path(tmp)
            url = server.database()
            embedded = Collections(root / "sqlite")
            embedded.ensure_collection(URI)
            a = Collections(root / "node-a", store=url)
            a.ensure_collection(URI)
            rows.append(("writes/s, one memory each: SQLite (synchronous=FULL)",
                         f"{write_rate(embedded, args.writes, 0):.0f}"))
            embedded.close()
            rows.append(("writes/s, one memory each: PostgreSQL (fsync off)", f"{write_rate(a, args.writes, 0):.0f}"))
            b = Collections(root / "node-b", store=url)
            b.index(URI), a.index(URI)
            seen: list[float] = []
            for p in range(args.probes):
                word = f"probe{p}x"
                began = time.perf_counter()
                a.write(URI, [memory(10_000_000 + p, f"probe text {word}")])
                while not b.search(URI, SearchRequest(q=word, mode="keyword", limit=1)).hits:
                    time.sleep(0.001)
                seen.append(time.perf_counter() - began)
            rows.append(("cross-node visibility p50 ms", f"{statistics.median(seen) * 1000:.0f}"))
            rows.append(("cross-node visibility p99 ms", f"{percentile(seen, 99) * 1000:.0f}"))
            for name, node in (("A", a), ("B", b)):
                times = []
                for k in range(200):
                    began = time.perf_counter()
                    node.search(URI, SearchRequest(q=f"{WORDS[k % len(WORDS)]} note", mode="keyword"))
                    times.append(time.perf_counter() - began)
                rows.append((f"keyword search p50 ms on node {name}", f"{statistics.median(times) * 1000:.2f}"))
            batch = 2000
            for start in range(100_000, 100_000 + args.n, batch):
                a.write(URI, [memory(i) for i in range(start, min(start + batch, 100_000 + args.n))])
            total = a.store.count(a.info(URI).id)
            began = time.perf_counter()
            fresh = Collections(root / "node-new", store=url)
            fresh.index(URI)
            rows.append((f"a new node loads the collection ({total} memories) s", f"{time.perf_counter() - began:.1f}"))
            for node in (fresh, a, b):
                node.close()
            if args.kills:
                written, lost, answered = kills(root, server.database(), args.kills)
                rows.append((f"Kindgi facts acknowledged by a node killed {args.kills} times", str(written)))
                rows.append(("acknowledged facts missing on the other nodes afterwards", str(lost)))
                rows.append((f"kills after which another node answered at once (of {args.kills})", str(answered)))
    finally:
        server.close()
    print(f"CPU: {cpu_model()}")
    print("| measure | value |\n|---|---:|")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
