"""Where one search's CPU time goes: searchMemories in process (ASGI, no sockets), credentials checked.

Builds (or reuses, --data) the space of bench/http_load.py, serves its app in this process with a
real credential check (a PLC directory on loopback, an authority, one member), and sends the same
hybrid searches (vector + q, explanations) one at a time, the search running inline. Prints the
thread CPU time per search of each part, the minimum over --passes passes of each pass's mean
(CPU time, not wall time, so that other work on a shared machine disturbs it less).

    python bench/profile_search.py --n 100000 --data DIR [--passes 5] [--cprofile 40]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import sys
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import numpy as np

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
sys.path.insert(0, str(_HERE.parent / "src"))

import http_load  # noqa: E402

from engram_index.endpoints import JSONAnswer  # noqa: E402
from engram_index.engram.api import lexicon, search as api_search, xrpc  # noqa: E402
from engram_index.engram.api.limits import SpaceLimits  # noqa: E402
from engram_index.app import create_app, space_credentials  # noqa: E402
from engram_index.engram.auth.credentials import SpaceCredentials  # noqa: E402
from engram_index.engine import _kernels, fusion, search as engine_search  # noqa: E402
from engram_index.engine.keyword import KeywordIndex  # noqa: E402
from engram_index.engine.vector import VectorIndex  # noqa: E402
from engram_index.engram.records import encode_query_vector  # noqa: E402

spent: dict[str, float] = {}


def timed(owner: Any, name: str, label: str) -> None:
    """Add the thread CPU time of every call of owner.name to spent[label]."""
    original = getattr(owner, name)
    if asyncio.iscoroutinefunction(original):
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            began = time.thread_time()
            try:
                return await original(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.thread_time() - began
        setattr(owner, name, async_wrapper)
        return

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.thread_time() - began
    setattr(owner, name, wrapper)


class Inline(Executor):
    """Runs what it is given at once, in the caller's thread (so that one thread's CPU time covers all)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Run fn and return its settled future."""
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to the awaiting coroutine
            future.set_exception(exc)
        return future


PARTS = [
    (api_search, "ranked_search", "ranking: the search with conversation context"),
    (engine_search.SpaceIndex, "search", "engine: the whole search"),
    (KeywordIndex, "search_and_score", "engine: keyword (tantivy + term counts)"),
    (VectorIndex, "search", "engine: vector scan + exact re-rank"),
    (VectorIndex, "similarities", "engine: cosines of keyword-only candidates"),
    (engine_search.SpaceIndex, "_explain", "engine: explanations (10 hits)"),
    (engine_search, "query_words", "engine: analyzer on the query"),
    (fusion, "convex", "engine: fusion"),
    (engine_search.SpaceIndex, "_order", "engine: ordering, ties"),
    (SpaceCredentials, "authenticate", "api: credential check"),
    (lexicon.Lexicons, "params", "api: lexicon validation of params"),
    (api_search, "build_request", "api: request (vector decoding, mode rules)"),
    (api_search, "hit_json", "api: JSON views of the hits"),
    (JSONAnswer, "render", "api: JSON encoding"),
    # The compiled calls inside the parts above: what no change to the Python around them can save.
    (_kernels, "nearest", "compiled: coarse scan (C)"),
    (_kernels, "cosines", "compiled: exact cosines (C)"),
    (_kernels, "bm25_parts", "compiled: BM25 of candidates (C)"),
    (KeywordIndex, "_find", "compiled: tantivy top-n (Rust, + ord lookup)"),
]
COMPILED = [label for _, _, label in PARTS if label.startswith("compiled:")]


def main() -> None:
    """Build, serve in process, search, print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--data", type=Path, required=True, help="build the space here once and reuse it")
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--cprofile", type=int, default=0, metavar="N",
                        help="also run one pass under cProfile and print its N costliest functions (own time)")
    parser.add_argument("--sources", action="store_true",
                        help="memories in conversations (bench/http_load.py --sources): garden's context pass runs")
    parser.add_argument("--scifact", type=Path, default=_HERE.parents[1] / "shared" / "data" / "scifact")
    parser.add_argument("--dump", type=Path, default=None, help="with --cprofile, also write the profile here (pstats)")
    args = parser.parse_args()
    http_load.build(args.data, args.n, args.scifact, args.sources)
    texts, vectors = http_load.make_queries(http_load.make_space(1000, scifact_dir=args.scifact, seed=1), 200, seed=2)
    query_strings = [urlencode({"space": http_load.SPACE, "q": q, "vector": encode_query_vector(v.astype(np.float32)),
                                "model": http_load.MODEL.model, "modelDigest": http_load.MODEL.digest}).encode()
                     for q, v in zip(texts, vectors)]
    plc = http_load.FakePlc()
    with http_load.serving(plc.app(), probe="/_health") as plc_url:
        authority = http_load.SpaceAuthority(plc, did=http_load.AUTHORITY)
        member = authority.member(http_load.SPACE, http_load.SERVICE_DID, lifetime=3600)
        headers = [(b"host", b"127.0.0.1")] + [(k.encode(), v.encode()) for k, v in member.headers().items()]
        app = create_app(args.data, http_load.SERVICE_DID,
                         authenticator=space_credentials(args.data, http_load.SERVICE_DID, plc_url=plc_url),
                         limits=SpaceLimits(1e9, 1e9, 64), read_only=True)
        for owner, name, label in PARTS:
            if hasattr(owner, name):  # (an older tree may lack a part)
                timed(owner, name, label)
        for module in (api_search, xrpc):  # older trees ran these on a thread pool: run them inline
            if hasattr(module, "run_in_threadpool"):
                module.run_in_threadpool = run_inline  # type: ignore[attr-defined]
        asyncio.run(drive(app, query_strings, headers, args.passes, args.n, args.cprofile, args.dump))


