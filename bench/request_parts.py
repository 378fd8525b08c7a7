"""The shared HTTP path's own parts, one request's worth each, in process (thread CPU, median of rounds).

- an access-log line through the served logging configuration (to /dev/null): uvicorn's own
  formatter beside the one served (server.AccessLine), which writes the same line;
- the metrics middleware around an app that answers at once, in one process and in
  multiprocess mode (as under `serve --workers`);
- a bearer key check (keys.bearer) against a keys file, the key remembered as served, and
  read afresh each time (as before keys were remembered);
- h11 alone: one search-sized request (a 1.4 KB target, a space credential's headers) parsed
  and its 3 KB answer written, on a keep-alive connection; and the served connection
  (protocol.JsonHttpProtocol: llhttp, its checks, the exchange with an app that answers at once,
  the loop's task for it) doing the same over an in-memory transport.

    python bench/request_parts.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import logging
import logging.config
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

ACCESS_ARGS = ("127.0.0.1:50000", "GET", "/xrpc/garden.engram.searchMemories?space=at%3A%2F%2Fdid%3Aplc%3Ax"
               + "&vector=" + "A" * 1024, "1.1", 200)


def per_call_us(call: Callable[[], object], n: int, rounds: int) -> float:
    """Median thread-CPU microseconds of one call, over `rounds` rounds of `n`."""
    out = []
    for _ in range(rounds):
        began = time.thread_time()
        for _ in range(n):
            call()
        out.append((time.thread_time() - began) / n * 1e6)
    return statistics.median(out)


def access_log(rounds: int) -> tuple[float, float, float]:
    """µs per access-log line: uvicorn's formatter, the served one, and the served writer (no LogRecord)."""
    from uvicorn.logging import AccessFormatter

    from engram_index.server import ACCESS_FORMAT, log_config, served_access_writer

    logging.config.dictConfig(log_config())
    logger = logging.getLogger("uvicorn.access")
    handler = logger.handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(open(os.devnull, "w"))
    served = handler.formatter

    def line() -> None:
        logger.info('%s - "%s %s HTTP/%s" %d', *ACCESS_ARGS)

    handler.setFormatter(AccessFormatter(ACCESS_FORMAT))
    theirs = per_call_us(line, 20000, rounds)
    handler.setFormatter(served)
    ours = per_call_us(line, 20000, rounds)
    write = served_access_writer()
    assert write is not None, "the access log is not configured as served"
    written = per_call_us(lambda: write(*ACCESS_ARGS), 20000, rounds)
    return theirs, ours, written


METRICS = """
import sys, time, asyncio, statistics
sys.path.insert(0, sys.argv[1])
from starlette.routing import Route
from engram_index.metrics import HttpMetrics
async def endpoint(request): pass
async def answer(scope, receive, send):
    scope["endpoint"] = endpoint
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})
async def receive(): return {"type": "http.request", "body": b""}
async def send(message): pass
scope = {"type": "http", "method": "GET", "path": "/xrpc/garden.engram.searchMemories"}
def per_request(app, n=20000):
    async def run():
        for _ in range(n): await app(dict(scope), receive, send)
    began = time.thread_time(); asyncio.run(run()); return (time.thread_time() - began) / n * 1e6
wrapped = HttpMetrics(answer, [Route(scope["path"], endpoint)])
rounds = int(sys.argv[2])
print(statistics.median(per_request(wrapped) - per_request(answer) for _ in range(rounds)))
"""


