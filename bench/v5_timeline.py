"""Where a served v5 search's time goes, thread by thread: what overlaps the query's embedding.

Serves a copy of a bench/v5.py data directory (`engram-index serve`, as bench/v5.py does) with
stamps at a hybrid search's steps, each the wall clock and its thread's CPU clock: the app's
first call and last send (the event loop), the route's `prepare`, the search pool's job, the
query's embedding (on the face's embedding thread), the job's first wait for the vector and its
end, and after the vector each collection's search and take (the chunks' on the embedding's
thread, as soon as it has made the vector) and each one's hits taken. One keep-alive client sends each query once (no query-cache hits). It
prints, per step, the median thread CPU and wall µs, the same of those parts, and two sums of CPU
medians: the path when the embedding overlaps
the job's work before the vector (the longer of the two counts), and the same work one step
after another. On a shared machine the CPU clocks say more than the wall: a thread waiting for a
core is not counted.

    python bench/v5_timeline.py --data DIR [--requests 300]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
ROOT = _HERE.parent
STEPS = [("the event loop, before the hop", "call", "prepared"), ("the hop to the search pool", "prepared", "job"),
         ("the job, before the vector", "job", "waits"), ("the embedding (its thread)", "embed>", "embed<"),
         ("the vector's hand-over", "embed<", "woken"), ("the job, after the vector", "woken", "done"),
         ("the hop back", "done", "back"), ("the event loop, after", "back", "sent")]
# The job's parts after the vector: each collection's search (its compiled rest) and take, the chunks' on the
# embedding's thread as soon as the vector is made, the memories' on the job's; and each one's hits taken (Python).
PARTS = [("the chunks' search and take (the embedding's thread)", "search chunk"),
         ("the memories' search and take (the job's thread)", "search memory"),
         ("taking the chunks' hits", "take chunk"), ("taking the memories' hits", "take memory")]
HOPS = {"prepared", "embed<", "done"}  # steps from one thread to another: no thread's CPU clock spans them


def child() -> None:
    """The served process: stamps installed, then `engram-index serve` with the given arguments."""
    import concurrent.futures as cf
    import threading

    import engram_index.embed.query_cache as query_cache
    import engram_index.search_pool as search_pool
    import engram_index.searching as searching
    import engram_index.server as server
    import engram_index.supermemory.routes as routes
    import engram_index.supermemory.search as search

    now: dict[str, tuple[float, float]] = {}
    rows: list[dict[str, tuple[float, float]]] = []

    def stamp(name: str, first: bool = True) -> None:
        if not first or name not in now:
            now[name] = (time.perf_counter(), time.thread_time())

    def wrapped(owner: Any, name: str, before: str, after: str) -> None:
        fn = getattr(owner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            stamp(before)
            try:
                return fn(*args, **kwargs)
            finally:
                stamp(after, first=False)
        setattr(owner, name, call)

    wrapped(routes, "start_search", "prepare>", "prepared")
    def per_leg(name: str, step: str) -> None:
        """Stamp `search.<name>` as `<step> <its leg's kind>` > and <."""
        fn = getattr(search, name)

        def call(face: Any, ns: str, leg: Any, *args: Any) -> Any:
            stamp(f"{step} {leg.kind}>")
            try:
                return fn(face, ns, leg, *args)
            finally:
                stamp(f"{step} {leg.kind}<", first=False)
        setattr(search, name, call)

    per_leg("_searched", "search")
    per_leg("_take", "take")
    wrapped(query_cache.QueryCache, "vector", "embed>", "embed<")
    wrapped(search, "search", "search>", "done")
    job = searching._as_job

    def as_job(*args: Any) -> Any:
        stamp("job")
        return job(*args)
    searching._as_job = as_job
    run = search_pool.SearchPool.run

    async def pool_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = await run(self, *args, **kwargs)
        stamp("back")
        return result
    search_pool.SearchPool.run = pool_run  # type: ignore[method-assign]
    result = cf.Future.result

    def waited(self: Any, timeout: float | None = None) -> Any:
        mine = threading.current_thread().name.startswith("search")
        if mine:
            stamp("waits")
        try:
            return result(self, timeout)
        finally:
            if mine:
                stamp("woken")  # (its first wait's end: the vector's hand-over)
    cf.Future.result = waited  # type: ignore[method-assign]
    serve = server.run

    def timed_run(app: Any, *args: Any, **kwargs: Any) -> None:
        async def timed(scope: Any, receive: Any, send: Any) -> None:
            searching_call = scope["type"] == "http" and scope["path"].endswith("/search")
            if searching_call:
                if now:
                    rows.append(dict(now))
                now.clear()
                stamp("call")

            async def sent(message: Any) -> None:
                await send(message)
                if searching_call and message["type"] == "http.response.body" and not message.get("more_body"):
                    stamp("sent", first=False)
            await app(scope, receive, sent)
        serve(timed, *args, **kwargs)
    server.run = timed_run

    def report(*_: Any) -> None:
        sys.stdout.write(json.dumps(rows[20:]) + "\n")
        sys.stdout.flush()
        os._exit(0)
    signal.signal(signal.SIGTERM, report)
    from engram_index.cli import main as cli

    sys.argv = ["engram-index", *sys.argv[2:]]
    cli()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--requests", type=int, default=300)
    shared = Path(os.environ.get("ENGRAM_SHARED", ROOT.parent / "shared"))
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    import httpx

    from retrieve import wait_listening

    from engram_index.keys import KeyStore
    from engram_index.testkit.serve import free_port

    texts = [json.loads(line)["text"] for line in (args.scifact / "queries.jsonl").open()]
    queries = (texts * (1 + (args.requests + 20) // len(texts)))[: args.requests + 20]
    queries = [q if i < len(texts) else f"{q} ({i})" for i, q in enumerate(queries)]  # each once
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        shutil.copytree(args.data, data)
        (data / "LOCK").unlink(missing_ok=True)
        key, _ = KeyStore(data).create("supermemory", {"namespaces": None})
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, __file__, "--child", "serve", "--data", str(data), "--port", str(port),
             "--insecure-open", "--no-access-log", "--embedder", "local", "--key-rate", "1000000", "--key-burst",
             "1000000", "--face-embedder", "auto"],
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        wait_listening(url, proc)
        print(f"load average {os.getloadavg()[0]:.1f} at start")
        client_ms: list[float] = []
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as client:
            for q in queries:
                began = time.perf_counter()
                assert client.post("/ns/scale/search", json={"query": q, "limit": 10}).status_code == 200
                client_ms.append((time.perf_counter() - began) * 1000)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    rows = [r for r in json.loads(out.decode().strip().splitlines()[-1])
            if all(k in r for _, a, b in STEPS for k in (a, b))]
    print(f"load average {os.getloadavg()[0]:.1f} at the end; {len(rows)} searches\n")
    med: dict[tuple[str, str], tuple[float, float]] = {}
    print("| step | thread CPU µs p50 | wall µs p50 |\n|---|---:|---:|")
    for label, a, b in STEPS:
        cpu = statistics.median((r[b][1] - r[a][1]) * 1e6 for r in rows)
        wall = statistics.median((r[b][0] - r[a][0]) * 1e6 for r in rows)
        med[(a, b)] = (cpu, wall)
        print(f"| {label} | {'' if a in HOPS else f'{cpu:.0f}'} | {wall:.0f} |")
    cpu_of = {a: med[(a, b)][0] for _, a, b in STEPS}
    loop = cpu_of["call"] + cpu_of["back"]
    overlapped = loop + max(cpu_of["embed>"], cpu_of["job"]) + cpu_of["woken"]
    one_by_one = loop + cpu_of["embed>"] + cpu_of["job"] + cpu_of["woken"]
    total = statistics.median((r["sent"][0] - r["call"][0]) * 1e6 for r in rows)
    print("\n| part of the job after the vector | searches | wall µs p50 | thread CPU µs p50 |\n|---|---:|---:|---:|")
    for label, part in PARTS:
        held = [r for r in rows if part + ">" in r and part + "<" in r]
        if held:
            print(f"| {label} | {len(held)} | {statistics.median((r[part + '<'][0] - r[part + '>'][0]) * 1e6 for r in held):.0f}"
                  f" | {statistics.median((r[part + '<'][1] - r[part + '>'][1]) * 1e6 for r in held):.0f} |")
    print("\n| point | median µs since the app's first call |\n|---|---:|")

    def since_call(point: str) -> float:
        return statistics.median((r[point][0] - r["call"][0]) * 1e6 for r in rows if point in r)
    for point in sorted({k for r in rows for k in r}, key=since_call):
        print(f"| {point} | {since_call(point):.0f} |")
    print(f"\nthe app's first call to its last send, wall p50: {total:.0f} µs;"
          f" the client's round trip p50: {statistics.median(client_ms[20:]) * 1000:.0f} µs")
    print(f"CPU along the path, the embedding beside the job's work before the vector: {overlapped:.0f} µs;"
          f" one step after another: {one_by_one:.0f} µs (hops and hand-overs not counted)")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child()
    else:
        from machine import print_machine

        print_machine()
        main()
