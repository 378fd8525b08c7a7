"""Giving freed heap memory back to the system (glibc keeps what its per-thread arenas freed)."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import time
from typing import Any

log = logging.getLogger(__name__)


def _libc() -> Any:
    """glibc, when this process runs on it (None on other C libraries, where trimming is not needed)."""
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return lib if hasattr(lib, "malloc_trim") else None
    except OSError:
        return None


_LIBC = _libc()


def release_free_memory() -> bool:
    """Return the free pages of every malloc arena to the system; whether any were returned.

    tantivy's indexing and merge threads allocate and free tens of MB per commit, each in its
    own glibc arena; glibc gives a non-main arena's free pages back only at its top, so without
    this the resident set keeps what those threads freed (docs/design/reliability.md, the Kindgi
    fuzz and memory rows: bench/heap.py measures it).
    """
    if _LIBC is None:
        return False
    return bool(_LIBC.malloc_trim(0))


M_ARENA_MAX = -8  # mallopt's parameter number for the most arenas (glibc's malloc.h)


def limit_arenas(arenas: int) -> bool:
    """Let glibc's malloc use at most `arenas` heaps from now on; whether it could be set (False off glibc).

    glibc gives each new thread a heap of its own, up to 8 per core, and keeps what each frees
    until a trim: the service's resident set then swings by what the search, indexing and
    request threads freed since the last one (70 MB on v5 and Kindgi under load; reliability.md).
    """
    if _LIBC is None or arenas < 1:
        return False
    return bool(_LIBC.mallopt(M_ARENA_MAX, arenas))


class Trimmer:
    """Releases free memory at most every `interval` seconds, while there has been work since the last time."""

    def __init__(self, interval: float = 5.0, clock: Any = time.monotonic) -> None:
        """Trim no more often than every `interval` seconds."""
        self.interval = interval
        self.clock = clock
        self._last = clock()
        self._worked_at: float | None = None

    def worked(self) -> None:
        """Note work that frees memory (a commit, a compaction): a trim is due after it."""
        self._worked_at = self.clock()

    def tick(self) -> bool:
        """Trim when due; whether it did. One more trim follows the last work, for merges that end after it."""
        now = self.clock()
        if self._worked_at is None or now - self._last < self.interval:
            return False
        if now - self._worked_at >= self.interval:
            self._worked_at = None  # this trim is the one after the last work
        self._last = now
        release_free_memory()
        return True
