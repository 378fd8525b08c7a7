"""Prometheus metrics of the service (`GET /metrics`), named like the reference's `engram_*` series.

Every label takes a bounded set of values: routes are the route table's templates (or
`unmatched`), methods are the standard ones (or `other`), codes are HTTP statuses, faces and
results are fixed lists. With `serve --workers` each process writes its values to files in
`PROMETHEUS_MULTIPROC_DIR` (set by the parent before the workers start) and a scrape answered by
any worker adds them up (prometheus-client's multiprocess mode).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
    multiprocess,
)
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram_index.embed.base import Embedder
from engram_index.exchange import Exchange
from engram_index.engine.types import ModelIdentity

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
disable_created_metrics()  # type: ignore[no-untyped-call] # `*_created` series double every counter and say nothing an alert uses

# The reference's buckets: 1 ms … 60 s for requests, up to an hour for lag.
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
LAG_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"

# The search route of each face: its searches are counted by face and result.
SEARCH_ROUTES = {
    "/xrpc/garden.engram.searchMemories": "garden.engram",
    "/ns/{namespace}/search": "supermemory",
    "/v1/memory/retrieve": "kindgi",
}
SEARCH_RESULTS = ("ok", "rate_limited", "busy", "invalid", "error")
# What a refusal's status means; every other status is not a refusal.
REFUSALS = {401: "unauthenticated", 403: "forbidden", 408: "timeout", 413: "too_large",
            429: "rate_limited", 503: "busy"}

REGISTRY = CollectorRegistry()
HTTP_REQUESTS = Counter("engram_http_requests_total", "HTTP requests answered, by route template, method and code.",
                        ["route", "method", "code"], registry=REGISTRY)
HTTP_DURATION = Histogram("engram_http_request_duration_seconds", "Time to answer an HTTP request, by route.",
                          ["route"], buckets=DURATION_BUCKETS, registry=REGISTRY)
HTTP_IN_FLIGHT = Gauge("engram_http_requests_in_flight", "HTTP requests being answered now.",
                       registry=REGISTRY, multiprocess_mode="livesum")
SEARCHES = Counter("engram_searches_total", "Searches by face and result (ok, rate_limited, busy, invalid, error).",
                   ["face", "result"], registry=REGISTRY)
QUERY_EMBEDDING = Histogram("engram_query_embedding_duration_seconds", "Time to embed one batch of queries.",
                            buckets=DURATION_BUCKETS, registry=REGISTRY)
INDEX_LAG = Histogram("engram_index_lag_seconds",
                      "Time from a write's durable commit (its acknowledgement) to its being searchable.",
                      buckets=LAG_BUCKETS, registry=REGISTRY)
MEMORIES = Gauge("engram_memories", "Documents searchable in the loaded collections.",
                 registry=REGISTRY, multiprocess_mode="livemostrecent")
COLLECTIONS_LOADED = Gauge("engram_collections_loaded", "Collections (spaces, namespaces, tenants) with a loaded index.",
                           registry=REGISTRY, multiprocess_mode="livemostrecent")
COLLECTIONS = Gauge("engram_collections", "Collections in the store.",
                    registry=REGISTRY, multiprocess_mode="livemostrecent")
REFUSED = Counter("engram_refusals_total", "Requests refused, by reason.", ["reason"], registry=REGISTRY)

# Alerting counters exist at 0 before anything happens, so that rate() has a series to start from.
for _face in SEARCH_ROUTES.values():
    for _result in SEARCH_RESULTS:
        SEARCHES.labels(_face, _result)
for _reason in sorted(set(REFUSALS.values())):
    REFUSED.labels(_reason)


def multiprocess_dir() -> str | None:
    """The directory multiprocess mode writes to (None: this process keeps its values in memory)."""
    return os.environ.get(MULTIPROC_ENV) or None


def search_result(status: int) -> str:
    """A search's result label from its answer's status."""
    if status < 400:
        return "ok"
    if status == 429:
        return "rate_limited"
    if status == 503:
        return "busy"
    return "invalid" if status < 500 else "error"


def record(route: str, method: str, status: int, seconds: float) -> None:
    """Count one answered request (and its search and refusal, if it was one)."""
    key = (route, method if method in METHODS else "other", status)
    children = _RECORDERS.get(key)
    if children is None:
        children = _RECORDERS[key] = _children(*key)
    requests, duration, extras = children
    requests.inc()
    duration.observe(seconds)
    for extra in extras:
        extra.inc()


# Each (route, method, status)'s labelled series, found once: labels() costs a lock, a tuple and
# string checks per call. Bounded as the labels are: routes, methods, HTTP statuses.
_RECORDERS: dict[tuple[str, str, int], tuple[Any, Any, tuple[Any, ...]]] = {}


def _children(route: str, method: str, status: int) -> tuple[Any, Any, tuple[Any, ...]]:
    """The series one answered request of (route, method: a standard one or "other", status) adds to."""
    extras = []
    face = SEARCH_ROUTES.get(route)
    if face is not None:
        extras.append(SEARCHES.labels(face, search_result(status)))
    reason = REFUSALS.get(status)
    if reason is not None:
        extras.append(REFUSED.labels(reason))
    return (HTTP_REQUESTS.labels(route, method, str(status)),
            HTTP_DURATION.labels(route), tuple(extras))


def requests_in_flight() -> int:
    """HTTP requests this process is answering now (the one asking included): those inside the app, or,
    served by engram_index.protocol, every one read whose answer has not ended (several read in one turn
    of the event loop count before any of them reaches the app)."""
    return max(HttpMetrics.in_flight, Exchange.answering)


class HttpMetrics:
    """ASGI middleware counting every HTTP request by the template of the route it matched."""

    in_flight = 0  # this process's requests being answered (a search alone may run on the loop's thread)

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        """Wrap `app`, whose router holds `routes` (their endpoints name their templates)."""
        self.app = app
        self.templates: dict[Any, str] = {}
        for route in routes:
            if isinstance(route, Route):
                self.templates.setdefault(route.endpoint, route.path)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer the request, then record it (also when the app raised)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = [500]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        HTTP_IN_FLIGHT.inc()
        HttpMetrics.in_flight += 1
        began = time.perf_counter()
        try:
            await self.app(scope, receive, sending)
        finally:
            HttpMetrics.in_flight -= 1
            HTTP_IN_FLIGHT.dec()
            # The router wrote the matched route's endpoint into the scope (also on a 405).
            route = self.templates.get(scope.get("endpoint"), UNMATCHED)
            record(route, str(scope.get("method", "")), status[0], time.perf_counter() - began)


class TimedEmbedder:
    """An embedder whose query embeddings are timed into engram_query_embedding_duration_seconds."""

    def __init__(self, inner: Embedder) -> None:
        """Time `inner`'s query embeddings; everything else passes through."""
        self.inner = inner
        self.identity: ModelIdentity = inner.identity

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed documents (not timed: they are not on a search's path)."""
        return self.inner.embed_documents(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed queries, timing the call."""
        with QUERY_EMBEDDING.time():
            return self.inner.embed_queries(texts)

    def close(self) -> None:
        """Close the embedder."""
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        """Whatever else the embedder has (its limits, its batch size)."""
        return getattr(self.inner, name)


def timed(embedder: Embedder | None) -> Embedder | None:
    """`embedder` with its query embeddings timed (once, however often it is passed here)."""
    if embedder is None or isinstance(embedder, TimedEmbedder):
        return embedder
    return TimedEmbedder(embedder)


def observe_lag(seconds: float) -> None:
    """Record how long an acknowledged write waited to become searchable."""
    INDEX_LAG.observe(max(0.0, seconds))


def set_loaded(spaces: Any) -> None:
    """Set the collection gauges from a `Collections` (what this process has loaded)."""
    names = spaces.store.collections()
    loaded = [index for index in map(spaces.loaded, names) if index is not None]
    COLLECTIONS.set(len(names))
    COLLECTIONS_LOADED.set(len(loaded))
    MEMORIES.set(sum(len(index) for index in loaded))


def exposition() -> tuple[bytes, str]:
    """The metrics text (and its content type): this process's, or every worker's in multiprocess mode."""
    registry = REGISTRY
    if multiprocess_dir() is not None:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return generate_latest(registry), CONTENT_TYPE_LATEST


async def metrics_endpoint(request: Request) -> Response:
    """GET /metrics: the Prometheus text format."""
    set_loaded(request.app.state.spaces)
    body, content_type = exposition()
    return Response(body, media_type=content_type)


def process_exited(pid: int | None = None) -> None:
    """Drop a finished worker's live gauges from the multiprocess files."""
    if multiprocess_dir() is not None:
        multiprocess.mark_process_dead(pid if pid is not None else os.getpid())  # type: ignore[no-untyped-call]
