"""How a response leaves the HTTP layer: its head and body in one write, a streamed head at once."""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.server import ServerState

from engram_index.protocol import JsonHttpProtocol, ServeConfig
from tests.test_http_internals import _Transport


class _Writes(_Transport):
    """A connection that keeps each write apart."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        super().write(data)
        self.writes.append(bytes(data))


async def _serve(app: Any, request: bytes) -> tuple[JsonHttpProtocol, _Writes]:
    """Our protocol over a recording connection, the request received, the app started."""
    config = ServeConfig(app, lifespan="off", log_level="warning")
    config.load()
    conn = JsonHttpProtocol(config, ServerState(), {}, asyncio.get_running_loop())
    transport = _Writes()
    conn.connection_made(transport)
    conn.data_received(request)
    return conn, transport


async def _turns(n: int = 20) -> None:
    """Let the loop run the app's task (and anything it scheduled) for a few turns."""
    for _ in range(n):
        await asyncio.sleep(0)


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    """An app answering 200 "ok", its length declared: uvicorn writes the head, then the body."""
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def test_a_response_head_and_its_body_leave_in_one_write() -> None:
    async def run() -> list[bytes]:
        _, transport = await _serve(_ok, b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        await _turns()
        return transport.writes

    writes = asyncio.run(run())
    assert len(writes) == 1, writes
    assert writes[0].startswith(b"HTTP/1.1 200 ") and writes[0].endswith(b"\r\n\r\nok")


def test_two_keep_alive_responses_leave_in_one_write_each() -> None:
    async def run() -> list[bytes]:
        conn, transport = await _serve(_ok, b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\n")
        await _turns()
        conn.data_received(b"GET /2 HTTP/1.1\r\nHost: a\r\n\r\n")
        await _turns()
        return transport.writes

    writes = asyncio.run(run())
    assert [w.startswith(b"HTTP/1.1 200 ") and w.endswith(b"ok") for w in writes] == [True, True], writes


def test_a_streamed_response_sends_its_head_before_its_body_is_ready() -> None:
    async def run() -> tuple[list[bytes], list[bytes]]:
        release = asyncio.Event()

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await send({"type": "http.response.start", "status": 200, "headers": []})  # chunked: streamed
            await release.wait()
            await send({"type": "http.response.body", "body": b"late"})

        _, transport = await _serve(app, b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        await _turns()
        before = list(transport.writes)
        release.set()
        await _turns()
        return before, transport.writes

    before, after = asyncio.run(run())
    assert len(before) == 1 and before[0].startswith(b"HTTP/1.1 200 ") and before[0].endswith(b"\r\n\r\n"), before
    assert b"late" in b"".join(after[1:])


def test_a_head_request_gets_its_head_alone() -> None:
    async def run() -> list[bytes]:
        _, transport = await _serve(_ok, b"HEAD / HTTP/1.1\r\nHost: a\r\n\r\n")
        await _turns()
        return transport.writes

    writes = asyncio.run(run())
    assert len(writes) == 1 and writes[0].startswith(b"HTTP/1.1 200 ") and writes[0].endswith(b"\r\n\r\n"), writes
