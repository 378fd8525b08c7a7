"""Slow request bodies on every face: a body that does not arrive in time is a 408 in the face's envelope.

Raw sockets against a real uvicorn server on loopback, served as `engram-index serve` serves, with a
short body deadline so that the tests run fast. Nothing here measures speed: a slow body must be
answered (within a generous bound) and its connection closed; timely bodies must be served.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.limits import PATIENCE_S, KeyedServer, keyed_server

from .rawhttp import RawResponse, closed_by_server, connect, read_response

BODY_TIMEOUT = 1.0  # seconds of grace for a body (the served default is 30)
BODY_MIN_RATE = 1000.0  # bytes a second a body must keep up after that (each byte buys 1 ms)
SPACE = "at://did:plc:slowslowslowslowslowslow/space/garden.engram.space/slow"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeyedServer]:
    with keyed_server(tmp_path_factory.mktemp("slow"), body_timeout=BODY_TIMEOUT, body_min_rate=BODY_MIN_RATE) as running:
        yield running


@dataclass(frozen=True)
class Route:
    """A route of one face taking a JSON body, and the headers that let a request reach its body."""

    face: str
    path: str
    body: bytes

    def headers(self, served: KeyedServer) -> dict[str, str]:
        """The credentials the face wants before it reads a body (garden.engram is served open)."""
        key = {"v5": served.v5_key, "kindgi": served.kindgi_key}.get(self.face)
        return {"authorization": f"Bearer {key}"} if key else {}


ROUTES = [
    Route("garden.engram", "/xrpc/garden.engram.warmSpace", json.dumps({"space": SPACE}).encode()),
    Route("v5", "/ns/notes/document", json.dumps({"content": "a note that takes its time"}).encode()),
    Route("kindgi", "/v1/memory/facts", json.dumps({"type": "note", "scope": {"tenantId": "acme", "userId": "alice"},
                                                    "content": "a fact that takes its time"}).encode()),
]


def head(served: KeyedServer, route: Route, length: int, extra: dict[str, str] | None = None) -> bytes:
    """A POST head announcing a body of `length` bytes."""
    fields = {"host": "127.0.0.1", "content-type": "application/json", "content-length": str(length),
              **route.headers(served), **(extra or {})}
    lines = [f"POST {route.path} HTTP/1.1", *(f"{name}: {value}" for name, value in fields.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def answered(sock: socket.socket) -> bool:
    """Whether the server has begun to answer (peeked, nothing consumed) or closed."""
    sock.settimeout(0.01)
    try:
        sock.recv(1, socket.MSG_PEEK)  # a byte of the answer, or b"" when the server closed
        return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def trickle(sock: socket.socket, body: bytes, pause: float, bound: float = 30.0) -> RawResponse:
    """Send `body` a byte at a time, `pause` seconds apart, until the server answers; then read its answer."""
    deadline = time.monotonic() + bound
    for byte in body:
        if time.monotonic() > deadline or answered(sock):
            break
        try:
            sock.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            break
        time.sleep(pause)
    return read_response(sock, timeout=10)


def assert_envelope(face: str, response: RawResponse) -> None:
    """The body is the face's own error envelope (XRPC's, v5's ErrorResponse, Kindgi's with its request id)."""
    assert response.headers.get("content-type") == "application/json", response
    body = response.json()
    if face == "garden.engram":
        assert set(body) == {"error", "message"} and body["error"] == "InvalidRequest", body
        assert "body" in body["message"]
    elif face == "v5":
        assert set(body) <= {"error", "details"} and isinstance(body["error"], str) and "body" in body["error"], body
    else:
        error = body["error"]
        assert set(body) == {"error"} and error["code"] == "bad-input" and "body" in error["message"], body
        assert response.headers["x-request-id"] == error["requestId"]


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.face)
def test_a_body_trickled_slower_than_the_deadline_gets_a_408_in_the_faces_envelope_and_is_closed(
        served: KeyedServer, route: Route, caplog: pytest.LogCaptureFixture) -> None:
    padded = route.body + b" " * 200  # far more bytes than the deadline lets through at this pace
    with connect(served.url) as sock:
        sock.sendall(head(served, route, len(padded)))
        response = trickle(sock, padded, pause=0.1)
        assert response.status == 408 and not response.reset, response
        assert response.headers.get("connection") == "close"
        assert_envelope(route.face, response)
        assert closed_by_server(sock, timeout=10)
    # The app, whose read of the body ended, answered it as a client error: no internal error was logged.
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def test_a_head_whose_body_never_comes_gets_a_408(served: KeyedServer) -> None:
    route = ROUTES[0]
    with connect(served.url) as sock:
        sock.sendall(head(served, route, len(route.body)))
        response = read_response(sock, timeout=15)
    assert response.status == 408
    assert_envelope(route.face, response)


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.face)
def test_a_normal_body_is_served_as_before(served: KeyedServer, route: Route) -> None:
    response = httpx.post(served.url + route.path, content=route.body,
                          headers={"content-type": "application/json", **route.headers(served)})
    assert response.status_code != 408 and response.status_code < 500, response.text


def test_a_large_fast_body_is_read_whole_and_answered_by_its_route(served: KeyedServer) -> None:
    # 8 MiB of content: longer than v5 takes, so the answer is its validation error, which needs the whole body.
    body = json.dumps({"content": "x" * (8 * 1024 * 1024)}).encode()
    route = ROUTES[1]
    response = httpx.post(served.url + route.path, content=body, timeout=60,
                          headers={"content-type": "application/json", **route.headers(served)})
    assert response.status_code == 400, response.text[:300]


def test_a_chunked_body_that_stalls_gets_a_408(served: KeyedServer) -> None:
    route = ROUTES[2]
    with connect(served.url) as sock:
        fields = head(served, route, 0).replace(b"content-length: 0", b"transfer-encoding: chunked")
        sock.sendall(fields + b"5\r\n{\"typ\r\n")
        response = read_response(sock, timeout=15)
    assert response.status == 408
    assert_envelope(route.face, response)


def test_a_body_that_keeps_up_the_minimum_rate_may_take_longer_than_the_grace_period(served: KeyedServer) -> None:
    route = ROUTES[1]
    body = route.body + b" " * 8000
    with connect(served.url) as sock:
        sock.sendall(head(served, route, len(body)))
        # About 8x the minimum rate for about twice the grace period: each piece buys far more time than it takes.
        for start in range(0, len(body), 400):
            sock.sendall(body[start:start + 400])
            time.sleep(0.05)
        response = read_response(sock, timeout=15)
    assert response.status == 200, response


def test_a_client_waiting_for_100_continue_is_not_timed_before_it_is_asked_for_its_body(served: KeyedServer) -> None:
    route = ROUTES[1]
    with connect(served.url) as sock:
        sock.sendall(head(served, route, len(route.body), {"expect": "100-continue"}))
        interim = sock.recv(100)
        assert interim.startswith(b"HTTP/1.1 100 ")
        sock.sendall(route.body)
        response = read_response(sock, timeout=15)
    assert response.status == 200, response


def test_a_body_still_trickling_after_its_answer_is_cut_off_at_the_deadline(served: KeyedServer) -> None:
    route = ROUTES[1]
    with connect(served.url) as sock:
        # No key: v5 answers 401 before it reads the body, which keeps coming a byte at a time.
        sock.sendall(head(served, route, 500).replace(route.headers(served)["authorization"].encode(), b"x"))
        response = None
        deadline = time.monotonic() + PATIENCE_S
        closed = False
        while time.monotonic() < deadline:
            try:
                sock.sendall(b" ")
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if response is None and answered(sock):
                response = read_response(sock, timeout=5)
            elif response is not None and closed_by_server(sock, timeout=0.1):
                closed = True
                break
            time.sleep(0.1)
    assert response is not None and response.status == 401
    assert closed


def test_the_server_answers_others_while_slow_bodies_are_held(served: KeyedServer) -> None:
    route = ROUTES[0]
    slow = [connect(served.url) for _ in range(20)]
    try:
        for sock in slow:
            sock.sendall(head(served, route, 1000) + b"{")
        answers = [httpx.get(served.url + "/xrpc/garden.engram.describeService").status_code for _ in range(20)]
        assert answers == [200] * 20
        responses = [read_response(sock, timeout=15) for sock in slow]
        assert [r.status for r in responses] == [408] * 20
    finally:
        for sock in slow:
            sock.close()


def test_the_served_default_deadline_is_thirty_seconds_at_a_minimum_rate() -> None:
    from engram_index.protocol import BODY_MIN_RATE as DEFAULT_RATE
    from engram_index.protocol import BODY_TIMEOUT as DEFAULT_TIMEOUT
    from engram_index.server import uvicorn_options

    options = uvicorn_options()
    assert options["body_timeout"] == DEFAULT_TIMEOUT == 30.0
    assert options["body_min_rate"] == DEFAULT_RATE > 0


def test_a_normal_body_after_a_keep_alive_request_is_timed_afresh(served: KeyedServer) -> None:
    route = ROUTES[1]
    with connect(served.url) as sock:
        for _ in range(2):  # two requests on one connection, each with its own body, a pause between
            sock.sendall(head(served, route, len(route.body)) + route.body)
            assert read_response(sock, timeout=15).status == 200
            time.sleep(BODY_TIMEOUT * 1.5)
