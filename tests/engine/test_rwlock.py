"""The index's lock: many readers or one writer, and a waiting writer goes before new readers."""

from __future__ import annotations

import threading

from engram_index.engine.rwlock import RWLock


def _until(condition: object) -> None:
    """Wait (without a time bound) until a condition, polled, holds."""
    while not condition():  # type: ignore[operator]
        threading.Event().wait(0.001)


def test_readers_hold_the_lock_together() -> None:
    lock, inside, go = RWLock(), [], threading.Event()

    def read() -> None:
        with lock.read():
            inside.append(1)
            go.wait()

    readers = [threading.Thread(target=read) for _ in range(3)]
    for t in readers:
        t.start()
    _until(lambda: len(inside) == 3)  # all three in at once
    go.set()
    for t in readers:
        t.join()


def test_a_waiting_writer_goes_before_readers_that_arrive_after_it() -> None:
    lock, order = RWLock(), []
    first_in, release_first = threading.Event(), threading.Event()

    def first_reader() -> None:
        with lock.read():
            first_in.set()
            release_first.wait()

    def writer() -> None:
        with lock.write():
            order.append("write")

    def late_reader() -> None:
        with lock.read():
            order.append("read")

    holder = threading.Thread(target=first_reader)
    holder.start()
    first_in.wait()
    w = threading.Thread(target=writer)
    w.start()
    _until(lambda: lock._writers_waiting == 1)
    r = threading.Thread(target=late_reader)
    r.start()
    # The late reader may not pass the waiting writer, even though only a reader holds the lock.
    threading.Event().wait(0.05)
    assert order == []
    release_first.set()
    for t in (holder, w, r):
        t.join()
    assert order == ["write", "read"]


def test_a_writer_excludes_readers_and_other_writers() -> None:
    lock, log, go = RWLock(), [], threading.Event()

    def write(name: str) -> None:
        with lock.write():
            log.append(f"{name} in")
            go.wait()
            log.append(f"{name} out")

    a = threading.Thread(target=write, args=("a",))
    a.start()
    _until(lambda: log == ["a in"])
    b = threading.Thread(target=write, args=("b",))
    b.start()
    go.set()
    for t in (a, b):
        t.join()
    assert log in (["a in", "a out", "b in", "b out"],)
