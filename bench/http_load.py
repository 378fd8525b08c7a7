"""HTTP benchmark: searchMemories against a real server process, driven from a second process.

Builds a synthetic space (default 100k memories) in a data directory (a temporary one, or
--data to build once and reuse), starts `engram-index serve` on a loopback port, then runs
closed-loop clients (1, 8, 32 at once) that each send hybrid searches (vector + q, with
explanations) for a fixed time; prints requests/s, p50/p99, and the CPU time per request of the
server's processes and of the clients (on a shared machine, CPU per request is the steadier figure),
and at the end the resident and private memory of each server process. Then, once the server has
stopped, the same searches in this process (the engine's hybrid search with explanations, one at a
time): their p50 wall and thread-CPU ms, and each row's server CPU per search over that p50. The
clients cycle through 200 queries, so the server answers each many times and finds what it keeps
per query (its analysis, its documents) kept: the in-process searches are timed after one untimed
pass over every query, in the same state. (Before issue 25's twenty-second pass they were timed
from a cold start, 20 searches warmed: their p50 was 1.87-2.35 ms in three runs of the same engine
code where the warmed reference's is 1.54, which flattered the ratio.)

With `--interleave S` the in-process searches are timed beside the served ones instead: each row's
clients run in segments of S seconds, and after each segment, while the server idles, a block of
the searches runs in this process (the space opened read-only beside the server; each row's blocks
time every query once, as its clients send every query; each block after one untimed search,
paired.py). Each row's ratio then divides by the p50 of the blocks timed during that row:
both sides meet the machine of the same minutes (timed minutes apart, the reference moved 1.87-2.35
ms between runs of one tree, and the ratio 0.97-1.41 with it).

With `--threads`, each row also splits the server's CPU per search between the workers' main
threads (their event loops) and all their other threads (the search pool's, the libraries'), from
each thread's counters in /proc: where a search's hop to a pool thread goes, or does not.

Requests carry real space credentials: a PLC directory (the test kit's, in this process) publishes
the space authority's DID document, the authority mints a credential per client, and the server
checks every request (`--service-did`, `--plc-url`). `--insecure-open` serves without the check,
for comparison. The clients send pre-encoded requests over keep-alive sockets, so that the
benchmark process spends little of the machine's CPU on building requests.

    python bench/http_load.py --n 100000 --seconds 10 [--workers 2] [--insecure-open] [--data DIR]
                              [--interleave SECONDS] [--threads]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from synth import SynthSpace, make_queries, make_space  # noqa: E402
from wire import Connection  # noqa: E402  (also http_load.Connection, as other benches use it)

from engram_index.engine.types import Document, ModelIdentity, SearchRequest  # noqa: E402
from engram_index.errors import UnknownSpace  # noqa: E402
from engram_index.engram.records import encode_query_vector  # noqa: E402
from engram_index.collections import Collections  # noqa: E402
from engram_index.store.sqlite import StoredDocument  # noqa: E402
from engram_index.testkit.authority import SpaceAuthority  # noqa: E402
from engram_index.testkit.plc import FakePlc  # noqa: E402
from engram_index.testkit.serve import free_port, serving  # noqa: E402

AUTHORITY = "did:plc:http234bench234http234be"
SPACE = f"at://{AUTHORITY}/space/garden.engram.space/bench"
SERVICE_DID = "did:web:bench.invalid"
MODEL = ModelIdentity("bench-model", "sha256:bench", 384)
PATH = "/xrpc/garden.engram.searchMemories"


TURNS = 12  # with --sources: memories per conversation (runs of consecutive memories share a source)


def source_of(i: int, sources: bool) -> str | None:
    """Memory i's source: none, or (--sources) its conversation, so that garden's context pass runs."""
    return f"at://{AUTHORITY}/conversation/c{i // TURNS:06d}" if sources else None


def memory_batches(synth: SynthSpace, size: int = 2000, sources: bool = False) -> Iterator[list[StoredDocument]]:
    """The synthetic memories as records of the benchmark space, in batches of `size` as an import writes them."""
    n = len(synth.texts)
    for start in range(0, n, size):
        yield [
            StoredDocument(Document(id=f"{SPACE}/{synth.authors[i]}/garden.engram.memory/m{i:07d}",
                                    author=synth.authors[i], text=synth.texts[i], tags=synth.tags[i],
                                    created_ms=int(synth.created_ms[i]), vector=synth.vectors[i].tobytes(),
                                    source=source_of(i, sources)))
            for i in range(start, min(n, start + size))
        ]


def build(data: Path, n: int, scifact: Path, sources: bool = False, model: ModelIdentity = MODEL) -> None:
    """Write n synthetic memories into a data directory (unless it holds them), then compact its keyword index
    (`sources`: in conversations; a data directory keeps what it was built with; `model`: the space's)."""
    spaces = Collections(data)
    try:
        try:
            if spaces.store.count(spaces.info(SPACE).id) == n:
                return
        except UnknownSpace:
            pass
        spaces.ensure_collection(SPACE, model)
        for batch in memory_batches(make_space(n, scifact_dir=scifact, seed=1), sources=sources):
            spaces.write(SPACE, batch)
        spaces.index(SPACE)
        spaces.maintain()
    finally:
        spaces.close()


def prepare(query_strings: list[str], headers: dict[str, str]) -> list[bytes]:
    """The raw bytes of each request: the query string and the client's credential headers."""
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return [f"GET {PATH}?{qs} HTTP/1.1\r\nhost: 127.0.0.1\r\n{head}\r\n".encode() for qs in query_strings]


def _stat(path: str) -> list[str] | None:
    """The fields of a /proc stat file after the command's name (fields[1]: the parent, [11] and [12]: user
    and system ticks), or None when the process or thread is gone."""
    try:
        with open(path) as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _cpu_seconds(fields: list[str]) -> float:
    """The user + system CPU seconds of a stat file's fields."""
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu_seconds(pids: list[int]) -> tuple[float, float]:
    """CPU seconds used so far by these processes' main threads, and by all their other threads (Linux /proc)."""
    main = other = 0.0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            fields = _stat(f"/proc/{pid}/task/{tid}/stat")
            if fields is None:
                continue
            if int(tid) == pid:
                main += _cpu_seconds(fields)
            else:
                other += _cpu_seconds(fields)
    return main, other


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) used so far by a process and its live descendants (Linux /proc)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        fields = _stat(f"/proc/{entry}/stat") if entry.isdigit() else None
        if fields is None:
            continue
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = _cpu_seconds(fields)
    tree, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        children = [p for p, pp in parents.items() if pp == parent and p not in tree]
        tree.update(children)
        frontier.extend(children)
    return sum(times.get(p, 0.0) for p in tree)


