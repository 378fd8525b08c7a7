"""What a served garden search costs beyond the engine, in process: the whole path on one thread.

Opens the space of bench/http_load.py (--data, built once), serves the garden app in this process
through the served HTTP protocol (engram_index.protocol's connection, llhttp, over an in-memory
transport, on uvloop's loop, the access log to /dev/null) with real space credentials (a test-kit
PLC directory, served in a thread), and the search pool run inline, so that one thread's CPU time
covers a whole request. Each query is sent --rounds times over one keep-alive connection, each
right after the same search run alone; prints the thread CPU per request, of which its search (the
ranking the route calls), and the rest: the HTTP path's own cost (on a loaded machine the steadier
figure), beside the same searches run alone. With --cprofile K, the K costliest functions of the
served path. With --answers FILE, every response body, to compare.

    python bench/garden_path.py --data DIR [--n 100000] [--rounds 3] [--cprofile 40] [--answers FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import logging
import logging.config
import os
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import numpy as np
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import http_load as h  # noqa: E402
from profile_search import Inline  # noqa: E402

import engram_index.engram.api.search as api_search  # noqa: E402
from engram_index.app import create_app, space_credentials  # noqa: E402
from engram_index.engram.api.lexicon import Lexicons  # noqa: E402
from engram_index.engram.api.search import build_request  # noqa: E402
from engram_index.engram.records import encode_query_vector  # noqa: E402
from engram_index.engram.api.limits import SpaceLimits  # noqa: E402
from engram_index.protocol import JsonHttpProtocol, ServeConfig  # noqa: E402
from engram_index.ranking import same_source  # noqa: E402
from engram_index.ranking import search as ranked_search  # noqa: E402
from engram_index.server import log_config, uvicorn_options  # noqa: E402
from starlette.datastructures import QueryParams  # noqa: E402
from uvicorn.server import ServerState  # noqa: E402


class Memory(asyncio.Transport):
    """A connection that keeps what is written and says when a whole response has arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.done: asyncio.Future[bytes] | None = None

    def expect(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[bytes]:
        """A future settled with the next whole response's bytes."""
        self.written.clear()
        self.done = loop.create_future()
        return self.done

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Keep the bytes; settle the future once the body's declared length has come."""
        self.written += data
        head_end = self.written.find(b"\r\n\r\n")
        if head_end < 0 or self.done is None or self.done.done():
            return
        head = bytes(self.written[:head_end]).lower()
        at = head.find(b"content-length: ")
        length = int(head[at + 16:head.find(b"\r\n", at) if head.find(b"\r\n", at) > 0 else None])
        if len(self.written) >= head_end + 4 + length:
            self.done.set_result(bytes(self.written))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """The peer and socket names."""
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8080)}.get(name, default)

    def is_closing(self) -> bool:
        """Never closing."""
        return False

    def is_reading(self) -> bool:
        """Always reading."""
        return True

    def pause_reading(self) -> None:
        """Flow control: nothing to pause."""

    def resume_reading(self) -> None:
        """Flow control: nothing to resume."""

    def can_write_eof(self) -> bool:
        """No half close."""
        return False

    def close(self) -> None:
        """Nothing to close."""

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        """Flow control: no limits."""

    def get_write_buffer_size(self) -> int:
        """Nothing is buffered."""
        return 0


def quiet_log_config() -> dict[str, Any]:
    """The served logging configuration, writing its lines (the access log's too) to /dev/null."""
    config = log_config()
    for handler in config["handlers"].values():
        handler["stream"] = open(os.devnull, "w")  # noqa: SIM115
    return config


