"""Starlette's router, trying for each request only the routes that its path's first segment can match.

Starlette tries every route in order until one matches: a v5 search went through 41 routes'
patterns first (~19 µs), a Kindgi retrieve through 21 (~11 µs). A route whose path begins with a
literal segment (`/ns/...`, `/v1/...`, `/xrpc/...`) can only match a path that begins with it, so
each first segment keeps the routes it can reach, in their order (routes whose first segment holds
a parameter are in every list): the first full match, or else the first partial one (a 405), is the
one Starlette's loop finds. A path none of them matches goes through Starlette's own loop, unchanged
(as does any request under a root path).

The app (`FaceApp`) goes further for a route of the faces' own (`FaceRoute`, whose endpoint answers
whatever it raises) at a path without parameters, such as garden's searchMemories or Kindgi's
retrieve: a request to it with a method it takes is handed to it by a dict lookup, past the router
and Starlette's ExceptionMiddleware (which has nothing of such a route's to handle), through the
same error middleware and the app's own middleware (the metrics). The layers and the router's
matching cost ~35 µs of CPU a served search (`bench/garden_path.py`'s A/B toggles: docs/design/service.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.body_limit import RequestBodyLimitMiddleware
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.routing import BaseRoute, Match, Mount, Route, Router, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from engram_index.endpoints import FaceRoute


def first_segment(path: str) -> str:
    """The first segment of a path ("xrpc" of "/xrpc/x", "" of "/")."""
    return path.split("/", 2)[1] if path.startswith("/") else path


def literal_first_segment(route: BaseRoute) -> str | None:
    """The first segment every path a route matches begins with, or None when it may begin with any."""
    if isinstance(route, (Route, Mount, WebSocketRoute)) and route.path.startswith("/"):
        segment = first_segment(route.path)
        return None if "{" in segment else segment
    return None  # a Host, or any other route: it may match any path


class FaceRouter(Router):
    """A Router whose loop over routes skips those a request path's first segment rules out."""

    def __init__(self, routes: Sequence[BaseRoute], **options: Any) -> None:
        """Starlette's router over `routes`, indexed by their first segment."""
        super().__init__(routes, **options)
        self._by_segment: dict[str, list[BaseRoute]] = {}
        self._anywhere: list[BaseRoute] = []  # for a segment no route names
        self._indexed = -1  # how many routes the index was made from

    def _index(self) -> None:
        """(Re)build the index from the routes (routes may be added after the router was made)."""
        firsts = [literal_first_segment(route) for route in self.routes]
        self._by_segment = {segment: [r for r, first in zip(self.routes, firsts) if first in (segment, None)]
                            for segment in set(firsts) if segment is not None}
        self._anywhere = [r for r, first in zip(self.routes, firsts) if first is None]
        self._indexed = len(self.routes)

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Route an HTTP request among the routes its path can match (anything else as Starlette does)."""
        if scope["type"] != "http" or scope.get("root_path"):
            await super().app(scope, receive, send)
            return
        if self._indexed != len(self.routes):
            self._index()
        if "router" not in scope:
            scope["router"] = self
        segment = first_segment(scope["path"])
        partial = None
        for route in self._by_segment.get(segment, self._anywhere):
            match, child_scope = route.matches(scope)
            if match is Match.FULL:
                scope["route"] = route
                scope.update(child_scope)
                await route.handle(scope, receive, send)
                return
            if match is Match.PARTIAL and partial is None:
                partial, partial_scope = route, child_scope
        if partial is not None:
            scope["route"] = partial
            scope.update(partial_scope)
            await partial.handle(scope, receive, send)
            return
        await super().app(scope, receive, send)  # no route: Starlette's own answer (a redirect, the 404)


class FaceApp(Starlette):
    """Starlette, with a request to a face's route of a path without parameters handed to it directly."""

    _direct: dict[str, Route] | None = None
    _direct_stack: ASGIApp | None = None

    def direct_routes(self) -> dict[str, Route]:
        """The routes answered past the router, by path: each FaceRoute whose path has no parameter."""
        if self._direct is None:
            self._direct = {}
            for route in self.router.routes:
                if isinstance(route, FaceRoute) and not route.param_convertors:
                    self._direct.setdefault(route.path, route)  # the first of a path, as the router finds it
        return self._direct

    def _build_direct_stack(self) -> ASGIApp:
        """Starlette's middleware stack (build_middleware_stack's) with the route in place of the
        ExceptionMiddleware and the router."""
        error_handler = None
        for key, value in self.exception_handlers.items():
            if key in (500, Exception):
                error_handler = value
        middleware = [Middleware(ServerErrorMiddleware, handler=error_handler, debug=self.debug)]
        if self.max_body_size is not None:
            middleware.append(Middleware(RequestBodyLimitMiddleware, max_body_size=self.max_body_size))
        middleware += self.user_middleware
        app: ASGIApp = _reached_route
        for cls, args, kwargs in reversed(middleware):
            app = cls(app, *args, **kwargs)
        return app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a request: past the router when it is for a direct route and a method it takes."""
        if scope["type"] == "http" and not scope.get("root_path"):
            route = self.direct_routes().get(scope["path"])
            if route is not None and (route.methods is None or scope["method"] in route.methods):
                scope["app"] = self
                if "router" not in scope:
                    scope["router"] = self.router
                scope["route"] = route
                scope["endpoint"] = route.endpoint
                scope["path_params"] = {}
                if self._direct_stack is None:
                    self._direct_stack = self._build_direct_stack()
                await self._direct_stack(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


async def _reached_route(scope: Scope, receive: Receive, send: Send) -> None:
    """The direct route a request was handed to (`FaceApp`), answering it."""
    await scope["route"].app(scope, receive, send)
