"""The moment a query's forward pass begins on another thread: the work beside it lets the pass go first.

A v5 search or a Kindgi retrieve embeds its query on an embedding thread while a search thread
runs the keyword side. Both need the GIL to begin; the embedding, the longer and the one the
answer waits for, needs it only until its forward pass starts (onnxruntime lets go of it for the
pass). A search thread that takes the GIL first holds the embedding back for as long as its own
Python runs: a served Kindgi retrieve's embedding began ~250 µs after it was submitted
(bench/retrieve_trace.py). So the embedder says when its pass begins (`pass_begins`, called on
the embedding thread), and the work beside it waits for that, briefly (`PassStart.wait`): a
moment that never comes (a remote embedder, an error, a cached vector) costs at most `WAIT_S`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")

WAIT_S = 0.002  # the longest the work beside an embedding waits for its pass to begin
_local = threading.local()


class PassStart:
    """Set once the forward pass of the embedding it was handed to has begun (or the embedding is over)."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        """Not yet begun."""
        self.event = threading.Event()

    @contextmanager
    def signalled(self) -> Iterator[None]:
        """On the embedding thread, around the embedding: this thread's next pass sets it, and so does the end."""
        _local.start = self
        try:
            yield
        finally:
            _local.start = None
            self.event.set()

    def wait(self, timeout: float = WAIT_S) -> None:
        """Wait until the pass began, at most `timeout` seconds."""
        if not self.event.is_set():
            self.event.wait(timeout)


def pass_begins() -> None:
    """Called by an embedder on its thread right before a forward pass lets go of the GIL."""
    start: PassStart | None = getattr(_local, "start", None)
    if start is not None:
        _local.start = None
        start.event.set()


class Embedding(Future[T]):
    """A query's vector being made on an embedding thread, with the moment its pass begins (`began`)."""

    def __init__(self) -> None:
        """Pending, its pass not begun."""
        super().__init__()
        self.began = PassStart()


def embed_on(pool: Executor, make: Callable[[], T]) -> Embedding[T]:
    """`make()` on one of the pool's threads, as an Embedding whose `began` its forward pass sets."""
    out: Embedding[T] = Embedding()

    def run() -> None:
        if not out.set_running_or_notify_cancel():
            return
        with out.began.signalled():
            try:
                result = make()
            except BaseException as exc:
                out.set_exception(exc)
                return
        out.set_result(result)

    pool.submit(run)
    return out


def wait_for_pass(vector: object, timeout: float = WAIT_S) -> None:
    """Let a query's embedding under way (an Embedding) begin its pass before this thread's work."""
    if isinstance(vector, Embedding) and not vector.done():
        vector.began.wait(timeout)
