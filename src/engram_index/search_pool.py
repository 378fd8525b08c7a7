"""One pool of search threads for every face, each search with a deadline that frees its slot.

A search takes one of `threads` slots (waiting in a queue of at most `queue` searches, FIFO) and
runs on a pool thread; its caller waits at most until the deadline, counted from its arrival.
A search still running then is answered `SearchTimedOut` and its slot goes to the next search at
once: the overrunning search finishes on one of the pool's spare threads (there are `threads`
spares; while all of them hold overruns, slots are handed out only as overruns end), so a slow
search never holds the capacity of the ones behind it. Beyond the queue, `SearchBusy` at once.
Both are `Unavailable` (503): each face answers them in its own envelope.

A search from the event loop may run on the loop's own thread instead (`run`'s `inline_key`): when
no search holds a slot and the collection's last search took under `inline_max_s`. The hop to a
pool thread and back cost a served garden search ~0.3 ms of CPU at one client (of ~2.4: the other
core's caches are cold, two threads wake; docs/benchmarks.md, the twenty-third pass), so a lone
request's search runs where its request already is. Such a search cannot be cut at its deadline,
but it blocks the loop only for about as long as its collection's last search took, and the
caller asks for it only when its search waits for nothing else and its process has at most
`loop_depth` requests in flight: by default 1 (it is alone), and twice the cores when the server
runs at least as many processes as it has cores (`loop_depth_for`). Each core then has a loop of
its own and a pool thread adds no core, only the hop; but a process that got more than its share
of the connections still hands its searches to the pool, where they can take a second core from a
process with less to do (docs/design/service.md).

Threads: two per process by default. A search computes in numpy, tantivy and the C kernels
(which release the GIL) and in Python (which holds it): on a 2-core machine a third thread added
no throughput and only queued behind the GIL (docs/design/service.md). Callers are async (garden,
`run`) or threads (v5 and Kindgi, `run_sync`).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from engram_index.errors import Unavailable

T = TypeVar("T")

SEARCH_THREADS = 2
SEARCH_QUEUE = 64  # searches waiting for a slot at most (beyond: SearchBusy at once)
SEARCH_DEADLINE_S = 10.0  # from arrival to answer, queueing included
INLINE_MAX_S = 0.02  # a collection whose last search took less may be searched on the loop's thread


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (no affinity where the platform has none)
        return os.cpu_count() or 1


def loop_depth_for(processes: int) -> int:
    """The requests in flight up to which a process of a server of `processes` searches on its loop: 1 (only
    a lone request) unless the processes fill the cores, then twice the cores (at 32 clients on 2 workers,
    unbounded, a worker holding most of the connections doubled p99; docs/design/service.md)."""
    cores = usable_cores()
    return 2 * cores if processes >= cores else 1


class SearchBusy(Unavailable):
    """Every search slot is taken and the queue is full."""


class SearchTimedOut(Unavailable):
    """A search did not finish before its deadline (its slot went to the next search)."""


class _Waiter:
    """One search waiting for a slot: woken on its thread or on its event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self.granted = False
        self.event = threading.Event() if loop is None else None
        self.loop = loop
        self.future: asyncio.Future[None] | None = loop.create_future() if loop is not None else None

    def wake(self) -> None:
        """Tell the waiter it holds a slot now (called under the pool's lock)."""
        self.granted = True
        if self.event is not None:
            self.event.set()
        elif self.loop is not None and self.future is not None:
            self.loop.call_soon_threadsafe(_resolve, self.future)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _Expired(Exception):
    """A search's deadline passed while its caller waited on the event loop."""


def on_loop(done: Future[T], loop: asyncio.AbstractEventLoop) -> asyncio.Future[T]:
    """A future of `loop` that a thread's `done` settles (its result or error), unless its waiter left:
    one loop future and one callback, where `wrap_future` chains more."""
    answer: asyncio.Future[T] = loop.create_future()
    done.add_done_callback(lambda finished: loop.call_soon_threadsafe(_settle, answer, finished))
    return answer


