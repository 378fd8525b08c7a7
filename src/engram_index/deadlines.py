"""The request head's and body's deadlines of an HTTP connection: protocol.JsonHttpProtocol's timers.

A request head must arrive within `head_timeout` seconds of its first byte (408 when part of it
came, else the connection just closes); a request body within `body_timeout` seconds of the end of
its head plus 1/`body_min_rate` s for each byte received, while the server is not the one holding it
back (408 in the face's envelope for the app, which then reads RequestTimeout; after an answer, the
rest of the body is cut off with a lingering close).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from engram_index.errors import EngramError, RequestTimeout

if TYPE_CHECKING:
    from engram_index.exchange import Exchange

log = logging.getLogger("uvicorn.error")


class Deadlines:
    """The head and body timers of a connection (mixed into protocol.JsonHttpProtocol)."""

    loop: asyncio.AbstractEventLoop
    head_timeout: float
    body_timeout: float
    body_min_rate: float
    head_timer: asyncio.TimerHandle | None
    body_timer: asyncio.TimerHandle | None
    body_since: float
    body_bytes: int
    start: bytes
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

    # -- the head's deadline ----------------------------------------------------------------------

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
