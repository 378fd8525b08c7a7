"""A served path and its in-process reference timed in alternating blocks, so that both meet one machine.

A face's ratio goal (served p50 over the engine's and the embedding's own p50s) compares two
measurements. Timed one after the other, minutes apart, they meet different machines: on a shared
host the load moves the speed of both by a third and more within minutes, so the ratio moved
1.13-1.78 between runs of one tree. Here the two alternate in blocks of a few queries (`blocks`):
the served block, then the same queries in process, then the next block; each side's samples are
pooled over the blocks and their p50s divided. Each block starts with one untimed call on each side
(a query of its own), so that each timed call follows one of its kind, as in an unbroken loop.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def blocks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """`items` in consecutive blocks of `size` (the last one may be shorter)."""
    if size < 1:
        raise ValueError(f"a block holds at least one item, got {size}")
    for start in range(0, len(items), size):
        yield items[start:start + size]


def each_ms(call: Callable[[str, Any], object], pairs: Iterable[tuple[str, Any]],
            clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """Each call's time in milliseconds on `clock`, one (query, vector) pair after another."""
    out = []
    for q, v in pairs:
        began = clock()
        call(q, v)
        out.append((clock() - began) * 1000)
    return out


def task_cpu_ns(pid: int) -> int | None:
    """CPU nanoseconds every live thread of process `pid` has run (the scheduler's own account, to the
    nanosecond, where /proc/PID/stat counts clock ticks of 10 ms); None when the process is gone."""
    total = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, IndexError, ValueError):  # a thread that ended meanwhile
                continue
    except OSError:
        return None
    return total


@dataclass
class Samples:
    """Millisecond samples by name, pooled over blocks."""

    by_name: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, values: Sequence[float]) -> None:
        """Add one block's samples of `name`."""
        self.by_name.setdefault(name, []).extend(values)

    def p50(self, name: str) -> float:
        """The median of every sample of `name`."""
        return statistics.median(self.by_name[name])

    def p99(self, name: str) -> float:
        """The 99th percentile (nearest rank) of every sample of `name`."""
        ordered = sorted(self.by_name[name])
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]

    def count(self, name: str) -> int:
        """How many samples of `name`."""
        return len(self.by_name.get(name, ()))
