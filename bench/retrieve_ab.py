"""Two checkouts' Kindgi retrieve over HTTP, interleaved: server CPU and wall ms per request.

Serves a data directory filled by bench/retrieve.py (`--data DIR/n100000`, tenant `bench`) with each
checkout's own code (`--trees OLD,NEW`, each a repository root; each tree its own copy of the data
directory, `--data OLD_DIR,NEW_DIR`, as the server locks its directory), then sends them, in turns
of `--batch` requests, retrieves in `--mode` (default both) of queries none repeats, each query to
both servers one after the other (old first in one request, new first in the next: on a shared
machine the load then weighs on both alike), and prints per server the median over the turns of
the server process's CPU ms per request and of the wall ms p50. The reader is retrieve.py's (3 of
10 projects); the query embedding is inside the figures.

    python bench/retrieve_ab.py --trees OLD,NEW --data OLD_DIR,NEW_DIR [--turns 10] [--batch 30] [--mode both]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from retrieve import PROJECTS, TENANT, USERS, server_cpu_s, wait_idle, wait_listening, wait_quiet  # noqa: E402
from synth import make_queries, make_space  # noqa: E402

from engram_index.keys import KeyStore  # noqa: E402
from engram_index.testkit.serve import free_port  # noqa: E402


def serve_tree(tree: Path, data: Path, port: int) -> subprocess.Popen[bytes]:
    """`engram-index serve` of one checkout's code (its src first on the path) over one data directory."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "engram_index.cli", "serve", "--data", str(data), "--port",
                             str(port), "--insecure-open", "--no-access-log", "--embedder", "local",
                             "--face-embedder", "auto", "--key-rate", "1000000", "--key-burst", "1000000"],
                            env=env, cwd=str(tree), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(f"http://127.0.0.1:{port}", proc)
    return proc


def turn(servers: list[tuple[subprocess.Popen[bytes], str, httpx.Client]], queries: list[str],
         mode: str) -> list[tuple[float, float]]:
    """Per server, its CPU ms per request and its median wall ms over one batch of retrieves, each query
    sent to every server in turn (the first server alternating)."""
    walls: list[list[float]] = [[] for _ in servers]
    before = [server_cpu_s(proc.pid) or 0.0 for proc, _, _ in servers]
    for n, q in enumerate(queries):
        body: dict[str, object] = {"mode": mode, "limit": 10} if mode == "list" else {"mode": mode, "query": q,
                                                                                   "limit": 10}
        order = range(len(servers)) if n % 2 == 0 else reversed(range(len(servers)))
        for i in order:
            _, token, client = servers[i]
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                       "Idempotency-Key": str(uuid.uuid4())}
            began = time.perf_counter()
            answer = client.post("/v1/memory/retrieve", headers=headers, content=orjson.dumps(body))
            walls[i].append(time.perf_counter() - began)
            assert answer.status_code == 200, answer.text
    return [(((server_cpu_s(proc.pid) or 0.0) - before[i]) / len(queries) * 1000, statistics.median(walls[i]) * 1000)
            for i, (proc, _, _) in enumerate(servers)]


def main() -> None:
    """Serve both checkouts, send them turns in alternation, print one table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", required=True, help="OLD,NEW: two repository roots")
    parser.add_argument("--data", required=True, help="OLD_DIR,NEW_DIR: a copy of one n100000 directory each")
    parser.add_argument("--turns", type=int, default=10, help="batches per server")
    parser.add_argument("--batch", type=int, default=30, help="retrieves per batch")
    parser.add_argument("--mode", default="both", choices=("list", "keyword", "semantic", "both"))
    shared = Path(os.environ.get("ENGRAM_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    args = parser.parse_args()
    trees = [Path(t) for t in args.trees.split(",")]
    datas = [Path(d) for d in args.data.split(",")]
    labels = ["old", "new"]
    every, _ = make_queries(make_space(1000, scifact_dir=args.scifact, seed=1),
                            (args.turns + 1) * args.batch, seed=3)
    servers = []
    try:
        for tree, data in zip(trees, datas):
            token, _ = KeyStore(data).create("kindgi", {"tenant": TENANT, "user": USERS[0], "projects": PROJECTS[:3]})
            port = free_port()
            proc = serve_tree(tree, data, port)
            servers.append((proc, token, httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)))
        for proc, token, client in servers:
            wait_idle(str(client.base_url).rstrip("/"), token, proc.pid)
        turn(servers, every[:args.batch], "both")  # warm: masks, conversation codes
        for proc, _, _ in servers:
            wait_quiet(proc.pid)
        cpu: list[list[float]] = [[], []]
        wall: list[list[float]] = [[], []]
        for k in range(args.turns):  # the same queries to both, interleaved
            queries = every[(k + 1) * args.batch:(k + 2) * args.batch]
            for i, (c, w) in enumerate(turn(servers, queries, args.mode)):
                cpu[i].append(c)
                wall[i].append(w)
    finally:
        for proc, _, client in servers:
            client.close()
            proc.terminate()
            proc.wait(30)
    print(f"\n{args.turns} turns of {args.batch} `{args.mode}` retrieves per server, interleaved; medians over the"
          f" turns (load average {os.getloadavg()[0]:.1f} at the end)")
    print("| server | server CPU ms per retrieve | wall p50 ms |\n|---|---|---|")
    for i, label in enumerate(labels):
        print(f"| {label} | {statistics.median(cpu[i]):.2f} | {statistics.median(wall[i]):.2f} |")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
