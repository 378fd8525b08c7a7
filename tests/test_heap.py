"""The trims that give freed heap memory back to the system."""

from __future__ import annotations

import pytest

from engram_index import heap
from engram_index.heap import Trimmer, release_free_memory


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_releasing_free_memory_runs_on_this_c_library() -> None:
    assert release_free_memory() in (True, False)


def test_no_trim_without_work() -> None:
    clock = Clock()
    trimmer = Trimmer(5.0, clock)
    clock.now = 100.0
    assert not trimmer.tick()


def test_a_trim_follows_work_at_most_once_per_interval_and_once_more_after_the_last_work() -> None:
    clock = Clock()
    trimmer = Trimmer(5.0, clock)
    trimmer.worked()
    clock.now = 1.0
    assert not trimmer.tick()  # within the interval of the start
    clock.now = 4.0
    trimmer.worked()
    clock.now = 5.0
    assert trimmer.tick()
    clock.now = 6.0
    assert not trimmer.tick()  # within the interval of the last trim
    clock.now = 10.0
    assert trimmer.tick()  # the one after the last work (merges end after commits)
    clock.now = 100.0
    assert not trimmer.tick()  # no work since: nothing to give back


ARENAS_SCRIPT = r"""
import ctypes, ctypes.util, sys, tempfile, threading
from engram_index.heap import limit_arenas
limit = int(sys.argv[1])
if limit:
    assert limit_arenas(limit)
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.fclose.argtypes = [ctypes.c_void_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
barrier = threading.Barrier(8)

def work():
    barrier.wait()
    for p in [libc.malloc(4096) for _ in range(500)]:
        libc.free(p)

threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
with tempfile.NamedTemporaryFile(suffix=".xml") as out:
    f = libc.fopen(out.name.encode(), b"w")
    libc.malloc_info(0, f)
    libc.fclose(f)
    print(open(out.name).read().count("<heap nr="))
"""


def _arenas_after_eight_threads(limit: int) -> int:
    """How many malloc arenas a fresh process has after eight threads allocated, under `limit` (0: glibc's)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run([sys.executable, "-c", ARENAS_SCRIPT, str(limit)], capture_output=True, text=True,
                          env=env, check=True, timeout=60)
    return int(done.stdout.strip())


def test_limiting_malloc_arenas_keeps_threads_to_that_many_heaps() -> None:
    if heap._LIBC is None:
        pytest.skip("not glibc: no per-thread malloc arenas to limit")
    assert _arenas_after_eight_threads(0) > 2  # glibc gives each new thread an arena of its own
    assert _arenas_after_eight_threads(2) <= 2
