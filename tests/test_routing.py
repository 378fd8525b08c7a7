"""The app's router takes every request to the route Starlette's own loop over all routes takes it to."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route, Router

from engram_index.routing import FaceRouter


def _named(name: str) -> Any:
    async def endpoint(request: Request) -> PlainTextResponse:
        return PlainTextResponse(name)

    return endpoint


ROUTES = [
    Route("/xrpc/a.b", _named("xrpc-get")),
    Route("/xrpc/a.b", _named("xrpc-post"), methods=["POST"]),
    Route("/{anything}/search", _named("param-first"), methods=["POST"]),
    Route("/ns/{ns}/search", _named("ns-search"), methods=["POST"]),
    Route("/ns/{ns}", _named("ns")),
    Route("/v1/memory/{rest:path}", _named("memory")),
    Mount("/console", routes=[Route("/page", _named("console-page"))]),
    Route("/", _named("root")),
]
PATHS = ["/xrpc/a.b", "/xrpc/a.c", "/ns/x/search", "/ns/x", "/ns", "/v1/memory/facts/1", "/v1/memory",
         "/other/search", "/console/page", "/console", "/", "", "/xrpc/a.b/", "//ns/x"]
METHODS = ["GET", "POST", "HEAD", "PUT"]


def _answer(router: Router, path: str, method: str) -> tuple[int, bytes]:
    """The status and body a router answers a request with."""
    sent: list[Any] = []

    async def receive() -> Any:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "root_path": "", "query_string": b"", "headers": []}
    asyncio.run(router(scope, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def test_every_path_and_method_reaches_the_route_starlettes_loop_reaches() -> None:
    plain, indexed = Router(ROUTES, redirect_slashes=False), FaceRouter(ROUTES, redirect_slashes=False)
    for path, method in itertools.product(PATHS, METHODS):
        assert _answer(indexed, path, method) == _answer(plain, path, method), (path, method)


def test_a_route_added_after_the_router_was_made_is_reached() -> None:
    router = FaceRouter(list(ROUTES), redirect_slashes=False)
    assert _answer(router, "/late/x", "GET")[0] == 404
    router.routes.append(Route("/late/{x}", _named("late")))
    assert _answer(router, "/late/x", "GET") == (200, b"late")


def test_the_apps_routes_are_indexed_without_losing_one(tmp_path: Path) -> None:
    from engram_index.engram.auth import InsecureOpen
    from tests.limits import roomy_app

    app = roomy_app(tmp_path, "did:web:index.example", authenticator=InsecureOpen())
    assert isinstance(app.router, FaceRouter)
    router = app.router
    router._index()
    for route in router.routes:
        if isinstance(route, Route) and "{" not in route.path:
            reachable = router._by_segment.get(route.path.split("/", 2)[1], router._anywhere)
            assert route in reachable, route.path
