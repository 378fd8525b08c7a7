"""Sync benchmark, in the fake space network (real HTTP on loopback, real commits and CARs).

1. First full sync: a space of --n memories (384-dim vectors) spread over --members repos; time
   from the service's start until every memory is stored, and records per second.
2. Write to searchable: --writes single writes, one after another; for each, the time from the
   member's write (which notifies the service) until a keyword search finds it. p50 and p95.

    python bench/sync.py [--n 100000] [--members 10] [--writes 50]
"""

from __future__ import annotations

import argparse
import base64
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rich.console import Console  # noqa: E402
from rich.progress import Progress  # noqa: E402
from rich.table import Table  # noqa: E402

from engram_index.engram.api.limits import SpaceLimits  # noqa: E402
from engram_index.app import create_app  # noqa: E402
from engram_index.engram.auth.credentials import SpaceCredentials  # noqa: E402
from engram_index.engram.auth.state import AuthState  # noqa: E402
from engram_index.engram.identity.did import DidResolver  # noqa: E402
from engram_index.collections import Collections  # noqa: E402
from engram_index.engram.syncstate import SyncState  # noqa: E402
from engram_index.engram.sync.client import Account  # noqa: E402
from engram_index.engram.sync.runner import SyncConfig  # noqa: E402
from engram_index.testkit.serve import free_port, serving  # noqa: E402
from engram_index.testkit.spacenet import SpaceNetwork  # noqa: E402

DIMS = 384
MODEL = {"model": "all-MiniLM-L6-v2", "modelDigest": "sha256:bench", "dims": DIMS}
WORDS = "memory agent index vector keyword search space note fact deploy server retry policy cache".split()


def memory(rng: np.random.Generator, i: int) -> dict[str, object]:
    """A synthetic memory with a random unit vector."""
    vector = rng.standard_normal(DIMS).astype(np.float32)
    vector /= np.linalg.norm(vector)
    text = " ".join(rng.choice(WORDS, 12)) + f" item{i}"
    raw = vector.astype("<f2").tobytes()
    return {"$type": "garden.engram.memory", "text": text, "tags": [str(rng.choice(WORDS))],
            "createdAt": "2026-11-01T00:00:00.000Z",
            "embedding": {**MODEL, "encoding": "f16le", "vector": {"$bytes": base64.b64encode(raw).decode().rstrip("=")}}}


def main() -> None:
    """Run both measurements and print one table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--writes", type=int, default=50)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    console = Console()
    rows: list[tuple[str, str]] = []
    with SpaceNetwork() as net, tempfile.TemporaryDirectory() as tmp:
        indexer, authority = net.account(), net.authority_account()
        members = [net.account() for _ in range(args.members)]
        space = net.create_space(members=[authority.did, *(m.did for m in members)], readers=[indexer.did])
        net.write(space, authority.did, "garden.engram.config", "self",
                  {"$type": "garden.engram.config", **MODEL, "createdAt": "2026-11-01T00:00:00.000Z"})
        per = args.n // args.members
        with Progress(console=console, transient=True) as bar:
            task = bar.add_task("writing the space", total=args.n)
            for m, member in enumerate(members):
                for start in range(0, per, 1000):
                    net.apply(space, member.did, [("garden.engram.memory", f"3k{m:03d}{i:08d}", memory(rng, i))
                                                  for i in range(start, min(per, start + 1000))])
                    bar.advance(task, min(1000, per - start))
        data = Path(tmp)
        opened = Collections(data)
        SyncState(opened.store).add_space(space, 0)
        opened.close()
        port = free_port()
        url, did = f"http://127.0.0.1:{port}", f"did:web:127.0.0.1%3A{port}"
        checker = SpaceCredentials(did, DidResolver(net.plc_url), AuthState())
        sync = SyncConfig(Account(indexer.did, indexer.password), net.plc_url, url, 3600.0)
        total = per * args.members
        started = time.perf_counter()
        app = create_app(data, did, authenticator=checker, limits=SpaceLimits(rate=1e6, burst=1e6), sync=sync)
        headers = net.authority.member(space, did).headers()
        with serving(app, port=port):
            while True:
                r = httpx.get(f"{url}/xrpc/garden.engram.getSpaceStatus", params={"space": space}, headers=headers)
                if r.status_code == 200 and r.json()["memories"] >= total:
                    break
                time.sleep(0.1)
            first = time.perf_counter() - started
            rows.append((f"first full sync of {total:,} memories ({args.members} repos)", f"{first:.1f} s"))
            rows.append(("  records per second", f"{total / first:,.0f}"))
            author = members[0].did
            latencies = []
            for i in range(args.writes):
                token = f"fresh{i}token"
                value = memory(rng, 10_000_000 + i)
                value["text"] = f"{value['text']} {token}"
                begin = time.perf_counter()
                net.write(space, author, "garden.engram.memory", f"3kz{i:010d}", value)
                while True:
                    r = httpx.get(f"{url}/xrpc/garden.engram.searchMemories", headers=headers,
                                  params={"space": space, "q": token, "mode": "keyword", "limit": 1})
                    if r.status_code == 200 and r.json()["memories"]:
                        break
                    time.sleep(0.005)
                latencies.append(time.perf_counter() - begin)
            latencies.sort()
            rows.append((f"write → searchable, p50 of {args.writes}", f"{statistics.median(latencies) * 1000:.0f} ms"))
            rows.append(("write → searchable, p95", f"{latencies[int(len(latencies) * 0.95) - 1] * 1000:.0f} ms"))
    table = Table(title="sync in the fake space network")
    table.add_column("what")
    table.add_column("result", justify="right")
    for row in rows:
        table.add_row(*row)
    console.print(table)


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
