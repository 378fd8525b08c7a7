"""What the HTTP layer still takes from uvicorn past its public API: present in the pinned uvicorn, or a loud failure.

protocol.py names each (UVICORN_PROTOCOL_ATTRIBUTES, UVICORN_CYCLE_ATTRIBUTES, UVICORN_HOOKS; the why is in
docs/design/service.md). An upgrade of uvicorn that renames one fails here, saying which, before any
behaviour test fails for a reason that is harder to read.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from engram_index import protocol
from engram_index.protocol import JsonH11Protocol, ServeConfig


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


def _driven_protocol(loop: asyncio.AbstractEventLoop) -> JsonH11Protocol:
    """Our protocol over a fake connection, with a request head received and its body awaited."""
    state = ServerState()
    config = ServeConfig(_noop_app, lifespan="off")
    conn = JsonH11Protocol(config, state, {}, loop)
    conn.connection_made(_Transport())
    conn.data_received(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n")
    return conn


def test_the_pinned_uvicorn_has_every_protocol_attribute_the_http_layer_uses(loop: asyncio.AbstractEventLoop) -> None:
    conn = _driven_protocol(loop)
    missing = [name for name in protocol.UVICORN_PROTOCOL_ATTRIBUTES if not hasattr(conn, name)]
    assert missing == [], (f"uvicorn {uvicorn.__version__}'s H11Protocol no longer has {missing}: "
                           "engram_index/protocol.py relies on them (docs/design/service.md)")
    assert conn.cycle is not None, f"uvicorn {uvicorn.__version__} made no request cycle for a request head"
    gone = [name for name in protocol.UVICORN_CYCLE_ATTRIBUTES if not hasattr(conn.cycle, name)]
    assert gone == [], (f"uvicorn {uvicorn.__version__}'s request cycle no longer has {gone}: the body "
                        "deadline cannot end the app's wait for a body (engram_index/protocol.py)")
    assert isinstance(conn.cycle.message_event, asyncio.Event)


def test_the_pinned_uvicorn_still_calls_the_hooks_the_http_layer_overrides() -> None:
    missing = [name for name in protocol.UVICORN_HOOKS if not callable(getattr(H11Protocol, name, None))]
    assert missing == [], f"uvicorn {uvicorn.__version__}'s H11Protocol no longer has the hooks {missing}"
    source = inspect.getsource(H11Protocol.handle_events)
    # A malformed head is answered by send_400_response right after h11's next_event raised, which
    # our connection keeps: the JSON 400/414/431 depends on both calls staying where they are.
    assert "self.conn.next_event()" in source and "self.send_400_response(" in source, (
        f"uvicorn {uvicorn.__version__}'s handle_events no longer reads h11 through self.conn.next_event() "
        "and answers with self.send_400_response(): malformed requests would not get JSON envelopes")


def test_a_malformed_head_is_answered_in_json_from_the_error_h11_raised(loop: asyncio.AbstractEventLoop) -> None:
    conn = JsonH11Protocol(ServeConfig(_noop_app, lifespan="off"), ServerState(), {}, loop)
    transport = _Transport()
    conn.connection_made(transport)
    conn.data_received(b"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")  # two Hosts: h11 refuses it
    assert transport.written.startswith(b"HTTP/1.1 400 "), transport.written[:80]
    assert b"content-type: application/json" in transport.written
    assert b"malformed HTTP request" in transport.written


def test_no_module_reaches_uvicorns_or_h11s_private_modules_or_the_exception_being_handled() -> None:
    from tests.test_layout import sources_containing

    private = ["h11._", "uvicorn._", "sys.exc_info()", "_unset_keepalive_if_required", ".flow.", "cycle.response_"]
    assert {needle: sources_containing(needle) for needle in private} == {needle: [] for needle in private}
