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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
sys.path.insert(0, str(_HERE.parent / "src"))

from http_load import SPACE, build  # noqa: E402
from machine import print_machine  # noqa: E402
from retrieve import wait_listening, wait_quiet  # noqa: E402
from v5_served_ab import alternated, print_ab, stop  # noqa: E402

from engram_index.embed.local import MINILM_IDENTITY  # noqa: E402
from engram_index.testkit.serve import free_port  # noqa: E402

ROOT = _HERE.parent
PATH = "/xrpc/garden.engram.searchMemories"
PACE_S = 0.55  # between one query's turns and the next (each server's authority: 2 embeddings a second)


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
    build(args.data, args.n, args.scifact, model=MINILM_IDENTITY)
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
                    assert answer.status_code == 200 and answer.json()["mode"] == "hybrid", answer.text
                time.sleep(PACE_S)
            for proc, _ in servers.values():
                wait_quiet(proc.pid)
            wall, cpu = alternated(servers, measured, lambda client, q: client.get(PATH, params={"space": SPACE, "q": q}),
                                   PACE_S)
        finally:
            stop(servers)
    print_ab(wall, cpu, len(measured))


if __name__ == "__main__":
    main()
