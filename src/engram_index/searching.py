"""Collections' searches: on the one search pool, each face search one job of it (Collections mixes this in).

A face's search may search several collections and do its own work around them; run as one job
of the pool (`run_job` from a thread, `searching` from the event loop), it takes one slot and one
deadline and makes one thread hop, and every search it makes runs inline on its thread. A request
whose vector is a Future (a query being embedded) runs its keyword pass first (SpaceIndex.start):
`search_many` and `start_many` run every collection's before any waits for the vector.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from engram_index.engine.search import SpaceIndex, StartedSearch
from engram_index.engine.types import SearchRequest, SearchResult
from engram_index.search_pool import SearchPool

T = TypeVar("T")


class Searching:
    """The searches of Collections, on its search pool."""

    searches: SearchPool

    if TYPE_CHECKING:
        def index(self, uri: str) -> SpaceIndex:
            """The collection's index (Collections.index)."""

    def search(self, uri: str, req: SearchRequest) -> SearchResult:
        """Search a collection (loading its index first when needed) on the search pool, within its deadline
        (inline in a job of the pool: `run_job`)."""
        if getattr(_job, "inside", False):
            return self.index(uri).search(req)
        return self.searches.run_sync(self.index(uri).search, req)

    def search_many(self, asks: Sequence[tuple[str, SearchRequest]]) -> list[SearchResult]:
        """Search several collections (each loaded first when needed) in one job on the search pool, one slot
        and one deadline for them all: what one search of a face asks of its collections, in one thread hop
        (none in a job of the pool already: `run_job`). A request's vector may be a Future (a query being
        embedded): every keyword pass runs before it is waited for (SpaceIndex.start)."""
        if not asks:
            return []
        indexes = [self.index(uri) for uri, _ in asks]
        return self.run_job(_search_each, indexes, [req for _, req in asks])

    def start_many(self, asks: Sequence[tuple[str, SearchRequest]]) -> list[StartedSearch]:
        """Several collections' searches begun (each loaded first when needed), their keyword passes run,
        the rest left to each one's `finish` (SpaceIndex.start): in a job of the search pool (`run_job`)."""
        return [index.start(req) for index, req in [(self.index(uri), req) for uri, req in asks]]

    def run_job(self, fn: Callable[..., T], *args: Any) -> T:
        """Run fn(*args), a search that may search several collections, as one job of the search pool (its
        slot, its deadline) from a thread: the searches it makes run inline, as does fn in a job already."""
        if getattr(_job, "inside", False):
            return fn(*args)
        done: T = self.searches.run_sync(_as_job, fn, *args)
        return done

    async def searching(self, fn: Callable[..., T], *args: Any) -> T:
        """`run_job` from the event loop: a face's whole search as one job of the search pool, one hop."""
        return await self.searches.run(_as_job, fn, *args)


def _search_each(indexes: Sequence[SpaceIndex], reqs: Sequence[SearchRequest]) -> list[SearchResult]:
    """Each index searched with its request (one job of the search pool): every one's keyword pass first,
    then each one's rest, so that a query vector still being embedded is waited for once all else is done."""
    started = [index.start(req) for index, req in zip(indexes, reqs)]
    return [search.finish() for search in started]


_job = threading.local()  # `inside`: this thread runs a job of `Collections.run_job` or `searching`


def _as_job(fn: Callable[..., T], *args: Any) -> T:
    """fn(*args) on a search pool thread, marked as a job of the pool (its searches run inline)."""
    _job.inside = True
    try:
        return fn(*args)
    finally:
        _job.inside = False
