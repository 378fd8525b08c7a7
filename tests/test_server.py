"""Running the service: the listening socket that `serve --workers` shares between processes."""

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from engram_index.server import tcp_listener, uvicorn_options
from engram_index.testkit.serve import free_port, serving
from tests.limits import serve_command

pytestmark = pytest.mark.long(15)  # seconds in all on a 2-core machine: run first (tests/conftest.py)

SRC = str(Path(__file__).resolve().parents[1] / "src")


async def accepted_nodelay(listener: socket.socket) -> int:
    """TCP_NODELAY of a connection that asyncio accepts on the listener, as uvicorn's workers serve it."""
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    server = await asyncio.get_running_loop().create_server(Probe, sock=listener)
    try:
        _, writer = await asyncio.open_connection(*listener.getsockname()[:2])
        value = await asyncio.wait_for(accepted, 5)
        writer.close()
        return value
    finally:
        server.close()


def test_connections_accepted_on_the_shared_listening_socket_have_nagle_off() -> None:
    # Without it, every keep-alive response waits for the client's delayed ACK (~40 ms on Linux).
    listener = tcp_listener("127.0.0.1", 0)
    assert listener.proto == socket.IPPROTO_TCP
    assert asyncio.run(accepted_nodelay(listener)) != 0


def test_on_uvloops_loop_as_served_connections_on_the_shared_listening_socket_have_nagle_off() -> None:
    # The served loop is uvloop's (uvicorn_options): it must keep Nagle off as asyncio's does.
    import uvloop

    listener = tcp_listener("127.0.0.1", 0)
    assert uvicorn_options()["loop"] == "uvloop"
    assert uvloop.run(accepted_nodelay(listener)) != 0


def test_requests_are_answered_on_uvloops_event_loop() -> None:
    # What the measurements in docs/design/service.md were taken on: libuv's loop, not asyncio's own.
    async def loop_name(request: Request) -> JSONResponse:
        return JSONResponse({"loop": type(asyncio.get_running_loop()).__module__})

    with serving(Starlette(routes=[Route("/loop", loop_name)]), probe="/loop") as url:
        assert httpx.get(f"{url}/loop").json() == {"loop": "uvloop"}


def test_a_worker_process_started_on_the_shared_listening_socket_accepts_its_connections() -> None:
    # What --workers relies on: a child process (spawned, as the workers are) accepts on the parent's socket.
    listener = tcp_listener("127.0.0.1", 0)
    try:
        listener.listen(1)
        child = subprocess.Popen(
            [sys.executable, "-c", "import socket,sys; s = socket.socket(fileno=int(sys.argv[1])); "
             "c, _ = s.accept(); c.sendall(b'from the worker'); c.close()", str(listener.fileno())],
            close_fds=False)
        try:
            with socket.create_connection(listener.getsockname()[:2], timeout=30) as conn:
                assert conn.recv(64) == b"from the worker"
        finally:
            assert child.wait(30) == 0
    finally:
        listener.close()


def served_log(tmp_path: Path, *options: str) -> str:
    """What `engram-index serve` prints while answering one request."""
    port = free_port()
    proc = subprocess.Popen(
        serve_command(sys.executable, tmp_path, port, "--insecure-open", "--embedder", "none", *options),
        env={**os.environ, "PYTHONPATH": SRC}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                assert httpx.get(f"http://127.0.0.1:{port}/xrpc/garden.engram.describeService").status_code == 200
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.1)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=20)
    return out


def test_serve_logs_a_line_per_request_unless_told_not_to(tmp_path: Path) -> None:
    assert '"GET /xrpc/garden.engram.describeService' in served_log(tmp_path / "a")
    assert "describeService" not in served_log(tmp_path / "b", "--no-access-log")
