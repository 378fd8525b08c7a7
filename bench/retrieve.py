"""Kindgi retrieve over HTTP: p50 / p99 per mode at 10k and 100k facts, and write throughput.

For each size, a data directory is filled with synthetic facts (bench/synth.py: SciFact sentences
with all-MiniLM-L6-v2-space vectors) through the face's own revision rows and index documents, in
batches; then `engram-index serve --embedder local` runs as its own process and this process
sends it, over one keep-alive connection, the requests the official SDK sends (JSON body,
Bearer token, a fresh Idempotency-Key each), the timed ones as bytes made before the clock starts
over a raw socket (bench/wire.py; issue 25's twenty-sixth pass: httpx's own work was ~0.5 ms of
each, bench/client_cost.py). The caller is a user holding 3 of 10 projects, so visibility filters every search. Semantic
and both embed each query on the server (MiniLM, onnxruntime): that cost is inside the figures.
Writes are `write_fact` calls through the SDK, one at a time and from 4 threads, each embedded on
the server.

    python bench/retrieve.py [--sizes 10000,100000] [--requests 300] [--writes 300] [--data DIR]
                             [--face-embedders local,auto] [--rounds N] [--interleave BLOCK]

Per face embedder it also prints, measured in the same run, the engine's own searches for one
`both` retrieve (keyword and vector legs, in process) and the query embedding alone: both p50 /
(engine + embedding) is what the HTTP face adds. Each of those is timed in a loop of its own, which
keeps its data in the CPU's caches; a served retrieve finds neither there, so the last columns
time the two in sequence, query by query, and divide p50 by that too. Those in-process loops run
after the server has gone, or with `--interleave BLOCK` in blocks of BLOCK queries alternating with
the served `both` retrieves, so that both sides of the ratio meet the same load (paired.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from paired import Samples, blocks, each_ms, task_cpu_ns  # noqa: E402
from synth import make_queries, make_space  # noqa: E402
from wire import Connection, port_of, post  # noqa: E402

from engram_index.collections import Collections  # noqa: E402
from engram_index.embed.local import MiniLMEmbedder  # noqa: E402
from engram_index.engine.types import Filters, ModelIdentity, SearchRequest  # noqa: E402
from engram_index.kindgi.auth import Principal  # noqa: E402
from engram_index.kindgi.scope import reader_groups  # noqa: E402
from engram_index.keys import KeyStore  # noqa: E402
from engram_index.kindgi import revisions as rev  # noqa: E402
from engram_index.kindgi.facts import space_name  # noqa: E402
from engram_index.kindgi.models import format_ms  # noqa: E402
from engram_index.kindgi.retrieve import CONTEXT_DEPTH, MIN_LEG_DEPTH  # noqa: E402
from engram_index.ranking import content_query  # noqa: E402
from engram_index.kindgi.schema import migrate  # noqa: E402
from engram_index.store.sqlite import StoredDocument  # noqa: E402
from engram_index.testkit.serve import free_port, wait_answering  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TENANT = "bench"
WRITES = "p9"  # the project the write measurements fill: one the measured reader does not hold
PROJECTS = [f"p{i}" for i in range(10)]  # the reader holds p0-p2
USERS = [f"u{i}" for i in range(5)]
TYPES = ["note", "preference", "task", "profile"]
MODES = ("list", "keyword", "semantic", "both")
LEG_DEPTH = MIN_LEG_DEPTH  # a retrieve of limit 10 (the bench's): each leg's depth, max(2 × limit, 20)


def build(data: Path, n: int, scifact: Path) -> None:
    """Write n synthetic facts (each in one of 10 projects, a fifth of them a user's own) unless present."""
    spaces = Collections(data)
    try:
        migrate(spaces.store)
        have = spaces.store.query("SELECT count(*) FROM kindgi_revisions WHERE tenant=?", (TENANT,))[0][0]
        if have >= n:  # built before (the right-after-a-write probes add a few unmatched facts)
            return
        embedder = MiniLMEmbedder()
        name = space_name(TENANT)
        spaces.ensure_collection(name, embedder.identity)
        embedder.close()
        synth = make_space(n, scifact_dir=scifact, seed=1)
        base = int(time.time() * 1000) - n
        for start in range(0, n, 2000):
            puts, rows = [], []
            for i in range(start, min(n, start + 2000)):
                scope = {"tenantId": TENANT, "projectId": PROJECTS[i % len(PROJECTS)]}
                if i % 5 == 0:
                    scope["userId"] = USERS[i % len(USERS)]
                created = base + i
                fact = rev.ordered({"id": str(uuid.UUID(int=i + 1)), "type": TYPES[i % len(TYPES)], "scope": scope,
                                    "version": 1, "createdAt": format_ms(created), "content": synth.texts[i],
                                    **rev.content_facts(synth.texts[i]), "embeddingModel": "all-MiniLM-L6-v2",
                                    "trust": "asserted", "attributedTo": {"kind": "service", "id": "bench"}})
                rows.append(rev.insert_row(TENANT, fact, created_ms=created, first_ms=created, current=True))
                doc = rev.document(fact, created, None)
                doc.vector = synth.vectors[i].tobytes()
                puts.append(StoredDocument(doc))
            spaces.write(name, puts, also=rows)
        spaces.index(name)
        spaces.maintain()
    finally:
        spaces.close()


def server_cpu_s(pid: int) -> float | None:
    """CPU seconds the process has used (user + system), from /proc; None where there is none."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_idle(url: str, token: str, pid: int, timeout: float = 600) -> None:
    """Wait until the tenant's index has loaded (a retrieve answers) and the server has gone quiet
    (under 5 % of a core for a whole second: no loading, merging or saving left to compete)."""
    deadline = time.monotonic() + timeout
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    while httpx.post(f"{url}/v1/memory/retrieve", headers=headers, timeout=timeout,
                     content=orjson.dumps({"mode": "keyword", "query": "warm", "limit": 1})).status_code != 200:
        if time.monotonic() > deadline:
            raise RuntimeError("the index did not load")
        time.sleep(0.5)
    wait_quiet(pid, deadline - time.monotonic())


def wait_quiet(pid: int, timeout: float = 300) -> None:
    """Wait until the server uses under 5 % of a core for a whole second (loading, merging done)."""
    deadline = time.monotonic() + timeout
    before = server_cpu_s(pid)
    while before is not None and time.monotonic() < deadline:
        time.sleep(1.0)
        now = server_cpu_s(pid)
        if now is not None and now - before < 0.05:
            return
        before = now


def wait_listening(url: str, proc: subprocess.Popen[bytes], what: str = "the server", timeout: float = 300) -> None:
    """Wait until the server `proc` started answers at `url` (its health route); raise if it exits first."""
    wait_answering(url, timeout, proc, poll_s=0.1, what=what)


def serve(data: Path, port: int, face_spec: str = "auto") -> subprocess.Popen[bytes]:
    """`engram-index serve` on a loopback port, answering once it listens (wait_idle: once loaded)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "engram_index.cli", "serve", "--data", str(data), "--port",
                             str(port), "--insecure-open", "--no-access-log", "--embedder", "local",
                             "--face-embedder", face_spec,
                             # one client measures latency: no per-key admission in the way
                             "--key-rate", "1000000", "--key-burst", "1000000"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(f"http://127.0.0.1:{port}", proc)
    return proc


def face_model(spec: str) -> MiniLMEmbedder:
    """The local model the Kindgi face embeds with under `--face-embedder spec` (auto: the int8 graph)."""
    return MiniLMEmbedder(int8=spec in ("auto", "local-int8"))


def relabel(data: Path, identity: ModelIdentity) -> None:
    """Declare the tenant's facts as embedded with `identity` (their SciFact vectors are MiniLM's;
    int8's are within cosine 0.99 of them), so that the face searches them without re-embedding."""
    spaces = Collections(data)
    try:
        spaces.ensure_collection(space_name(TENANT), identity)
    finally:
        spaces.close()


class Reference:
    """The engine's own searches for one `both` retrieve (its keyword and vector legs, with the reader's
    visibility filters, in this process) and the query embedding alone, each timed in a loop of its own
    over a block of queries, in thread CPU ms (not wall: on a shared machine wall time is mostly waiting
    for a core); then the two in sequence, query by query (embed, then search), as a served retrieve
    meets them: each loop of its own keeps its own data in the CPU's caches, which a retrieve never finds so."""

    def __init__(self, data: Path, model: MiniLMEmbedder) -> None:
        """Open the tenant's collection read-only (beside a server that holds it)."""
        self.spaces = Collections(data, read_only=True, lock=False)
        self.index = self.spaces.index(space_name(TENANT))
        reader = Principal(TENANT, "bench", user=USERS[0], projects=frozenset(PROJECTS[:3]))
        self.filters = Filters(any_tags=reader_groups(reader))
        self.model = model
        self.samples = Samples()

    def legs(self, q: str, v: np.ndarray) -> None:
        """One `both` retrieve's engine searches, 20 each, answered as hits (as the engine answers any caller:
        the reference of issue 25's ratio goal since it was set)."""
        self.index.search(SearchRequest("keyword", q=q, limit=20, filters=self.filters, explain=False))
        self.index.search(SearchRequest("vector", vector=v, limit=20, filters=self.filters, explain=False))

    def legs_asked(self, q: str, v: np.ndarray) -> None:
        """The same searches exactly as the face asks them (kindgi/retrieve.py, limit 10): the keyword leg's
        content words, 50 deep (its context depth), the vector leg 20, both answered in columns."""
        self.index.search(SearchRequest("keyword", q=content_query(q), limit=max(LEG_DEPTH, CONTEXT_DEPTH),
                                        filters=self.filters, explain=False, documents=False, hits=False))
        self.index.search(SearchRequest("vector", vector=v, limit=LEG_DEPTH, filters=self.filters, explain=False,
                                        documents=False, hits=False))

    def block(self, queries: Sequence[str], warm: str | None = None, settle: int = 0) -> None:
        """Time a block of queries on each side, the first `settle` of the engine's and of the sequence's left
        out (`warm`: a query of its own run untimed before each loop instead)."""
        embed = self.model.embed_queries
        if warm is not None:
            embed([warm])
        vectors, embed_cpu = [], []
        for q in queries:
            t = time.thread_time()
            vectors.append(embed([q])[0])
            embed_cpu.append((time.thread_time() - t) * 1000)
        if warm is not None:
            self.legs(warm, vectors[0])
        engine_cpu = each_ms(self.legs, zip(queries, vectors), time.thread_time)
        asked_cpu = each_ms(self.legs_asked, zip(queries, vectors), time.thread_time)
        if warm is not None:
            self.legs(warm, embed([warm])[0])
        in_sequence = []
        for q in queries:
            t = time.thread_time()
            self.legs(q, embed([q])[0])
            in_sequence.append((time.thread_time() - t) * 1000)
        self.samples.add("engine", engine_cpu[settle:])
        self.samples.add("embed", embed_cpu)
        self.samples.add("sequence", in_sequence[settle:])
        self.samples.add("asked", asked_cpu[settle:])

    def p50s(self) -> dict[str, float]:
        """Thread-CPU p50 ms of the engine, the embedding, the two in sequence and the engine as the face asks
        it, by name."""
        return {name: self.samples.p50(name) for name in self.samples.by_name}

    def close(self) -> None:
        """Close the collection."""
        self.spaces.close()


def in_process(data: Path, queries: Sequence[str], model: MiniLMEmbedder) -> dict[str, float]:
    """`Reference`'s p50s over one block of every query (after the server has gone), the first 10 of the
    engine's and of the sequence's left out."""
    reference = Reference(data, model)
    try:
        reference.block(queries, settle=10)
    finally:
        reference.close()
    return reference.p50s()


def percentiles(samples: list[float]) -> tuple[float, float]:
    """p50 and p99 in milliseconds."""
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000


def retrieve_latencies(url: str, token: str, mode: str, queries: list[str], count: int, pid: int,
                       reference: Reference | None = None, block: int = 0) -> tuple[float, float, float, float | None]:
    """p50, p99 (ms), mean results and the server's CPU ms per retrieve of `count` retrieves in one
    mode, one at a time, after 10 that warm it. With a `reference` and a `block` size, the retrieves
    go in blocks, each followed by the same queries in process (`Reference.block`), each block on each
    side begun by an untimed query of its own (paired.py)."""
    samples: list[float] = []
    found = 0
    cpu_ns = 0

    def one(http: Connection, query: str) -> tuple[float, Any]:
        # The request's bytes are made before the clock starts, its answer parsed after (wire.py says why).
        body: dict[str, object] = {"mode": mode, "limit": 10}
        if mode != "list":
            body["query"] = query
        headers = {"authorization": f"Bearer {token}", "idempotency-key": str(uuid.uuid4()),
                   "accept": "application/json"}
        request = post("/v1/memory/retrieve", orjson.dumps(body), headers)
        began = time.perf_counter()
        status, answer = http.send(request)
        elapsed = time.perf_counter() - began
        if status != 200:
            raise RuntimeError(f"{mode}: {status} {answer[:200]!r}")
        return elapsed, orjson.loads(answer)

    timed = [queries[i % len(queries)] for i in range(10, count + 10)]
    http = Connection(port_of(url))
    try:
        for i in range(10):  # the first few warm the caches, the embedder and the connection
            one(http, queries[i % len(queries)])
        for part in blocks(timed, block if reference is not None and block else len(timed)):
            if reference is not None:
                one(http, f"{part[0]} (warm-up)")
            before = task_cpu_ns(pid)
            for q in part:
                elapsed, answer = one(http, q)
                samples.append(elapsed)
                found += len(answer["results"])
            after = task_cpu_ns(pid)
            cpu_ns = cpu_ns + after - before if before is not None and after is not None and cpu_ns >= 0 else -1
            if reference is not None:
                reference.block(part, warm=f"{part[0]} (in-process warm-up)")
    finally:
        http.close()
    cpu_ms = None if cpu_ns < 0 else cpu_ns / count / 1e6
    p50, p99 = percentiles(samples)
    return p50, p99, found / count, cpu_ms


def fresh_keyword(url: str, token: str, count: int) -> tuple[float, float]:
    """p50, p99 (ms) of a keyword retrieve sent right after a write answered (it commits that write first)."""
    from kindgi.client import Kindgi

    samples: list[float] = []
    with Kindgi(base_url=url, token=token, max_retries=0) as client, httpx.Client(base_url=url, timeout=60) as http:
        for i in range(count):
            # One word no bench query holds, of letters only (no identifier parts to match elsewhere).
            word = "zq" + uuid.uuid4().hex.translate(str.maketrans("0123456789", "ghijklmnop"))
            client.memory.write_fact(type="note", scope={"tenantId": TENANT, "projectId": WRITES}, content=word)
            headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": str(uuid.uuid4()),
                       "Content-Type": "application/json"}
            began = time.perf_counter()
            answer = http.post("/v1/memory/retrieve", headers=headers,
                               content=orjson.dumps({"mode": "keyword", "query": word, "limit": 10}))
            samples.append(time.perf_counter() - began)
            if len(answer.json()["results"]) != 1:
                raise RuntimeError("a fact just written was not retrieved")
    return percentiles(samples)


