"""The HTTP stack's own cost: server CPU per request under uvicorn settings (the access log on or
off, the asyncio or uvloop loop, the served protocol or uvicorn's own h11 and httptools ones), for
describeService (a short request, no search, no credential) and for a search-sized request (a 1.2 KB
query string, answered at once with UnknownSpace: the request line is what the access log prints).

Each setting serves the app in a fresh process; closed-loop clients (threads of this process, on
keep-alive connections) send the request for --seconds; the server's CPU time is read from /proc.
Settings whose module is not installed are skipped. Rounds alternate the settings.

    python bench/http_stack.py [--rounds 3] [--seconds 4]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
sys.path.insert(0, str(_HERE.parent / "src"))

import http_load  # noqa: E402

SERVED = "engram_index.protocol:JsonHttpProtocol"  # what `serve` runs: llhttp (httptools) and protocol.py's limits
SETTINGS = [
    {"http": SERVED, "loop": "uvloop", "access_log": True},
    {"http": SERVED, "loop": "uvloop", "access_log": False},
    {"http": SERVED, "loop": "asyncio", "access_log": False},
    {"http": "h11", "loop": "uvloop", "access_log": True},
    {"http": "h11", "loop": "uvloop", "access_log": False},
    {"http": "httptools", "loop": "uvloop", "access_log": False},
]
# The server: the service's app (as `serve --insecure-open` builds it) under the given uvicorn settings.
SERVER = """
import json, sys
from pathlib import Path
import uvicorn
from engram_index.app import create_app
from engram_index.engram.auth import InsecureOpen
from engram_index.protocol import ServeConfig
from engram_index.server import uvicorn_options
settings = json.loads(sys.argv[3])
app = create_app(Path(sys.argv[1]), "did:web:bench.invalid", authenticator=InsecureOpen())
config = ServeConfig(app, host="127.0.0.1", port=int(sys.argv[2]), **{**uvicorn_options(), **settings, "log_level": "warning"})
uvicorn.Server(config).run()
"""
REQUEST = b"GET /xrpc/garden.engram.describeService HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"
SEARCH_SIZED = (
    "GET /xrpc/garden.engram.searchMemories?space=at%3A%2F%2Fdid%3Aplc%3Ahttp234bench234http234be%2Fspace"
    f"%2Fgarden.engram.space%2Fnone&q={'word+' * 20}&vector={'A' * 1024} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"
).encode()


def installed(setting: dict[str, object]) -> bool:
    """Whether the modules a setting needs are importable."""
    needs = [m for m in ("uvloop", "httptools") if m in setting.values() or (m == "httptools" and setting["http"] == SERVED)]
    return all(importlib.util.find_spec(m) is not None for m in needs)


def measure(data: Path, setting: dict[str, object], seconds: float) -> tuple[float, float]:
    """Server CPU microseconds per request (describeService, search-sized), 8 clients, under one setting."""
    port = http_load.free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(data), str(port), json.dumps(setting)],
                              env={**os.environ, "PYTHONPATH": str(_HERE.parent / "src")},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                connection = http_load.Connection(port)
                connection.get(REQUEST)
                connection.close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit(f"the server did not start with {setting}")
                time.sleep(0.1)
        out = []
        for request in (REQUEST, SEARCH_SIZED):
            http_load.drive(port, [[request]], 4, 1.0)  # warm-up
            before = http_load.tree_cpu_seconds(server.pid)
            *_, errors, done, _ = http_load.drive(port, [[request]], 8, seconds)
            out.append((http_load.tree_cpu_seconds(server.pid) - before) / max(done + errors, 1) * 1e6)
        return out[0], out[1]
    finally:
        server.terminate()
        server.wait(10)


def main() -> None:
    """Measure every installed setting in alternating rounds; print each one's figures and median."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    settings = [s for s in SETTINGS if installed(s)]
    results: dict[int, list[tuple[float, float]]] = {i: [] for i in range(len(settings))}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for i, setting in enumerate(settings):
                results[i].append(measure(Path(tmp), setting, args.seconds))
    print(f"server CPU us per request, 8 clients, {os.cpu_count()} cores, median of {args.rounds} rounds")
    print(f"  {'setting':44s}{'describeService':>16}{'search-sized':>14}")
    for i, setting in enumerate(settings):
        name = "served" if setting["http"] == SERVED else f"uvicorn's {setting['http']}"
        label = f"{name}, {setting['loop']}, access log {'on' if setting['access_log'] else 'off'}"
        short, long = (sorted(r[j] for r in results[i])[len(results[i]) // 2] for j in (0, 1))
        print(f"  {label:44s}{short:16.0f}{long:14.0f}")
    skipped = [s for s in SETTINGS if not installed(s)]
    if skipped:
        print("  not installed (skipped):", ", ".join(f"{s['http']}/{s['loop']}" for s in skipped))


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
