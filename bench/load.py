"""Load by hand: twice the measured capacity against a served face, and what admission did.

`--face engram` (the default) builds a synthetic garden space (--n memories, 64-dim vectors) and
sends hybrid searches; `--face engram-embed` builds 64 spaces of 64 authorities under MiniLM's
model and sends searches of q alone, which the service embeds (its embedding queue answers
`EmbedderBusy`, each authority's embedding bucket `RateLimitExceeded`); `--face kindgi` writes --n facts through the face and sends retrieves
(mode both) with a share of fact writes (`--writes`); `--face v5` adds --n documents, waits until
they are processed and sends hybrid searches with a share of document adds. Each face is served
by `engram-index serve` (--insecure-open; the hashing embedder for v5 and Kindgi, none for the
garden face, whose searches carry their vectors). Capacity is measured with 16 closed-loop
clients (admission off); the face is then served again admitting `--rate` (per space) or
`--key-rate` (per key; one key sends everything) = the capacity (or `--admit-share` of it),
burst the same, and twice the capacity is offered open loop for --seconds. Prints a table: every
answer by status and name, the admitted count against the token bucket's bound (burst + rate x
window), the admitted requests' p50/p99 from their scheduled send time (no coordinated omission) and from the write,
requests that got no answer, the server's RSS at the start and the end, and (writes) whether
every acknowledged write is found after a restart.

    python bench/load.py --n 20000 --seconds 60
    python bench/load.py --n 20000 --seconds 60 --admit-share 0.8
    python bench/load.py --face engram-embed --seconds 60
    python bench/load.py --face kindgi --n 2000 --seconds 60
    python bench/load.py --face v5 --n 1000 --seconds 60
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

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from load_faces import EMBED_AUTHORITIES, EMBED_BURST, EMBED_RATE, FACES, Workload, build, fill, missing, serve  # noqa: E402
from engram_index.testkit.serve import free_port  # noqa: E402

@dataclass
class Result:
    """What one run sent and got."""

    seconds: float
    offered: float = 0.0  # requests a second sent (open loop) or achieved (closed loop)
    statuses: Counter[int] = field(default_factory=Counter)
    names: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)  # refusals by limit: "rate" or "at once"
    latencies: list[float] = field(default_factory=list)  # admitted (2xx) only, seconds
    window: float = 0.0  # from the first send to the last answer: when admission can have happened
    wire: list[float] = field(default_factory=list)  # admitted only, from the write on a connection
    unanswered: int = 0
    rss: tuple[float, float] = (0.0, 0.0)
    rss_by_tenth: list[tuple[float, float]] = field(default_factory=list)  # (RSS, anonymous) MB at each tenth
    acknowledged: list[str] = field(default_factory=list)  # ids of the writes answered 2xx

    @property
    def admitted(self) -> int:
        """Requests answered 2xx."""
        return sum(v for s, v in self.statuses.items() if 200 <= s < 300)

    @property
    def sent(self) -> int:
        """Requests sent."""
        return sum(self.statuses.values()) + self.unanswered

    def percentile(self, p: float, wire: bool = False) -> float:
        """A latency percentile of the admitted requests in ms: from the scheduled time, or from the write."""
        values = self.wire if wire else self.latencies
        return float(np.percentile(values, p) * 1000) if values else float("nan")


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

    def close(self) -> None:
        """Close the idle connections."""
        while not self.free.empty():
            self.free.get_nowait()[1].close()


async def _one(pool: Pool, work: Workload, i: int, scheduled: float, out: Result, timeout: float = 30.0) -> None:
    """Send request i, recording its status and (when admitted) its latency from `scheduled`."""
    conn = None
    try:
        async with asyncio.timeout(timeout):
            conn = await pool.get()
            reader, writer = conn
            sent = time.monotonic()
            writer.write(work.request(i))
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
    if 200 <= status < 300:
        out.latencies.append(time.monotonic() - scheduled)
        out.wire.append(time.monotonic() - sent)
        ident = work.acknowledged(i, status, body)
        if ident is not None:
            out.acknowledged.append(ident)
    else:
        out.names[work.refusal_name(body)] += 1
        out.reasons[work.refusal_reason(body)] += 1


async def closed_loop(port: int, seconds: float, clients: int, work: Workload) -> Result:
    """`clients` sending back to back for `seconds`: the capacity."""
    out = Result(seconds)
    pool = Pool(port, clients)
    end = time.monotonic() + seconds

    async def loop(k: int) -> None:
        i = k
        while time.monotonic() < end:
            await _one(pool, work, i, time.monotonic(), out)
            i += clients

    await asyncio.gather(*(loop(k) for k in range(clients)))
    pool.close()
    out.offered = out.admitted / seconds
    return out


async def open_loop(port: int, seconds: float, rate: float, pid: int, work: Workload, connections: int = 64,
                    first: int = 10**7) -> Result:
    """Send at `rate` a second for `seconds` whatever the answers, over up to `connections` connections.

    Requests are numbered from `first`, so that their writes differ from the capacity run's.
    """
    out = Result(seconds, offered=rate)
    pool = Pool(port, connections)
    server = psutil.Process(pid)
    rss_start = server.memory_info().rss / 2**20
    tasks: set[asyncio.Task[None]] = set()
    t0 = time.monotonic()

    async def sample_rss() -> None:
        # Tenths of the run tell a warm-up that levels off from growth that goes on.
        for tenth in range(1, 11):
            await asyncio.sleep(max(0.0, t0 + seconds * tenth / 10 - time.monotonic()))
            out.rss_by_tenth.append(resident(pid))

    sampler = asyncio.create_task(sample_rss())
    for k in range(int(rate * seconds)):
        scheduled = t0 + k / rate
        delay = scheduled - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.create_task(_one(pool, work, first + k, scheduled, out))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.gather(*tasks)
    out.window = time.monotonic() - t0
    await sampler
    out.rss = (rss_start, server.memory_info().rss / 2**20)
    pool.close()
    return out


def resident(pid: int) -> tuple[float, float]:
    """A process's resident set and its anonymous part (heap, not mapped files), in MB (Linux /proc)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["RssAnon"].split()[0]) / 1024