def _settle(answer: asyncio.Future[T], done: Future[T]) -> None:
    """Hand a finished call's result (or error) to its caller waiting on the event loop, unless it stopped
    waiting (on the loop's thread)."""
    if answer.done():
        return
    if done.cancelled():  # the executor shut down before it ran
        answer.cancel()
        return
    error = done.exception()
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(done.result())


def _expire(answer: asyncio.Future[Any]) -> None:
    """The deadline: the caller stops waiting (its search runs on)."""
    if not answer.done():
        answer.set_exception(_Expired())


class SearchPool:
    """`threads` searches at once, a bounded FIFO queue, a deadline per search."""

    def __init__(self, threads: int = SEARCH_THREADS, queue: int = SEARCH_QUEUE,
                 deadline_s: float = SEARCH_DEADLINE_S, inline_max_s: float | None = None) -> None:
        """Start the pool (its threads start on demand); `inline_max_s` defaults to INLINE_MAX_S."""
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        self.threads, self.queue, self.deadline_s = threads, queue, deadline_s
        self.inline_max_s = INLINE_MAX_S if inline_max_s is None else inline_max_s
        # The requests in flight up to which a search from the loop may run on it (the module's docstring).
        self.loop_depth = 1
        # How long each collection's last search from the loop took (wall seconds), by the collection.
        self._last: weakref.WeakKeyDictionary[object, float] = weakref.WeakKeyDictionary()
        # Replaceable: bench/profile_search.py runs searches inline, to time them on one thread.
        self.executor: Executor = ThreadPoolExecutor(2 * threads, thread_name_prefix="search")
        self._lock = threading.Lock()
        self._running = 0  # slots held
        self._overrun = 0  # searches past their deadline, still on a thread
        self._waiters: deque[_Waiter] = deque()

    def idle(self) -> bool:
        """Whether no search holds a slot now (a moment's reading: a search may start right after)."""
        return self._running == 0 and not self._waiters

    def _free(self) -> bool:
        """Whether a slot can be given now (under the lock): one is free and a thread is too."""
        return self._running < self.threads and self._running + self._overrun < 2 * self.threads

    def _enter(self, loop: asyncio.AbstractEventLoop | None) -> _Waiter | None:
        """Take a slot (None) or join the queue (the waiter); SearchBusy when the queue is full."""
        with self._lock:
            if not self._waiters and self._free():
                self._running += 1
                return None
            if len(self._waiters) >= self.queue:
                raise SearchBusy("too many searches are running; retry shortly")
            waiter = _Waiter(loop)
            self._waiters.append(waiter)
            return waiter

    def _give_up(self, waiter: _Waiter) -> None:
        """A waiter's deadline passed (or its caller left): leave the queue, or give back the slot
        it was handed meanwhile."""
        with self._lock:
            if not waiter.granted:
                self._waiters.remove(waiter)
                return
        self._release()

    def _abandon(self, future: Future[Any]) -> None:
        """Free the slot of a search whose caller stopped waiting; it finishes on a spare thread."""
        self._release(overrun=True)
        future.add_done_callback(self._overrun_done)

    def _release(self, overrun: bool = False) -> None:
        """Give a slot back (to the first waiter, when one can run); `overrun`: its search runs on."""
        with self._lock:
            self._running -= 1
            self._overrun += overrun
            self._hand_out()

    def _overrun_done(self, _: Any) -> None:
        """An overrunning search finished: its thread is free again."""
        with self._lock:
            self._overrun -= 1
            self._hand_out()

    def _hand_out(self) -> None:
        """Wake queued searches while slots and threads are free (under the lock)."""
        while self._waiters and self._free():
            self._running += 1
            self._waiters.popleft().wake()

    def _timed_out(self, future: Future[Any], deadline_s: float) -> SearchTimedOut:
        """Free the slot of a search past its deadline, and the error its caller gets."""
        self._abandon(future)
        return SearchTimedOut(f"the search did not finish within {deadline_s:g} s")

    def run_sync(self, fn: Callable[..., T], *args: Any, deadline_s: float | None = None) -> T:
        """Run fn(*args) on a pool thread from a caller's thread, within the deadline."""
        budget = self.deadline_s if deadline_s is None else deadline_s
        limit = time.monotonic() + budget
        waiter = self._enter(None)
        if waiter is not None:
            assert waiter.event is not None
            if not waiter.event.wait(max(limit - time.monotonic(), 0.0)):
                self._give_up(waiter)
                raise SearchTimedOut("the search waited for a slot until its deadline")
        future = self.executor.submit(fn, *args)
        try:
            result = future.result(max(limit - time.monotonic(), 0.0))
        except FutureTimeout:
            raise self._timed_out(future, budget) from None
        except BaseException:
            self._release()
            raise
        self._release()
        return result

    def _inline(self, key: object) -> bool:
        """Whether a search of `key` may run on the loop's thread now: it takes the one slot when no search
        holds one and the collection's last search was quick."""
        last = self._last.get(key)
        if last is None or last >= self.inline_max_s:
            return False
        with self._lock:
            if self._running or self._waiters or not self._free():
                return False
            self._running += 1
            return True

    async def run(self, fn: Callable[..., T], *args: Any, deadline_s: float | None = None,
                  inline_key: object | None = None) -> T:
        """Run fn(*args) on a pool thread from the event loop, within the deadline. With `inline_key` (the
        collection it searches, weakly kept: from a caller whose fn waits for nothing else, and whose
        process has at most `loop_depth` requests in flight) it may run on the loop's thread instead (the
        module's docstring says when)."""
        if inline_key is None:
            return await self._pooled(fn, args, deadline_s)
        if self._inline(inline_key):
            try:
                return self._timed(inline_key, fn, *args)
            finally:
                self._release()
        # Timed on its thread: a wait for a slot is not the collection's (under load it would keep every
        # search of it off the loop).
        return await self._pooled(self._timed, (inline_key, fn, *args), deadline_s)

    def _timed(self, key: object, fn: Callable[..., T], *args: Any) -> T:
        """fn(*args), where it runs (the loop's thread or a pool thread), its time kept as its collection's last."""
        began = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self._last[key] = time.perf_counter() - began

    async def _pooled(self, fn: Callable[..., T], args: tuple[Any, ...], deadline_s: float | None) -> T:
        """`run` on a pool thread."""
        budget = self.deadline_s if deadline_s is None else deadline_s
        limit = time.monotonic() + budget
        loop = asyncio.get_running_loop()
        waiter = self._enter(loop)
        if waiter is not None:
            assert waiter.future is not None
            # The slot's future and one timer (wait_for would add a future, callbacks and a task's worth).
            queued = loop.call_later(max(limit - time.monotonic(), 0.0), _expire, waiter.future)
            try:
                await waiter.future
            except _Expired:
                self._give_up(waiter)
                raise SearchTimedOut("the search waited for a slot until its deadline") from None
            except asyncio.CancelledError:  # the caller left
                self._give_up(waiter)
                raise
            finally:
                queued.cancel()
        # One loop future settled from the search's thread and one timer for the deadline: what
        # wait_for(shield(wrap_future())) did with three futures and their callbacks, for less CPU.
        future = self.executor.submit(fn, *args)
        answer = on_loop(future, loop)
        timer = loop.call_later(max(limit - time.monotonic(), 0.0), _expire, answer)
        try:
            result = await answer
        except _Expired:
            raise self._timed_out(future, budget) from None
        except asyncio.CancelledError:  # the caller left: the search runs on, its slot is free
            self._abandon(future)
            raise
        except BaseException:
            self._release()
            raise
        finally:
            timer.cancel()
        self._release()
        return result

    def close(self) -> None:
        """Let running searches finish and stop the threads."""
        self.executor.shutdown(wait=True)
