"""The HTTP/1.1 connection: requests parsed by httptools (llhttp, C), answers in JSON for what it refuses, limits.

A request that cannot be parsed (llhttp's refusals, a target that is not visible ASCII among them,
and what h11 refused that llhttp lets through: no or two Host headers, a transfer coding other than chunked)
is answered in the face's JSON envelope with the right status (400, 414, 431), and the connection
closes gracefully: the answer is sent, the write side shut, and what the client still sends is
read and dropped for a bounded time and size (a "lingering close"). A request head is limited to
`head_limit` bytes, counted across reads (llhttp has no limit of its own).

Slow clients are bounded too: a request head must arrive within `head_timeout` seconds of its
first byte (or of the connection opening): 408 otherwise; a request body within `body_timeout`
seconds of the end of its head, plus 1/`body_min_rate` s for each byte received (so a large body
sent at a fair rate has the time it needs, and a byte a second does not): 408 otherwise, and the
connection closes; an idle keep-alive connection closes after uvicorn's `timeout_keep_alive`;
beyond `limit_concurrency` open connections a new one is answered 503 at once and closed.

Each request's body and response go through an `Exchange` (exchange.py), which writes a
response's head and the first bytes of its body in one write. What this takes of uvicorn is its
public serving API: `uvicorn.Config` (ServeConfig), the server's state (open connections, running
tasks, default headers) and the `shutdown` it calls on every connection.
"""

from __future__ import annotations

import asyncio
import http
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import httptools
import orjson
import regex
import uvicorn
from uvicorn.server import ServerState

from engram_index.connection_limits import ConnectionLimits
from engram_index.errors import EngramError, InvalidInput, Unavailable
from engram_index.exchange import AccessWriter, Exchange

log = logging.getLogger("uvicorn.error")

HEAD_TIMEOUT = 10.0  # seconds for a whole request head, from its first byte
BODY_TIMEOUT = 30.0  # seconds of grace for a request body, from the end of its head
BODY_MIN_RATE = 16 * 1024.0  # bytes a second a body must average beyond that grace (each byte buys 1/rate s)
# What the server buffers for one request head: room for the longest valid query string of any
# face (garden.engram's 96 KiB: a 43,000-character vector, a percent-encoded q, tags), so that every
# valid request reaches the app and an oversized one gets the face's own 413.
MAX_REQUEST_HEAD_BYTES = 256 * 1024
LINGER_SECONDS = 5.0  # how long a closing connection's remaining input is read and dropped
LINGER_BYTES = 64 * 1024 * 1024  # and how much of it (more than the largest body a face takes: 60 MB uploads)
_START_BYTES = 512  # what is kept of a request's first bytes, to know its path
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
    """uvicorn's settings, the request head's limit and deadline, the body's, and the faces' error envelopes."""

    def __init__(self, app: Any, *, head_timeout: float = HEAD_TIMEOUT, body_timeout: float = BODY_TIMEOUT,
                 body_min_rate: float = BODY_MIN_RATE, head_limit: int = MAX_REQUEST_HEAD_BYTES,
                 envelopes: EnvelopeFor = plain_envelopes,
                 access_writer: Callable[[], AccessWriter | None] | None = None, **kwargs: Any) -> None:
        """Every uvicorn option, plus `head_timeout` and `body_timeout` (seconds), `body_min_rate` (bytes/s),
        `head_limit` (bytes), `envelopes` (a path's error envelope, for what is answered before any route
        runs) and `access_writer` (a connection's writer of access lines; None: they go through logging)."""
        kwargs.setdefault("http", "engram_index.protocol:JsonHttpProtocol")
        super().__init__(app, **kwargs)
        self.head_timeout = head_timeout
        self.body_timeout = body_timeout
        self.body_min_rate = body_min_rate
        self.head_limit = head_limit
        self.envelopes = envelopes
        self.access_writer = access_writer


