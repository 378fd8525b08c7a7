"""One request and its response on an HTTP/1.1 connection: the ASGI receive and send of the app's call.

The connection (protocol.py) parses the request and hands its body over; an `Exchange` gives it to
the app, writes the app's response (its head and the first bytes of its body in one write), logs
the access line and tells the connection when the answer is complete. Its semantics are uvicorn's
request cycle's, with h11's framing of a response (a close-delimited body for an HTTP/1.0 client).
"""

from __future__ import annotations

import asyncio
import http
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

import regex

from engram_index.errors import EngramError, RequestTimeout

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message

log = logging.getLogger("uvicorn.error")
access = logging.getLogger("uvicorn.access")

HIGH_WATER = 64 * 1024  # bytes of request body held for the app before the connection stops reading
# Each status's line as uvicorn and h11 write it ("HTTP/1.1 <code> <phrase>", an unknown code without one).
STATUS_LINES = {code: f"HTTP/1.1 {code} ".encode("ascii") for code in range(100, 600)}
STATUS_LINES.update({int(s): f"HTTP/1.1 {int(s)} {s.phrase}".encode("ascii") for s in http.HTTPStatus})
_BAD_NAME = regex.compile(rb'[\x00-\x20\x7f-\xff()<>@,;:\[\]={}\\"/?]')  # not a token character (RFC 9110 §5.6.2)
_BAD_VALUE = regex.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")  # a control character other than tab
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


AccessWriter = Callable[[str, str, str, str, int], None]  # an access line's client, method, target, version, status


class Connection(Protocol):
    """What an exchange needs of its connection (protocol.JsonHttpProtocol)."""

    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    access_log: bool
    write_access: AccessWriter | None
    write_paused: bool

    @property
    def default_headers(self) -> list[tuple[bytes, bytes]]:
        """The header fields the server adds to every response."""

    def resume_reading(self) -> None:
        """Read again (the app asks for more body)."""

    async def drain(self) -> None:
        """Wait until the transport takes writes again."""

    def close_after_answer(self) -> None:
        """Close once an answer that ends the connection is written."""

    def closing(self) -> bool:
        """Whether the connection is closing (nothing more is written)."""

    def on_response_complete(self) -> None:
        """The answer is complete: the next request may start."""

    def internal_error(self, path: str, error: EngramError) -> tuple[bytes, list[tuple[bytes, bytes]]]:
        """`error` in the envelope of the face serving `path` (body, extra headers)."""