def tree_memory_mb(pid: int) -> list[tuple[int, float, float]]:
    """(pid, resident MB, private MB) of a process and each of its live children (Linux smaps_rollup)."""
    out = []
    for candidate in [pid, *_children(pid)]:
        fields: dict[str, float] = {}
        try:
            with open(f"/proc/{candidate}/smaps_rollup") as fh:
                for line in fh:
                    name, _, rest = line.partition(":")
                    if rest.strip().endswith("kB"):
                        fields[name] = int(rest.split()[0]) / 1024
        except OSError:
            continue
        out.append((candidate, fields.get("Rss", 0.0), fields.get("Private_Clean", 0.0) + fields.get("Private_Dirty", 0.0)))
    return out


def _children(pid: int) -> list[int]:
    """The live child processes of a process."""
    out = []
    for entry in os.listdir("/proc"):
        fields = _stat(f"/proc/{entry}/stat") if entry.isdigit() else None
        if fields is not None and int(fields[1]) == pid:
            out.append(int(entry))
    return out


def drive(port: int, requests: list[list[bytes]], clients: int, seconds: float, start: int = 0
          ) -> tuple[float, float, float, int, int, np.ndarray]:
    """Closed-loop clients for `seconds` (client k sends requests[k], from its `start`-th on): requests/s,
    p50 ms, p99 ms, errors, requests, and every latency (ms)."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    stop = time.monotonic() + seconds

    def client(k: int) -> None:
        mine = requests[k % len(requests)]
        conn = Connection(port)
        i = start + k
        try:
            while time.monotonic() < stop:
                began = time.perf_counter()
                status = conn.get(mine[i % len(mine)])
                took = time.perf_counter() - began
                if status == 200:
                    latencies[k].append(took)
                else:
                    errors[k] += 1
                i += clients
        finally:
            conn.close()

    began = time.monotonic()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    arr = np.concatenate([np.asarray(x) for x in latencies]) * 1000
    p50, p99 = (float(np.percentile(arr, 50)), float(np.percentile(arr, 99))) if arr.size else (float("nan"),) * 2
    return len(arr) / elapsed, p50, p99, sum(errors), len(arr), arr


def hybrid_requests(texts: list[str], vectors: np.ndarray) -> list[SearchRequest]:
    """The served searches as the engine's own requests (explanations, limit 10, the lexicon's default)."""
    return [SearchRequest("hybrid", q=q, vector=np.asarray(v, np.float32), limit=10, explain=True)
            for q, v in zip(texts, vectors)]


class InProcess:
    """The engine's hybrid search in this process on the served space (opened read-only, beside the server
    or after it), warmed as the server is: the reference of each row's ratio."""

    def __init__(self, data: Path, texts: list[str], vectors: np.ndarray) -> None:
        """Open the space and warm it with one pass over every search (what the server keeps per query)."""
        self.spaces = Collections(data, read_only=True, lock=False)
        self.index = self.spaces.index(SPACE)
        self.requests = hybrid_requests(texts, vectors)
        for req in self.requests:
            self.index.search(req)

    def timed(self, requests: list[SearchRequest]) -> tuple[list[float], list[float]]:
        """The wall and thread-CPU ms of each of these searches, one after another."""
        wall, cpu = [], []
        for req in requests:
            t, c = time.perf_counter(), time.thread_time()
            self.index.search(req)
            wall.append((time.perf_counter() - t) * 1000)
            cpu.append((time.thread_time() - c) * 1000)
        return wall, cpu

    def block(self, part: int, parts: int) -> tuple[list[float], list[float]]:
        """`timed` for the searches of block `part` of `parts` (together: every search once), after an untimed
        one (the search before the block's first): `--interleave`'s blocks between the served segments."""
        size = -(-len(self.requests) // parts)
        start = part * size
        self.index.search(self.requests[start - 1])
        return self.timed(self.requests[start:start + size])

    def close(self) -> None:
        """Close the space."""
        self.spaces.close()


def in_process(data: Path, texts: list[str], vectors: np.ndarray) -> tuple[float, float]:
    """p50 wall and thread-CPU ms of the engine's hybrid search (explanations, limit 10, the lexicon's
    default) of each query, in this process on the served data, once warmed as the server is."""
    reference = InProcess(data, texts, vectors)
    try:
        wall, cpu = reference.timed(reference.requests)
    finally:
        reference.close()
    return float(np.median(wall)), float(np.median(cpu))


@contextlib.contextmanager
def data_dir(given: Path | None) -> Iterator[Path]:
    """The given data directory, or a temporary one removed afterwards."""
    if given is not None:
        yield given
        return
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


def main() -> None:
    """Build, serve, drive, print."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--workers", type=int, default=1, help="serve --workers")
    parser.add_argument("--insecure-open", action="store_true", help="serve without the credential check")
    parser.add_argument("--data", type=Path, default=None, help="build the space here once and reuse it")
    parser.add_argument("--serve-args", default="", help="more options for engram-index serve")
    parser.add_argument("--sources", action="store_true",
                        help="memories in conversations of 12 (a source each): garden's context pass runs")
    parser.add_argument("--interleave", type=float, default=0.0, metavar="SECONDS",
                        help="time the in-process searches in blocks between served segments of this length")
    parser.add_argument("--threads", action="store_true",
                        help="split each row's server CPU between the event loops and the other threads")
    parser.add_argument("--scifact", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact")
    args = parser.parse_args()
    with data_dir(args.data) as data, contextlib.ExitStack() as stack:
        build(data, args.n, args.scifact, args.sources)
        texts, vectors = make_queries(make_space(1000, scifact_dir=args.scifact, seed=1), 200, seed=2)
        query_strings = [urlencode({"space": SPACE, "q": q, "vector": encode_query_vector(v.astype(np.float32)),
                                    "model": MODEL.model, "modelDigest": MODEL.digest}) for q, v in zip(texts, vectors)]
        port = free_port()
        command = [sys.executable, "-m", "engram_index.cli", "serve", "--data", str(data), "--port", str(port),
                   "--embedder", "none", "--rate", "100000", "--burst", "100000", "--concurrent", "64",
                   "--workers", str(args.workers), *shlex.split(args.serve_args)]
        max_clients = max(int(c) for c in args.clients.split(","))
        if args.insecure_open:
            command.append("--insecure-open")
            requests = [prepare(query_strings, {})]
        else:
            plc = FakePlc()
            plc_url = stack.enter_context(serving(plc.app(), probe="/_health"))
            authority = SpaceAuthority(plc, did=AUTHORITY)
            command += ["--service-did", SERVICE_DID, "--plc-url", plc_url]
            # One member (its own key and credential) per client; each reuses its signed headers.
            requests = [prepare(query_strings, authority.member(SPACE, SERVICE_DID, lifetime=3600).headers())
                        for _ in range(max_clients)]
        server = subprocess.Popen(command, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 300
            while True:
                try:
                    conn = Connection(port)
                    status = conn.get(requests[0][0])
                    conn.close()
                    if status == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the server did not start")
                time.sleep(0.2)
            drive(port, requests, 4, 2.0)  # warm-up
            print(f"searchMemories (hybrid, explanations) over HTTP, {args.n:,} memories"
                  f"{' in conversations (sources)' if args.sources else ''}, {os.cpu_count()} cores,"
                  f" {args.workers} worker process(es), {'no credential check' if args.insecure_open else 'credentials checked'}"
                  + (f", serve {args.serve_args}" if args.serve_args else ""))
            # CPU per request: the server's processes, and this (client) process, during each row.
            print(f"{'clients':>8}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}{'server cpu ms':>15}{'client cpu ms':>15}")
            rows: list[tuple[int, float, float, float]] = []
            beside = InProcess(data, texts, vectors) if args.interleave > 0 else None
            if beside is not None:
                stack.callback(beside.close)
            references: list[tuple[float, float]] = []  # each row's in-process wall and CPU p50 (interleaved)
            splits: list[tuple[float, ...]] = []  # each row's workers' CPU ms per search: main threads, others
            for clients in [int(c) for c in args.clients.split(",")]:
                segments = max(1, round(args.seconds / args.interleave)) if beside is not None else 1
                server_s = client_s = elapsed = 0.0
                workers = _children(server.pid) or [server.pid]  # (one worker: the server is it)
                split_before = thread_cpu_seconds(workers)
                latencies: list[np.ndarray] = []
                errs = done = 0
                walls: list[float] = []
                cpus: list[float] = []
                for segment in range(segments):
                    cpu_before, client_before, began = tree_cpu_seconds(server.pid), time.process_time(), time.monotonic()
                    _, _, _, seg_errs, seg_done, seg_ms = drive(port, requests, clients, args.seconds / segments, done)
                    elapsed += time.monotonic() - began
                    server_s += tree_cpu_seconds(server.pid) - cpu_before
                    client_s += time.process_time() - client_before
                    errs, done = errs + seg_errs, done + seg_done
                    latencies.append(seg_ms)
                    if beside is not None:
                        wall, cpu = beside.block(segment, segments)
                        walls += wall
                        cpus += cpu
                split_after = thread_cpu_seconds(workers)
                splits.append(tuple((a - b) / max(done, 1) * 1000 for a, b in zip(split_after, split_before)))
                every = np.concatenate(latencies)
                p50, p99 = (float(np.percentile(every, 50)), float(np.percentile(every, 99))) if every.size else (float("nan"),) * 2
                rps = done / elapsed if elapsed else 0.0
                server_cpu, client_cpu = server_s / max(done, 1) * 1000, client_s / max(done, 1) * 1000
                print(f"{clients:>8}{rps:>10.0f}{p50:>10.2f}{p99:>10.2f}{errs:>8}{server_cpu:>15.2f}{client_cpu:>15.2f}", flush=True)
                rows.append((clients, p50, p99, server_cpu))
                if walls:
                    references.append((float(np.median(walls)), float(np.median(cpus))))
            if args.threads:
                print(f"{'clients':>8}{'event loops cpu ms':>20}{'other threads cpu ms':>22}")
                for (clients, *_), (loops, others) in zip(rows, splits):
                    print(f"{clients:>8}{loops:>20.2f}{others:>22.2f}")
            memory = tree_memory_mb(server.pid)
            print("server memory, MB resident / private:", ", ".join(f"{rss:.0f} / {own:.0f}" for _, rss, own in memory))
        finally:
            server.terminate()
            server.wait(10)
        if references:
            print(f"in-process hybrid (explanations) p50, timed in blocks between {args.interleave:g} s served"
                  " segments, per row: " + ", ".join(f"{w:.2f} ms wall / {c:.2f} ms thread CPU" for w, c in references))
        else:
            engine_wall, engine_cpu = in_process(data, texts, vectors)
            print(f"in-process hybrid (explanations) p50: {engine_wall:.2f} ms wall, {engine_cpu:.2f} ms thread CPU")
            references = [(engine_wall, engine_cpu)] * len(rows)
        # Against the wall p50 (the goal's figure on a quiet machine) and against the thread CPU (steadier
        # when other work shares the cores: the wall time then includes waiting for one).
        print(f"{'clients':>8}{'server cpu / in-process wall p50':>34}{'/ in-process cpu p50':>22}{'p99 / p50':>12}")
        for (clients, p50, p99, server_cpu), (engine_wall, engine_cpu) in zip(rows, references):
            print(f"{clients:>8}{server_cpu / engine_wall:>34.2f}{server_cpu / engine_cpu:>22.2f}{p99 / p50:>12.2f}")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
