"""Per-space admission: a token bucket for the rate and a cap on concurrent searches."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from engram_index.errors import RateLimited


class TokenBucket:
    """`rate` tokens a second up to `burst`; each request takes one or is refused."""

    def __init__(self, rate: float, burst: float) -> None:
        """Start full."""
        self.rate, self.burst = rate, burst
        self._tokens = burst
        self._stamp = time.monotonic()
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Take a token if there is one."""
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            if self._tokens >= 1:
                self._tokens -= 1
                return True
            return False


@dataclass
class SpaceLimits:
    """The admission settings: searches per second and burst per space, concurrent searches, wait."""

    rate: float = 50.0
    burst: float = 100.0
    concurrent: int = 8
    queue_wait_s: float = 0.5
    _buckets: dict[str, TokenBucket] = field(default_factory=dict)
    _slots: dict[str, asyncio.Semaphore] = field(default_factory=dict)

    @asynccontextmanager
    async def admit(self, space: str) -> AsyncIterator[None]:
        """Hold one of the space's search slots, or raise RateLimitExceeded."""
        bucket = self._buckets.setdefault(space, TokenBucket(self.rate, self.burst))
        if not bucket.take():
            raise RateLimited(f"more than {self.rate:g} searches a second for this space")
        slots = self._slots.setdefault(space, asyncio.Semaphore(self.concurrent))
        if slots.locked():  # only then is there a wait to bound (wait_for costs a task)
            try:
                await asyncio.wait_for(slots.acquire(), self.queue_wait_s)
            except TimeoutError:
                raise RateLimited(f"more than {self.concurrent} searches at once for this space") from None
        else:
            await slots.acquire()
        try:
            yield
        finally:
            slots.release()
