"""What the MCP path costs over a face's own HTTP call: the same keyword recall four ways.

A garden.engram space of N memories (each with a few words of a small vocabulary, hashing-embedder
vectors) is served on loopback by one process (uvicorn, as `serve`); each recall is then timed
(p50, p99 of --requests calls, after a warm-up):

1. `GET /xrpc/garden.engram.searchMemories` over HTTP (the face alone);
2. `Console.recall` over that HTTP (the access layer: the same request plus the shared shape);
3. the MCP `recall` tool through the SDK's in-process client (the tool's argument checks, its JSON);
4. the MCP `recall` tool over streamable HTTP at `/mcp` (the served app calls its face in process).

    python bench/mcp_calls.py [--memories 2000] [--requests 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from peers_common import cpu_model  # noqa: E402

from engram_index.app import create_app  # noqa: E402
from engram_index.collections import Collections  # noqa: E402
from engram_index.console.access import Console, Query  # noqa: E402
from engram_index.console.mcp_server import build  # noqa: E402
from engram_index.embed.hashing import HashingEmbedder  # noqa: E402
from engram_index.engram.api.embedding import QueryEmbedding  # noqa: E402
from engram_index.engram.api.limits import SpaceLimits  # noqa: E402
from engram_index.engram.auth import InsecureOpen  # noqa: E402
from engram_index.engram.importer import import_jsonl  # noqa: E402
from engram_index.testkit.serve import serving  # noqa: E402

SPACE = "at://did:plc:benchbenchbenchbenchbenc/space/garden.engram.space/mcp"
WORDS = [f"w{i}" for i in range(300)]


def fill(data: Path, count: int) -> None:
    """A space of `count` memories of 8 random words each."""
    rng = random.Random(7)
    spaces = Collections(data)
    embedder = HashingEmbedder(64)
    try:
        spaces.ensure_collection(SPACE, embedder.identity)
        path = data / "mcp.jsonl"
        with open(path, "w") as fh:
            for i in range(count):
                fh.write(json.dumps({"rkey": f"r{i}", "text": " ".join(rng.choices(WORDS, k=8)),
                                     "createdAt": "2026-01-01T00:00:00Z"}) + "\n")
        import_jsonl(spaces, SPACE, path, embedder=embedder)
    finally:
        spaces.close()


async def timed(call: Callable[[str], Awaitable[Any]], queries: list[str]) -> tuple[float, float]:
    """p50 and p99 in ms of `call` over the queries (after 20 warm-up calls)."""
    for q in queries[:20]:
        await call(q)
    took = []
    for q in queries:
        began = time.perf_counter()
        await call(q)
        took.append((time.perf_counter() - began) * 1000)
    took.sort()
    return statistics.median(took), took[min(len(took) - 1, int(len(took) * 0.99))]


async def measure(url: str, queries: list[str]) -> list[tuple[str, float, float]]:
    """The four ways, in order."""
    rows = []
    async with httpx.AsyncClient(base_url=url) as http:
        async def face(q: str) -> Any:
            answer = await http.get("/xrpc/garden.engram.searchMemories",
                                    params={"space": SPACE, "q": q, "mode": "keyword", "limit": 10})
            assert answer.status_code == 200
        rows.append(("face HTTP (searchMemories)", *await timed(face, queries)))
        console = Console(http, None, lambda: [SPACE])

        async def layer(q: str) -> Any:
            await console.recall(SPACE, Query(q, 10, "keyword"))
        rows.append(("access layer over HTTP", *await timed(layer, queries)))
        async with Client(build(lambda ctx: console)) as client:
            async def tool(q: str) -> Any:
                result = await client.call_tool("recall", {"collection": SPACE, "query": q, "mode": "keyword"})
                assert not result.is_error, result.content
            rows.append(("MCP tool, in-process client", *await timed(tool, queries)))
    async with httpx2.AsyncClient(timeout=30) as http2:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http2)) as client:
            async def remote(q: str) -> Any:
                result = await client.call_tool("recall", {"collection": SPACE, "query": q, "mode": "keyword"})
                assert not result.is_error, result.content
            rows.append(("MCP tool over HTTP at /mcp", *await timed(remote, queries)))
    return rows


def main() -> None:
    """Fill, serve, measure, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    rng = random.Random(11)
    queries = [" ".join(rng.choices(WORDS, k=2)) for _ in range(args.requests)]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        fill(data, args.memories)
        app = create_app(data, "did:web:localhost", authenticator=InsecureOpen(),
                         embedding=QueryEmbedding(HashingEmbedder(64)), limits=SpaceLimits(1e6, 1e6, 64))
        with serving(app) as url:
            rows = asyncio.run(measure(url, queries))
    model, cores = cpu_model()
    print(f"{args.memories} memories, {args.requests} keyword recalls each; CPU: {model} ({cores} cores)\n")
    print("| path | p50 ms | p99 ms |\n|---|---:|---:|")
    for name, p50, p99 in rows:
        print(f"| {name} | {p50:.2f} | {p99:.2f} |")


if __name__ == "__main__":
    main()
