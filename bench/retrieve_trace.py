"""Where the wall time of one served Kindgi retrieve goes: each step's median time from the request's arrival.

Serves a data directory filled by bench/retrieve.py (`--data DIR/n100000`, tenant `bench`; give it a
copy: the server locks it and writes) in a child process of this script that stamps, with
perf_counter, the points of the served path as each request passes them (the first bytes read, the
credential check, the body's bytes when they come apart from the head, the route's prepare step, the
Idempotency-Key's lookup, the query embedding and its forward pass, each search, the cross-leg
rankings, the fusion, the facts' bodies, the answer's keeping, the response's last write), then
sends it `--requests` retrieves of queries none repeats over one keep-alive connection and prints,
per point, the median over the requests (the first 20 left out) of its time since the first bytes,
and of each step's own wall and thread CPU time. Medians of different points come from different
requests: read them as a timeline, not as sums. What does sum is the last table (`both`): the path
whose end is the answer's, each hop the median over the requests of the time between its two points
in the same request. It also prints what Python's cycle collector did while the traced requests
ran: per generation, how often it ran, its median and total pause, and the objects it freed (the
cyclic garbage the requests left).

    python bench/retrieve_trace.py --data DIR/n100000 [--requests 300] [--mode both]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
sys.path.insert(0, str(_HERE.parent / "src"))

# (module, owner or None, attribute, label): the steps stamped on entry and exit; a step called more
# than once per request keeps its first entry, its last exit and the sum of its thread CPU (but the
# bodies' read: its last call alone, the one the answer waits for).
STEPS = [
    ("engram_index.kindgi.routes", None, "authenticate", "credential check"),
    ("engram_index.kindgi.routes", None, "start_retrieve", "prepare (body checks, embedding submitted)"),
    ("engram_index.kindgi.retrieve", "Retriever", "start", "Retriever.start (in prepare)"),
    ("engram_index.kindgi.idempotency", "Idempotency", "begin", "Idempotency-Key lookup"),
    ("engram_index.kindgi.retrieve", "Retriever", "keyword_part", "keyword leg (search pool thread)"),
    ("engram_index.kindgi.retrieve", "Retriever", "_keyword_hits", "keyword leg's query analysis and hits"),
    ("engram_index.kindgi.retrieve", "Retriever", "_semantic_leg", "semantic leg (embedding thread)"),
    ("engram_index.embed.query_cache", "QueryCache", "vector", "query embedding"),
    ("engram_index.embed.local", "MiniLMEmbedder", "forward", "forward pass (inputs, then onnxruntime)"),
    ("engram_index.kindgi.ranked", None, "by_meaning", "keyword leg's facts by meaning"),
    ("engram_index.kindgi.ranked", None, "by_words", "semantic leg's facts by words"),
    ("engram_index.kindgi.ranked", None, "fused", "fusion"),
    ("engram_index.kindgi.retrieve", "Retriever", "answer", "answer formed"),
    ("engram_index.kindgi.idempotency", "Idempotency", "keep_behind", "answer kept behind"),
]
BODIES = "facts' bodies (the last read)"
# The points a `both` retrieve's answer waits on, in order (the keyword leg runs beside the embedding).
CRITICAL = ["arrival", "credential check >", "credential check <", "prepare (body checks, embedding submitted) >",
            "Retriever.start (in prepare) >", "query embedding >", "forward pass (inputs, then onnxruntime) >",
            "forward pass (inputs, then onnxruntime) <", "query embedding <", "vector search >", "vector search <",
            "answer formed >", "keyword leg's facts by meaning >", "keyword leg's facts by meaning <",
            "semantic leg's facts by words >", "semantic leg's facts by words <", "fusion <", BODIES + " >",
            BODIES + " <", "answer formed <", "answer kept behind >", "response written"]
OTHERS = [BODIES, "keyword search", "vector search"]  # stamped apart (see serve)


def serve(port: int, data: Path, out: Path) -> None:
    """The child: `engram-index serve` with the stamps installed; medians written to `out` on SIGTERM."""
    import importlib

    import engram_index.exchange as exchange
    import engram_index.protocol as protocol
    from engram_index.engine.search import SpaceIndex
    from engram_index.kindgi.facts import Facts

    clock = time.perf_counter
    rows: list[dict[str, float]] = []
    now: dict[str, float] = {}
    lock = threading.RLock()  # (the report, a signal handler, may run while this thread holds it)

    def stamp(label: str, fn: Callable[..., Any], first: bool = True) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            began, cpu = clock(), time.thread_time()
            with lock:
                if not first or label + " >" not in now:
                    now[label + " >"] = began
            try:
                return fn(*args, **kwargs)
            finally:
                with lock:
                    now[label + " <"] = clock()
                    spent = time.thread_time() - cpu
                    now[label + " cpu"] = now.get(label + " cpu", 0.0) + spent if first else spent
        return run

    for module, owner, name, label in STEPS:
        holder = importlib.import_module(module)
        target = getattr(holder, owner) if owner else holder
        setattr(target, name, stamp(label, getattr(target, name)))
    Facts.retrievable = stamp(BODIES, Facts.retrievable, first=False)  # type: ignore[method-assign]
    search = SpaceIndex.search
    SpaceIndex.search = lambda self, req: stamp(f"{req.mode} search", search)(self, req)  # type: ignore[method-assign]

    received = protocol.JsonHttpProtocol.data_received

    def data_received(self: Any, data: bytes) -> None:
        if b"POST /v1/memory/retrieve" in data[:64]:
            with lock:
                if now:
                    rows.append(dict(now))
                now.clear()
                now["arrival"] = clock()
        else:  # the client wrote its body apart from its head (httpx does): when that came
            with lock:
                if "arrival" in now:
                    now.setdefault("the body's bytes (apart from the head)", clock())
        received(self, data)

    send = exchange.Exchange.send

    async def sent(self: Any, message: Any) -> None:
        await send(self, message)
        if message["type"] == "http.response.body" and not message.get("more_body"):  # its last bytes went out
            with lock:
                now["response written"] = clock()

    protocol.JsonHttpProtocol.data_received = data_received  # type: ignore[method-assign]
    exchange.Exchange.send = sent  # type: ignore[method-assign]

    import gc

    # The collector's runs while the traced requests (past the first 20) went: generation → pauses (s), freed.
    pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
    freed = [0, 0, 0]
    began = [0.0]

    def collecting(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[0] = clock()
        elif len(rows) > 20:
            pauses[info["generation"]].append(clock() - began[0])
            freed[info["generation"]] += info["collected"]

    gc.callbacks.append(collecting)

    def report(*_: Any) -> None:
        with lock:
            done = [r for r in rows[20:] if "response written" in r]
        points = sorted({k for r in done for k in k_points(r)}, key=lambda k: statistics.median(
            r[k] - r["arrival"] for r in done if k in r))
        table = [(k, statistics.median((r[k] - r["arrival"]) * 1e6 for r in done if k in r),
                  sum(k in r for r in done)) for k in points]
        steps = {}
        for label in [step[3] for step in STEPS] + OTHERS:
            walls = [(r[label + " <"] - r[label + " >"]) * 1e6 for r in done if label + " <" in r]
            cpus = [r[label + " cpu"] * 1e6 for r in done if label + " cpu" in r]
            if walls:
                steps[label] = (statistics.median(walls), statistics.median(cpus) if cpus else 0.0)
        hops = []
        for a, b in zip(CRITICAL, CRITICAL[1:]):
            spans = [(r[b] - r[a]) * 1e6 for r in done if a in r and b in r]
            if spans:
                hops.append((f"{a} → {b}", statistics.median(spans), len(spans)))
        whole = [(r["response written"] - r["arrival"]) * 1e6 for r in done]
        hops.append(("the whole request (first bytes → response written)", statistics.median(whole), len(whole)))
        collector = [(g, len(p), statistics.median(p) * 1e6 if p else 0.0, sum(p) * 1e3, freed[g])
                     for g, p in pauses.items()]
        out.write_text(json.dumps({"requests": len(done), "timeline": table, "steps": steps, "hops": hops,
                                   "collector": collector}))
        os._exit(0)

    signal.signal(signal.SIGTERM, report)
    from engram_index.cli import main

    sys.argv = ["engram-index", "serve", "--data", str(data), "--port", str(port), "--insecure-open",
                "--no-access-log", "--embedder", "local", "--face-embedder", "auto",
                "--key-rate", "1000000", "--key-burst", "1000000"]
    main()


def k_points(row: dict[str, float]) -> list[str]:
    """The stamped points of one request (its entries and exits, not its CPU sums)."""
    return [k for k in row if k != "arrival" and not k.endswith(" cpu")]


def main() -> None:
    """Serve with stamps, send the retrieves, print the timeline."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--mode", default="both", choices=("list", "keyword", "semantic", "both"))
    parser.add_argument("--serve", nargs=2, metavar=("PORT", "OUT"), help=argparse.SUPPRESS)
    shared = Path(os.environ.get("ENGRAM_SHARED", _HERE.parents[1] / "shared"))
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    args = parser.parse_args()
    if args.serve:
        serve(int(args.serve[0]), args.data, Path(args.serve[1]))
        return
    import httpx
    import orjson
    from retrieve import PROJECTS, TENANT, USERS, wait_idle, wait_listening, wait_quiet
    from synth import make_queries, make_space

    from engram_index.keys import KeyStore
    from engram_index.testkit.serve import free_port

    token, _ = KeyStore(args.data).create("kindgi", {"tenant": TENANT, "user": USERS[0], "projects": PROJECTS[:3]})
    port, out = free_port(), Path(tempfile.mkdtemp(prefix="retrieve-trace-")) / "medians.json"
    env = {**os.environ, "PYTHONPATH": str(_HERE.parent / "src")}
    proc = subprocess.Popen([sys.executable, __file__, "--data", str(args.data), "--serve", str(port), str(out)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_listening(url, proc)
        wait_idle(url, token, proc.pid)
        queries, _ = make_queries(make_space(1000, scifact_dir=args.scifact, seed=1), args.requests + 60, seed=4)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        with httpx.Client(base_url=url, timeout=60) as client:
            for n, q in enumerate(queries):
                if n == 40:  # warmed (masks, the conversation codes): let the server go quiet first
                    wait_quiet(proc.pid)
                body = {"mode": args.mode, "limit": 10} | ({} if args.mode == "list" else {"query": q})
                answer = client.post("/v1/memory/retrieve", content=orjson.dumps(body),
                                     headers={**headers, "Idempotency-Key": str(uuid.uuid4())})
                assert answer.status_code == 200, answer.text
    finally:
        proc.terminate()
        proc.wait(60)
    result = json.loads(out.read_text())
    print(f"{result['requests']} `{args.mode}` retrieves traced (load average {os.getloadavg()[0]:.1f})")
    print("\n| point | median µs since the request's first bytes | requests |\n|---|---:|---:|")
    for point, at, seen in result["timeline"]:
        print(f"| {point} | {at:.0f} | {seen} |")
    print("\n| step | median wall µs | median thread CPU µs |\n|---|---:|---:|")
    for label, (wall, cpu) in result["steps"].items():
        print(f"| {label} | {wall:.0f} | {cpu:.0f} |")
    print("\n| collector generation | runs | runs per request | median pause µs | total ms | objects freed |"
          "\n|---|---:|---:|---:|---:|---:|")
    for gen, runs, median, total, gone in result["collector"]:
        print(f"| {gen} | {runs} | {runs / max(result['requests'], 1):.2f} | {median:.0f} | {total:.1f} | {gone} |")
    if result["hops"]:
        print("\n| hop on the answer's path (both) | median µs, within each request | requests |\n|---|---:|---:|")
        for label, wall, seen in result["hops"]:
            print(f"| {label} | {wall:.0f} | {seen} |")


if __name__ == "__main__":
    from machine import print_machine

    if "--serve" not in sys.argv:
        print_machine()
    main()