def write_rate(url: str, token: str, texts: list[str], threads: int) -> float:
    """Facts written a second through the SDK, from `threads` threads at once (into a project the
    retrieving reader does not hold, so that later runs retrieve over the built facts only)."""
    from kindgi.client import Kindgi

    def worker(chunk: list[str]) -> None:
        with Kindgi(base_url=url, token=token, max_retries=0) as client:
            for text in chunk:
                client.memory.write_fact(type="note", scope={"tenantId": TENANT, "projectId": WRITES}, content=text)

    chunks = [texts[k::threads] for k in range(threads)]
    began = time.perf_counter()
    pool = [threading.Thread(target=worker, args=(c,)) for c in chunks]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return len(texts) / (time.perf_counter() - began)


def measure_face(data: Path, n: int, token: str, spec: str, every: list[str],
                 requests: int, interleave: int = 0) -> tuple[list[str], str]:
    """Serve with one face embedder: each mode's row, then the `both` ratio row (its in-process references
    after the server has gone, or with `interleave` in blocks of that many queries alternating with the
    served `both` retrieves: paired.py)."""
    model = face_model(spec)
    relabel(data, model.identity)
    port = free_port()
    proc = serve(data, port, spec)
    url = f"http://127.0.0.1:{port}"
    rows: list[str] = []
    both_p50 = both_cpu = 0.0
    reference = Reference(data, model) if interleave else None
    try:
        wait_idle(url, token, proc.pid)
        for k, mode in enumerate(MODES):
            queries = every[k * (requests + 10):(k + 1) * (requests + 10)]
            paired = reference if mode == "both" else None
            p50, p99, found, cpu_ms = retrieve_latencies(url, token, mode, queries, requests, proc.pid,
                                                         paired, interleave)
            cpu = "" if cpu_ms is None else f"{cpu_ms:.2f}"
            rows.append(f"| {n:>7,} | {mode:<8} ({model.identity.model}) | {p50:7.2f} | {p99:7.2f} | {cpu} |"
                        f" {found:5.1f} |")
            print(rows[-1], flush=True)
            if mode == "both":
                both_p50, both_cpu = p50, cpu_ms or 0.0
    finally:
        proc.terminate()
        proc.wait(30)
        if reference is not None:
            reference.close()
    ref = reference.p50s() if reference is not None else in_process(data, every[: requests + 10], model)
    model.close()
    engine_p50, embed_p50, sequence_p50, asked_p50 = ref["engine"], ref["embed"], ref["sequence"], ref["asked"]
    ratio = (f"| {n:>7,} | {model.identity.model} | {both_p50:.2f} | {both_cpu:.2f} | {engine_p50:.2f} |"
             f" {embed_p50:.2f} | {both_p50 / (engine_p50 + embed_p50):.2f} | {both_cpu / (engine_p50 + embed_p50):.2f} |"
             f" {sequence_p50:.2f} | {both_p50 / sequence_p50:.2f} | {asked_p50:.2f} |"
             f" {both_p50 / (asked_p50 + embed_p50):.2f} |")
    print(ratio, flush=True)
    return rows, ratio


