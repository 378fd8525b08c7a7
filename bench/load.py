"""Load by hand: twice the measured capacity against a served space, and what admission did.

Builds a synthetic space (--n memories, 64-dim vectors), serves it with `engram-index serve`
(--insecure-open, no embedder), measures its capacity with closed-loop hybrid searches (16 at
once, admission off), then serves it again admitting `--rate` = the capacity (burst the same) and
offers twice the capacity, open loop, for --seconds. Prints a table: every answer by status, the
admitted rate against the token bucket's bound (burst + rate x seconds), the admitted requests'
p50/p99 measured from their scheduled send time (no coordinated omission), requests that got no
answer, and the server's RSS at the start and the end.

    python bench/load.py --n 20000 --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from engram_index.collections import Collections  # noqa: E402
from engram_index.engine.types import Document, ModelIdentity  # noqa: E402
from engram_index.engram.records import encode_query_vector  # noqa: E402
from engram_index.store.sqlite import StoredDocument  # noqa: E402
from engram_index.testkit.serve import free_port  # noqa: E402

SPACE = "at://did:plc:load2load2load2load2load2lo/space/garden.engram.space/load"
MODEL = ModelIdentity("m", "sha256:00", 64)
WORDS = ["river", "stone", "cloud", "ember", "maple", "quartz", "delta", "lumen", "orbit", "fjord", "cedar", "basalt"]


def build(data: Path, n: int) -> None:
    """A space of n memories with random words and vectors."""
    rng = np.random.default_rng(18)
    spaces = Collections(data)
    try:
        spaces.ensure_space(SPACE, MODEL)
        for start in range(0, n, 5000):
            docs = []
            for i in range(start, min(n, start + 5000)):
                text = " ".join(rng.choice(WORDS, 6)) + f" w{i}"
                vec = rng.standard_normal(MODEL.dims).astype("<f2").tobytes()
                docs.append(StoredDocument(Document(
                    id=f"{SPACE}/did:plc:a/garden.engram.memory/r{i}", author="did:plc:a", text=text,
                    created_ms=1_700_000_000_000 + i, vector=vec, metadata={"cid": "bafyreiexample"})))
            spaces.write(SPACE, docs)
    finally:
        spaces.close()


def serve(data: Path, port: int, rate: float, burst: float) -> subprocess.Popen[bytes]:
    """The server, loaded and answering."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "engram_index.cli", "serve", "--data", str(data), "--port", str(port),
         "--insecure-open", "--embedder", "none", "--no-access-log", "--rate", str(rate), "--burst", str(burst)],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            r = httpx.get(f"{url}/xrpc/garden.engram.getSpaceStatus", params={"space": SPACE}, timeout=5)
            if r.status_code == 200 and not r.json().get("building") and httpx.get(
                    f"{url}/xrpc/garden.engram.searchMemories", params={"space": SPACE, "q": "x", "mode": "keyword"},
                    timeout=5).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit("the server did not start")


def queries(count: int) -> list[dict[str, str]]:
    """Hybrid searches: two words and a random vector."""
    rng = np.random.default_rng(7)
    return [{"space": SPACE, "q": " ".join(rng.choice(WORDS, 2)), "model": MODEL.model, "modelDigest": MODEL.digest,
             "vector": encode_query_vector(rng.standard_normal(MODEL.dims)), "limit": "10"} for _ in range(count)]


@dataclass
class Result:
    """What one run sent and got."""

    seconds: float
    offered: float = 0.0  # requests a second sent (open loop) or achieved (closed loop)
    statuses: Counter[int] = field(default_factory=Counter)
    names: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)  # admitted (200) only, seconds
    window: float = 0.0  # from the first send to the last answer: when admission can have happened
    unanswered: int = 0
    rss: tuple[float, float] = (0.0, 0.0)

    @property
    def sent(self) -> int:
        """Requests sent."""
        return sum(self.statuses.values()) + self.unanswered

    def percentile(self, p: float) -> float:
        """A latency percentile of the admitted requests, in ms."""
        return float(np.percentile(self.latencies, p) * 1000) if self.latencies else float("nan")