def main() -> None:
    """Serve in process, send, time, print."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--data", type=Path, required=True, help="the space of bench/http_load.py (built once)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cprofile", type=int, default=0, help="print this many functions by --sort")
    parser.add_argument("--sort", default="tottime")
    parser.add_argument("--dump", type=Path, default=None, help="also write the profile here (pstats)")
    parser.add_argument("--answers", type=Path, default=None, help="write every response body here and stop")
    parser.add_argument("--scifact", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact")
    args = parser.parse_args()
    h.build(args.data, args.n, args.scifact)
    texts, vectors = h.make_queries(h.make_space(1000, scifact_dir=args.scifact, seed=1), args.queries, seed=2)
    query_strings = [urlencode({"space": h.SPACE, "q": q, "vector": encode_query_vector(v.astype(np.float32)),
                                "model": h.MODEL.model, "modelDigest": h.MODEL.digest}) for q, v in zip(texts, vectors)]
    logging.config.dictConfig(quiet_log_config())
    with contextlib.ExitStack() as stack:
        plc = h.FakePlc()
        plc_url = stack.enter_context(h.serving(plc.app(), probe="/_health"))
        authority = h.SpaceAuthority(plc, did=h.AUTHORITY)
        requests = h.prepare(query_strings, authority.member(h.SPACE, h.SERVICE_DID, lifetime=3600).headers())
        credentials = space_credentials(args.data, h.SERVICE_DID, plc_url=plc_url, allow_http_localhost=True)
        app = create_app(args.data, h.SERVICE_DID, authenticator=credentials, read_only=True,
                         limits=SpaceLimits(100000, 100000, 64))
        uvloop.run(serve(app, requests, query_strings, args))


async def serve(app: Any, requests: list[bytes], query_strings: list[str], args: argparse.Namespace) -> None:
    """Send every request through the protocol, as served, and print the costs."""
    loop = asyncio.get_running_loop()
    async with app.router.lifespan_context(app):
        spaces = app.state.spaces
        spaces.searches.executor = Inline()
        index = spaces.index(h.SPACE)
        options = {k: v for k, v in uvicorn_options().items() if k not in ("log_config", "loop", "http")}
        config = ServeConfig(app, lifespan="off", log_config=quiet_log_config(), **options)
        config.load()
        conn = JsonHttpProtocol(config, ServerState(), {}, loop)
        transport = Memory()
        conn.connection_made(transport)

        async def one(request: bytes) -> bytes:
            done = transport.expect(loop)
            conn.data_received(request)
            return await done

        for request in requests[:20]:  # warm: caches, masks, the authority's DID document
            answer = await one(request)
            assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
        if args.answers is not None:
            with args.answers.open("wb") as out:
                for request in requests:
                    answer = await one(request)
                    out.write(answer[answer.find(b"\r\n\r\n") + 4:] + b"\n")
            return
        info = spaces.info(h.SPACE)
        searches = [await build_request(Lexicons.bundled().params("garden.engram.searchMemories", QueryParams(qs)),
                                        info, app.state.embedding) for qs in query_strings]
        served, engine, inside = [], [], []
        spent = [0.0]

        def timed_search(*a: Any) -> Any:  # the served request's own search, timed where the route calls it
            cpu = time.thread_time()
            try:
                return ranked_search(*a)
            finally:
                spent[0] += time.thread_time() - cpu

        api_search.ranked_search = timed_search  # type: ignore[assignment]
        profiler = cProfile.Profile()
        for _ in range(args.rounds):
            # Each query's engine search right before its served request: the machine's other work
            # weighs on both alike.
            engine_cpu = served_cpu = 0.0
            spent[0] = 0.0
            for req, request in zip(searches, requests):
                cpu = time.thread_time()
                ranked_search(index, req, same_source)
                engine_cpu += time.thread_time() - cpu
                if args.cprofile:
                    profiler.enable()
                cpu = time.thread_time()
                await one(request)
                served_cpu += time.thread_time() - cpu
                profiler.disable()
            engine.append(engine_cpu / len(searches) * 1e6)
            served.append(served_cpu / len(requests) * 1e6)
            inside.append(spent[0] / len(requests) * 1e6)
        s, e = statistics.median(served), statistics.median(engine)
        own = statistics.median(x - y for x, y in zip(served, inside))
        print(f"garden searchMemories in process, {len(requests)} queries x {args.rounds} rounds (medians, thread CPU):"
              f" served {s:.0f} µs, of which its search {statistics.median(inside):.0f} µs and the path {own:.0f} µs;"
              f" the engine's ranking of the same requests alone {e:.0f} µs")
        conn.connection_lost(None)
        if args.cprofile:
            if args.dump is not None:
                profiler.dump_stats(args.dump)
            pstats.Stats(profiler).sort_stats(args.sort).print_stats(args.cprofile)


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
