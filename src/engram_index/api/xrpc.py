"""XRPC plumbing: query parameters and the one place that turns errors into responses."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..errors import EngramError

log = logging.getLogger("engram_index.api")

Handler = Callable[[Request], Awaitable[Any]]


def xrpc(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """Wrap a query handler: JSON out, every error as an XRPC error envelope, never a traceback."""

    async def endpoint(request: Request) -> Response:
        try:
            return JSONResponse(await handler(request))
        except EngramError as exc:
            return error_response(exc.status, exc.xrpc_name, exc.message)
        except Exception:
            request_id = uuid.uuid4().hex[:16]
            log.exception("request %s failed", request_id)
            return error_response(500, "InternalServerError", f"internal error (request id {request_id})")

    return endpoint


def error_response(status: int, name: str, message: str) -> JSONResponse:
    """An XRPC error: {"error": name, "message": message}."""
    return JSONResponse({"error": name, "message": message}, status_code=status)
