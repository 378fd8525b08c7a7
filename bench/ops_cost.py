"""What metrics and whyFewer cost: the metrics middleware per request, and one whyFewer beside one search.

1. The ASGI metrics middleware (engram_index.metrics.HttpMetrics) around an app that answers at
   once, called in-process (no sockets): the CPU per request with and without it, best of rounds.
2. A space of --docs synthetic memories (tagged so that each filter keeps a share): one keyword
   search of limit 10 against the whyFewer of the same request (three filters), each repeated.

    python bench/ops_cost.py [--docs 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from starlette.routing import Route  # noqa: E402

from engram_index.collections import Collections  # noqa: E402
from engram_index.engine.types import Document, Filters, SearchRequest  # noqa: E402
from engram_index.metrics import HttpMetrics  # noqa: E402
from engram_index.shortfall import Condition, Target, why_fewer  # noqa: E402
from machine import cpu_model  # noqa: E402
from engram_index.store.sqlite import StoredDocument  # noqa: E402

SPACE = "at://did:plc:benchbenchbenchbenchbench/space/garden.engram.space/ops"
WORDS = "tea coffee river morning night kyoto brazil herbal green black cold run".split()


async def answer(scope: Any, receive: Any, send: Any) -> None:
    """An app that answers 200 at once, as the router would after matching a route."""
    scope["endpoint"] = endpoint
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


async def endpoint(request: Any) -> None:
    """The route's endpoint (only its identity matters)."""


def per_request_us(app: Any, n: int) -> float:
    """CPU microseconds per request through `app`."""
    scope = {"type": "http", "method": "GET", "path": "/xrpc/garden.engram.searchMemories"}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: Any) -> None:
        pass

    async def run() -> None:
        for _ in range(n):
            await app(dict(scope), receive, send)

    began = time.process_time()
    asyncio.run(run())
    return (time.process_time() - began) / n * 1e6


def middleware(rounds: int) -> tuple[float, float]:
    """Best per-request CPU of the bare app and of the app inside the metrics middleware."""
    wrapped = HttpMetrics(answer, [Route("/xrpc/garden.engram.searchMemories", endpoint)])
    bare = min(per_request_us(answer, 20000) for _ in range(rounds))
    timed = min(per_request_us(wrapped, 20000) for _ in range(rounds))
    return bare, timed


def shortfall(docs: int, rounds: int) -> tuple[float, float]:
    """Best milliseconds of one keyword search and of its whyFewer, on a space of `docs` memories."""
    with tempfile.TemporaryDirectory() as tmp:
        spaces = Collections(Path(tmp))
        spaces.ensure_collection(SPACE)
        batch = []
        for i in range(docs):
            text = " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7)) + f" note {i}"
            tags = tuple(t for t, every in (("a", 2), ("b", 5), ("c", 11)) if i % every == 0)
            batch.append(StoredDocument(Document(id=f"{SPACE}/did:plc:x/garden.engram.memory/r{i:07d}",
                                                 author=f"did:plc:author{i % 7}", text=text, tags=tags,
                                                 created_ms=1_700_000_000_000 + i)))
            if len(batch) == 5000:
                spaces.write(SPACE, batch)
                batch = []
        if batch:
            spaces.write(SPACE, batch)
        index = spaces.index(SPACE)
        flt = Filters(author="did:plc:author3", tags=("a", "b"))
        req = SearchRequest("keyword", q="kyoto herbal", limit=10, filters=flt, explain=True)
        conditions = [Condition("author", Filters(author="did:plc:author3")), Condition("tags=a", Filters(tags=("a",))),
                      Condition("tags=b", Filters(tags=("b",)))]
        search_ms, why_ms = [], []
        for _ in range(rounds * 10):
            began = time.perf_counter()
            result = index.search(req)
            search_ms.append((time.perf_counter() - began) * 1000)
            began = time.perf_counter()
            why_fewer(spaces, SPACE, [Target(SPACE)], returned=len(result.hits), conditions=conditions)
            why_ms.append((time.perf_counter() - began) * 1000)
        spaces.close()
    return min(search_ms), min(why_ms)


def main() -> None:
    """Print both tables."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"CPU: {cpu_model()}")
    bare, timed = middleware(args.rounds)
    print("| path | CPU per request (µs) |\n|---|---|")
    print(f"| app alone | {bare:.1f} |\n| app + metrics middleware | {timed:.1f} |\n"
          f"| middleware's own cost | {timed - bare:.1f} |")
    search_ms, why_ms = shortfall(args.docs, args.rounds)
    print(f"\n| {args.docs} memories, 3 filters | best ms |\n|---|---|")
    print(f"| keyword search, limit 10 | {search_ms:.3f} |\n| its whyFewer | {why_ms:.3f} |")


if __name__ == "__main__":
    main()