class Exchange:
    """One request's body for the app, and the app's response onto the connection."""

    # Requests of this process whose answer a connection started (its task made) and that have not ended:
    # counted when they are read, before their tasks run, so that the first of several read in one turn of
    # the event loop knows of the others (a search alone in the process may run on the loop's thread).
    answering = 0

    __slots__ = ("conn", "scope", "keep_alive", "waiting_for_100_continue", "chunks", "held", "more_body",
                 "ready", "waiter", "disconnected", "timed_out", "started", "complete", "chunked", "length_left",
                 "head")

    def __init__(self, conn: Connection, scope: dict[str, Any], *, keep_alive: bool, expect_100: bool) -> None:
        """An exchange of `conn` for the request `scope` describes."""
        self.conn, self.scope = conn, scope
        self.keep_alive = keep_alive
        self.waiting_for_100_continue = expect_100  # the client waits to be asked for its body
        self.chunks: list[bytes] = []  # body received and not yet given to the app
        self.held = 0  # their bytes
        self.more_body = True
        self.ready = False  # something new for the app's receive (body, its end, a disconnect)
        self.waiter: asyncio.Future[None] | None = None
        self.disconnected = False
        self.timed_out = False  # the body deadline answered for the app
        self.started = self.complete = False  # the response
        self.chunked = False
        self.length_left = -1  # bytes of the response body still due (-1: none declared)
        self.head = b""  # the response's head, held for the first bytes of its body

    # -- the connection's side ---------------------------------------------------------------------

    def wake(self) -> None:
        """Tell the app's receive that something changed."""
        self.ready = True
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def body(self, data: bytes) -> bool:
        """Body bytes arrived (dropped once the answer is complete); whether the app now holds too many."""
        if self.complete:
            return False
        self.chunks.append(data)
        self.held += len(data)
        self.wake()
        return self.held > HIGH_WATER

    def body_complete(self) -> None:
        """The whole body arrived."""
        if not self.complete:
            self.more_body = False
            self.wake()

    def disconnect(self, timed_out: bool = False) -> None:
        """The client is gone (or its body's deadline passed, `timed_out`): the app reads no more."""
        if not self.complete:
            self.disconnected = True
            self.timed_out = timed_out
        self.wake()

    # -- the app's side -------------------------------------------------------------------------

    async def run(self, app: ASGIApp) -> None:
        """Call the app; what it fails to answer is answered here, as uvicorn's cycle does."""
        try:
            result = await app(self.scope, self.receive, self.send)  # type: ignore[func-returns-value]
        except BaseException as exc:
            log.error("Exception in ASGI application\n", exc_info=exc)
            if not self.started:
                await self._internal_error()
            else:
                self.conn.close_after_answer()
        else:
            if result is not None:
                log.error("ASGI callable should return None, but returned '%s'.", result)
                self.conn.close_after_answer()
            elif not self.started and not self.disconnected:
                log.error("ASGI callable returned without starting response.")
                await self._internal_error()
            elif not self.complete and not self.disconnected:
                log.error("ASGI callable returned without completing response.")
                self.conn.close_after_answer()

    async def _internal_error(self) -> None:
        """A 500 in the envelope of the request's face."""
        error = EngramError("internal error: the app gave no answer")
        body, extra = self.conn.internal_error(self.scope["path"], error)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode("ascii")),
                   (b"connection", b"close"), *extra]
        await self.send({"type": "http.response.start", "status": error.status, "headers": headers})
        await self.send({"type": "http.response.body", "body": body})

    async def receive(self) -> Message:
        """The next part of the request body, or a disconnect (RequestTimeout once its deadline answered)."""
        conn = self.conn
        if self.waiting_for_100_continue and not conn.closing():
            conn.transport.write(_CONTINUE)
            self.waiting_for_100_continue = False
        if not self.disconnected and not self.complete:
            conn.resume_reading()
            if not self.ready:
                self.waiter = conn.loop.create_future()
                try:
                    await self.waiter
                finally:
                    self.waiter = None
            self.ready = False
        if self.disconnected or self.complete:
            if self.timed_out:
                # The connection answered 408 in the face's envelope: as RequestTimeout (an EngramError) the
                # face's one error place shapes it like any client error, where a disconnect would be logged
                # as an internal error (the answer goes nowhere: the connection is closing).
                raise RequestTimeout("the request body did not arrive in time")
            return {"type": "http.disconnect"}
        chunks, self.chunks, self.held = self.chunks, [], 0
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        return {"type": "http.request", "body": data, "more_body": self.more_body}

    async def send(self, message: Message) -> None:
        """Write the app's response: its head with its body's first bytes (one write), then the rest."""
        conn = self.conn
        if conn.write_paused and not self.disconnected:
            await conn.drain()
        if self.disconnected:
            return
        kind = message["type"]
        if not self.started:
            if kind != "http.response.start":
                raise RuntimeError(f"Expected ASGI message 'http.response.start', but got '{kind}'.")
            self.started = True
            self.waiting_for_100_continue = False
            status = message["status"]
            if conn.access_log:
                self._log_access(status)
            self.head = self._head(status, message.get("headers", ()))
            # Held for the body's first bytes, written alone at the loop's next turn if none came meanwhile
            # (a streamed response's head is not kept waiting).
            conn.loop.call_soon(self._flush)
        elif not self.complete:
            if kind != "http.response.body":
                raise RuntimeError(f"Expected ASGI message 'http.response.body', but got '{kind}'.")
            body = message.get("body", b"")
            more = message.get("more_body", False)
            if self.scope["method"] == "HEAD":
                data = b""
                self.length_left = -1
            elif self.chunked:
                data = b"%x\r\n%b\r\n" % (len(body), body) if body else b""
                if not more:
                    data += b"0\r\n\r\n"
            else:
                data = body
                if self.length_left >= 0:
                    if len(body) > self.length_left:
                        raise RuntimeError("Response content longer than Content-Length")
                    self.length_left -= len(body)
            if self.head:
                data, self.head = self.head + data, b""
            if data and not conn.closing():
                conn.transport.write(data)
            if not more:
                if self.length_left > 0:
                    raise RuntimeError("Response content shorter than Content-Length")
                self.complete = True
                self.chunks, self.held = [], 0  # what the app did not read is dropped, as what still comes
                self.wake()
                if not self.keep_alive:
                    conn.close_after_answer()
                conn.on_response_complete()
        else:
            raise RuntimeError(f"Unexpected ASGI message '{kind}' sent, after response already completed.")

    def _flush(self) -> None:
        """Write a held head (its body did not follow at once: a streamed response)."""
        if self.head:
            head, self.head = self.head, b""
            if not self.conn.closing():
                self.conn.transport.write(head)

    def _head(self, status: int, headers: Any) -> bytes:
        """The response's status line and header fields (the server's own first), framed as h11 framed an
        answer: a body of no declared length chunked (read to the close for HTTP/1.0), `Connection: close`
        when the connection ends, what it sets title-cased at the end."""
        fields = [*self.conn.default_headers, *headers]
        names = [name.lower() for name, _ in fields]
        if not all(names) or _BAD_NAME.search(b"-".join(names)) or _BAD_VALUE.search(b"\t".join(v for _, v in fields)):
            raise RuntimeError("Invalid HTTP header name or value.")
        length: int | None = None
        coded = False
        tokens: set[bytes] | None = None  # the Connection field's tokens
        for name, (_, value) in zip(names, fields):
            if name == b"content-length":
                if length is None:
                    length = int(value)
            elif name == b"transfer-encoding":
                if value.strip().lower() != b"chunked":
                    raise RuntimeError("Only Transfer-Encoding: chunked is supported")
                coded = True
            elif name == b"connection":
                tokens = (tokens or set()) | {t.strip().lower() for t in value.split(b",") if t.strip()}
        if tokens is not None and b"close" in tokens:
            self.keep_alive = False
        drop: set[bytes] = set()
        tail: list[bytes] = []
        if status in (204, 304):
            self.length_left = 0
        elif coded or length is None:  # a body of unknown length (its framing chosen as for a GET, for a HEAD too)
            drop |= {b"content-length", b"transfer-encoding"}
            if self.scope["http_version"] == "1.0":
                if self.scope["method"] != "HEAD":
                    self.keep_alive = False  # read to the connection's close
            else:
                self.chunked = True
                tail.append(b"Transfer-Encoding: chunked")
        else:
            self.length_left = length
        if not self.keep_alive:
            drop.add(b"connection")
            tail.append(b"Connection: " + b", ".join(sorted(((tokens or set()) - {b"keep-alive"}) | {b"close"})))
        lines = [STATUS_LINES.get(status) or f"HTTP/1.1 {status} ".encode("ascii")]
        if drop:
            lines += [name + b": " + value for lower, (name, value) in zip(names, fields) if lower not in drop]
        else:
            lines += [name + b": " + value for name, value in fields]
        lines += tail
        lines.append(b"\r\n")
        return b"\r\n".join(lines)

    def _log_access(self, status: int) -> None:
        """uvicorn's access line: client, method, target, version, status (server.py formats it)."""
        scope = self.scope
        client = scope.get("client")
        target = quote(scope["path"])
        if scope["query_string"]:
            target = f"{target}?{scope['query_string'].decode('ascii')}"
        write = self.conn.write_access
        if write is not None:
            write("%s:%d" % client if client else "", scope["method"], target, scope["http_version"], status)
        else:
            access.info('%s - "%s %s HTTP/%s" %d', "%s:%d" % client if client else "", scope["method"], target,
                        scope["http_version"], status)
