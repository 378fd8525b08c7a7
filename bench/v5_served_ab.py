"""Two source trees' v5 search served side by side, the same queries alternated (wall clock and server CPU).

On a shared machine two runs one after the other differ by more than most changes do. Here two
`engram-index serve` processes run at once, one from this tree and one from `--old SRC` (another
tree's `src`), each on its own copy of a bench/v5.py data directory (namespace `scale`), and one
keep-alive client sends every query to both, in turns (old first, then new first): whatever load
the machine has, both meet it alike. A query is sent once to each (no query-cache hits). It prints
the CPU line, the load average, each server's p50 and p90 wall ms, their p50 ratio, the median of
the per-query ratios, and each server's CPU ms per search (from /proc).

    python bench/v5_served_ab.py --data DIR --old OLD/src [--queries 300] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
sys.path.insert(0, str(_HERE.parent / "src"))

from retrieve import server_cpu_s, wait_listening, wait_quiet  # noqa: E402

from engram_index.keys import KeyStore  # noqa: E402
from engram_index.testkit.serve import free_port  # noqa: E402

ROOT = _HERE.parent


def serve(src: Path, data: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`engram-index serve` of the tree at `src` on a copy of the data, as bench/v5.py serves it."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "engram_index.cli", "serve", "--data", str(data), "--port", str(port),
         "--insecure-open", "--no-access-log", "--embedder", "local", "--key-rate", "1000000",
         "--key-burst", "1000000", "--face-embedder", "auto"],
        env={**os.environ, "PYTHONPATH": str(src)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_listening(url, proc, f"the server of {src}")
    return proc, url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a bench/v5.py data directory (copied twice)")
    parser.add_argument("--old", type=Path, required=True, help="the other tree's src directory")
    parser.add_argument("--queries", type=int, default=300)
    shared = Path(os.environ.get("ENGRAM_SHARED", ROOT.parent / "shared"))
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    args = parser.parse_args()
    texts = [json.loads(line)["text"] for line in (args.scifact / "queries.jsonl").open()]
    warm, measured = texts[:20], texts[20:20 + args.queries]
    measured += [f"{q} (again)" for q in texts[20:20 + max(0, args.queries - len(measured))]]
    print(f"load average {os.getloadavg()[0]:.1f} at start")
    with tempfile.TemporaryDirectory() as tmp:
        servers: dict[str, tuple[subprocess.Popen[bytes], httpx.Client]] = {}
        try:
            for name, src in (("old", args.old.resolve()), ("new", ROOT / "src")):
                data = Path(tmp) / name
                shutil.copytree(args.data, data)
                (data / "LOCK").unlink(missing_ok=True)
                key, _ = KeyStore(data).create("supermemory", {"namespaces": None})
                proc, url = serve(src, data)
                client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120)
                servers[name] = (proc, client)
            for q in warm:  # the indexes load, the caches fill
                for _, client in servers.values():
                    assert client.post("/ns/scale/search", json={"query": q}).status_code == 200
            for proc, _ in servers.values():
                wait_quiet(proc.pid)
            wall, cpu = alternated(servers, measured,
                                   lambda client, q: client.post("/ns/scale/search", json={"query": q, "limit": 10}))
        finally:
            stop(servers)
    print_ab(wall, cpu, len(measured))


def alternated(servers: dict[str, tuple[subprocess.Popen[bytes], httpx.Client]], queries: Sequence[str],
               ask: Callable[[httpx.Client, str], httpx.Response],
               pace_s: float = 0.0) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Each query asked of both servers ("old", "new") in turns, old first, then new first (`pace_s` between
    one query's turns and the next): each one's wall ms per query, and its process's CPU ms per query."""
    wall: dict[str, list[float]] = {"old": [], "new": []}
    cpu_before = {name: server_cpu_s(proc.pid) or 0.0 for name, (proc, _) in servers.items()}
    for i, q in enumerate(queries):
        for name in (("old", "new") if i % 2 == 0 else ("new", "old")):
            began = time.perf_counter()
            answer = ask(servers[name][1], q)
            wall[name].append((time.perf_counter() - began) * 1000)
            assert answer.status_code == 200, answer.text
        if pace_s:
            time.sleep(pace_s)
    cpu = {name: ((server_cpu_s(proc.pid) or 0.0) - cpu_before[name]) / len(queries) * 1000
           for name, (proc, _) in servers.items()}
    return wall, cpu


def stop(servers: dict[str, tuple[subprocess.Popen[bytes], httpx.Client]]) -> None:
    """Close each server's client and stop the server."""
    for proc, client in servers.values():
        client.close()
        proc.terminate()
        proc.wait(60)


def print_ab(wall: dict[str, list[float]], cpu: dict[str, float], queries: int) -> None:
    """The side-by-side table: each tree's p50 and p90 wall ms and server CPU ms per search, and their ratios."""
    print(f"load average {os.getloadavg()[0]:.1f} at the end, {queries} queries each\n")
    print("| tree | p50 ms | p90 ms | server CPU ms per search |\n|---|---:|---:|---:|")
    for name in ("old", "new"):
        ordered = sorted(wall[name])
        print(f"| {name} | {statistics.median(ordered):.2f} | {ordered[int(0.9 * len(ordered))]:.2f} |"
              f" {cpu[name]:.2f} |")
    ratios = [n / o for n, o in zip(wall["new"], wall["old"])]
    print(f"\nnew / old: p50 {statistics.median(wall['new']) / statistics.median(wall['old']):.3f},"
          f" median per query {statistics.median(ratios):.3f}, CPU {cpu['new'] / cpu['old']:.3f}")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