def main() -> None:
    """Build, serve and measure each size; print one table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--requests", type=int, default=300, help="retrieves per mode")
    parser.add_argument("--writes", type=int, default=300, help="facts written per write measurement")
    parser.add_argument("--data", type=Path, default=None, help="build each size under here once and reuse it")
    shared = Path(os.environ.get("ENGRAM_SHARED", ROOT.parent / "shared"))
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    parser.add_argument("--face-embedders", default="auto",
                        help="--face-embedder specs to compare in this run, e.g. local,auto (float32, int8)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure each face embedder this many times in turn (a fresh server each round, its"
                             " in-process figures right after): the host's speed drifts between minutes")
    parser.add_argument("--interleave", type=int, default=0, metavar="N",
                        help="time the in-process references in blocks of N queries alternating with the served"
                             " `both` retrieves on one server (paired.py), not after it: both sides meet one machine")
    args = parser.parse_args()
    specs = [s for s in args.face_embedders.split(",") if s]
    root = args.data or Path(tempfile.mkdtemp(prefix="kindgi-bench-"))
    ratios: list[str] = []
    rows = []
    print(f"# bench/retrieve.py on {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start", flush=True)
    for n in (int(s) for s in args.sizes.split(",")):
        data = root / f"n{n}"
        began = time.perf_counter()
        build(data, n, args.scifact)
        built = time.perf_counter() - began
        token, _ = KeyStore(data).create("kindgi", {"tenant": TENANT, "user": USERS[0], "projects": PROJECTS[:3]})
        writer, _ = KeyStore(data).create("kindgi", {"tenant": TENANT, "user": USERS[1], "projects": [WRITES]})
        # Each mode its own queries, none repeated: no answer comes from the query-vector cache.
        every, _ = make_queries(make_space(1000, scifact_dir=args.scifact, seed=1),
                                4 * (args.requests + 10) * args.rounds, seed=2)
        for turn in range(args.rounds):
            for spec in specs:  # each round its own queries: no answer comes from the query cache
                size = 4 * (args.requests + 10)
                face_rows, ratio = measure_face(data, n, token, spec, every[turn * size:(turn + 1) * size],
                                                args.requests, args.interleave)
                rows += face_rows
                ratios.append(ratio)
        port = free_port()
        proc = serve(data, port, specs[-1])
        url = f"http://127.0.0.1:{port}"
        try:
            wait_idle(url, token, proc.pid)
            queries = every[: 300]
            p50, p99 = fresh_keyword(url, writer, 50)
            rows.append(f"| {n:>7,} | keyword right after a write | {p50:7.2f} | {p99:7.2f} | | 1.0 |")
            print(rows[-1], flush=True)
            texts = [f"write bench fact {i}: {q}" for i, q in enumerate(queries * (args.writes // len(queries) + 1))]
            one = write_rate(url, writer, texts[: args.writes], 1)
            four = write_rate(url, writer, texts[: args.writes], 4)
            rows.append(f"| {n:>7,} | writes   | {one:6.1f}/s (1 client) | {four:6.1f}/s (4 clients) | | built in {built:.0f} s |")
            print(rows[-1], flush=True)
        finally:
            proc.terminate()
            proc.wait(30)
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end (on {os.cpu_count()} cores)")
    print("\n| facts | mode | p50 ms | p99 ms | server CPU ms per retrieve | results |\n|---|---|---|---|---|---|")
    print("\n".join(rows))
    print("\nin-process references: " + (f"in blocks of {args.interleave} queries alternating with the served"
                                        " `both` retrieves (paired.py)" if args.interleave else "after each round's server"))
    print("\n| facts | face embedder | both p50 ms (HTTP) | server CPU ms per both | engine CPU ms (keyword +"
          " vector legs, in process) | query embedding CPU ms | p50 / (engine + embedding) |"
          " server CPU / (engine + embedding) | embedding then engine, in sequence, CPU ms | p50 / that |"
          " engine CPU ms as the face asks it (content words, keyword 50 deep, columns) | p50 / (that + embedding) |"
          "\n|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(ratios))
    if args.rounds > 1:
        print("\n| facts | face embedder | rounds | median p50 / (engine + embedding) | median server CPU /"
              " (engine + embedding) | median p50 / (in sequence) | median p50 / (engine as the face asks it +"
              " embedding) |\n|---|---|---|---|---|---|---|")
        for key in dict.fromkeys(tuple(r.split("|")[1:3]) for r in ratios):
            mine = [r.split("|") for r in ratios if tuple(r.split("|")[1:3]) == key]
            print(f"|{key[0]}|{key[1]}| {len(mine)} | {statistics.median(float(c[7]) for c in mine):.2f} |"
                  f" {statistics.median(float(c[8]) for c in mine):.2f} |"
                  f" {statistics.median(float(c[10]) for c in mine):.2f} |"
                  f" {statistics.median(float(c[12]) for c in mine):.2f} |")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
