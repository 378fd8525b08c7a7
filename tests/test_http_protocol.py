"""The HTTP layer under bad clients: malformed requests get JSON errors, slow ones are bounded.

Raw sockets against a real uvicorn server on loopback, served as `engram-index serve` serves.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.limits import roomy_app, serve_command, PATIENCE_S
from engram_index.engram.auth import InsecureOpen
from engram_index.server import MAX_LOGGED_TARGET
from engram_index.testkit.serve import free_port, serving

from .reliability.rawhttp import closed_by_server, connect, exchange, read_response

HEAD_TIMEOUT = 1.0
OK = b"GET /xrpc/garden.engram.describeService HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    app = roomy_app(tmp_path_factory.mktemp("data"), "did:web:index.example", authenticator=InsecureOpen())
    with serving(app, head_timeout=HEAD_TIMEOUT, timeout_keep_alive=1) as base:
        yield base


def assert_xrpc_error(body: object, name: str) -> None:
    assert isinstance(body, dict) and set(body) == {"error", "message"}
    assert body["error"] == name and isinstance(body["message"], str) and body["message"]


@pytest.mark.parametrize("request_bytes", [
    b"GET /xrpc/garden.engram.describeService HTTP/1.1\r\n\r\n",  # no Host
    b"GET /xrpc/garden.engram.describeService HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",  # two Hosts
    b"POST /xrpc/garden.engram.describeService HTTP/1.1\r\nHost: a\r\nContent-Length: x1\r\n\r\n",
    b"POST /xrpc/garden.engram.describeService HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
    b"GET /xrpc/garden.engram.\x00describeService HTTP/1.1\r\nHost: a\r\n\r\n",  # NUL in the request line
    "GET /xrpc/garden.engram.describeServicé HTTP/1.1\r\nHost: a\r\n\r\n".encode(),  # raw non-ASCII
    b"GET /xrpc/garden.engram.describeService HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n",
    b"GET  HTTP/1.1\r\nHost: a\r\n\r\n",
], ids=["no-host", "two-hosts", "bad-content-length", "two-content-lengths", "nul", "non-ascii",
        "bad-header-name", "no-target"])
def test_malformed_http_is_answered_with_a_json_400(url: str, request_bytes: bytes) -> None:
    response = exchange(url, request_bytes)
    assert response.status == 400 and not response.reset
    assert response.headers["content-type"] == "application/json"
    assert_xrpc_error(response.json(), "InvalidRequest")
    assert b"\x00" not in response.body and "é".encode() not in response.body  # never echoed


@pytest.mark.parametrize("coding", [b"gzip", b"x", b"-1", b"", b"chunked, gzip"])
def test_a_transfer_coding_other_than_chunked_is_a_json_400_not_a_5xx(url: str, coding: bytes) -> None:
    response = exchange(url, b"GET /xrpc/x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: " + coding + b"\r\n\r\n")
    assert response.status == 400
    assert_xrpc_error(response.json(), "InvalidRequest")


@pytest.mark.parametrize("size", [600_000, 2_000_000])
def test_a_huge_request_target_gets_a_json_414_instead_of_a_reset(url: str, size: int) -> None:
    target = b"/xrpc/garden.engram.listMemories?q=" + b"a" * size
    response = exchange(url, b"GET " + target + b" HTTP/1.1\r\nHost: a\r\n\r\n")
    assert response.status == 414 and not response.reset
    assert_xrpc_error(response.json(), "PayloadTooLarge")
    assert httpx.get(f"{url}/xrpc/_health").status_code == 200


def test_a_target_under_the_head_limit_but_over_the_query_limit_is_still_a_json_413(url: str) -> None:
    response = exchange(url, b"GET /xrpc/garden.engram.listMemories?q=" + b"a" * 200_000 + b" HTTP/1.1\r\nHost: a\r\n\r\n")
    assert response.status == 413
    assert_xrpc_error(response.json(), "PayloadTooLarge")


def test_a_huge_header_field_gets_a_json_431(url: str) -> None:
    with connect(url) as sock:
        sock.sendall(b"GET /xrpc/_health HTTP/1.1\r\nHost: a\r\nX-Pad: ")
        for _ in range(40):  # in pieces, so that h11 sees an incomplete head over its limit
            sock.sendall(b"a" * 10_000)
            time.sleep(0.005)
        response = read_response(sock)
    assert response.status == 431
    assert_xrpc_error(response.json(), "PayloadTooLarge")


def test_a_connection_that_sends_nothing_is_closed_after_the_head_timeout(url: str) -> None:
    with connect(url) as sock:
        assert closed_by_server(sock, timeout=HEAD_TIMEOUT + 5)


def test_a_head_sent_a_line_at_a_time_gets_a_json_408_when_it_takes_too_long(url: str) -> None:
    with connect(url) as sock:
        sock.sendall(b"GET /xrpc/_health HTTP/1.1\r\n")
        response = None
        for i in range(100):  # far more lines than the timeout lets through
            try:
                sock.sendall(f"X-Slow-{i}: 1\r\n".encode())
            except (BrokenPipeError, ConnectionResetError):
                break
            time.sleep(HEAD_TIMEOUT / 4)
            sock.settimeout(0.01)
            try:
                if sock.recv(1, 2):  # MSG_PEEK: the answer has begun
                    break
            except TimeoutError:
                continue
        response = read_response(sock)
    assert response.status == 408
    assert_xrpc_error(response.json(), "InvalidRequest")


def test_an_idle_keep_alive_connection_is_closed(url: str) -> None:
    with connect(url) as sock:
        sock.sendall(OK)
        assert read_response(sock).status == 200
        assert closed_by_server(sock, timeout=10)


def test_a_keep_alive_connection_in_use_stays_open_past_the_idle_timeout_and_closes_once_idle(url: str) -> None:
    with connect(url) as sock:
        for _ in range(6):  # requests spaced well within the 1 s idle timeout, for longer than it
            sock.sendall(OK)
            assert read_response(sock).status == 200
            time.sleep(0.4)
        assert closed_by_server(sock, timeout=10)


def test_a_slow_but_timely_head_is_served(url: str) -> None:
    with connect(url) as sock:
        for piece in (OK[:10], OK[10:30], OK[30:]):
            sock.sendall(piece)
            time.sleep(HEAD_TIMEOUT / 10)
        assert read_response(sock).status == 200


def test_connections_beyond_the_cap_get_a_json_503_and_slots_free_when_slow_ones_time_out(tmp_path: Path) -> None:
    app = roomy_app(tmp_path, "did:web:index.example", authenticator=InsecureOpen())
    with serving(app, head_timeout=HEAD_TIMEOUT, limit_concurrency=4) as base:
        idle = [connect(base) for _ in range(4)]
        try:
            time.sleep(0.2)  # let the server accept them
            over = exchange(base, OK)
            assert over.status == 503 and not over.reset
            assert_xrpc_error(over.json(), "Unavailable")
            assert all(closed_by_server(sock, timeout=HEAD_TIMEOUT + 5) for sock in idle)
        finally:
            for sock in idle:
                sock.close()
        deadline = time.monotonic() + PATIENCE_S
        while (status := exchange(base, OK).status) == 503 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status == 200


def test_the_access_log_writes_a_bounded_line_for_a_huge_target(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    proc = subprocess.Popen(
        serve_command(sys.executable, tmp_path, port, "--insecure-open", "--embedder", "none"),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{base}/xrpc/_health")
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert exchange(base, b"GET /xrpc/garden.engram.listMemories?q=" + b"z" * 200_000
                        + b" HTTP/1.1\r\nHost: a\r\n\r\n").status == 413
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=20)
    lines = (out + err).decode("utf-8", "replace").splitlines()
    logged = [line for line in lines if "listMemories" in line]
    assert logged, "the request was not logged"
    assert all(len(line) < MAX_LOGGED_TARGET + 200 for line in lines)
    assert "more characters" in logged[0]


@pytest.mark.parametrize("request_bytes", [
    b"GET /v1/memory/facts HTTP/1.1\r\n\r\n",  # no Host
    b"POST /v1/memory/retrieve HTTP/1.1\r\nHost: a\r\nContent-Length: x1\r\n\r\n",
    b"GET /v1/memory/facts HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
], ids=["no-host", "bad-content-length", "transfer-coding"])
def test_malformed_http_on_a_memory_path_is_answered_in_the_kindgi_envelope(url: str, request_bytes: bytes) -> None:
    response = exchange(url, request_bytes)
    assert response.status == 400 and not response.reset
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "requestId"}
    assert body["error"]["code"] == "bad-input"
    assert body["error"]["requestId"].startswith("req-")
    assert response.headers["x-request-id"] == body["error"]["requestId"]
