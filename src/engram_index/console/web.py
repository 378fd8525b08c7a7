"""The web page at `/` and the small JSON API it calls (`/console/api/…`), over the access layer.

The page is package data (static/): no build step. The API forwards the page's Authorization
header to the faces (the access layer), so the page signs in with exactly the faces' credentials.
"""

from __future__ import annotations

from importlib import resources
from typing import Any, Awaitable, Callable

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from engram_index.console.access import Console, Query, Refused, credential_of

STATIC = {"index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8",
          "app.css": "text/css; charset=utf-8"}
MAX_BODY = 64 * 1024
# The page's own policy: nothing but this origin's scripts, styles and API.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:;"
       " base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def _json(status: int, payload: Any) -> Response:
    """A JSON answer of the page's API."""
    return Response(orjson.dumps(payload), status_code=status, media_type="application/json",
                    headers={"cache-control": "no-store"})


def _static(name: str) -> Callable[[Request], Awaitable[Response]]:
    """The handler serving one file of the page."""
    async def serve(request: Request) -> Response:
        body = resources.files("engram_index.console").joinpath("static", name).read_bytes()
        return Response(body, media_type=STATIC[name], headers={"content-security-policy": CSP,
                                                               "x-content-type-options": "nosniff"})
    return serve


def _console(request: Request) -> Console:
    """The caller of a page request: its bearer key or space credential (or none), against this app."""
    from engram_index.console.wiring import app_console

    return app_console(request.app, *credential_of(request.headers))


def _api(handler: Callable[[Request, Console], Awaitable[Any]]) -> Callable[[Request], Awaitable[Response]]:
    """A page API route: its refusals as `{error, message}` with the face's status."""
    async def run(request: Request) -> Response:
        try:
            return _json(200, await handler(request, _console(request)))
        except Refused as exc:
            return _json(exc.status, {"error": "Refused", "message": exc.message})
    return run


def _param(request: Request, name: str) -> str:
    """A required query parameter."""
    value = request.query_params.get(name)
    if not value:
        raise Refused(f"query parameter `{name}` is required")
    return value


async def _body(request: Request) -> dict[str, Any]:
    """The JSON object a POST carries (bounded)."""
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise Refused(f"the body is larger than {MAX_BODY} bytes", 413)
    try:
        body = orjson.loads(raw or b"{}")
    except orjson.JSONDecodeError:
        raise Refused("the body is not JSON") from None
    if not isinstance(body, dict):
        raise Refused("the body must be a JSON object")
    return body


async def collections(request: Request, c: Console) -> Any:
    """GET /console/api/collections."""
    return {"face": c.face, "collections": await c.list_collections()}


async def recall(request: Request, c: Console) -> Any:
    """POST /console/api/recall {collection, query, limit?, mode?, author?, tags?, since?, metadata?}."""
    body = await _body(request)
    try:
        limit = int(body.get("limit") or 10)
    except (TypeError, ValueError):
        raise Refused("limit must be a whole number") from None
    tags = body.get("tags") or []
    metadata = body.get("metadata") or {}
    if not isinstance(tags, list) or not isinstance(metadata, dict):
        raise Refused("tags must be a list and metadata an object")
    q = Query(str(body.get("query") or ""), limit, body.get("mode") or None, body.get("author") or None,
              [str(t) for t in tags], body.get("since") or None, metadata)
    return await c.recall(str(body.get("collection") or ""), q)


async def memory(request: Request, c: Console) -> Any:
    """GET /console/api/memory?collection=&id=."""
    return await c.get(_param(request, "collection"), _param(request, "id"))


async def page(request: Request, c: Console) -> Any:
    """GET /console/api/list?collection=&limit=&cursor=."""
    raw = request.query_params.get("limit", "25")
    if not raw.isdigit():
        raise Refused("limit must be a whole number")
    return await c.page(_param(request, "collection"), int(raw), request.query_params.get("cursor"))


def web_routes() -> list[Route]:
    """The page and its API."""
    return [
        Route("/", _static("index.html")),
        Route("/console/app.js", _static("app.js")),
        Route("/console/app.css", _static("app.css")),
        Route("/console/api/collections", _api(collections)),
        Route("/console/api/recall", _api(recall), methods=["POST"]),
        Route("/console/api/memory", _api(memory)),
        Route("/console/api/list", _api(page)),
    ]
