"""Which Idempotency-Keys the store may keep an answer for: a Bloom filter, so that a key never seen
(nearly every request's: the SDK sends a fresh one each time) is claimed without a store read.

It never misses a key it was told of; of the others it takes about one in six thousand for one
(at a million keys; more as keys accumulate), and the store is then read as before. It holds no
key itself, only bits (4 MiB), and lives in one process's memory.
"""

from __future__ import annotations

BITS = 1 << 25
_HALF = (1 << 32) - 1


class SeenKeys:
    """A Bloom filter over keys (four places each, from the key's hash). Not thread-safe: its owner
    serialises every call."""

    def __init__(self, bits: int = BITS) -> None:
        """An empty filter of `bits` bits (a power of two)."""
        if bits < 8 or bits & (bits - 1):
            raise ValueError(f"bits must be a power of two of at least 8, got {bits}")
        self._bits = bytearray(bits // 8)
        self._mask = bits - 1
        self.count = 0

    def _places(self, key: str) -> tuple[int, int, int, int]:
        """The key's four bit places: double hashing of the two halves of its (per-process) hash."""
        h = hash(key)
        low, high = h & _HALF, ((h >> 32) & _HALF) | 1
        mask = self._mask
        return low & mask, (low + high) & mask, (low + 2 * high) & mask, (low + 3 * high) & mask

    def add(self, key: str) -> None:
        """Remember that the store may hold `key`."""
        bits = self._bits
        for place in self._places(key):
            bits[place >> 3] |= 1 << (place & 7)
        self.count += 1

    def may_hold(self, key: str) -> bool:
        """False only for a key never added."""
        bits = self._bits
        return all(bits[place >> 3] & (1 << (place & 7)) for place in self._places(key))