def admitted_bound(rate: float, burst: float, seconds: float) -> int:
    """The most a token bucket (rate, burst) admits in `seconds`."""
    return int(burst + rate * seconds) + 1


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server and wait for it."""
    proc.terminate()
    proc.wait(30)


REFUSAL = {"engram": {"RateLimitExceeded"}, "engram-embed": {"RateLimitExceeded", "EmbedderBusy"},
           "kindgi": {"rate-limit-exceeded"}, "v5": {"rate limit exceeded"}}
WHAT = {"engram": "garden.engram searchMemories (hybrid)",
        "engram-embed": f"garden.engram searchMemories, q alone embedded by the service, {EMBED_AUTHORITIES} authorities",
        "kindgi": "Kindgi retrieve (mode both)", "v5": "v5 search (hybrid)"}


def report(face: str, args: argparse.Namespace, rate: float, result: Result, lost: list[str] | None) -> None:
    """Print the run's table and its checks."""
    bound = admitted_bound(rate, rate, result.window)
    if face == "engram-embed":  # each authority's embedding bucket bounds it too, and more tightly
        bound = min(bound, EMBED_AUTHORITIES * admitted_bound(EMBED_RATE, EMBED_BURST, result.window))
    load = os.getloadavg()
    writes = f" + {args.writes:.0%} writes" if args.writes else ""
    print(f"\n### load: {WHAT[face]}{writes}, n={args.n}, {args.seconds:.0f} s at 2x capacity, admitting "
          f"{args.admit_share:g} x capacity "
          f"(load average {load[0]:.1f} / {load[1]:.1f} at the end)\n")
    print("| offered/s | admitted rate/burst | sent | 2xx | 429 | 503 | other | no answer | admitted/s over the window "
          "| bucket bound (burst + rate x window) | p50 / p99 ms from schedule | p50 / p99 ms from the write "
          "| RSS MB start → end |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    other = sum(v for s, v in result.statuses.items() if not 200 <= s < 300 and s not in (429, 503))
    print(f"| {result.offered:.0f} | {rate:.0f}/{rate:.0f} | {result.sent} | {result.admitted} | {result.statuses[429]} "
          f"| {result.statuses[503]} | {other} | {result.unanswered} | {result.admitted / result.window:.1f} "
          f"| {bound} | {result.percentile(50):.0f} / {result.percentile(99):.0f} "
          f"| {result.percentile(50, True):.0f} / {result.percentile(99, True):.0f} "
          f"| {result.rss[0]:.0f} → {result.rss[1]:.0f} |")
    print(f"\nwindow (first send to last answer): {result.window:.1f} s; statuses: {dict(sorted(result.statuses.items()))}"
          f"; error names: {dict(result.names)}; refused by: {dict(result.reasons)}")
    # The file-backed part is the data files' pages read through mmap: the page cache, not the heap.
    print("server RSS MB (anonymous) at each tenth of the run: "
          + " ".join(f"{rss:.0f} ({anon:.0f})" for rss, anon in result.rss_by_tenth))
    exact = other == 0 and result.unanswered == 0 and set(result.names) <= REFUSAL[face]
    print(f"admission exact: every refusal a 429 or 503 {sorted(REFUSAL[face])} in the envelope: {exact}; "
          f"admitted within the bucket: {result.admitted <= bound}")
    if lost is not None:
        print(f"acknowledged writes: {len(result.acknowledged)}; found after a restart: "
              f"{len(result.acknowledged) - len(lost)}; lost: {len(lost)} {lost[:5]}")


def refusal_cost(face: str, data: Path, port: int, url: str, work: Workload, args: argparse.Namespace) -> None:
    """Requests a second the server answers when it admits nothing (after one), beside those it admits."""
    proc = serve(face, data, port, 1e6, 1e6)
    try:
        fill(work, url, args.n)
        admitted = asyncio.run(closed_loop(port, args.capacity_seconds, 16, work))
    finally:
        stop(proc)
    proc = serve(face, data, port, 0.1, 1)
    try:
        refused = asyncio.run(closed_loop(port, args.capacity_seconds, 16, work))
    finally:
        stop(proc)
    answered = sum(refused.statuses.values()) / args.capacity_seconds
    load = os.getloadavg()
    print(f"\n### refusal cost: {WHAT[face]}, n={args.n} (load average {load[0]:.1f})\n")
    print("| admitted/s (admission off) | ms each | refused/s (admission on, rate 0.1) | ms each | statuses refused |")
    print("|---:|---:|---:|---:|---|")
    print(f"| {admitted.offered:.0f} | {1000 / admitted.offered:.2f} | {answered:.0f} | {1000 / answered:.2f} "
          f"| {dict(refused.statuses)} |")


def main() -> None:
    """Measure capacity, offer twice that, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--face", choices=FACES, default="engram")
    parser.add_argument("--n", type=int, default=None, help="Memories, facts or documents (20000, 2000, 1000).")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--capacity-seconds", type=float, default=10.0)
    parser.add_argument("--capacity", type=float, help="Skip measuring: use this many requests a second.")
    parser.add_argument("--writes", type=float, default=None, help="Share of writes (v5, Kindgi; default 0.1).")
    parser.add_argument("--admit-share", type=float, default=1.0,
                        help="Admit this share of the capacity (refusals cost CPU too: below 1 leaves room for them).")
    parser.add_argument("--refusals", action="store_true",
                        help="Only measure what refusing costs: closed loop against a server admitting nothing.")
    args = parser.parse_args()
    face = args.face
    args.n = args.n if args.n is not None else {"engram": 20000, "engram-embed": 12800, "kindgi": 2000, "v5": 1000}[face]
    args.writes = 0.0 if face.startswith("engram") else (0.1 if args.writes is None else args.writes)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        work = build(face, data, args.n, args.writes)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        capacity = args.capacity
        if args.refusals:
            refusal_cost(face, data, port, url, work, args)
            return
        proc = serve(face, data, port, 1e6, 1e6)
        try:
            fill(work, url, args.n)
            if capacity is None:
                measured = asyncio.run(closed_loop(port, args.capacity_seconds, 16, work))
                capacity = measured.offered
                print(f"capacity: {capacity:.0f} requests/s (16 clients, closed loop, admitted p99 "
                      f"{measured.percentile(99):.0f} ms, statuses {dict(measured.statuses)})")
        finally:
            stop(proc)
        rate = max(1.0, round(capacity * args.admit_share))
        proc = serve(face, data, port, rate, rate)
        try:
            result = asyncio.run(open_loop(port, args.seconds, 2 * round(capacity), proc.pid, work))
        finally:
            stop(proc)
        lost = None
        if args.writes:
            proc = serve(face, data, port, 1e6, 1e6)  # restarted: what was acknowledged must still be there
            try:
                lost = missing(work, url, result.acknowledged)
            finally:
                stop(proc)
    report(face, args, rate, result, lost)


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
