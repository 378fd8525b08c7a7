"""The HTTP/1.1 connection: uvicorn's h11 protocol, answering what it cannot parse in JSON, with limits.

uvicorn answers a request h11 cannot parse (no or two Host headers, a bad Content-Length, NUL or
raw non-ASCII in the request line, a head over the buffer limit) with a plain-text 400 and closes
at once, so a client still sending a long head gets a TCP reset instead of the answer. Here the
answer is the face's JSON envelope with the right status (400, 414, 431), and the connection
closes gracefully: the answer is sent, the write side shut, and what the client still sends is
read and dropped for a bounded time and size (a "lingering close").

Slow clients are bounded too: a request head must arrive within `head_timeout` seconds of its
first byte (or of the connection opening): 408 otherwise; a request body within `body_timeout`
seconds of the end of its head, plus 1/`body_min_rate` s for each byte received (so a large body
sent at a fair rate has the time it needs, and a byte a second does not): 408 otherwise, and the
connection closes; an idle keep-alive connection closes after uvicorn's `timeout_keep_alive`;
beyond `limit_concurrency` open connections a new one is answered 503 at once and closed.

A response's head leaves with the first bytes of its body, in one write (uvicorn writes them apart).
"""

from __future__ import annotations

import asyncio
import http
import logging
from collections.abc import Callable
from typing import Any, cast

import h11
import orjson
import regex
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from engram_index.errors import (
    EngramError, HeadTooLarge, InvalidInput, RequestTimeout, TargetTooLong, Unavailable,
)

log = logging.getLogger("uvicorn.error")

HEAD_TIMEOUT = 10.0  # seconds for a whole request head, from its first byte
BODY_TIMEOUT = 30.0  # seconds of grace for a request body, from the end of its head
BODY_MIN_RATE = 16 * 1024.0  # bytes a second a body must average beyond that grace (each byte buys 1/rate s)
# What the server buffers for one request head: room for the longest valid query string of any
# face (garden.engram's 96 KiB: a 43,000-character vector, a percent-encoded q, tags), so that every
# valid request reaches the app and an oversized one gets the face's own 413 (uvicorn's h11 default
# of 16 KiB rejects valid vectors whenever a request arrives in pieces).
MAX_REQUEST_HEAD_BYTES = 256 * 1024
H11_DEFAULT_HEAD_BYTES = 16 * 1024  # h11's documented default max_incomplete_event_size
LINGER_SECONDS = 5.0  # how long a closing connection's remaining input is read and dropped
LINGER_BYTES = 64 * 1024 * 1024  # and how much of it (more than the largest body a face takes: 60 MB uploads)
_START_BYTES = 512  # what is kept of a request's first bytes, to know its path
_HEAD_END = regex.compile(rb"\r?\n\r?\n")
_REQUEST_LINE = regex.compile(rb"^[!#$%&'*+.^_`|~0-9A-Za-z-]+ (/[!-~]*)")
MAX_LOGGED_MESSAGE = 200


# An error as (JSON body, extra headers), and which envelope a request path's error is answered in:
# the faces' own, handed in by whoever serves them (this layer knows no face).
Headers = list[tuple[bytes, bytes]]
Envelope = Callable[[EngramError], tuple[bytes, Headers]]
EnvelopeFor = Callable[[str], Envelope]


def plain_envelope(error: EngramError) -> tuple[bytes, Headers]:
    """The envelope of a server that names no face: {"error", "message"}."""
    return orjson.dumps({"error": error.code, "message": error.message}), []


def plain_envelopes(target: str) -> Envelope:
    """Every path in the plain envelope."""
    return plain_envelope


class ServeConfig(uvicorn.Config):
    """uvicorn's settings, the request head and body deadlines, and the faces' error envelopes."""

    def __init__(self, app: Any, *, head_timeout: float = HEAD_TIMEOUT, body_timeout: float = BODY_TIMEOUT,
                 body_min_rate: float = BODY_MIN_RATE, envelopes: EnvelopeFor = plain_envelopes,
                 **kwargs: Any) -> None:
        """Every uvicorn option, plus `head_timeout` and `body_timeout` (seconds), `body_min_rate` (bytes/s)
        and `envelopes` (a path's error envelope, for what is answered before any route runs)."""
        kwargs.setdefault("h11_max_incomplete_event_size", MAX_REQUEST_HEAD_BYTES)
        super().__init__(app, **kwargs)
        self.head_timeout = head_timeout
        self.body_timeout = body_timeout
        self.body_min_rate = body_min_rate
        self.envelopes = envelopes