async def _one(client: httpx.AsyncClient, url: str, params: dict[str, str], scheduled: float, out: Result) -> None:
    """Send one search, recording its status and (when admitted) its latency from `scheduled`."""
    try:
        r = await client.get(f"{url}/xrpc/garden.engram.searchMemories", params=params)
    except httpx.HTTPError:
        out.unanswered += 1
        return
    out.statuses[r.status_code] += 1
    if r.status_code == 200:
        out.latencies.append(time.monotonic() - scheduled)
    else:
        try:
            out.names[str(r.json().get("error"))] += 1
        except ValueError:
            out.names["(not JSON)"] += 1


async def closed_loop(url: str, seconds: float, clients: int) -> Result:
    """`clients` searching back to back for `seconds`: the capacity."""
    out = Result(seconds)
    qs = queries(997)
    end = time.monotonic() + seconds
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=clients)) as client:
        async def loop(k: int) -> None:
            i = k
            while time.monotonic() < end:
                await _one(client, url, qs[i % len(qs)], time.monotonic(), out)
                i += clients
        await asyncio.gather(*(loop(k) for k in range(clients)))
    out.offered = out.statuses[200] / seconds
    return out


async def open_loop(url: str, seconds: float, rate: float, pid: int) -> Result:
    """Send at `rate` a second for `seconds` whatever the answers (up to 256 connections)."""
    out = Result(seconds, offered=rate)
    qs = queries(997)
    rss_start = psutil.Process(pid).memory_info().rss / 2**20
    tasks: set[asyncio.Task[None]] = set()
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=256)) as client:
        t0 = time.monotonic()
        total = int(rate * seconds)
        for i in range(total):
            scheduled = t0 + i / rate
            delay = scheduled - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            task = asyncio.create_task(_one(client, url, qs[i % len(qs)], scheduled, out))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
        out.window = time.monotonic() - t0
    out.rss = (rss_start, psutil.Process(pid).memory_info().rss / 2**20)
    return out


def admitted_bound(rate: float, burst: float, seconds: float) -> int:
    """The most a token bucket (rate, burst) admits in `seconds`."""
    return int(burst + rate * seconds) + 1


def main() -> None:
    """Measure capacity, offer twice that, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--capacity-seconds", type=float, default=10.0)
    parser.add_argument("--capacity", type=float, help="Skip measuring: use this many searches a second.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        build(data, args.n)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        capacity = args.capacity
        if capacity is None:
            proc = serve(data, port, 1e6, 1e6)
            try:
                measured = asyncio.run(closed_loop(url, args.capacity_seconds, 16))
            finally:
                proc.terminate()
                proc.wait(30)
            capacity = measured.offered
            print(f"capacity: {capacity:.0f} searches/s (16 clients, closed loop, p99 {measured.percentile(99):.0f} ms)")
        rate = max(1.0, round(capacity))
        proc = serve(data, port, rate, rate)
        try:
            result = asyncio.run(open_loop(url, args.seconds, 2 * rate, proc.pid))
        finally:
            proc.terminate()
            proc.wait(30)
    bound = admitted_bound(rate, rate, result.window)
    print(f"\n### load: garden.engram searchMemories (hybrid), {args.n} memories, {args.seconds:.0f} s at 2x capacity\n")
    print("| offered/s | admitted --rate/--burst | sent | 200 | 429 | 503 | other | no answer | admitted/s "
          "| bucket bound (burst + rate x window) | p50 ms | p99 ms | RSS MB start → end |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    other = sum(v for s, v in result.statuses.items() if s not in (200, 429, 503))
    print(f"| {2 * rate:.0f} | {rate:.0f}/{rate:.0f} | {result.sent} | {result.statuses[200]} | {result.statuses[429]} "
          f"| {result.statuses[503]} | {other} | {result.unanswered} | {result.statuses[200] / args.seconds:.1f} "
          f"| {bound} | {result.percentile(50):.0f} | {result.percentile(99):.0f} "
          f"| {result.rss[0]:.0f} → {result.rss[1]:.0f} |")
    print(f"\nwindow (first send to last answer): {result.window:.1f} s; error names: {dict(result.names)}")
    print(f"admission exact: every refusal a 429/503 in the envelope: {other == 0 and result.unanswered == 0}; "
          f"admitted within the bucket: {result.statuses[200] <= bound}")


if __name__ == "__main__":
    main()
