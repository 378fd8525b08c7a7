"""Many readers or one writer, the writer first: a waiting write holds back new reads.

Searches read and writes apply changes. With readers first, a steady stream of overlapping
searches would keep a write (and every search's view of it) waiting for as long as the stream
lasts; here a write waits only for the searches already running, and searches that arrive
after it wait for it (a write applies a batch in milliseconds). Not reentrant: a thread holding
the lock must not take it again (a nested read would wait behind a waiting writer for ever).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class RWLock:
    """Many readers or one writer; waiting writers go before new readers."""

    def __init__(self) -> None:
        """Start unlocked."""
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    @contextmanager
    def read(self) -> Iterator[None]:
        """Hold the lock for reading (after every writer already waiting)."""
        with self._cond:
            while self._writer or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        """Hold the lock for writing (once the readers already in have left)."""
        with self._cond:
            self._writers_waiting += 1
            try:
                while self._writer or self._readers:
                    self._cond.wait()
            finally:
                self._writers_waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()
