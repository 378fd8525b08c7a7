"""What a bench's HTTP client itself costs a request: httpx against bench/wire.py's raw socket.

Serves one trivial Starlette route (it reads the body and answers a fixed ~3.5 KB JSON body, the
size of a ten-result answer) with uvicorn in a child process, then sends it the same POST through
httpx (as the faces' benches did until issue 25's twenty-sixth pass, its answer parsed as they did)
and through bench/wire.py (bytes made first), alternating request by request. The server's side is
the same for both; the difference is the client's. Prints the CPU model and each client's p50 ms.

    python bench/client_cost.py [--requests 1000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import print_machine  # noqa: E402
from wire import Connection, post  # noqa: E402

_APP = '''
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

BODY = b'{"results": [' + b",".join(b'{"id": "f%d", "text": "%s", "score": 0.5}' % (i, b"x" * 300)
                                    for i in range(10)) + b"]}"


async def retrieve(request):
    await request.body()
    return Response(BODY, media_type="application/json")


app = Starlette(routes=[Route("/v1/memory/retrieve", retrieve, methods=["POST"])])
'''


def main() -> None:
    """Serve the route, send through both clients in turn, print the p50s."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    print_machine()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from engram_index.testkit.serve import free_port, wait_answering

    port = free_port()
    body = orjson.dumps({"mode": "both", "limit": 10, "query": "what did we decide about the launch date"})
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "client_cost_app.py").write_text(_APP)
        server = subprocess.Popen([sys.executable, "-m", "uvicorn", "client_cost_app:app", "--port", str(port),
                                   "--log-level", "warning", "--no-access-log"], cwd=tmp)
        try:
            wait_answering(f"http://127.0.0.1:{port}", 60, server)  # (any answer, its 404 too)
            raw = Connection(port)
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:

                def via_httpx() -> float:
                    headers = {"Authorization": "Bearer x", "Idempotency-Key": str(uuid.uuid4()),
                               "Content-Type": "application/json", "Accept": "application/json"}
                    began = time.perf_counter()
                    answer = http.post("/v1/memory/retrieve", content=body, headers=headers)
                    answer.json()
                    return time.perf_counter() - began

                def via_wire() -> float:
                    request = post("/v1/memory/retrieve", body, {"authorization": "Bearer x",
                                                                 "idempotency-key": str(uuid.uuid4())})
                    began = time.perf_counter()
                    raw.send(request)
                    return time.perf_counter() - began

                for _ in range(50):
                    via_httpx()
                    via_wire()
                spent: dict[str, list[float]] = {"httpx": [], "wire": []}
                for i in range(args.requests):
                    for name in (("httpx", "wire") if i % 2 else ("wire", "httpx")):
                        spent[name].append(via_httpx() if name == "httpx" else via_wire())
            raw.close()
        finally:
            server.terminate()
            server.wait(30)
    httpx_ms, wire_ms = (statistics.median(spent[name]) * 1000 for name in ("httpx", "wire"))
    print(f"\n| client | p50 ms |\n|---|---:|\n| httpx | {httpx_ms:.3f} |\n| bench/wire.py | {wire_ms:.3f} |\n"
          f"\nhttpx's own part: {httpx_ms - wire_ms:.3f} ms a request")


if __name__ == "__main__":
    main()
