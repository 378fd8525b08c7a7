"""Waking the event loop from another thread, and a thread from the event loop, without holding the
GIL through the wake.

uvloop's `call_soon_threadsafe` writes to its wake-up descriptor while holding the GIL. On a busy
machine the write often lets the woken loop thread run at once on the writer's core: the writer is
then preempted holding the GIL, and no Python thread can run until it is scheduled again (a served
`both` retrieve's answer, handed to the loop that way, held the GIL ~0.2 ms a request in samples of
`py-spy record --gil`). Here the callback is queued first and the loop is woken by `os.write`, which
releases the GIL for the system call: the loop takes it and answers while the writer waits for it.
"""

from __future__ import annotations

import asyncio
import collections
import os
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any


class LoopWake:
    """Callbacks handed to one event loop from any thread, run there in the order handed."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        """Watch a new pipe on `loop` (call on the loop's thread)."""
        self._loop = loop
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._pending: collections.deque[tuple[Callable[..., Any], tuple[Any, ...]]] = collections.deque()
        self._closed = False
        loop.add_reader(self._read, self._drain)
        self._fds = weakref.finalize(self, _close_fds, self._read, self._write)

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run fn(*args) on the loop soon (from any thread)."""
        self._pending.append((fn, args))  # before the wake: the loop that reads the byte finds it
        try:
            os.write(self._write, b"\0")
        except BlockingIOError:  # the pipe is full of wakes the loop has yet to read: it will run this
            pass

    def _drain(self) -> None:
        """On the loop: read the wakes, run what was handed."""
        try:
            while os.read(self._read, 4096):
                pass
        except BlockingIOError:
            pass
        pending = self._pending
        while pending:
            fn, args = pending.popleft()
            fn(*args)

    def close(self) -> None:
        """Stop watching the pipe (on the loop's thread, while it runs or once it stopped). Its ends are
        closed once nothing holds this any more (a thread may still hand a callback, which is dropped):
        closed now, a descriptor reused meanwhile could be written to."""
        if self._closed:
            return
        self._closed = True
        if not self._loop.is_closed():
            self._loop.remove_reader(self._read)


def _close_fds(*fds: int) -> None:
    """Close the pipe's ends."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


class LoopWakes:
    """One LoopWake per event loop, made on first use on it."""

    def __init__(self) -> None:
        """None yet."""
        self._wakes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopWake] = weakref.WeakKeyDictionary()

    def of(self, loop: asyncio.AbstractEventLoop) -> LoopWake:
        """The LoopWake of `loop` (call on the loop's thread)."""
        wake = self._wakes.get(loop)
        if wake is None:
            wake = self._wakes[loop] = LoopWake(loop)
        return wake

    def close(self) -> None:
        """Close every LoopWake."""
        for wake in list(self._wakes.values()):
            wake.close()
        self._wakes.clear()


class PipeThreads(Executor):
    """A few threads running what is submitted, woken through a pipe: `submit` (from the event loop)
    queues the call first and then writes a byte with `os.write`, which releases the GIL for the
    system call, where a ThreadPoolExecutor's wake (a lock's release) holds it: the woken thread can
    take the GIL at once even when the waking one is preempted there (see the module's docstring)."""

    def __init__(self, threads: int, name: str) -> None:
        """Start `threads` threads named `name`_0, ... (daemons: `shutdown` stops them)."""
        self._read, self._write = os.pipe()
        self._pending: collections.deque[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = (
            collections.deque())
        self._lock = threading.Lock()
        self._shut = False
        self._threads = [threading.Thread(target=self._work, name=f"{name}_{i}", daemon=True) for i in range(threads)]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Run fn(*args) on one of the threads; its Future settles with what it returns or raises."""
        if kwargs:
            raise TypeError("PipeThreads.submit takes positional arguments only")
        future: Future[Any] = Future()
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot submit after shutdown")
            self._pending.append((future, fn, args))
        os.write(self._write, b"\0")  # one byte per call: one thread wakes for it
        return future

    def _work(self) -> None:
        """Wait for a byte (without the GIL), run the call queued for it; a None ends the thread."""
        while True:
            os.read(self._read, 1)
            item = self._pending.popleft()
            if item is None:
                return
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Run what was submitted, then stop the threads (and close the pipe once they stopped)."""
        with self._lock:
            if self._shut:
                return
            self._shut = True
            self._pending.extend([None] * len(self._threads))
        os.write(self._write, b"\0" * len(self._threads))
        if wait:
            for thread in self._threads:
                thread.join()
            _close_fds(self._read, self._write)