class JsonH11Protocol(H11Protocol):
    """h11 connections whose own errors are JSON, with a head timeout and a connection cap."""

    def __init__(self, config: uvicorn.Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        """As uvicorn's, with the cap taken from `limit_concurrency` and applied per connection."""
        super().__init__(config, server_state, app_state, _loop)
        self.head_limit = config.h11_max_incomplete_event_size or H11_DEFAULT_HEAD_BYTES
        # h11's public Connection, keeping the protocol error it raises (uvicorn's send_400_response is
        # not told which it was).
        self.conn = _RecordingConnection(h11.SERVER, self.head_limit)
        # uvicorn would answer requests over the limit with a plain-text 503; connections are capped here.
        self.max_connections = self.limit_concurrency
        self.limit_concurrency = None
        self.head_timeout: float = getattr(config, "head_timeout", HEAD_TIMEOUT)
        self.head_timer: asyncio.TimerHandle | None = None
        self.start = b""  # the first bytes of the request being read
        self.head_seen = 0  # bytes of the request head being read, so far
        self.head_tail = b""  # its last bytes, to find the blank line that ends it across reads
        self.body_timeout: float = getattr(config, "body_timeout", BODY_TIMEOUT)
        self.body_min_rate: float = getattr(config, "body_min_rate", BODY_MIN_RATE)
        self.envelopes: EnvelopeFor = getattr(config, "envelopes", plain_envelopes)
        self.body_timer: asyncio.TimerHandle | None = None
        self.body_since = 0.0  # when the body being timed began (or the server last held it back)
        self.body_bytes = 0  # bytes received since then
        self.body_timed_out = False  # the body deadline passed and was answered for the app
        self.app = _quiet_after_timeout(self.app, lambda: self.body_timed_out)
        self.lingering = -1  # bytes dropped since the connection began to close; -1 while open

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Accept the connection, or answer 503 when too many are open."""
        super().connection_made(transport)
        # uvicorn closes at once after an answer given before the body was read (a 413, a 401): the
        # unread bytes would make the kernel reset the connection under a client still sending.
        self.transport = cast(asyncio.Transport, _LingeringTransport(self.transport, self))
        if self.max_connections is not None and len(self.connections) > self.max_connections:
            self.refuse(Unavailable(f"more than {self.max_connections} open connections: retry shortly"))
            return
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection and its timers."""
        self._cancel_head_timer()
        self._cancel_body_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Feed h11, timing the request head from its first byte; drop input while closing."""
        if self.lingering >= 0:
            self.lingering += len(data)
            if self.lingering > LINGER_BYTES:
                self.transport.close()
            return
        if self.conn.their_state is h11.IDLE:
            if self.head_timer is None:  # a new request head begins (after keep-alive or pipelined)
                self.start, self.head_seen, self.head_tail = b"", 0, b""
                self._arm_head_timer()
            if len(self.start) < _START_BYTES:
                self.start += data[: _START_BYTES - len(self.start)]
            if self._head_too_large(data):
                return
        if self.body_timer is not None:
            self.body_bytes += len(data)
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE and self.lingering < 0:
            self._cancel_head_timer()  # the head is complete
        self._time_body()

    def _head_too_large(self, data: bytes) -> bool:
        """Refuse a head over the limit (431), however the reads split it; True when refused.

        h11 checks its limit only on a head it has not yet seen end, so a head that arrives complete
        in one or two socket reads (up to twice the limit) would pass.
        """
        window = self.head_tail + data
        end = _HEAD_END.search(window)
        size = self.head_seen + (end.end() - len(self.head_tail) if end else len(data))
        self.head_seen, self.head_tail = size, window[-3:]
        if size <= self.head_limit:
            return False
        crlf = b"\n" in self.start
        self.refuse(HeadTooLarge(f"the request head is larger than {self.head_limit} bytes") if crlf
                    else TargetTooLong(f"the request target is longer than {self.head_limit} bytes"))
        return True

    def on_response_complete(self) -> None:
        """As uvicorn's, which may start a pipelined request whose body is then timed."""
        super().on_response_complete()
        self._time_body()

    def send_400_response(self, msg: str) -> None:
        """Answer a request h11 could not parse with the face's JSON error (uvicorn's sends text)."""
        self.refuse(self._protocol_error())

    def _protocol_error(self) -> EngramError:
        """The error for what h11 refused (the one its connection last raised)."""
        exc = self.conn.refused if isinstance(self.conn, _RecordingConnection) else None
        hint = exc.error_status_hint if isinstance(exc, h11.RemoteProtocolError) else 400
        limit = self.head_limit
        if hint == 431:
            if b"\r\n" not in self.start and b"\n" not in self.start:
                return TargetTooLong(f"the request target is longer than {limit} bytes")
            return HeadTooLarge(f"the request head is larger than {limit} bytes")
        # h11's message, without the bytes it quotes (never echo a request back).
        detail = str(exc).split(": b'")[0].split(": bytearray(")[0][:MAX_LOGGED_MESSAGE] if exc else "unreadable"
        # h11 hints 501 for a transfer coding other than chunked: a request this service will never
        # accept is a 4xx (retrying cannot help), so every other refusal is a 400.
        return InvalidInput(f"malformed HTTP request: {detail}")

    def refuse(self, error: EngramError) -> None:
        """Answer `error` in the face's envelope and close gracefully (a lingering close)."""
        self._cancel_head_timer()
        self._stop_keep_alive_timer()
        if self.transport.is_closing():
            return
        match = _REQUEST_LINE.match(self.start)
        path = match.group(1).decode("ascii") if match else "/"
        body, extra = self.envelopes(path)(error)
        try:
            reason = http.HTTPStatus(error.status).phrase
        except ValueError:
            reason = ""
        lines = [f"HTTP/1.1 {error.status} {reason}".encode("ascii"), b"content-type: application/json",
                 b"content-length: " + str(len(body)).encode("ascii"), b"connection: close"]
        lines += [name + b": " + value for name, value in extra]
        if error.status == 503:
            lines.append(b"retry-after: 1")
        log.warning("%s %s", error.status, error.message[:MAX_LOGGED_MESSAGE])
        self.transport.write(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        self._linger()

    def _linger(self) -> None:
        """Shut the write side and read and drop what still comes, for a bounded time (a lingering close)."""
        self._cancel_body_timer()
        self.lingering = 0
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.transport.resume_reading()  # keep reading, to drop it, so the client gets no reset
        self.loop.call_later(LINGER_SECONDS, self.transport.close)

    def _stop_keep_alive_timer(self) -> None:
        """Cancel the idle keep-alive timer (uvicorn's, armed after each answer)."""
        if self.timeout_keep_alive_task is not None:
            self.timeout_keep_alive_task.cancel()
            self.timeout_keep_alive_task = None

    def timeout_keep_alive_handler(self) -> None:
        """An idle keep-alive connection closes (uvicorn's)."""
        self._cancel_head_timer()
        super().timeout_keep_alive_handler()

    def _arm_head_timer(self) -> None:
        """Start timing a request head."""
        self._cancel_head_timer()
        self.head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        """Stop timing the request head."""
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_timed_out(self) -> None:
        """The head did not arrive in time: 408 when part of it came, else just close."""
        self.head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self.start:
            self.refuse(RequestTimeout(f"the request head did not arrive within {self.head_timeout:g} s"))
        else:
            self.transport.close()

    def _time_body(self) -> None:
        """Start timing a request body when one is expected, stop when it has all arrived."""
        sending = self.conn.their_state is h11.SEND_BODY and self.lingering < 0
        if sending and self.body_timer is None:
            self._restart_body_clock()
        elif not sending:
            self._cancel_body_timer()

    def _restart_body_clock(self) -> None:
        """Give the body a fresh grace period from now."""
        self._cancel_body_timer()
        self.body_since, self.body_bytes = self.loop.time(), 0
        self.body_timer = self.loop.call_later(self.body_timeout, self._check_body)

    def _cancel_body_timer(self) -> None:
        """Stop timing the request body."""
        if self.body_timer is not None:
            self.body_timer.cancel()
            self.body_timer = None

    def _check_body(self) -> None:
        """At the body's deadline: wait longer for what the bytes received have earned, else cut it off."""
        self.body_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.SEND_BODY or self.lingering >= 0:
            return
        answering = self.conn.our_state is not h11.SEND_RESPONSE  # the app's answer has begun
        if not self.transport.is_reading() or (self.conn.they_are_waiting_for_100_continue and not answering):
            # The server holds the body back (its buffer is full, or the app has not asked for it yet):
            # the client is not the slow one, so its clock starts again.
            self._restart_body_clock()
            return
        earned = self.body_bytes / self.body_min_rate if self.body_min_rate > 0 else 0.0
        left = self.body_since + self.body_timeout + earned - self.loop.time()
        if left > 0:
            self.body_timer = self.loop.call_later(left, self._check_body)
            return
        if not answering:
            # Answer for the app, in the face's envelope; the app's receive then ends (quietly: see
            # _quiet_after_timeout) and whatever it answers is dropped.
            self.body_timed_out = True
            rate = f", then at least {self.body_min_rate:g} bytes a second" if self.body_min_rate > 0 else ""
            self.refuse(RequestTimeout(f"the request body did not arrive in time ({self.body_timeout:g} s{rate})"))
            _end_app_receive(self)
        elif self.conn.our_state in (h11.DONE, h11.MUST_CLOSE):
            log.warning("the rest of a request body did not arrive in time: closing after the answer")
            self._stop_keep_alive_timer()
            self._linger()
        else:
            self.transport.close()  # mid-answer: no answer can be given any more


class _LingeringTransport(asyncio.Transport):
    """A connection's transport whose close, while the client is still sending its body, lingers instead,
    and which writes a response's head together with the first bytes of its body."""

    def __init__(self, transport: asyncio.Transport, protocol: JsonH11Protocol) -> None:
        """Wrap the connection's transport."""
        super().__init__()
        self._transport, self._protocol = transport, protocol
        # A response's head, held for its body's first bytes: one write (one send, one packet) instead of two.
        self._head = b""
        self._in_body = False  # the response being written has sent its head

    def _flush(self) -> None:
        """Write a held response head (its body did not follow at once: a streamed response)."""
        if self._head:
            head, self._head = self._head, b""
            if not self._transport.is_closing():
                self._transport.write(head)

    def close(self) -> None:
        """Close, or shut the write side and drop the rest of the body first when it is still coming."""
        self._flush()
        protocol = self._protocol
        if protocol.lingering < 0 and protocol.conn.their_state is h11.SEND_BODY and not self._transport.is_closing():
            protocol._linger()  # its timer (or the byte bound) closes for real: lingering is then >= 0
            return
        self._transport.close()

    def is_closing(self) -> bool:
        """Closing for real, or lingering (nothing more is written either way)."""
        return self._protocol.lingering >= 0 or self._transport.is_closing()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Write to the connection; a response's head waits for the first bytes of its body (this loop turn)."""
        sending_body = self._protocol.conn.our_state is h11.SEND_BODY
        if sending_body and not self._in_body and data:
            # uvicorn writes the head, then the body: hold the head for it, and write it alone at the
            # loop's next turn if no body came meanwhile (a streamed response's head is not kept waiting).
            self._in_body = True
            self._head = bytes(data)
            self._protocol.loop.call_soon(self._flush)
            return
        self._in_body = sending_body
        if self._head:
            head, self._head = self._head, b""
            data = head + data
        if data:
            self._transport.write(data)

    def writelines(self, list_of_data: Any) -> None:
        """Write several buffers to the connection."""
        self.write(b"".join(list_of_data))

    def write_eof(self) -> None:
        """Shut the write side."""
        self._flush()
        self._transport.write_eof()

    def can_write_eof(self) -> bool:
        """Whether the write side can be shut alone."""
        return self._transport.can_write_eof()

    def abort(self) -> None:
        """Close at once, dropping buffered output."""
        self._transport.abort()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """The transport's details (peer and socket names, the socket)."""
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        """Stop reading (flow control)."""
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        """Read again."""
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        """Whether it reads."""
        return self._transport.is_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        """Flow control of writes."""
        self._transport.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        """Bytes waiting to be written (a held head included)."""
        return self._transport.get_write_buffer_size() + len(self._head)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        """Hand the connection to another protocol."""
        self._flush()
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        """The connection's protocol."""
        return self._transport.get_protocol()


class _RecordingConnection(h11.Connection):
    """h11's connection, keeping the protocol error it last raised (to answer it with the right status)."""

    refused: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        """h11's next event; a protocol error is kept before it is raised."""
        try:
            return super().next_event()
        except h11.RemoteProtocolError as exc:
            self.refused = exc
            raise


# -- uvicorn's own internals: the one place this module reaches past uvicorn's public API ------------
# uvicorn offers no public way to end an app's wait for a request body it has answered for (the body
# deadline's 408): its request cycle's `disconnected` flag and `message_event` do it, as uvicorn's own
# connection_lost does. tests/test_http_internals.py fails, naming what is gone, when the pinned
# uvicorn no longer has them (docs/design/service.md, "What the HTTP layer takes from uvicorn").
UVICORN_PROTOCOL_ATTRIBUTES = ("conn", "cycle", "transport", "connections", "limit_concurrency", "app", "loop",
                               "timeout_keep_alive_task")
UVICORN_CYCLE_ATTRIBUTES = ("disconnected", "message_event")
UVICORN_HOOKS = ("send_400_response", "on_response_complete", "timeout_keep_alive_handler", "data_received",
                 "connection_made", "connection_lost")


def _end_app_receive(protocol: JsonH11Protocol) -> None:
    """End the app's wait for the rest of the body (its receive then answers a disconnect)."""
    cycle = protocol.cycle
    if cycle is not None:
        cycle.disconnected = True
        cycle.message_event.set()


def _quiet_after_timeout(app: ASGIApp, timed_out: Callable[[], bool]) -> Any:
    """The app, whose reads end with RequestTimeout (an EngramError) once the body deadline answered for it.

    Without this, the app would see a client disconnect and each face would log it as an internal
    error; as RequestTimeout each face's one error place shapes it like any client error (the
    answer goes nowhere: the connection has been answered and is closing).
    """

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        async def read() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect" and timed_out():
                raise RequestTimeout("the request body did not arrive in time")
            return message

        await app(scope, read, send)

    return guarded
