"""The moment a query's forward pass begins on another thread: the work beside it lets the pass go first.

A v5 search or a Kindgi retrieve embeds its query on an embedding thread while a search thread
runs the keyword side. Both need the GIL to begin; the embedding, the longer and the one the
answer waits for, needs it only until its forward pass starts (onnxruntime lets go of it for the
pass). A search thread that takes the GIL first holds the embedding back for as long as its own
Python runs: a served Kindgi retrieve's embedding began ~250 µs after it was submitted
(bench/retrieve_trace.py). So the embedder says when its pass begins (`pass_begins`, called on
the embedding thread), and the work beside it waits for that, briefly (`PassStart.wait`): a
moment that never comes (a remote embedder, an error, a cached vector) costs at most `WAIT_S`.

The thread that submits the embedding (the event loop, in a face's `prepare`) holds the GIL too:
its own Python after the submission (the Idempotency-Key's lookup, the hop to a search thread)
held a served Kindgi retrieve's embedding back ~120 µs more. So when no other query embedding is
under way in the process, the submitter waits for the pass to begin (at most `LOOP_WAIT_S`), and
what it does after overlaps the pass (`submit_first`, from a Kindgi retrieve's prepare). With
another under way it does not wait: the pass may wait for a thread or a core, and the event loop
has other requests to serve.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")

WAIT_S = 0.002  # the longest the work beside an embedding waits for its pass to begin
# The longest the submitter of a lone embedding waits for its pass to begin (~120-250 µs when it comes:
# bench/retrieve_trace.py); on a busy machine the pass may not come sooner than its turn on a core.
LOOP_WAIT_S = 0.001
_local = threading.local()
_under_way = 0  # query embeddings submitted (`PassStart.submitting`) and not over (`PassStart.end`)
_count = threading.Lock()


class PassStart:
    """Set once the forward pass of the embedding it was handed to has begun (or the embedding is over)."""

    __slots__ = ("event", "_counted")

    def __init__(self) -> None:
        """Not yet begun."""
        self.event = threading.Event()
        self._counted = False

    def submitting(self) -> bool:
        """Count its embedding as under way from now (call it before the submission) to its end; say whether
        it is the only one under way in the process."""
        global _under_way
        with _count:
            if not self._counted:
                self._counted = True
                _under_way += 1
            return _under_way == 1

    def end(self) -> None:
        """The embedding is over (or will never run): the moment is set, and it is no longer under way."""
        global _under_way
        self.event.set()
        with _count:
            if self._counted:
                self._counted = False
                _under_way -= 1

    @contextmanager
    def signalled(self) -> Iterator[None]:
        """On the embedding thread, around the embedding: this thread's next pass sets it, and so does the end."""
        _local.start = self
        try:
            yield
        finally:
            _local.start = None
            self.end()

    def wait(self, timeout: float = WAIT_S) -> None:
        """Wait until the pass began, at most `timeout` seconds."""
        if not self.event.is_set():
            self.event.wait(timeout)


def tells_pass(embedder: object) -> bool:
    """Whether an embedder (or the one a wrapper holds) calls `pass_begins` before its passes: a remote one
    never does, and waiting for it would only hold the waiter up to its timeout."""
    return bool(getattr(embedder, "TELLS_PASS", False))


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


def embed_on(pool: Executor, make: Callable[[], T], timeout: float = 0.0) -> Embedding[T]:
    """`make()` on one of the pool's threads, as an Embedding whose `began` its forward pass sets; with a
    `timeout`, the caller goes on once that pass has begun when no other embedding is under way
    (`submit_first`). A v5 search's job waits for it on the search thread anyway (`wait_for_pass`), right
    after the event loop's hop: waiting on the event loop as well only adds a wake-up there (measured
    no faster, bench/v5_served_ab.py), so it does not by default."""
    out: Embedding[T] = Embedding()

    def run() -> None:
        if not out.set_running_or_notify_cancel():
            out.began.end()  # cancelled before it ran
            return
        with out.began.signalled():
            try:
                result = make()
            except BaseException as exc:
                out.set_exception(exc)
                return
        out.set_result(result)

    submit_first(out.began, lambda: pool.submit(run), timeout)
    return out


def submit_first(start: PassStart, submit: Callable[[], object], timeout: float = LOOP_WAIT_S) -> None:
    """Submit an embedding that signals `start` (`submit()`); when it is the only one under way, wait until its
    pass begins (at most `timeout` s), so that this thread's next Python does not hold back its start."""
    alone = start.submitting()
    try:
        submit()
    except BaseException:
        start.end()  # never to run
        raise
    if alone:
        start.wait(timeout)


def wait_for_pass(vector: object, timeout: float = WAIT_S) -> None:
    """Let a query's embedding under way (an Embedding) begin its pass before this thread's work."""
    if isinstance(vector, Embedding) and not vector.done():
        vector.began.wait(timeout)
