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
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

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
    wire: list[float] = field(default_factory=list)  # admitted only, from the write on a connection
    unanswered: int = 0
    rss: tuple[float, float] = (0.0, 0.0)

    @property
    def sent(self) -> int:
        """Requests sent."""
        return sum(self.statuses.values()) + self.unanswered

    def percentile(self, p: float, wire: bool = False) -> float:
        """A latency percentile of the admitted requests in ms: from the scheduled time, or from the write."""
        values = self.wire if wire else self.latencies
        return float(np.percentile(values, p) * 1000) if values else float("nan")


def prepared(count: int) -> list[bytes]:
    """The raw bytes of `count` searches, encoded once so that the client spends little CPU."""
    return [b"GET /xrpc/garden.engram.searchMemories?" + urlencode(q).encode()
            + b" HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n" for q in queries(count)]


class Pool:
    """Keep-alive connections to the server; a request waits for a free one (and that wait counts)."""

    def __init__(self, port: int, size: int) -> None:
        """Up to `size` connections, opened when first needed."""
        self.port, self.size, self.opened = port, size, 0
        self.free: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()

    async def get(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A free connection, opening one while under the size."""
        if self.free.empty() and self.opened < self.size:
            self.opened += 1
            return await asyncio.open_connection("127.0.0.1", self.port)
        return await self.free.get()

    def put(self, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None) -> None:
        """Give a connection back (None: it broke, and may be opened again)."""
        if conn is None:
            self.opened -= 1
        else:
            self.free.put_nowait(conn)


async def _one(pool: Pool, request: bytes, scheduled: float, out: Result, timeout: float = 30.0) -> None:
    """Send one search, recording its status and (when admitted) its latency from `scheduled`."""
    conn = None
    try:
        async with asyncio.timeout(timeout):
            conn = await pool.get()
            reader, writer = conn
            sent = time.monotonic()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            length = next(int(v.split(b":", 1)[1]) for v in lines if v.lower().startswith(b"content-length:"))
            body = await reader.readexactly(length)
            status = int(lines[0].split(b" ", 2)[1])
            if any(v.lower() == b"connection: close" for v in lines):
                writer.close()
                conn = None
    except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError, StopIteration):
        out.unanswered += 1
        if conn is not None:
            conn[1].close()
        pool.put(None)
        return
    pool.put(conn)
    out.statuses[status] += 1
    if status == 200:
        out.latencies.append(time.monotonic() - scheduled)
        out.wire.append(time.monotonic() - sent)
    else:
        try:
            out.names[str(json.loads(body).get("error"))] += 1
        except ValueError:
            out.names["(not JSON)"] += 1


async def closed_loop(port: int, seconds: float, clients: int) -> Result:
    """`clients` searching back to back for `seconds`: the capacity."""
    out = Result(seconds)
    reqs = prepared(997)
    pool = Pool(port, clients)
    end = time.monotonic() + seconds

    async def loop(k: int) -> None:
        i = k
        while time.monotonic() < end:
            await _one(pool, reqs[i % len(reqs)], time.monotonic(), out)
            i += clients

    await asyncio.gather(*(loop(k) for k in range(clients)))
    out.offered = out.statuses[200] / seconds
    return out


async def open_loop(port: int, seconds: float, rate: float, pid: int, connections: int = 64) -> Result:
    """Send at `rate` a second for `seconds` whatever the answers, over up to `connections` connections."""
    out = Result(seconds, offered=rate)
    reqs = prepared(997)
    pool = Pool(port, connections)
    rss_start = psutil.Process(pid).memory_info().rss / 2**20
    tasks: set[asyncio.Task[None]] = set()
    t0 = time.monotonic()
    for i in range(int(rate * seconds)):
        scheduled = t0 + i / rate
        delay = scheduled - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.create_task(_one(pool, reqs[i % len(reqs)], scheduled, out))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.gather(*tasks)
    out.window = time.monotonic() - t0
    out.rss = (rss_start, psutil.Process(pid).memory_info().rss / 2**20)
    while not pool.free.empty():
        pool.free.get_nowait()[1].close()
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
        capacity = args.capacity
        if capacity is None:
            proc = serve(data, port, 1e6, 1e6)
            try:
                measured = asyncio.run(closed_loop(port, args.capacity_seconds, 16))
            finally:
                proc.terminate()
                proc.wait(30)
            capacity = measured.offered
            print(f"capacity: {capacity:.0f} searches/s (16 clients, closed loop, p99 {measured.percentile(99):.0f} ms)")
        rate = max(1.0, round(capacity))
        proc = serve(data, port, rate, rate)
        try:
            result = asyncio.run(open_loop(port, args.seconds, 2 * rate, proc.pid))
        finally:
            proc.terminate()
            proc.wait(30)
    bound = admitted_bound(rate, rate, result.window)
    print(f"\n### load: garden.engram searchMemories (hybrid), {args.n} memories, {args.seconds:.0f} s at 2x capacity\n")
    print("| offered/s | admitted --rate/--burst | sent | 200 | 429 | 503 | other | no answer | admitted/s over the window "
          "| bucket bound (burst + rate x window) | p50 / p99 ms from schedule | p50 / p99 ms from the write "
          "| RSS MB start → end |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    other = sum(v for s, v in result.statuses.items() if s not in (200, 429, 503))
    print(f"| {2 * rate:.0f} | {rate:.0f}/{rate:.0f} | {result.sent} | {result.statuses[200]} | {result.statuses[429]} "
          f"| {result.statuses[503]} | {other} | {result.unanswered} | {result.statuses[200] / result.window:.1f} "
          f"| {bound} | {result.percentile(50):.0f} / {result.percentile(99):.0f} "
          f"| {result.percentile(50, True):.0f} / {result.percentile(99, True):.0f} "
          f"| {result.rss[0]:.0f} → {result.rss[1]:.0f} |")
    print(f"\nwindow (first send to last answer): {result.window:.1f} s; error names: {dict(result.names)}")
    print(f"admission exact: every refusal a 429/503 in the envelope: {other == 0 and result.unanswered == 0}; "
          f"admitted within the bucket: {result.statuses[200] <= bound}")


if __name__ == "__main__":
    main()