def _answered(task: asyncio.Task[None]) -> None:
    """A request's answer ended (its task is done, however)."""
    Exchange.answering -= 1


class _Refused(Exception):
    """A request head parsed but not accepted (raised from a parser callback, answered by the connection)."""

    def __init__(self, error: EngramError) -> None:
        super().__init__(error.message)
        self.error = error


class JsonHttpProtocol(ConnectionLimits, asyncio.Protocol):
    """One HTTP/1.1 connection: requests parsed by llhttp, refusals in JSON, deadlines, a connection cap."""

    def __init__(self, config: uvicorn.Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        """A connection of the server whose state is `server_state`, serving `config`'s app."""
        if not config.loaded:
            config.load()
        self.config = config
        self.app = config.loaded_app
        self.loop = _loop or asyncio.get_event_loop()
        self.server_state = server_state
        self.connections: set[Any] = server_state.connections
        self.tasks: set[asyncio.Task[None]] = server_state.tasks
        self.app_state = app_state
        self.root_path: str = config.root_path
        self.asgi = {"version": config.asgi_version, "spec_version": "2.3"}
        self.access_log = logging.getLogger("uvicorn.access").hasHandlers()
        make_writer = getattr(config, "access_writer", None)
        self.write_access: AccessWriter | None = make_writer() if self.access_log and make_writer else None
        self.timeout_keep_alive: float = config.timeout_keep_alive
        self.max_connections: int | None = config.limit_concurrency  # answered 503 at accept, per connection
        self.head_limit: int = getattr(config, "head_limit", MAX_REQUEST_HEAD_BYTES)
        self.head_timeout: float = getattr(config, "head_timeout", HEAD_TIMEOUT)
        self.body_timeout: float = getattr(config, "body_timeout", BODY_TIMEOUT)
        self.body_min_rate: float = getattr(config, "body_min_rate", BODY_MIN_RATE)
        self.envelopes: EnvelopeFor = getattr(config, "envelopes", plain_envelopes)
        self.parser = httptools.HttpRequestParser(self)
        # As uvicorn: answer a request that asked to close even when the client sent more after it.
        self.parser.set_dangerous_leniencies(lenient_data_after_close=True)
        self.transport: asyncio.Transport = None  # type: ignore[assignment]  # set by connection_made
        self.server: tuple[str, int | None] | None = None
        self.client: tuple[str, int] | None = None
        self.scheme = "http"
        self.write_paused = False
        self.writable: asyncio.Future[None] | None = None  # settled when writes may go on
        self.read_paused = False
        self.exchange: Exchange | None = None  # the request being answered
        self.pipeline: list[Exchange] = []  # requests that arrived before it was answered (in order)
        self.keep_alive_timer: asyncio.TimerHandle | None = None
        self.idle_since: float | None = None  # when the last answer ended and nothing came since (None: busy)
        # The request being parsed.
        self.in_head = True  # its head has not ended (between requests too)
        self.in_body = False  # its head has ended, its body has not
        self.begun = False  # llhttp has begun it (its method read)
        self.first = b""  # its first bytes, held until its method is known
        self.method: str | None = None  # its method, when llhttp reads another in its place
        self.stopped = False  # nothing more is parsed (llhttp stopped at an Upgrade or CONNECT; a refusal waits)
        self.deferred: EngramError | None = None  # a refusal of a pipelined request, answered after the one before
        self.url = b""
        self.headers: Headers = []
        self.hosts = 0
        self.codings: list[bytes] = []  # its Transfer-Encoding values
        self.expect_100 = False
        # The head's limit and deadline.
        self.head_timer: asyncio.TimerHandle | None = None
        self.head_open = False  # bytes of a request head have come
        self.head_since = 0.0  # when its first bytes came
        self.start = b""  # the first bytes of the request being read
        self.head_seen = 0  # bytes of the request head being read, so far
        self.head_tail = b""  # its last bytes, to find the blank line that ends it across reads
        # The body's deadline.
        self.body_timer: asyncio.TimerHandle | None = None
        self.body_since = 0.0  # when the body being timed began (or the server last held it back)
        self.body_bytes = 0  # bytes received since then
        self.lingering = -1  # bytes dropped since the connection began to close; -1 while open

    # -- the connection ----------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Accept the connection, or answer 503 when too many are open."""
        self.transport = transport  # type: ignore[assignment]
        self.connections.add(self)
        self.server = _address(transport, "sockname")
        self.client = _address(transport, "peername")  # type: ignore[assignment]
        self.scheme = "https" if transport.get_extra_info("sslcontext") else "http"
        if self.max_connections is not None and len(self.connections) > self.max_connections:
            self.refuse(Unavailable(f"more than {self.max_connections} open connections: retry shortly"))
            return
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection and its timers; the app's exchange hears of the disconnect."""
        self.connections.discard(self)
        self._cancel_head_timer()
        self._cancel_body_timer()
        self._stop_keep_alive_timer()
        for exchange in (self.exchange, *self.pipeline):
            if exchange is not None:
                exchange.disconnect()
        self.resume_writing()
        if exc is None:
            self.transport.close()

    def eof_received(self) -> None:
        """The client shut its side: the transport closes (an answer being written is lost, as uvicorn)."""

    def data_received(self, data: bytes) -> None:
        """Parse what came, timing the request head from its first byte; drop input while closing."""
        if self.lingering >= 0:
            self.lingering += len(data)
            if self.lingering > LINGER_BYTES:
                self.transport.close()
            return
        if self.stopped:
            return
        self.idle_since = None
        if self.in_head:
            if not self.head_open:  # a new request head begins (after keep-alive or pipelined)
                self.head_open = True
                self.start, self.head_seen, self.head_tail = b"", 0, b""
                self.head_since = self.loop.time()
            if len(self.start) < _START_BYTES:
                self.start += data[: _START_BYTES - len(self.start)]
            if self._head_too_large(data):
                return
            if not self.begun:  # llhttp waits for a request line: its method first
                held = self._method_known(data)
                if held is None:
                    self._time_head()
                    return
                data = held
        elif self.body_timer is not None:
            self.body_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self.stopped = True  # answered, then closed: llhttp reads nothing after it
            exchange = self._parsed()
            if exchange is not None:
                exchange.keep_alive = False
        except httptools.HttpParserError as exc:
            refused = exc.__context__
            self.refuse(refused.error if isinstance(refused, _Refused) else
                        InvalidInput(f"malformed HTTP request: {str(exc)[:MAX_LOGGED_MESSAGE]}"))
            return
        self._time_head()
        self._time_body()

    # -- the parser's callbacks ------------------------------------------------------------------

    def on_message_begin(self) -> None:
        """A request begins."""
        self.begun = True
        self.url, self.headers, self.hosts, self.codings, self.expect_100 = b"", [], 0, [], False

    def on_url(self, url: bytes) -> None:
        """(Part of) the request target."""
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        """A header field of the head (a chunked body's trailer fields are dropped, as h11's are)."""
        if not self.in_head:
            return
        name = name.lower()
        if value[-1:] in (b" ", b"\t"):
            value = value.rstrip(b" \t")  # as h11: no whitespace around a value (llhttp keeps it trailing)
        if name == b"host":
            self.hosts += 1
        elif name == b"transfer-encoding":
            self.codings.append(value.lower())
        elif name == b"expect" and value.lower() == b"100-continue":
            self.expect_100 = True
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        """The head has ended: refuse what h11 would have, else start (or queue) its exchange with the app."""
        parser = self.parser
        version = parser.get_http_version()
        url = self.url
        # h11's refusals that llhttp lets through (tests/test_http_protocol.py).
        if self.hosts > 1 or (self.hosts == 0 and version == "1.1"):  # (h11's words)
            raise _Refused(InvalidInput("malformed HTTP request: " + (
                "Found multiple Host: headers" if self.hosts else "Missing mandatory Host: header")))
        if self.codings and b", ".join(self.codings) != b"chunked":
            raise _Refused(InvalidInput("malformed HTTP request: Only Transfer-Encoding: chunked is supported"))
        self.in_head, self.in_body, self.head_open = False, True, False
        self._cancel_head_timer()
        method, self.method = self.method, None
        raw_path, _, query = url.partition(b"?")  # as uvicorn's h11 protocol read a target (llhttp: visible ASCII)
        path = raw_path.decode("ascii")
        if "%" in path:
            path = unquote(path)
        root = self.root_path
        scope = {
            "type": "http", "asgi": dict(self.asgi), "http_version": version, "server": self.server,
            "client": self.client, "scheme": self.scheme, "method": method or parser.get_method().decode("ascii"),
            "root_path": root, "path": root + path if root else path,
            "raw_path": root.encode("ascii") + raw_path if root else raw_path, "query_string": query,
            "headers": self.headers, "state": self.app_state.copy(),
        }
        exchange = Exchange(self, scope, keep_alive=version != "1.0" and parser.should_keep_alive(),
                            expect_100=self.expect_100)
        if self.exchange is None or self.exchange.complete:
            self._start(exchange)
        else:  # pipelined: answered in turn
            self.pipeline.append(exchange)
            self.pause_reading()

    def _parsed(self) -> Exchange | None:
        """The exchange of the request being parsed (the last one begun)."""
        return self.pipeline[-1] if self.pipeline else self.exchange

    def on_body(self, body: bytes) -> None:
        """Body bytes of the request (held for the app, up to HIGH_WATER before reading stops)."""
        exchange = self._parsed()
        if exchange is not None and exchange.body(body):
            self.pause_reading()  # until the app reads it (its receive resumes reading)

    def on_message_complete(self) -> None:
        """The request has ended; the next head may begin."""
        self.in_head, self.in_body, self.begun = True, False, False
        exchange = self._parsed()
        if exchange is not None:
            exchange.body_complete()
            if exchange.complete and not self.pipeline:  # answered before its body ended: idle from now
                self._idle()

    # -- exchanges --------------------------------------------------------------------------------

    def _start(self, exchange: Exchange) -> None:
        """Run the app for a request."""
        self.exchange = exchange
        task = self.loop.create_task(exchange.run(self.app))
        Exchange.answering += 1
        task.add_done_callback(_answered)
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)

    def on_response_complete(self) -> None:
        """An answer is complete: start the next pipelined request, or wait for one (keep-alive)."""
        self.server_state.total_requests += 1
        if self.closing():
            return
        if self.deferred is not None:
            self.refuse(self.deferred)
            return
        self.resume_reading()
        if self.pipeline:
            self._start(self.pipeline.pop(0))
        elif not self.in_body:
            self._idle()
        self._time_body()  # a pipelined request's body is timed once its turn comes

    def close_after_answer(self) -> None:
        """Close after an answer that ends the connection (lingering when the client may still send)."""
        if self.stopped and not self.closing():
            self._linger()
        else:
            self.close()

    def close(self) -> None:
        """Close, or shut the write side and drop the rest of the request body first when it is still coming."""
        if self.lingering < 0 and self.in_body and not self.transport.is_closing():
            self._linger()  # its timer (or the byte bound) closes for real
        else:
            self.transport.close()

    def closing(self) -> bool:
        """Closing for real, or lingering (nothing more is written either way)."""
        return self.lingering >= 0 or self.transport.is_closing()

    def internal_error(self, path: str, error: EngramError) -> tuple[bytes, Headers]:
        """`error` in the envelope of the face serving `path`."""
        return self.envelopes(path)(error)

    @property
    def default_headers(self) -> Headers:
        """The header fields the server adds to every response (date, server)."""
        return self.server_state.default_headers

    def shutdown(self) -> None:
        """The server is stopping: close now when idle, else after the answer being written."""
        if self.exchange is None or self.exchange.complete:
            self.close()
        else:
            self.exchange.keep_alive = False

    def _idle(self) -> None:
        """Nothing to answer or read: the idle keep-alive connection closes after `timeout_keep_alive`."""
        self.idle_since = self.loop.time()
        if self.keep_alive_timer is None:
            self.keep_alive_timer = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)

    def timeout_keep_alive_handler(self) -> None:
        """An idle keep-alive connection closes; the timer is left running across requests and
        looks again when the connection was busy meanwhile (cheaper than a timer per request)."""
        self.keep_alive_timer = None
        if self.idle_since is None:
            return  # busy: the next _idle arms it again
        left = self.idle_since + self.timeout_keep_alive - self.loop.time()
        if left > 0:
            self.keep_alive_timer = self.loop.call_later(left, self.timeout_keep_alive_handler)
            return
        self._cancel_head_timer()
        if not self.transport.is_closing():
            self.close()

    def _stop_keep_alive_timer(self) -> None:
        """Cancel the idle keep-alive timer."""
        self.idle_since = None
        if self.keep_alive_timer is not None:
            self.keep_alive_timer.cancel()
            self.keep_alive_timer = None

    # -- flow control -----------------------------------------------------------------------------

    def pause_reading(self) -> None:
        """Stop reading: the app holds enough body, or a pipelined request waits."""
        if not self.read_paused:
            self.read_paused = True
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        """Read again."""
        if self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()

    def pause_writing(self) -> None:
        """The transport's buffer is full: the app's writes wait."""
        self.write_paused = True

    def resume_writing(self) -> None:
        """The transport takes writes again."""
        self.write_paused = False
        if self.writable is not None:
            if not self.writable.done():
                self.writable.set_result(None)
            self.writable = None

    async def drain(self) -> None:
        """Wait until the transport takes writes again."""
        if self.write_paused:
            if self.writable is None or self.writable.done():
                self.writable = self.loop.create_future()
            await self.writable

    # -- refusals and closing ---------------------------------------------------------------------

    def refuse(self, error: EngramError) -> None:
        """Answer `error` in the face's envelope and close gracefully (a lingering close)."""
        self._cancel_head_timer()
        self._stop_keep_alive_timer()
        if self.closing():
            return
        exchange = self.exchange
        if exchange is not None and not exchange.complete and not exchange.disconnected and self.in_head:
            # A pipelined request refused while the one before is answered: its answer first.
            self.deferred, self.stopped = error, True
            self.pause_reading()
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
        self.read_paused = False
        self.transport.resume_reading()  # keep reading, to drop it, so the client gets no reset
        self.loop.call_later(LINGER_SECONDS, self.transport.close)


# -- what this module takes of uvicorn: its public serving API, named here ------------------------------
# The server builds a connection as `config.http_protocol_class(config=, server_state=, app_state=, _loop=)`
# and calls `shutdown()` on each open one when it stops; the connection reads these settings of its
# Config and this state of the server. tests/test_http_internals.py fails, naming what is gone, when
# the pinned uvicorn no longer has one (docs/design/service.md, "What the HTTP layer takes from uvicorn").
UVICORN_CONFIG_ATTRIBUTES = ("loaded", "loaded_app", "root_path", "asgi_version", "timeout_keep_alive",
                             "limit_concurrency")
UVICORN_STATE_ATTRIBUTES = ("connections", "tasks", "default_headers", "total_requests")


def _address(transport: asyncio.BaseTransport, name: str) -> tuple[str, int | None] | None:
    """The transport's local or peer address as (host, port), as uvicorn puts it in the scope (a local
    Unix socket as (path, None), a peer without one as None)."""
    info = transport.get_extra_info(name)
    if isinstance(info, (list, tuple)) and len(info) >= 2:
        return (str(info[0]), int(info[1]))
    if isinstance(info, str) and name == "sockname":
        return (info, None)
    return None
