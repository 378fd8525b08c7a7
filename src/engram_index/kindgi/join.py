"""The legs of a retrieve that run on threads of their own; the last one to finish runs what follows.

A `both` retrieve's keyword leg runs on a search pool thread while its query is embedded (and its
vector search runs) on the embedding thread. The answer needs both; whichever leg finishes second
forms it at once on its own thread, so that no third thread has to wake for it. The request's
coroutine waits for `done`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Generic, TypeVar

T = TypeVar("T")


class Join(Generic[T]):
    """Legs that arrive once each, in any order; the last to arrive runs `then` (unless a leg failed)."""

    def __init__(self, legs: int, then: Callable[[], T], absent: Sequence[int] = ()) -> None:
        """Wait for legs 0 .. legs - 1, but for those `absent` (this retrieve does not run them)."""
        self._then: Callable[[], T] | None = then
        self._waiting = legs - len(set(absent))
        self._errors: list[BaseException | None] = [None] * legs
        self._arrived = [leg in set(absent) for leg in range(legs)]
        self._lock = threading.Lock()
        self.done: Future[T] = Future()

    def arrived(self, leg: int) -> bool:
        """Whether leg `leg` has finished (or is not run): a leg still to come leaves time for work ahead."""
        with self._lock:
            return self._arrived[leg]

    def arrive(self, leg: int, error: BaseException | None = None) -> None:
        """Leg `leg` has finished (or failed with `error`). The last leg runs `then` here and settles `done`
        with its result; a failed leg settles it with its error instead, the first leg's before the second's
        (as a retrieve that runs its legs one after the other fails)."""
        with self._lock:
            self._errors[leg] = error
            self._arrived[leg] = True
            self._waiting -= 1
            if self._waiting:
                return
        # `then` closes over the retrieve, which holds this join: let go of it, so that the retrieve's state
        # (its bodies, vectors and futures) is freed when its request ends, not left to the cycle collector.
        then, self._then = self._then, None
        assert then is not None  # (the last leg arrives once)
        failed = next((e for e in self._errors if e is not None), None)
        if failed is not None:
            self.done.set_exception(failed)
            return
        try:
            result = then()
        except BaseException as exc:  # the request answers it as it would have on one thread
            self.done.set_exception(exc)
        else:
            self.done.set_result(result)
