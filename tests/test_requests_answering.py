"""How many requests the process is answering: counted from when a connection starts a request's answer."""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.server import ServerState

from engram_index.metrics import requests_in_flight
from engram_index.protocol import JsonHttpProtocol, ServeConfig


class Transport(asyncio.Transport):
    """A connection that keeps what is written."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()

    def write(self, data: Any) -> None:
        self.written += data

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8080)}.get(name, default)

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


def test_requests_read_in_one_turn_of_the_loop_all_count_before_any_is_answered() -> None:
    seen: list[int] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        seen.append(requests_in_flight())  # what a route asks before it searches on the loop's thread
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"{}"})

    async def scenario() -> int:
        loop = asyncio.get_running_loop()
        config = ServeConfig(app, lifespan="off", access_log=False)
        config.load()
        transports = [Transport() for _ in range(3)]
        conns = [JsonHttpProtocol(config, ServerState(), {}, loop) for _ in transports]
        for conn, transport in zip(conns, transports):
            conn.connection_made(transport)
        for conn in conns[:2]:  # two requests read in one turn of the loop, before their answers run
            conn.data_received(b"GET /a HTTP/1.1\r\nhost: x\r\n\r\n")
        await asyncio.sleep(0.01)
        conns[2].data_received(b"GET /b HTTP/1.1\r\nhost: x\r\n\r\n")  # alone, once they are answered
        await asyncio.sleep(0.01)
        assert all(t.written.startswith(b"HTTP/1.1 200") for t in transports)
        for conn in conns:
            conn.connection_lost(None)
        return requests_in_flight()

    assert asyncio.run(scenario()) == 0
    assert seen == [2, 2, 1]
