"""What the HTTP layer takes from uvicorn: present in the pinned uvicorn, or a loud failure.

protocol.py names each (UVICORN_CONFIG_ATTRIBUTES, UVICORN_STATE_ATTRIBUTES, and the server's calls
of the protocol class; the why is in docs/design/service.md). An upgrade of uvicorn that renames one
fails here, saying which, before any behaviour test fails for a reason that is harder to read.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from uvicorn.server import Server, ServerState

from engram_index import protocol
from engram_index.protocol import JsonHttpProtocol, ServeConfig


class _Transport(asyncio.Transport):
    """A connection that keeps what is written, for driving a protocol without a socket."""

    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.reading = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8080)}.get(name, default)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def is_closing(self) -> bool:
        return False

    def is_reading(self) -> bool:
        return self.reading

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def can_write_eof(self) -> bool:
        return False

    def close(self) -> None:
        pass


async def _noop_app(scope: Any, receive: Any, send: Any) -> None:
    """An app that never answers (the test looks at the connection mid-request)."""


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop of the test's own (never run: the protocol only schedules on it)."""
    made = asyncio.new_event_loop()
    yield made
    tasks = asyncio.all_tasks(made)
    for task in tasks:
        task.cancel()
    if tasks:
        made.run_until_complete(asyncio.wait(tasks))
    made.close()


def test_the_pinned_uvicorn_has_every_setting_and_server_state_the_http_layer_reads() -> None:
    config = ServeConfig(_noop_app, lifespan="off")
    config.load()
    missing = [name for name in protocol.UVICORN_CONFIG_ATTRIBUTES if not hasattr(config, name)]
    assert missing == [], (f"uvicorn {uvicorn.__version__}'s Config no longer has {missing}: "
                           "engram_index/protocol.py reads them (docs/design/service.md)")
    state = ServerState()
    gone = [name for name in protocol.UVICORN_STATE_ATTRIBUTES if not hasattr(state, name)]
    assert gone == [], f"uvicorn {uvicorn.__version__}'s ServerState no longer has {gone} (engram_index/protocol.py)"


def test_the_pinned_uvicorn_builds_the_protocol_and_shuts_its_connections_down_as_the_http_layer_expects() -> None:
    startup, shutdown = inspect.getsource(Server.startup), inspect.getsource(Server.shutdown)
    built = all(f"{name}=" in startup for name in ("config", "server_state", "app_state", "_loop"))
    assert "config.http_protocol_class(" in startup and built, (
        f"uvicorn {uvicorn.__version__} no longer builds a connection as http_protocol_class(config=, "
        "server_state=, app_state=, _loop=): JsonHttpProtocol's constructor must follow it")
    assert "connection.shutdown()" in shutdown, (
        f"uvicorn {uvicorn.__version__} no longer calls shutdown() on each connection when it stops")
    assert callable(getattr(JsonHttpProtocol, "shutdown", None))


def test_a_malformed_head_is_answered_in_json_from_the_parsers_refusal(loop: asyncio.AbstractEventLoop) -> None:
    conn = JsonHttpProtocol(ServeConfig(_noop_app, lifespan="off"), ServerState(), {}, loop)
    transport = _Transport()
    conn.connection_made(transport)
    conn.data_received(b"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")  # two Hosts: refused
    assert transport.written.startswith(b"HTTP/1.1 400 "), transport.written[:80]
    assert b"content-type: application/json" in transport.written
    assert b"malformed HTTP request" in transport.written


def test_no_module_reaches_uvicorns_or_h11s_private_modules_or_the_exception_being_handled() -> None:
    from tests.test_layout import sources_containing

    private = ["h11._", "uvicorn._", "httptools._", "sys.exc_info()", "_unset_keepalive_if_required", ".flow.",
               "cycle.response_"]
    assert {needle: sources_containing(needle) for needle in private} == {needle: [] for needle in private}