def metrics(rounds: int, multiprocess: bool) -> float:
    """µs the metrics middleware adds per request (a fresh process: multiprocess mode is chosen at import)."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        if multiprocess:
            env["PROMETHEUS_MULTIPROC_DIR"] = tmp
        else:
            env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        src = str(Path(__file__).resolve().parents[1] / "src")
        out = subprocess.run([sys.executable, "-c", METRICS, src, str(rounds)], env=env, check=True,
                             capture_output=True, text=True).stdout
    return float(out.split()[-1])


def bearer_check(rounds: int) -> tuple[float, float]:
    """µs per bearer key check: remembered (as served), and read afresh from the keys file."""
    from engram_index.keys import KeyStore, bearer

    with tempfile.TemporaryDirectory() as tmp:
        keys = KeyStore(Path(tmp))
        token, _ = keys.create("kindgi", {"tenant": "t", "user": "u", "projects": ["p0", "p1", "p2"]})
        header = f"Bearer {token}"
        remembered = per_call_us(lambda: bearer(header, keys, "kindgi"), 20000, rounds)

        def afresh() -> None:
            keys._local.seen = None  # forgotten: the indexed read and its grants' JSON each time
            bearer(header, keys, "kindgi")

        fresh = per_call_us(afresh, 20000, rounds)
        keys.close()
    return remembered, fresh


TARGET = b"/xrpc/garden.engram.searchMemories?space=at%3A%2F%2Fdid%3Aplc%3Ax&vector=" + b"A" * 1300
HEAD = (b"GET " + TARGET + b" HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Atproto-Space " + b"x" * 700
        + b"\r\natproto-space-audience: did:web:bench.invalid\r\nsignature-input: atproto-space=(\"authorization\""
        b" \"atproto-space-audience\");created=1\r\nsignature: atproto-space=:" + b"y" * 88 + b":\r\n\r\n")
BODY = b"{" + b"x" * 3000 + b"}"


def h11_cycle(rounds: int) -> float:
    """µs of h11 for one search-sized request and its answer on a keep-alive connection."""
    import h11

    head, body = HEAD, BODY
    headers = [(b"date", b"Wed, 02 Dec 2026 07:00:00 GMT"), (b"server", b"uvicorn"),
               (b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=256 * 1024)

    def cycle() -> Any:
        conn.receive_data(head)
        conn.next_event()
        conn.next_event()
        out = conn.send(h11.Response(status_code=200, headers=headers, reason=b"OK"))
        out += conn.send(h11.Data(data=body))  # type: ignore[operator]
        conn.send(h11.EndOfMessage())
        conn.start_next_cycle()
        return out

    return per_call_us(cycle, 5000, rounds)


def served_cycle(rounds: int) -> float:
    """µs of the served connection (llhttp, its checks, the exchange with an app that answers at once, the
    loop's task) for the same request and answer, on a keep-alive connection over an in-memory transport."""
    import asyncio

    import uvloop
    from uvicorn.server import ServerState

    from engram_index.protocol import JsonHttpProtocol, ServeConfig

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(BODY)).encode()), (b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": BODY})

    class Memory(asyncio.Transport):
        done: asyncio.Future[None] | None = None

        def write(self, data: Any) -> None:
            if self.done is not None and not self.done.done():
                self.done.set_result(None)

        def get_extra_info(self, name: str, default: Any = None) -> Any:
            return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8080)}.get(name, default)

        def is_closing(self) -> bool:
            return False

        def close(self) -> None:
            pass

    async def run() -> float:
        loop = asyncio.get_running_loop()
        config = ServeConfig(app, lifespan="off", log_level="warning", access_log=False)
        config.load()
        conn = JsonHttpProtocol(config, ServerState(), {}, loop)
        transport = Memory()
        conn.connection_made(transport)
        out = []
        for _ in range(rounds + 1):
            began = time.thread_time()
            for _ in range(5000):
                transport.done = loop.create_future()
                conn.data_received(HEAD)
                await transport.done
            out.append((time.thread_time() - began) / 5000 * 1e6)
        conn.connection_lost(None)
        return statistics.median(out[1:])

    return float(uvloop.run(run()))


def main() -> None:
    """Measure and print each part."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    theirs, ours, written = access_log(args.rounds)
    remembered, fresh = bearer_check(args.rounds)
    print(f"CPU µs per request, median of {args.rounds} rounds")
    print("| part | µs |\n|---|---:|")
    print(f"| access-log line, uvicorn's formatter | {theirs:.1f} |")
    print(f"| access-log line, AccessLine | {ours:.1f} |")
    print(f"| access-log line, the served writer (AccessLine's line, no LogRecord) | {written:.1f} |")
    print(f"| metrics middleware, one process | {metrics(args.rounds, False):.1f} |")
    print(f"| metrics middleware, multiprocess mode | {metrics(args.rounds, True):.1f} |")
    print(f"| bearer key check, read afresh | {fresh:.1f} |")
    print(f"| bearer key check, remembered (served) | {remembered:.1f} |")
    print(f"| h11 alone: a search-sized request and its answer | {h11_cycle(args.rounds):.1f} |")
    print(f"| the served connection (llhttp, its checks, the exchange, the loop's task): the same | "
          f"{served_cycle(args.rounds):.1f} |")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
