"""HTTP benchmark: searchMemories against a real server process, driven from a second process.

Builds a synthetic space (default 100k memories) in a temporary data directory, starts
`engram-index serve` on a loopback port, then runs closed-loop clients (1, 8, 32 at once) that
each send hybrid searches (vector + q) for a fixed time; prints requests/s and p50/p99.

    python bench/http_load.py --n 100000 --seconds 10 [--workers 2]
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import httpx  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
_spec = importlib.util.spec_from_file_location("synth", os.path.join(_HERE, "synth.py"))
assert _spec is not None and _spec.loader is not None
synth_module = importlib.util.module_from_spec(_spec)
sys.modules["synth"] = synth_module  # dataclasses look their module up by name
_spec.loader.exec_module(synth_module)
make_queries, make_space = synth_module.make_queries, synth_module.make_space

from engram_index.engine.types import Document, ModelIdentity  # noqa: E402
from engram_index.records import encode_query_vector  # noqa: E402
from engram_index.spaces import Spaces  # noqa: E402
from engram_index.store.sqlite import StoredDocument  # noqa: E402

SPACE = "at://did:plc:http234bench234http234benc/space/garden.engram.space/bench"
MODEL = ModelIdentity("bench-model", "sha256:bench", 384)


def build(data: Path, n: int, scifact: Path) -> None:
    """Write n synthetic memories into a data directory, then compact its keyword index."""
    synth = make_space(n, scifact_dir=scifact, seed=1)
    spaces = Spaces(data)
    spaces.ensure_space(SPACE, MODEL)
    for start in range(0, n, 2000):
        spaces.write(SPACE, [
            StoredDocument(Document(id=f"{SPACE}/{synth.authors[i]}/garden.engram.memory/m{i:07d}",
                                    author=synth.authors[i], text=synth.texts[i], tags=synth.tags[i],
                                    created_ms=int(synth.created_ms[i]), vector=synth.vectors[i].tobytes()))
            for i in range(start, min(n, start + 2000))
        ])
    spaces.index(SPACE)
    spaces.maintain()
    spaces.close()


def free_port() -> int:
    """A free loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def drive(url: str, params: list[dict[str, str]], clients: int, seconds: float) -> tuple[float, float, float, int]:
    """Closed-loop clients for `seconds`: requests/s, p50 ms, p99 ms, errors."""
    latencies: list[float] = []
    errors = [0]
    stop = time.monotonic() + seconds
    lock = threading.Lock()

    def client(k: int) -> None:
        with httpx.Client(base_url=url, timeout=30) as http:
            i = k
            while time.monotonic() < stop:
                began = time.perf_counter()
                r = http.get("/xrpc/garden.engram.searchMemories", params=params[i % len(params)])
                took = time.perf_counter() - began
                with lock:
                    if r.status_code == 200:
                        latencies.append(took)
                    else:
                        errors[0] += 1
                i += clients

    began = time.monotonic()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    arr = np.asarray(latencies) * 1000
    return len(arr) / elapsed, float(np.percentile(arr, 50)), float(np.percentile(arr, 99)), errors[0]


def main() -> None:
    """Build, serve, drive, print."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--workers", type=int, default=1, help="serve --workers")
    parser.add_argument("--scifact", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        build(data, args.n, args.scifact)
        synth_queries = make_queries(make_space(1000, scifact_dir=args.scifact, seed=1), 200, seed=2)
        params = [{"space": SPACE, "q": q, "vector": encode_query_vector(v.astype(np.float32)),
                   "model": MODEL.model, "modelDigest": MODEL.digest} for q, v in zip(*synth_queries)]
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "engram_index.cli", "serve", "--data", str(data), "--port", str(port),
             "--insecure-open", "--embedder", "none", "--rate", "100000", "--burst", "100000", "--concurrent", "64",
             "--workers", str(args.workers)],
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    if httpx.get(f"{url}/xrpc/garden.engram.searchMemories", params=params[0]).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.2)
            drive(url, params, 4, 2.0)  # warm-up
            print(f"searchMemories (hybrid, explanations) over HTTP, {args.n:,} memories, {os.cpu_count()} cores,"
                  f" {args.workers} worker process(es)")
            print(f"{'clients':>8}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}")
            for clients in [int(c) for c in args.clients.split(",")]:
                rps, p50, p99, errs = drive(url, params, clients, args.seconds)
                print(f"{clients:>8}{rps:>10.0f}{p50:>10.2f}{p99:>10.2f}{errs:>8}")
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