async def run_inline(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run fn in this thread."""
    return fn(*args, **kwargs)


async def call(app: Any, query_string: bytes, headers: list[tuple[bytes, bytes]]) -> int:
    """Send one request to the ASGI app; return its status."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": http_load.PATH, "raw_path": http_load.PATH.encode(), "query_string": query_string,
             "root_path": "", "headers": headers, "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    status = [0]

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status[0] = message["status"]

    await app(scope, receive, send)
    return status[0]


async def drive(app: Any, query_strings: list[bytes], headers: list[tuple[bytes, bytes]], passes: int, n: int,
                cprofile: int, dump: Path | None = None) -> None:
    """Warm up, run the passes, print the minimum of each part's per-search mean."""
    async with app.router.lifespan_context(app):
        app.state.spaces.searches.executor = Inline()
        while await call(app, query_strings[0], headers) != 200:  # the index loads in the background
            await asyncio.sleep(0.2)
        for qs in query_strings:
            assert await call(app, qs, headers) == 200
        best: dict[str, float] = {}
        for _ in range(passes):
            spent.clear()
            began = time.thread_time()
            for qs in query_strings:
                await call(app, qs, headers)
            spent["the whole request"] = time.thread_time() - began
            for label, seconds in spent.items():
                best[label] = min(best.get(label, float("inf")), seconds / len(query_strings) * 1000)
    whole = best["the whole request"]
    print(f"searchMemories in process (hybrid, explanations, credentials), {n:,} memories, {os.cpu_count()} cores:"
          f" thread CPU ms per search, min over {passes} passes of {len(query_strings)}")
    for label in ["the whole request", *[label for _, _, label in PARTS]]:
        if label in best:
            print(f"  {label:46s}{best[label]:8.3f}{best[label] / whole:8.0%}")
    floor = sum(best.get(label, 0.0) for label in COMPILED)
    print(f"  {'compiled calls together':46s}{floor:8.3f}{floor / whole:8.0%}")
    print(f"  {'the rest: Python':46s}{whole - floor:8.3f}{(whole - floor) / whole:8.0%}")
    if cprofile:
        async with app.router.lifespan_context(app):
            app.state.spaces.searches.executor = Inline()
            while await call(app, query_strings[0], headers) != 200:
                await asyncio.sleep(0.2)
            profiler = cProfile.Profile()
            profiler.enable()
            for qs in query_strings:
                await call(app, qs, headers)
            profiler.disable()
        if dump is not None:
            profiler.dump_stats(dump)
        for sort, title in (("tottime", "own time"), ("cumulative", "time with callees")):
            print(f"\none pass under cProfile, the {cprofile} costliest functions by {title}:")
            pstats.Stats(profiler).sort_stats(sort).print_stats(cprofile)


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
