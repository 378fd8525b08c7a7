"""The one place that wires storage, engine and API into an ASGI application."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from . import __version__
from .api.search import search_memories
from .api.xrpc import error_response, xrpc
from .spaces import Spaces

log = logging.getLogger("engram_index")


def did_document(service_did: str) -> dict[str, Any]:
    """The service's did:web document."""
    host = service_did.removeprefix("did:web:").replace("%3A", ":")
    return {
        "@context": ["https://www.w3.org/ns/did/v1"],
        "id": service_did,
        "service": [
            {"id": "#engram_index", "type": "EngramIndex", "serviceEndpoint": f"https://{host}"}
        ],
    }


def create_app(data_dir: Path, service_did: str, *, insecure_open: bool = False) -> Starlette:
    """Build the service for a data directory."""
    if not insecure_open:
        raise SystemExit(
            "space credentials are not verified yet: serve only with --insecure-open (trusted networks)"
        )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        log.warning("serving WITHOUT authentication (--insecure-open): every caller can search every space")
        app.state.spaces = Spaces(data_dir)
        for uri in app.state.spaces.store.spaces():
            try:
                app.state.spaces.index_if_loaded(uri)
            except Exception:
                pass  # loading started in the background
        yield
        app.state.spaces.close()

    async def describe(request: Request) -> dict[str, Any]:
        return {"did": service_did, "version": __version__}

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"version": __version__})

    async def well_known(request: Request) -> JSONResponse:
        return JSONResponse(did_document(service_did))

    async def not_found(request: Request, exc: Exception) -> JSONResponse:
        return error_response(404, "MethodNotImplemented", f"no such method: {request.url.path}")

    routes = [
        Route("/xrpc/garden.engram.searchMemories", xrpc(search_memories)),
        Route("/xrpc/garden.engram.describeService", xrpc(describe)),
        Route("/xrpc/_health", health),
        Route("/.well-known/did.json", well_known),
    ]
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: not_found})
