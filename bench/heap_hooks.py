"""`engram-index` with memory hooks, for bench/heap.py only: never how the service is run.

SIGUSR1 writes the Python heap's size and highest size since the last time (tracemalloc, when ENGRAM_HEAP_TRACE is set) to the file
named by ENGRAM_HEAP_OUT; SIGUSR2 calls glibc's malloc_trim(0), giving every free page back.
"""

from __future__ import annotations

import ctypes
import gc
import os
import signal
import sys
import tracemalloc
from types import FrameType

if os.environ.get("ENGRAM_HEAP_TRACE"):
    tracemalloc.start(1)


def _python_heap(signum: int, frame: FrameType | None) -> None:
    """Append the traced Python heap's size and its highest since the last reading, in MB."""
    gc.collect()
    size, peak = tracemalloc.get_traced_memory() if tracemalloc.is_tracing() else (-2**20, -2**20)
    if tracemalloc.is_tracing():
        tracemalloc.reset_peak()
    with open(os.environ["ENGRAM_HEAP_OUT"], "a") as out:
        out.write(f"{size / 2**20:.1f} {peak / 2**20:.1f}\n")


def _trim(signum: int, frame: FrameType | None) -> None:
    """Give free heap pages back to the system."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)


signal.signal(signal.SIGUSR1, _python_heap)
signal.signal(signal.SIGUSR2, _trim)

from engram_index.cli import main  # noqa: E402

sys.argv[0] = "engram-index"
main()
