"""Two source trees' garden searchMemories with q alone (the server embeds it) served side by side, alternated.

Builds once, in `--data`, bench/http_load.py's synthetic space of `--n` memories, declared under the
local all-MiniLM-L6-v2 (its stand-in vectors: a search does the same work on them, only what ranks
first differs), then serves a copy of it from this tree and one from `--old SRC` (another tree's
`src`), each `engram-index serve --embedder local --insecure-open`, and sends every query (SciFact's
claims, none repeated: no query-cache hits) as `q` alone to both, in turns (old first, then new
first), over one keep-alive client each, one query every `PACE_S` (the service embeds q at 2 a second
per authority, `QueryEmbedding.rate`: a search at that pace finds its caches as a served one does).
Prints the CPU line, each server's p50 and p90 wall ms,
their p50 ratio, the median of the per-query ratios, and each server's CPU ms per search.

    python bench/garden_q_ab.py --data DIR --old OLD/src [--n 100000] [--queries 200]
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
from pathlib import Path

import httpx

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
sys.path.insert(0, str(_HERE.parent / "src"))

from http_load import SPACE, memory_batches  # noqa: E402
from machine import print_machine  # noqa: E402
from retrieve import server_cpu_s, wait_listening, wait_quiet  # noqa: E402
from synth import make_space  # noqa: E402

from engram_index.collections import Collections  # noqa: E402
from engram_index.embed.local import MINILM_IDENTITY  # noqa: E402
from engram_index.errors import UnknownSpace  # noqa: E402
from engram_index.testkit.serve import free_port  # noqa: E402

ROOT = _HERE.parent
PATH = "/xrpc/garden.engram.searchMemories"
PACE_S = 0.55  # between one query's turns and the next (each server's authority: 2 embeddings a second)


def build(data: Path, n: int, scifact: Path) -> None:
    """n synthetic memories in a space declared under the local model (unless `data` holds them)."""
    spaces = Collections(data)
    try:
        try:
            if spaces.store.count(spaces.info(SPACE).id) == n:
                return
        except UnknownSpace:
            pass
        spaces.ensure_collection(SPACE, MINILM_IDENTITY)
        for batch in memory_batches(make_space(n, scifact_dir=scifact, seed=1)):
            spaces.write(SPACE, batch)
        spaces.index(SPACE)
        spaces.maintain()
    finally:
        spaces.close()


def serve(src: Path, data: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`engram-index serve` of the tree at `src`, embedding q with the local model for every authority."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "engram_index.cli", "serve", "--data", str(data), "--port", str(port),
         "--insecure-open", "--no-access-log", "--embedder", "local", "--rate", "100000", "--burst", "100000",
         "--concurrent", "64"],
        env={**os.environ, "PYTHONPATH": str(src)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_listening(url, proc, f"the server of {src}")
    return proc, url


def main() -> None:
    """Print the table."""
    shared = Path(os.environ.get("ENGRAM_SHARED", ROOT.parent / "shared"))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="the space is built here once and copied twice")
    parser.add_argument("--old", type=Path, required=True, help="the other tree's src directory")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    args = parser.parse_args()
    print_machine()
    build(args.data, args.n, args.scifact)
    texts = [json.loads(line)["text"] for line in (args.scifact / "queries.jsonl").open()]
    warm, measured = texts[:20], texts[20:20 + args.queries]
    print(f"load average {os.getloadavg()[0]:.1f} at start")
    servers: dict[str, tuple[subprocess.Popen[bytes], httpx.Client]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for name, src in (("old", args.old.resolve()), ("new", ROOT / "src")):
                data = Path(tmp) / name
                shutil.copytree(args.data, data)
                (data / "LOCK").unlink(missing_ok=True)
                proc, url = serve(src, data)
                servers[name] = (proc, httpx.Client(base_url=url, timeout=120))
            for q in warm:  # the index loads, the caches fill
                for _, client in servers.values():
                    answer = client.get(PATH, params={"space": SPACE, "q": q})
                    assert answer.status_code == 200, answer.text
                time.sleep(PACE_S)
            for proc, _ in servers.values():
                wait_quiet(proc.pid)
            wall: dict[str, list[float]] = {"old": [], "new": []}
            cpu_before = {name: server_cpu_s(proc.pid) or 0.0 for name, (proc, _) in servers.items()}
            for i, q in enumerate(measured):
                for name in (("old", "new") if i % 2 == 0 else ("new", "old")):
                    began = time.perf_counter()
                    answer = servers[name][1].get(PATH, params={"space": SPACE, "q": q})
                    wall[name].append((time.perf_counter() - began) * 1000)
                    assert answer.status_code == 200 and answer.json()["mode"] == "hybrid", answer.text
                time.sleep(PACE_S)
            cpu = {name: ((server_cpu_s(proc.pid) or 0.0) - cpu_before[name]) / len(measured) * 1000
                   for name, (proc, _) in servers.items()}
        finally:
            for proc, client in servers.values():
                client.close()
                proc.terminate()
                proc.wait(60)
    print(f"load average {os.getloadavg()[0]:.1f} at the end, {len(measured)} queries each\n")
    print("| tree | p50 ms | p90 ms | server CPU ms per search |\n|---|---:|---:|---:|")
    for name in ("old", "new"):
        ordered = sorted(wall[name])
        print(f"| {name} | {statistics.median(ordered):.2f} | {ordered[int(0.9 * len(ordered))]:.2f} |"
              f" {cpu[name]:.2f} |")
    ratios = [n / o for n, o in zip(wall["new"], wall["old"])]
    print(f"\nnew / old: p50 {statistics.median(wall['new']) / statistics.median(wall['old']):.3f},"
          f" median per query {statistics.median(ratios):.3f}, CPU {cpu['new'] / cpu['old']:.3f}")


if __name__ == "__main__":
    main()
