"""Work that the thread making a query's vector runs as soon as it has made it, unless the caller runs it first.

A v5 hybrid search has two collections to search once its query vector is there. The thread
that made the vector is awake at that moment, while the search's own thread still has to be woken
(~0.2 ms on a busy machine: bench/v5_timeline.py). So one collection's search and take run on
the vector's thread at once (`AfterVector`), while the search's thread does the other; each
collection's compiled rest lets go of the GIL, so the two overlap on two cores.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, TypeVar

T = TypeVar("T")


class AfterVector(Generic[T]):
    """`work` run once `vector` is done, on the thread that completes it; `result` waits for it, or runs it on
    the caller's thread when that thread has not begun it (a busy machine may not run the vector's
    thread again soon). Either way it runs exactly once, and its error is `result`'s."""

    __slots__ = ("_work", "_done")

    def __init__(self, vector: Future[object], work: Callable[[], T]) -> None:
        """Have `vector`'s completion run `work` (at once, here, when `vector` is done already)."""
        self._work = work
        self._done: Future[T] = Future()
        vector.add_done_callback(self._run)

    def _run(self, _: object) -> None:
        """Run the work where the vector was made, unless the caller has taken it."""
        if not self._done.set_running_or_notify_cancel():
            return  # (the caller runs it)
        try:
            self._done.set_result(self._work())
        except BaseException as exc:  # its error is the caller's, from `result`
            self._done.set_exception(exc)

    def result(self) -> T:
        """The work's answer (or its error): waited for when it has begun elsewhere, else made here."""
        if self._done.cancel():
            return self._work()
        return self._done.result()
