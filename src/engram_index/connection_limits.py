"""What an HTTP connection (protocol.JsonHttpProtocol) bounds and reads first: a request head's size and method,
its deadline, and its body's.

A request head is limited to `head_limit` bytes, counted across reads (431; 414 when its request
line never ended); its method is read before llhttp sees it (llhttp knows a fixed set of methods,
h11 took any token). A head must arrive within `head_timeout` seconds of its first byte (408 when
part of it came, else the connection just closes); a request body within `body_timeout` seconds of
the end of its head plus 1/`body_min_rate` s for each byte received, while the server is not the one
holding it back (408 in the face's envelope for the app, which then reads RequestTimeout; after an
answer, the rest of the body is cut off with a lingering close).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import regex

from engram_index.errors import EngramError, HeadTooLarge, RequestTimeout, TargetTooLong

if TYPE_CHECKING:
    from engram_index.exchange import Exchange

log = logging.getLogger("uvicorn.error")

_HEAD_END = regex.compile(rb"\r?\n\r?\n")
_TOKEN = regex.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# The methods llhttp reads as they are (CONNECT aside, which it takes as a protocol switch); any other
# token is a method too (h11 took them all): llhttp reads it as GET and the app gets the method sent.
LLHTTP_METHODS = frozenset(b"DELETE GET HEAD POST PUT OPTIONS TRACE COPY LOCK MKCOL MOVE PROPFIND PROPPATCH SEARCH"
                           b" UNLOCK BIND REBIND UNBIND ACL REPORT MKACTIVITY CHECKOUT MERGE M-SEARCH NOTIFY SUBSCRIBE"
                           b" UNSUBSCRIBE PATCH PURGE MKCALENDAR LINK UNLINK SOURCE QUERY".split())
_METHOD_BYTES = 64  # bytes held at most while a request's method is not yet known (longer: llhttp judges it)


class ConnectionLimits:
    """A connection's head limit and method reading, and its head and body timers (mixed into
    protocol.JsonHttpProtocol)."""

    loop: asyncio.AbstractEventLoop
    head_timeout: float
    body_timeout: float
    body_min_rate: float
    head_timer: asyncio.TimerHandle | None
    body_timer: asyncio.TimerHandle | None
    body_since: float
    body_bytes: int
    start: bytes
    head_open: bool
    head_since: float
    head_limit: int
    head_seen: int
    head_tail: bytes
    first: bytes
    method: str | None
    in_head: bool
    in_body: bool
    read_paused: bool
    exchange: Exchange | None
    pipeline: list[Exchange]
    lingering: int

    if TYPE_CHECKING:  # the connection's own, used here
        transport: asyncio.Transport

        def closing(self) -> bool: ...

        def refuse(self, error: EngramError) -> None: ...

        def close(self) -> None: ...

        def _linger(self) -> None: ...

        def _stop_keep_alive_timer(self) -> None: ...

    def _head_too_large(self, data: bytes) -> bool:
        """Refuse a head over the limit (431; 414 when its request line never ended), however reads split it."""
        bound = self.head_seen + len(data)
        if bound <= self.head_limit:  # however much of it is the head, the limit is not passed: no search
            self.head_seen, self.head_tail = bound, (self.head_tail + data)[-3:]
            return False
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

    def _method_known(self, data: bytes) -> bytes | None:
        """The bytes for llhttp once a request's method is read (a token it does not know replaced by GET,
        the method kept for the app), or None while it is incomplete (the bytes are held)."""
        data, self.first = self.first + data, b""
        space = data.find(b" ", 0, _METHOD_BYTES + 1)
        if space < 0:
            if len(data) <= _METHOD_BYTES and b"\n" not in data:
                self.first = data
                return None
            return data  # no method: llhttp says what is wrong
        token = data[:space]
        if token in LLHTTP_METHODS or not _TOKEN.fullmatch(token):
            return data
        self.method = token.decode("ascii")
        return b"GET" + data[space:]

    # -- the head's deadline ----------------------------------------------------------------------

    def _arm_head_timer(self) -> None:
        """Start timing a request head."""
        self._cancel_head_timer()
        self.head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _time_head(self) -> None:
        """Time a request head still incomplete after a read, from its first byte (a head that arrived
        whole in one read, as most do, never needs a timer)."""
        if self.in_head and self.head_open and self.head_timer is None and self.lingering < 0:
            left = self.head_since + self.head_timeout - self.loop.time()
            self.head_timer = self.loop.call_later(max(left, 0.0), self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        """Stop timing the request head."""
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_timed_out(self) -> None:
        """The head did not arrive in time: 408 when part of it came, else just close."""
        self.head_timer = None
        if self.closing() or not self.in_head:
            return
        if self.start:
            self.refuse(RequestTimeout(f"the request head did not arrive within {self.head_timeout:g} s"))
        else:
            self.transport.close()

    # -- the body's deadline ----------------------------------------------------------------------

    def _time_body(self) -> None:
        """Time a request body while one is expected and its request is being answered, else stop."""
        if self.in_body and self.lingering < 0 and not self.pipeline:
            if self.body_timer is None:
                self._restart_body_clock()
        else:
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
        exchange = self.exchange
        if self.closing() or not self.in_body or exchange is None:
            return
        answering = exchange.started  # the app's answer has begun
        if self.read_paused or (exchange.waiting_for_100_continue and not answering):
            # The server holds the body back (the app holds enough, or has not asked for it yet):
            # the client is not the slow one, so its clock starts again.
            self._restart_body_clock()
            return
        earned = self.body_bytes / self.body_min_rate if self.body_min_rate > 0 else 0.0
        left = self.body_since + self.body_timeout + earned - self.loop.time()
        if left > 0:
            self.body_timer = self.loop.call_later(left, self._check_body)
            return
        if not answering:
            # Answer for the app, in the face's envelope; the app's receive then raises RequestTimeout
            # and whatever it answers is dropped.
            rate = f", then at least {self.body_min_rate:g} bytes a second" if self.body_min_rate > 0 else ""
            self.refuse(RequestTimeout(f"the request body did not arrive in time ({self.body_timeout:g} s{rate})"))
            exchange.disconnect(timed_out=True)
        elif exchange.complete:
            log.warning("the rest of a request body did not arrive in time: closing after the answer")
            self._stop_keep_alive_timer()
            self._linger()
        else:
            self.close()  # mid-answer: no answer can be given any more
