"""Where a v5 search's or a Kindgi retrieve's CPU goes: the face's app in process, every hop inline.

Opens a data directory filled by bench/v5.py (`--data DIR`, namespace `scale`) or bench/retrieve.py
(`--data DIR/n100000`, tenant `bench`), serves its app over ASGI in this process (no sockets) with
the face's thread-pool hop, the search pool and the faces' embedding threads all run inline, so that
one thread's CPU time covers a whole request; sends each query once (no query-cache hits) and prints
the thread CPU and wall ms per request, then (with --cprofile K) the K costliest functions.

    python bench/profile_faces.py --face v5 --data DIR [--requests 150] [--cprofile 40]
    python bench/profile_faces.py --face kindgi --data DIR/n100000 [--requests 150] [--cprofile 40]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import logging
import os
import pstats
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
sys.path.insert(0, str(_HERE.parent / "src"))

from profile_search import Inline  # noqa: E402
from v5 import UNLIMITED  # noqa: E402

import engram_index.kindgi.routes as kindgi_routes  # noqa: E402
import engram_index.supermemory.http as v5_http  # noqa: E402
from engram_index.app import create_app  # noqa: E402
from engram_index.embed.local import MiniLMEmbedder  # noqa: E402
from engram_index.engram.api.embedding import QueryEmbedding  # noqa: E402
from engram_index.engram.auth import InsecureOpen  # noqa: E402
from engram_index.keys import KeyStore  # noqa: E402
from engram_index.kindgi.facts import space_name  # noqa: E402
from engram_index.supermemory.tables import chunks_collection, memories_collection  # noqa: E402


async def _inline(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Starlette's run_in_threadpool, run in the caller's thread."""
    return fn(*args, **kwargs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--face", choices=("v5", "kindgi"), required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--requests", type=int, default=150)
    parser.add_argument("--cprofile", type=int, default=0, help="print this many functions by --sort")
    parser.add_argument("--sort", default="cumulative", help="the profile's order: cumulative, tottime, ...")
    parser.add_argument("--dump", type=Path, default=None, help="also write the profile here (pstats)")
    parser.add_argument("--answers", type=Path, default=None,
                        help="instead: write every answer (queries x modes x explanations or includes) here, to compare")
    parser.add_argument("--threads", action="store_true",
                        help="keep the hops on their threads (as served) instead of inline: with --answers, the"
                             " paths that overlap the query's embedding are the ones answering")
    shared = Path(os.environ.get("ENGRAM_SHARED", _HERE.parents[1] / "shared"))
    parser.add_argument("--scifact", type=Path, default=shared / "data" / "scifact")
    args = parser.parse_args()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # the client's request lines are not the face's cost
    if not args.threads:
        v5_http.run_in_threadpool = _inline  # type: ignore[assignment]
        kindgi_routes.run_in_threadpool = _inline  # type: ignore[assignment]
    queries = [json.loads(line)["text"] for line in (args.scifact / "queries.jsonl").open()][:20 + args.requests]
    app = create_app(args.data, "did:web:localhost", authenticator=InsecureOpen(), embedding=QueryEmbedding(None),
                     key_limits=UNLIMITED, face_embedder=MiniLMEmbedder(int8=True))
    if args.face == "v5":
        key, _ = KeyStore(args.data).create("supermemory", {"namespaces": None})
        path, names = "/ns/scale/search", [memories_collection("scale"), chunks_collection("scale")]
    else:
        key, _ = KeyStore(args.data).create("kindgi", {"tenant": "bench", "user": "u0", "projects": ["p0", "p1", "p2"]})
        path, names = "/v1/memory/retrieve", [space_name("bench")]

    def body(q: str) -> bytes:
        return orjson.dumps({"query": q, "limit": 10} if args.face == "v5" else {"mode": "both", "query": q, "limit": 10})

    async def run() -> None:
        async with app.router.lifespan_context(app):  # type: ignore[attr-defined]
            if not args.threads:
                app.state.spaces.searches.executor = Inline()
                if args.face == "kindgi":
                    app.state.kindgi.retriever._embedding = Inline()
                else:
                    app.state.supermemory.embedding_threads = Inline()
            for name in names:
                app.state.spaces.index(name)  # loaded before the first request
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
                async def one(q: str) -> None:
                    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json",
                               "Idempotency-Key": str(uuid.uuid4())}
                    answer = await client.post(path, content=body(q), headers=headers)
                    assert answer.status_code == 200, answer.text
                if args.answers is not None:
                    await write_answers(client, args.face, key, path, queries, args.answers)
                    return
                for q in queries[:20]:  # warm: caches, masks
                    await one(q)
                # Thread CPU, not wall: on a shared machine another process's work is not this request's.
                profiler = cProfile.Profile(time.thread_time_ns, 1e-9)
                wall, cpu = time.perf_counter(), time.thread_time()
                if args.cprofile:
                    profiler.enable()
                for q in queries[20:]:
                    await one(q)
                profiler.disable()
                n = len(queries) - 20
                print(f"{args.face}: {(time.thread_time() - cpu) / n * 1000:.2f} ms thread CPU,"
                      f" {(time.perf_counter() - wall) / n * 1000:.2f} ms wall per request ({n} requests"
                      + (", profiled" if args.cprofile else "") + ")")
                if args.cprofile:
                    if args.dump is not None:
                        profiler.dump_stats(args.dump)
                    pstats.Stats(profiler).sort_stats(args.sort).print_stats(args.cprofile)

    asyncio.run(run())


# The variants each query is asked in: every mode, with and without explanations (Kindgi) or
# includes (v5), so that a change that must not change answers can be checked byte for byte.
KINDGI_VARIANTS = [({"mode": m}, explain) for m in ("keyword", "semantic", "both") for explain in (False, True)] + [
    ({"mode": "list"}, False), ({"mode": "both", "type": "note"}, False),
    ({"mode": "both", "scope": {"projectId": "p1"}, "limit": 25}, False),
    ({"mode": "keyword", "scope": {"tenantId": "bench", "userId": "u0"}, "limit": 3}, False)]
V5_VARIANTS = [({"searchMode": m, "threshold": t, "include": inc}, explain)
               for m in ("hybrid", "memories", "chunks") for t in (0.0, 0.3)
               for inc in ({}, {"documents": True, "related": True}) for explain in (False, True)]


async def write_answers(client: httpx.AsyncClient, face: str, key: str, path: str, queries: list[str],
                        out: Path) -> None:
    """Every query in every variant, one JSON answer per line (request ids left out), to `out`."""
    variants = KINDGI_VARIANTS if face == "kindgi" else V5_VARIANTS
    with out.open("wb") as f:
        for q in queries:
            for extra, explain in variants:
                headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json",
                           "Idempotency-Key": str(uuid.uuid4())}
                if explain:
                    headers["X-Kindgi-Explain" if face == "kindgi" else "X-Engram-Explain"] = "true"
                answer = await client.post(path, content=orjson.dumps({"query": q, "limit": 10, **extra}),
                                           headers=headers)
                body = answer.json()
                for volatile in ("requestId", "searchTime"):  # they differ between any two runs
                    body.pop(volatile, None)
                f.write(orjson.dumps({"q": q, **extra, "explain": explain, "status": answer.status_code,
                                      "body": body}, option=orjson.OPT_SORT_KEYS) + b"\n")
    print(f"{len(queries) * len(variants)} answers written to {out}")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
