"""Instructions per Kindgi retrieve, counted by callgrind: a CPU measure that another process's load
does not move (thread CPU on a shared 2-core machine moved by a third between runs of the same code).

Serves a data directory filled by bench/retrieve.py (`--data DIR/n100000`, tenant `bench`; give it
a copy) in process with every hop inline (as bench/profile_faces.py does), warms it with 20
retrieves, then runs `--requests` more (SciFact queries none repeats, `--mode`, Python's cyclic
garbage collector off so that where its passes fall does not move the count) inside one
functools.reduce call, which `valgrind --tool=callgrind --toggle-collect=functools_reduce` counts
alone. `--src` picks the checkout whose code runs (its compiled kernels built beside it). valgrind
has no AVX-512: the kernels take their AVX2 or portable loops there.

    python bench/retrieve_callgrind.py --data DIR/n100000 [--requests 20] [--mode both] [--src DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))

from callgrind_count import count, measured_setup  # noqa: E402


def measured(src: Path, data: Path, requests: int, mode: str) -> None:
    """Under valgrind: the app in process, warmed, then the counted retrieves."""
    queries = measured_setup(src)
    import asyncio
    import contextlib
    import functools
    import gc
    import uuid

    import httpx
    import orjson
    from profile_search import Inline
    from v5 import UNLIMITED

    import engram_index.kindgi.routes as kindgi_routes
    from engram_index.app import create_app
    from engram_index.embed.local import MiniLMEmbedder
    from engram_index.engram.api.embedding import QueryEmbedding
    from engram_index.engram.auth import InsecureOpen
    from engram_index.keys import KeyStore
    from engram_index.kindgi.facts import space_name

    async def inline(fn: object, *args: object) -> object:
        return fn(*args)  # type: ignore[operator]

    kindgi_routes.run_in_threadpool = inline  # type: ignore[assignment]
    app = create_app(data, "did:web:localhost", authenticator=InsecureOpen(), embedding=QueryEmbedding(None),
                     key_limits=UNLIMITED, face_embedder=MiniLMEmbedder(int8=True))
    key, _ = KeyStore(data).create("kindgi", {"tenant": "bench", "user": "u0", "projects": ["p0", "p1", "p2"]})
    loop = asyncio.new_event_loop()
    stack = contextlib.AsyncExitStack()
    clients: list[httpx.AsyncClient] = []

    async def setup() -> None:
        await stack.enter_async_context(app.router.lifespan_context(app))  # type: ignore[attr-defined]
        app.state.spaces.searches.executor = Inline()
        app.state.kindgi.retriever._embedding = Inline()
        app.state.spaces.index(space_name("bench"))
        transport = httpx.ASGITransport(app=app)
        clients.append(await stack.enter_async_context(httpx.AsyncClient(transport=transport, base_url="http://b")))

    async def one(q: str) -> None:
        body = {"mode": mode, "limit": 10} | ({} if mode == "list" else {"query": q})
        answer = await clients[0].post("/v1/memory/retrieve", content=orjson.dumps(body), headers={
            "Authorization": f"Bearer {key}", "Content-Type": "application/json", "Idempotency-Key": str(uuid.uuid4())})
        assert answer.status_code == 200, answer.text

    loop.run_until_complete(setup())
    for q in queries[:20]:
        loop.run_until_complete(one(q))
    app.state.kindgi.retriever._expiry.submit(lambda: None).result()  # the conversation codes made
    gc.collect()
    gc.disable()
    functools.reduce(lambda _, q: loop.run_until_complete(one(q)), queries[20:20 + requests], None)
    os._exit(0)  # counted; the app's lifespan was entered in another task than this could leave it from


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--mode", default="both", choices=("list", "keyword", "semantic", "both"))
    parser.add_argument("--src", type=Path, default=_HERE.parent, help="the checkout whose code runs")
    parser.add_argument("--measured", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measured:
        measured(args.src, args.data, args.requests, args.mode)
        return
    total, out = count(__file__, ["--data", str(args.data), "--requests", str(args.requests), "--mode", args.mode,
                                  "--src", str(args.src)], args.src, "retrieve-callgrind-")
    print(f"code of {args.src}: {total / args.requests / 1e6:.2f} M instructions per `{args.mode}`"
          f" retrieve ({args.requests} retrieves; profile: {out})")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
