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


def _face_route(name: str, path: str, **options: Any) -> Any:
    from engram_index.endpoints import FaceRoute

    async def run(request: Request) -> PlainTextResponse:
        if request.query_params.get("fail"):  # the response itself fails as it is sent
            return _Failing(name)
        return PlainTextResponse(f"{name} {request.scope.get('endpoint') is run} {dict(request.path_params)}")

    return FaceRoute(path, run, **options)


class _Failing(PlainTextResponse):
    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("the response failed")


APP_ROUTES = [
    _face_route("face-get", "/xrpc/a.b"),
    _face_route("face-post", "/xrpc/a.c", methods=["POST"]),
    _face_route("face-param", "/ns/{ns}/search", methods=["POST"]),
    Route("/xrpc/_health", _named("plain")),
    *ROUTES,
]


class _Seen:
    """Middleware keeping the endpoint each request reached (as the metrics' middleware reads it)."""

    def __init__(self, app: Any, seen: list[Any]) -> None:
        self.app, self.seen = app, seen

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await self.app(scope, receive, send)
        finally:
            self.seen.append(getattr(scope.get("endpoint"), "__qualname__", None))


def _app_answer(app: Any, path: str, method: str, query: bytes = b"") -> tuple[int, bytes]:
    sent: list[Any] = []

    async def receive() -> Any:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "root_path": "", "query_string": query, "headers": [],
             "http_version": "1.1", "scheme": "http", "server": ("x", 80), "client": ("y", 1)}
    asyncio.run(app(scope, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


class _Recording(FaceRouter):
    """The app's router, keeping the path and method of each request it routed."""

    routed: list[tuple[str, str]]

    async def app(self, scope: Any, receive: Any, send: Any) -> None:
        self.__dict__.setdefault("routed", []).append((scope["path"], scope["method"]))
        await super().app(scope, receive, send)


def test_an_app_answers_its_exact_face_routes_past_the_router_as_starlette_would() -> None:
    from starlette.applications import Starlette
    from starlette.middleware import Middleware

    from engram_index.routing import FaceApp

    async def internal(request: Request, exc: Exception) -> PlainTextResponse:
        return PlainTextResponse(f"internal {exc}", status_code=500)

    apps, seen = [], []
    for cls, router in ((Starlette, Router), (FaceApp, _Recording)):
        kept: list[Any] = []
        app = cls(routes=APP_ROUTES, exception_handlers={Exception: internal},
                  middleware=[Middleware(_Seen, seen=kept)])
        app.router = router(APP_ROUTES, redirect_slashes=False)
        apps.append(app)
        seen.append(kept)
    plain, face = apps
    for path, method in itertools.product(PATHS + ["/xrpc/a.c", "/ns/x/search", "/xrpc/_health"], METHODS):
        assert _app_answer(face, path, method) == _app_answer(plain, path, method), (path, method)
    for app in apps:  # an error escaping the route's response reaches the app's handler of unexpected errors
        with __import__("pytest").raises(RuntimeError):  # (which answers, then raises on, as Starlette does)
            _app_answer(app, "/xrpc/a.b", "GET", b"fail=1")
    assert seen[0] == seen[1] and "_face_route.<locals>.run" in seen[1]
    assert face.direct_routes() == {"/xrpc/a.b": APP_ROUTES[0], "/xrpc/a.c": APP_ROUTES[1]}
    # Those were answered past the router (for a method they take); everything else went through it.
    routed = set(face.router.routed)  # type: ignore[attr-defined]
    assert not routed & {("/xrpc/a.b", "GET"), ("/xrpc/a.b", "HEAD"), ("/xrpc/a.c", "POST")}
    assert {("/xrpc/a.b", "POST"), ("/xrpc/a.c", "GET"), ("/ns/x/search", "POST")} <= routed
