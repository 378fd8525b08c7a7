"""Admission for any face: a token bucket per caller key and a cap on its requests at once.

Faces call `take(key)` before the expensive work of a request (parsing its body, decoding a
vector, embedding a query), so that a refusal costs little, and hold `slot(key)` around the work
itself. A refusal is `RateLimited` with the seconds after which a retry can be admitted; each face
answers it in its own envelope (429 with `Retry-After`). Nothing here knows HTTP.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from dataclasses import dataclass, field

from engram_index.errors import RateLimited

# Keys remembered at most: a full bucket is the same as a new one and goes first, then the oldest.
MAX_KEYS = 10_000
# Controlled delay, as in "Fail at Scale" (Maurer, ACM Queue 2015): a key's queue that has not been
# empty for CONGESTED_AFTER_S is a standing queue, not a burst, and a request arriving then waits at
# most CONGESTED_WAIT_S (a few searches' time: callers with more requests at once than slots still
# get theirs in turn). Waiting longer would only hold the caller's connection, so that its pool
# fills and every request behind it waits too (at twice capacity the garden face's p99 from the
# scheduled time grew to 20 s while each admitted search took 0.4 s).
CONGESTED_AFTER_S = 0.1
CONGESTED_WAIT_S = 0.05


class TokenBucket:
    """`rate` tokens a second up to `burst`; each request takes one or is refused."""

    def __init__(self, rate: float, burst: float) -> None:
        """Start full."""
        self.rate, self.burst = rate, burst
        self._tokens = burst
        self._stamp = time.monotonic()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        """Add what accrued since the last look (under the lock)."""
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    def take(self) -> bool:
        """Take a token if there is one."""
        with self._lock:
            self._refill()
            if self._tokens >= 1:
                self._tokens -= 1
                return True
            return False

    def wait_s(self) -> float:
        """Seconds until the next token (0 when one is there)."""
        with self._lock:
            self._refill()
            return max(0.0, (1 - self._tokens) / self.rate)

    def full(self) -> bool:
        """Whether the bucket has refilled to its burst (forgetting it changes nothing)."""
        with self._lock:
            self._refill()
            return self._tokens >= self.burst


class _Slots:
    """A key's slots for requests at once, and how many requests hold or wait for one."""

    def __init__(self, concurrent: int) -> None:
        """`concurrent` slots, none in use, no one waiting."""
        self.semaphore = asyncio.Semaphore(concurrent)
        self.users = 0
        self.waiting = 0
        self.empty_at = time.monotonic()  # when the queue of waiters was last seen empty

    def wait_s(self, queue_wait_s: float) -> float:
        """How long a request arriving now may wait: queue_wait_s, or CONGESTED_WAIT_S on a standing queue."""
        now = time.monotonic()
        if self.waiting == 0:
            self.empty_at = now
            return queue_wait_s
        return CONGESTED_WAIT_S if now - self.empty_at > CONGESTED_AFTER_S else queue_wait_s

    async def acquire(self, queue_wait_s: float) -> bool:
        """Take a slot, waiting as long as wait_s allows; False when none came in time."""
        wait = self.wait_s(queue_wait_s)
        self.waiting += 1
        try:
            await asyncio.wait_for(self.semaphore.acquire(), wait)
            return True
        except TimeoutError:
            return False
        finally:
            self.waiting -= 1
            if self.waiting == 0:
                self.empty_at = time.monotonic()


def retry_after_s(wait_s: float) -> int:
    """The whole seconds a client should wait (at least 1): what Retry-After carries."""
    return max(1, math.ceil(wait_s))


@dataclass
class Admission:
    """`rate` requests a second per key (up to `burst` at once), at most `concurrent` running per key.

    A request past the rate is refused at once; one past the concurrent cap waits at most
    `queue_wait_s` for a slot (CONGESTED_WAIT_S when the key's queue has stood for a while), then is
    refused. `noun` and `per` name what is counted in messages.
    """

    rate: float = 50.0
    burst: float = 100.0
    concurrent: int = 8
    queue_wait_s: float = 0.5
    noun: str = "requests"
    per: str = "key"
    _buckets: dict[str, TokenBucket] = field(default_factory=dict)
    _slots: dict[str, _Slots] = field(default_factory=dict)

    def take(self, key: str) -> None:
        """Take one of the key's tokens, or raise RateLimited with when to come back."""
        bucket = self._buckets.get(key)
        if bucket is None:
            self._forget_some()
            bucket = self._buckets[key] = TokenBucket(self.rate, self.burst)
        if not bucket.take():
            wait = retry_after_s(bucket.wait_s())
            raise RateLimited(f"more than {self.rate:g} {self.noun} a second for this {self.per}; retry after {wait} s",
                              retry_after_s=wait)

    def _forget_some(self) -> None:
        """Keep at most MAX_KEYS buckets: full ones go first (a new bucket is full), then the oldest."""
        if len(self._buckets) < MAX_KEYS:
            return
        for key in [k for k, b in self._buckets.items() if b.full()]:
            del self._buckets[key]
        while len(self._buckets) >= MAX_KEYS:
            del self._buckets[next(iter(self._buckets))]

    def slot(self, key: str) -> Slot:
        """One of the key's slots, held while the request runs (`async with`); RateLimited after queue_wait_s."""
        return Slot(self, key)

    def admit(self, key: str) -> Slot:
        """take(key), then a slot to hold (`async with`)."""
        self.take(key)
        return Slot(self, key)


class Slot:
    """`async with`: one of a key's slots held (a class: an async generator's context manager cost ~3 µs more)."""

    __slots__ = ("admission", "key", "slots")

    def __init__(self, admission: Admission, key: str) -> None:
        """A slot of `key` under `admission`'s limits, not yet held."""
        self.admission, self.key = admission, key
        self.slots: _Slots | None = None

    async def __aenter__(self) -> None:
        """Take the slot, waiting at most the admission's wait; RateLimited when none came."""
        admission, key = self.admission, self.key
        slots = admission._slots.get(key)
        if slots is None:
            slots = admission._slots[key] = _Slots(admission.concurrent)
        slots.users += 1
        try:
            if slots.semaphore.locked():  # only then is there a wait to bound (wait_for costs a task)
                if not await slots.acquire(admission.queue_wait_s):
                    raise RateLimited(f"more than {admission.concurrent} {admission.noun} at once for this {admission.per}",
                                      retry_after_s=1)
            else:
                await slots.semaphore.acquire()
        except BaseException:
            self._leave(slots)
            raise
        self.slots = slots

    async def __aexit__(self, *exc: object) -> None:
        """Give the slot back."""
        slots = self.slots
        if slots is not None:
            self.slots = None
            slots.semaphore.release()
            self._leave(slots)

    def _leave(self, slots: _Slots) -> None:
        """One user fewer; an idle key's slots are forgotten (a new one is the same, and keys do not pile up)."""
        slots.users -= 1
        if slots.users == 0:
            del self.admission._slots[self.key]
