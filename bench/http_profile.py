"""Where a served search's time holding the GIL goes: bench/http_load.py's server sampled by py-spy.

Serves the space of bench/http_load.py (--data, built once) with `engram-index serve --workers 2`
and real credentials, drives closed-loop clients for --seconds while `py-spy record --gil
--nonblocking` samples every worker process (the `bench` extra pins py-spy), then prints, for the
busiest worker, each part's share of the samples: the engine's search thread, and on the event
loop the HTTP stack, the hand-off to a search thread, the response's writes, the views, the access
log, the credential check and the rest. Samples holding the GIL are Python's (and the C calls made
while holding it: socket writes, futex wakes); the engine's kernels release it and are not seen.

    python bench/http_profile.py --data DIR [--seconds 15] [--clients 1] [--serve-args=--no-access-log] [--keep DIR]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import http_load as h  # noqa: E402

from engram_index.engram.records import encode_query_vector  # noqa: E402

# A sample's part: the first of these (label, frame text) found from its innermost frame outwards.
PARTS = [
    ("uvicorn access log", "Logger."), ("credential check", "SpaceCredentials.authenticate"),
    ("views of the hits", "hit_json"), ("JSON encoding", "JSONAnswer.render"),
    ("hand-off to a search thread", "ThreadPoolExecutor.submit"), ("search pool", "SearchPool.run"),
    ("request (vector, mode rules)", "build_request"), ("parameters, the space's row", "checked_space"),
    ("query string parse", "query_params"), ("response writes", "Transport.write"),
    ("metrics middleware", "metrics.py"), ("admission", "admission.py"), ("searchMemories, the rest", "search_memories"),
    ("XRPC wrapper", "xrpc.<locals>.work"),
    *[("HTTP stack: the connection, uvicorn, Starlette", pat) for pat in
      ("routing.py", "errors.py", "exceptions.py", "exchange.py", "proxy_headers", "applications.py", "protocol.py",
       "connection_limits.py", "_exception_handler", "endpoints.py", "responses.py")],
    ("event loop", "runners.py"), ("event loop", "base_events"), ("event loop", "events.py"),
    ("event loop", "selector_events"),
]


def shares(raw: Path) -> tuple[int, collections.Counter[str]]:
    """The samples of one py-spy raw file, and how many fall in each part."""
    parts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        total += n
        if "_WorkItem.run" in stack:
            parts["engine: the search thread"] += n
            continue
        if "Thread._bootstrap" in stack:
            parts["other threads"] += n
            continue
        for frame in reversed(stack.split(";")):
            label = next((label for label, pattern in PARTS if pattern in frame), None)
            if label is not None:
                parts[label] += n
                break
        else:
            parts["other"] += n
    return total, parts


def main() -> None:
    """Serve, drive, sample, print."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--data", type=Path, required=True, help="the space of bench/http_load.py (built once)")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--rate", type=int, default=200, help="py-spy samples a second")
    parser.add_argument("--serve-args", default="", help="more options for engram-index serve")
    parser.add_argument("--keep", type=Path, default=None, help="copy each worker's py-spy samples (raw) here")
    parser.add_argument("--scifact", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact")
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        raise SystemExit("py-spy is not installed (pip install -e '.[bench]')")
    h.build(args.data, args.n, args.scifact)
    texts, vectors = h.make_queries(h.make_space(1000, scifact_dir=args.scifact, seed=1), 200, seed=2)
    query_strings = [urlencode({"space": h.SPACE, "q": q, "vector": encode_query_vector(v.astype(np.float32)),
                                "model": h.MODEL.model, "modelDigest": h.MODEL.digest}) for q, v in zip(texts, vectors)]
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        plc = h.FakePlc()
        plc_url = stack.enter_context(h.serving(plc.app(), probe="/_health"))
        authority = h.SpaceAuthority(plc, did=h.AUTHORITY)
        requests = [h.prepare(query_strings, authority.member(h.SPACE, h.SERVICE_DID, lifetime=3600).headers())
                    for _ in range(args.clients)]
        port = h.free_port()
        command = [sys.executable, "-m", "engram_index.cli", "serve", "--data", str(args.data), "--port", str(port),
                   "--embedder", "none", "--rate", "100000", "--burst", "100000", "--concurrent", "64",
                   "--workers", "2", "--service-did", h.SERVICE_DID, "--plc-url", plc_url, *shlex.split(args.serve_args)]
        server = subprocess.Popen(command, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 300
            while True:
                with contextlib.suppress(OSError):
                    conn = h.Connection(port)
                    status = conn.get(requests[0][0])
                    conn.close()
                    if status == 200:
                        break
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the server did not start")
                time.sleep(0.2)
            h.drive(port, requests, max(args.clients, 2), 2.0)  # warm-up
            samplers = {pid: subprocess.Popen(
                [spy, "record", "-r", str(args.rate), "-f", "raw", "-o", f"{tmp}/{pid}.txt", "-d", str(int(args.seconds)),
                 "--gil", "--nonblocking", "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for pid in h._children(server.pid)}
            cpu = h.tree_cpu_seconds(server.pid)
            rps, p50, p99, errors, done, _ = h.drive(port, requests, args.clients, args.seconds)
            cpu = (h.tree_cpu_seconds(server.pid) - cpu) / max(done, 1) * 1000
            for sampler in samplers.values():
                sampler.wait()
        finally:
            server.terminate()
            server.wait(10)
        counted = [shares(Path(f"{tmp}/{pid}.txt")) for pid in samplers if Path(f"{tmp}/{pid}.txt").stat().st_size]
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            for pid in samplers:
                shutil.copy(f"{tmp}/{pid}.txt", args.keep / f"worker-{pid}.txt")
    total, parts = max(counted, key=lambda c: c[0])
    print(f"searchMemories over HTTP, {args.clients} client(s): {rps:.0f} req/s, p50 {p50:.2f} ms, p99 {p99:.2f} ms,"
          f" {errors} errors, server CPU {cpu:.2f} ms per search")
    print(f"the busiest worker: {total} samples holding the GIL ({args.rate}/s for {args.seconds:g} s), by part:")
    for label, n in parts.most_common():
        print(f"  {label:40s}{n:7d}{n / total:8.1%}")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
