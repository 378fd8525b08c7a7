"""Caches of values cheap to make again, bounded by starting over when full."""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Bounded(dict[K, V]):
    """A dict of at most `limit` entries that forgets them all when a new key would pass the limit.

    Why not least-recently-used: a hit stays one dict read (no reordering, no lock), and the keys
    that matter come back at once after a start-over (a query's words, a day's date, a document's
    fields). Its steps are dict operations, so threads may share one: two that fill it at once may
    both start it over, which costs only what it held.
    """

    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        """An empty cache of at most `limit` entries (at least one)."""
        if limit < 1:
            raise ValueError("a bounded cache holds at least one entry")
        super().__init__()
        self.limit = limit

    def keep(self, key: K, value: V) -> V:
        """Store `value` at `key`, first starting over when full and `key` is new; give `value` back."""
        if len(self) >= self.limit and key not in self:
            self.clear()
        self[key] = value
        return value
